package table

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/schema"
)

// projections memoizes, per dataset version, what a read of a column list
// returns: the projected fields and the Arrow schema of its batches. A
// keyed read asks for the same few column lists on every call, and
// building them was a third of the bytes a get allocated. A version's
// schema never changes, so entries never go stale.
type projections struct {
	mu sync.Mutex
	m  map[string]projection
}

type projection struct {
	proj *schema.Schema
	out  *arrow.Schema
}

// maxProjections bounds the memo: column lists come from callers, and the
// lists past this many are built per read.
const maxProjections = 64

func newProjections() *projections { return &projections{m: map[string]projection{}} }

// project returns the fields of columns (nil: every column) and the schema
// of the batches a read of them returns: dictionary columns as their value
// type when plain, a RowAddrColumn last when withAddr.
func (d *Dataset) project(columns []string, plain, withAddr bool) (*schema.Schema, *arrow.Schema, error) {
	var flags byte // the key: flags, then each column's length and name
	if plain {
		flags |= 1
	}
	if withAddr {
		flags |= 2
	}
	if columns == nil {
		flags |= 4
	}
	var kb [1024]byte
	k := append(kb[:0], flags)
	for _, c := range columns {
		k = append(binary.AppendUvarint(k, uint64(len(c))), c...) // a name may hold any byte
	}
	ps := d.projs
	if ps != nil {
		ps.mu.Lock()
		p, ok := ps.m[string(k)]
		ps.mu.Unlock()
		if ok {
			return p.proj, p.out, nil
		}
	}
	proj := d.schema
	if columns != nil {
		var err error
		if proj, err = d.schema.Project(columns); err != nil {
			return nil, nil, err
		}
	}
	out := outputSchema(proj, plain)
	if withAddr {
		out = withRowAddr(out)
	}
	if ps != nil {
		ps.mu.Lock()
		if len(ps.m) < maxProjections {
			ps.m[string(k)] = projection{proj, out}
		}
		ps.mu.Unlock()
	}
	return proj, out, nil
}

// outputSchema is the schema a read of proj returns.
func outputSchema(proj *schema.Schema, plain bool) *arrow.Schema {
	s := proj.Arrow()
	if !plain {
		return s
	}
	fields := s.Fields()
	for i := range fields {
		fields[i].Type = outputType(fields[i].Type, true)
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

// withRowAddr is sch with a RowAddrColumn last.
func withRowAddr(sch *arrow.Schema) *arrow.Schema {
	return arrow.NewSchema(append(slices.Clone(sch.Fields()), arrow.Field{Name: RowAddrColumn, Type: arrow.PrimitiveTypes.Uint64}), nil)
}
