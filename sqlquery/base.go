package sqlquery

import (
	"context"
	"fmt"

	"github.com/lance-context/lance-context/rollout"
)

// baseStore is a Table whose base table the engine may read directly (a
// rollout.Store): OpenBase gives the table a fragments scan of the store
// would read now (version v when not 0, else the version a checkout pins,
// else the latest), described in rollout's terms. The engine reads no
// Lance package itself.
type baseStore interface {
	OpenBase(ctx context.Context, v uint64) (*rollout.BaseTable, error)
}

// BaseIdentity identifies the base table a fragments read of store would
// read now: the version the store reads (or the one a checkout pins) and
// its commit time, which tells a store deleted and created again apart. ok
// is false for a store whose base table the engine cannot open itself.
func BaseIdentity(ctx context.Context, store any) (ident string, ok bool, err error) {
	bs, ok := store.(baseStore)
	if !ok {
		return "", false, nil
	}
	ident, err = baseIdent(ctx, bs)
	return ident, true, err
}

// baseIdent identifies the base table a scan of bs would read now.
func baseIdent(ctx context.Context, bs baseStore) (string, error) {
	_, ident, err := openBase(ctx, bs)
	return ident, err
}

// openBase opens the base table a scan of bs would read now, and
// identifies it.
func openBase(ctx context.Context, bs baseStore) (*rollout.BaseTable, string, error) {
	d, err := bs.OpenBase(ctx, 0)
	if err != nil {
		return nil, "", fmt.Errorf("sqlquery: open base table: %w", err)
	}
	return d, d.Ident(), nil
}
