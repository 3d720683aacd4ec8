package table

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

// FragmentWriter streams record batches into one new data file. The file
// becomes part of the table only when the fragment Finish returns is
// committed (Append, Rewrite); until then it is invisible to readers.
type FragmentWriter struct {
	obj    objstore.ObjectWriter
	w      *file.Writer
	name   string
	schema *schema.Schema
	rows   int64
}

// NewFragmentWriter starts a data file holding the columns of cols (a
// projection of the table schema, by name) with the table's field ids and
// types. A column of cols may have a type writable to the table's (see
// writable); the file always stores the table's.
func NewFragmentWriter(ctx context.Context, store objstore.Store, tableSchema *schema.Schema, cols *arrow.Schema, opts file.WriterOptions) (*FragmentWriter, error) {
	names := make([]string, cols.NumFields())
	for i, f := range cols.Fields() {
		names[i] = f.Name
		tf := tableSchema.Field(f.Name)
		if tf == nil {
			return nil, fmt.Errorf("lance/table: column %q is not in the table schema", f.Name)
		}
		if !writable(f.Type, tf.Type) {
			return nil, fmt.Errorf("lance/table: column %q is %s in the table, got %s", f.Name, tf.Type, f.Type)
		}
	}
	proj, err := tableSchema.Project(names)
	if err != nil {
		return nil, err
	}
	name := uuid.NewString() + ".lance"
	obj, err := store.Create(ctx, dataDir+name)
	if err != nil {
		return nil, fmt.Errorf("lance/table: create data file: %w", err)
	}
	w, err := file.NewWriter(obj, proj, opts)
	if err != nil {
		_ = obj.Abort()
		return nil, err
	}
	return &FragmentWriter{obj: obj, w: w, name: name, schema: proj}, nil
}

// writable reports whether values of type have can be written to a column
// of type want: the same type, plain values for a dictionary column (the
// writer dictionary-encodes them), or a timestamp of the same unit in
// another time zone (stored as the table's type; the instants are the same
// integers).
func writable(have, want arrow.DataType) bool {
	if arrow.TypeEqual(have, want) {
		return true
	}
	if d, ok := want.(*arrow.DictionaryType); ok {
		return arrow.TypeEqual(have, d.ValueType)
	}
	th, ok1 := have.(*arrow.TimestampType)
	tw, ok2 := want.(*arrow.TimestampType)
	return ok1 && ok2 && th.Unit == tw.Unit
}

// Write appends a batch; its columns must match the writer's, in order.
func (fw *FragmentWriter) Write(rec arrow.RecordBatch) error {
	if err := fw.w.Write(rec); err != nil {
		_ = fw.obj.Abort()
		return err
	}
	fw.rows += rec.NumRows()
	return nil
}

// Rows returns the number of rows written so far.
func (fw *FragmentWriter) Rows() int64 { return fw.rows }

// Finish completes the data file durably and returns the (uncommitted)
// fragment describing it. Its id is assigned at commit.
func (fw *FragmentWriter) Finish() (*pb.DataFragment, error) {
	info, err := fw.w.Finish()
	if err != nil {
		_ = fw.obj.Abort()
		return nil, err
	}
	if err := fw.obj.Close(); err != nil {
		return nil, fmt.Errorf("lance/table: close data file: %w", err)
	}
	return &pb.DataFragment{
		PhysicalRows: uint64(info.Rows),
		Files: []*pb.DataFile{{
			Path:             fw.name,
			Fields:           info.FieldIDs,
			ColumnIndices:    info.ColumnIndices,
			FileMajorVersion: 2,
			FileMinorVersion: 0,
			FileSizeBytes:    uint64(info.Size),
		}},
	}, nil
}

// Abort discards the data file.
func (fw *FragmentWriter) Abort() error { return fw.obj.Abort() }

// WriteFragment writes recs (all with the same columns) as one fragment.
func WriteFragment(ctx context.Context, store objstore.Store, tableSchema *schema.Schema, recs []arrow.RecordBatch) (*pb.DataFragment, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("lance/table: no records to write")
	}
	fw, err := NewFragmentWriter(ctx, store, tableSchema, recs[0].Schema(), file.WriterOptions{})
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if !r.Schema().Equal(recs[0].Schema()) {
			_ = fw.Abort()
			return nil, fmt.Errorf("lance/table: record batches of one fragment must share a schema")
		}
		if err := fw.Write(r); err != nil {
			return nil, err
		}
	}
	return fw.Finish()
}
