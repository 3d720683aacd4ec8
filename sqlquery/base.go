package sqlquery

import (
	"context"
	"fmt"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// baseStore is a store whose base table the engine can open itself (a
// rollout.Store): the dataset root, and the version a checkout pinned.
type baseStore interface {
	Root() objstore.Store
	Pinned() uint64
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
func openBase(ctx context.Context, bs baseStore) (*table.Dataset, string, error) {
	var (
		d   *table.Dataset
		err error
	)
	pin := bs.Pinned()
	if pin != 0 {
		d, err = table.Checkout(ctx, bs.Root(), pin)
	} else {
		d, err = table.Open(ctx, bs.Root())
	}
	if err != nil {
		return nil, "", fmt.Errorf("sqlquery: open base table: %w", err)
	}
	var sec int64
	var nanos int32
	if ts := d.Manifest().GetTimestamp(); ts != nil {
		sec, nanos = ts.GetSeconds(), ts.GetNanos()
	}
	return d, fmt.Sprintf("p%d v%d t%d.%09d", pin, d.Version(), sec, nanos), nil
}
