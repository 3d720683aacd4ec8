package rollout

import (
	"context"
	"fmt"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
)

// BaseTable is the base table of a store at one version, as a fragments
// read of the store sees it: the exported face of a view of the base
// alone, for a reader that reads the table directly rather than through
// Scan (the SQL engine: late materialization, index lookups, chart bases
// that follow fragments). Its reader needs no Lance package: columns,
// fragments and row addresses are described in this package's terms.
type BaseTable struct {
	v   *view
	pin uint64 // the version asked for or pinned by a checkout; 0: the latest
}

// RowAddrColumn is the uint64 column BaseScan.WithRowAddr appends: each
// row's address in the base table, fragment id << 32 | offset.
const RowAddrColumn = table.RowAddrColumn

// OpenBase opens the base table a fragments read of s reads now: version
// v when it is not 0, else the version a checkout pins, else the latest.
func (s *Store) OpenBase(ctx context.Context, v uint64) (*BaseTable, error) {
	pin := v
	if pin == 0 {
		pin = s.Pinned()
	}
	var (
		d   *table.Dataset
		err error
	)
	if pin != 0 {
		d, err = table.Checkout(ctx, s.root, pin)
	} else {
		d, err = table.Open(ctx, s.root)
	}
	if err != nil {
		return nil, err
	}
	return &BaseTable{v: s.newView(&snapshot{base: d}), pin: pin}, nil
}

// Version is the table's version.
func (b *BaseTable) Version() uint64 { return b.v.base().Version() }

// Ident identifies the table: the version asked for (or pinned), the
// version read and its commit time, which tells a store deleted and
// created again apart. Any commit (merge, compaction, delete, checkout)
// changes it.
func (b *BaseTable) Ident() string {
	d := b.v.base()
	var sec int64
	var nanos int32
	if ts := d.Manifest().GetTimestamp(); ts != nil {
		sec, nanos = ts.GetSeconds(), ts.GetNanos()
	}
	return fmt.Sprintf("p%d v%d t%d.%09d", b.pin, d.Version(), sec, nanos)
}

// BaseColumn is one column of a base table: its field id and the Arrow
// type it reads as (a dictionary column reads as its value type).
type BaseColumn struct {
	ID   int32
	Type arrow.DataType
}

// Column describes the column name of the table; false when it has none.
func (b *BaseTable) Column(name string) (BaseColumn, bool) {
	f := b.v.base().Schema().Field(name)
	if f == nil {
		return BaseColumn{}, false
	}
	t := f.ArrowField().Type
	if dt, ok := t.(*arrow.DictionaryType); ok {
		t = dt.ValueType // read plain
	}
	return BaseColumn{ID: f.ID, Type: t}, true
}

// Indexed reports whether a BTree index of the table covers column.
func (b *BaseTable) Indexed(column string) bool {
	ix, err := index.BTreeIndexes(b.v.base(), column)
	return err == nil && len(ix) > 0
}

// BaseScan selects what BaseTable.Scan reads. Dictionary columns read as
// plain arrays of their value type.
type BaseScan struct {
	Columns   []string // returned in this order
	BatchRows int
	// Equal are string equalities, AND-ed; the rows of a fragment an index
	// covers are found through the store's indexes, the others scanned.
	Equal []Filter
	// Fragments, when not nil, limits the scan to these fragment ids.
	Fragments   *roaring.Bitmap
	WithRowAddr bool // append RowAddrColumn
	// Late, when Keep is set: the scan reads the Filter columns of every
	// row first, Keep returns the rows of such a batch to return (as
	// ascending row indices), and only those rows' Columns are read.
	Filter []string
	Keep   func(arrow.RecordBatch) ([]int, error)
}

// Scan streams the live rows o selects to fn, fragment by fragment.
func (b *BaseTable) Scan(ctx context.Context, o BaseScan, fn func(arrow.RecordBatch) error) error {
	d := b.v.base()
	if o.Keep != nil {
		return d.ScanLate(ctx, table.LateScan{
			Filter: o.Filter, Columns: o.Columns, Keep: o.Keep, BatchRows: o.BatchRows,
			PlainDictionaries: true, Fragments: o.Fragments, WithRowAddr: o.WithRowAddr,
		}, fn)
	}
	opts := table.ScanOptions{Columns: o.Columns, BatchRows: o.BatchRows, PlainDictionaries: true, Fragments: o.Fragments, WithRowAddr: o.WithRowAddr}
	if len(o.Equal) > 0 {
		opts.Index = b.v.s.opts.Indexes
		for _, f := range o.Equal {
			opts.Where = append(opts.Where, table.Eq{Column: f.Column, Value: f.Value})
		}
	}
	return b.v.scanBase(ctx, opts, fn)
}

// BaseFragment is one fragment of a base table: enough to tell, of a later
// version, whether it holds the same rows (Files, Rows) and which of them
// were deleted since (DeletionKey, Deleted).
type BaseFragment struct {
	ID          uint64
	Files       string          // its data files: a fragment id reused for other rows has others
	Rows        uint64          // physical rows
	DeletionKey string          // its deletion file, or ""
	Deleted     *roaring.Bitmap // the offsets it deletes, or nil
}

// Live is the fragment's rows less its deleted ones.
func (f BaseFragment) Live() int64 {
	if f.Deleted == nil {
		return int64(f.Rows)
	}
	return int64(f.Rows) - int64(f.Deleted.GetCardinality())
}

// Fragments describes every fragment of the table, reading the deletion
// files.
func (b *BaseTable) Fragments(ctx context.Context) ([]BaseFragment, error) {
	d := b.v.base()
	var out []BaseFragment
	for _, fr := range d.Fragments() {
		var files []string
		for _, df := range fr.GetFiles() {
			files = append(files, df.GetPath())
		}
		f := BaseFragment{ID: fr.GetId(), Files: strings.Join(files, ","), Rows: fr.GetPhysicalRows()}
		if df := fr.GetDeletionFile(); df != nil {
			f.DeletionKey = fmt.Sprintf("%d-%d-%d", df.GetFileType(), df.GetReadVersion(), df.GetId())
			del, err := d.DeletedRows(ctx, fr.GetId())
			if err != nil {
				return nil, err
			}
			f.Deleted = del
		}
		out = append(out, f)
	}
	return out, nil
}
