//go:build duckdb_arrow

package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/rollout"
)

var errNoDuckArrow = errors.New("unused")

// scanReader is an array.RecordReader over Store.Export, run in a
// goroutine: DuckDB pulls batches as it writes.
type scanReader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	ch     chan arrow.RecordBatch
	errc   chan error
	cur    arrow.RecordBatch
	err    error
	rows   int64
}

func newScanReader(ctx context.Context, st *rollout.Store, o rollout.ExportOptions) (*scanReader, error) {
	if err := rollout.CheckExport(&o); err != nil {
		return nil, err
	}
	r := &scanReader{schema: rollout.ExportSchema(o.Columns), ch: make(chan arrow.RecordBatch, 4), errc: make(chan error, 1)}
	r.refs.Store(1)
	go func() {
		err := st.Export(ctx, o, func(b arrow.RecordBatch) error {
			b.Retain()
			select {
			case r.ch <- b:
				return nil
			case <-ctx.Done():
				b.Release()
				return ctx.Err()
			}
		})
		close(r.ch)
		r.errc <- err
	}()
	return r, nil
}

func (r *scanReader) Retain() { r.refs.Add(1) }
func (r *scanReader) Release() {
	if r.refs.Add(-1) == 0 && r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}
func (r *scanReader) Schema() *arrow.Schema { return r.schema }
func (r *scanReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	b, ok := <-r.ch
	if !ok {
		r.err = <-r.errc
		return false
	}
	r.cur = b
	r.rows += b.NumRows()
	return true
}
func (r *scanReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *scanReader) Record() arrow.RecordBatch      { return r.cur }
func (r *scanReader) Err() error                     { return r.err }

// duckCopy writes the store's base table to path with DuckDB's COPY ...
// TO (FORMAT parquet, COMPRESSION zstd), DuckDB reading our scan through
// its Arrow scan.
func duckCopy(ctx context.Context, st *rollout.Store, path string) (int64, error) {
	conn, err := duckdb.NewConnector("", nil)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	dc, err := conn.Connect(ctx)
	if err != nil {
		return 0, err
	}
	defer dc.Close()
	ar, err := duckdb.NewArrowFromConn(dc)
	if err != nil {
		return 0, err
	}
	rd, err := newScanReader(ctx, st, rollout.ExportOptions{Source: rollout.SourceFragments})
	if err != nil {
		return 0, err
	}
	release, err := ar.RegisterView(rd, "base")
	if err != nil {
		return 0, err
	}
	defer release()
	ex := dc.(driver.ExecerContext)
	if _, err := ex.ExecContext(ctx, fmt.Sprintf("COPY (SELECT * FROM base) TO '%s' (FORMAT parquet, COMPRESSION zstd)", path), nil); err != nil {
		return 0, err
	}
	if rd.err != nil {
		return rd.rows, rd.err
	}
	return rd.rows, nil
}
