package table

import (
	"context"
	"errors"
	"fmt"

	"github.com/lance-context/lance-context/objstore"
)

// CommitFrom is Commit whose first attempt is built against start, a
// version the caller has just read, instead of opening the table again.
// Versions are dense and written put-if-absent, so the attempt lands only
// if start is still the latest; otherwise it goes on as Commit does.
func CommitFrom(ctx context.Context, store objstore.Store, start *Dataset, fn ChangeFunc) (*Dataset, error) {
	if start == nil {
		return Commit(ctx, store, fn)
	}
	c := &Cache{start.files} // the retries share start's cache
	if extra := start.manifest.GetWriterFeatureFlags() &^ writableFlags; extra != 0 {
		return nil, fmt.Errorf("%w: writer flags %#x; refusing to write", ErrUnsupportedFeature, extra)
	}
	ch, err := fn(ctx, start)
	if err != nil {
		return nil, err
	}
	next, err := commitOnce(ctx, start, ch)
	if !errors.Is(err, objstore.ErrExists) {
		return next, err
	}
	return c.Commit(ctx, store, fn)
}
