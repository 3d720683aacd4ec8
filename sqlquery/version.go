package sqlquery

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/rollout"
)

// versioned is a store read at one base version (Request.Version): its
// scans read that version alone, and, as a checkout pin does, OpenBase
// opens it for the scans that read the base table directly (base.go).
type versioned struct {
	*rollout.Store
	v uint64
}

func (s versioned) Scan(ctx context.Context, o rollout.ScanOptions, fn func(arrow.RecordBatch) error) error {
	o.Version = s.v
	return s.Store.Scan(ctx, o, fn)
}

func (s versioned) OpenBase(ctx context.Context, v uint64) (*rollout.BaseTable, error) {
	if v == 0 {
		v = s.v
	}
	return s.Store.OpenBase(ctx, v)
}

// atVersion opens store at base version v, other stores as open does.
func atVersion(open Opener, store string, v uint64) Opener {
	return func(ctx context.Context, name string) (Table, error) {
		t, err := open(ctx, name)
		if err != nil || name != store {
			return t, err
		}
		st, ok := t.(*rollout.Store)
		if !ok {
			return nil, fmt.Errorf("store %q cannot be read at a version", name)
		}
		return versioned{st, v}, nil
	}
}
