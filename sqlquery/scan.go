//go:build cgo

package sqlquery

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/rollout"
)

// scanColumns are the SQL columns of every store, with their DuckDB types.
var scanColumns = func() []arrow.Field {
	var out []arrow.Field
	for _, name := range rollout.ScanColumns() {
		i := rollout.Schema.FieldIndices(name)[0]
		out = append(out, rollout.Schema.Field(i))
	}
	return out
}()

func duckType(t arrow.DataType) (duckdb.TypeInfo, error) {
	simple := func(t duckdb.Type) (duckdb.TypeInfo, error) { return duckdb.NewTypeInfo(t) }
	switch t := t.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		return simple(duckdb.TYPE_VARCHAR)
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return simple(duckdb.TYPE_BLOB)
	case *arrow.Int8Type:
		return simple(duckdb.TYPE_TINYINT)
	case *arrow.Int32Type:
		return simple(duckdb.TYPE_INTEGER)
	case *arrow.Int64Type:
		return simple(duckdb.TYPE_BIGINT)
	case *arrow.Float32Type:
		return simple(duckdb.TYPE_FLOAT)
	case *arrow.Float64Type:
		return simple(duckdb.TYPE_DOUBLE)
	case *arrow.BooleanType:
		return simple(duckdb.TYPE_BOOLEAN)
	case *arrow.TimestampType:
		return simple(duckdb.TYPE_TIMESTAMP_TZ)
	case *arrow.ListType:
		child, err := duckType(t.Elem())
		if err != nil {
			return nil, err
		}
		return duckdb.NewListInfo(child)
	case *arrow.StructType:
		var entries []duckdb.StructEntry
		for _, f := range t.Fields() {
			ft, err := duckType(f.Type)
			if err != nil {
				return nil, err
			}
			e, err := duckdb.NewStructEntry(ft, f.Name)
			if err != nil {
				return nil, err
			}
			entries = append(entries, e)
		}
		return duckdb.NewStructInfo(entries[0], entries[1:]...)
	}
	return nil, fmt.Errorf("sqlquery: no DuckDB type for %s", t)
}

// registerScan registers the table function every store name resolves to:
// lance_context_scan(store). DuckDB pushes the projection down: the scan
// reads only the columns the query names.
func registerScan(conn *sql.Conn, cur func() *query) error {
	infos := make([]duckdb.ColumnInfo, len(scanColumns))
	for i, f := range scanColumns {
		t, err := duckType(f.Type)
		if err != nil {
			return err
		}
		infos[i] = duckdb.ColumnInfo{Name: f.Name, T: t}
	}
	vc, err := duckdb.NewTypeInfo(duckdb.TYPE_VARCHAR)
	if err != nil {
		return err
	}
	if err := duckdb.RegisterTableUDF(conn, scanFunc, duckdb.ChunkTableFunction{
		Config: duckdb.TableFunctionConfig{Arguments: []duckdb.TypeInfo{vc}},
		BindArguments: func(_ map[string]any, args ...any) (duckdb.ChunkTableSource, error) {
			return bindScan(cur(), args, infos, nil)
		},
	}); err != nil {
		return err
	}
	// lance_context_base(store) reads the fragments of one base table
	// version a chart base update names (query.direct), with each row's
	// address; it serves nothing else.
	addr, err := duckdb.NewTypeInfo(duckdb.TYPE_UBIGINT)
	if err != nil {
		return err
	}
	baseInfos := append(slices.Clone(infos), duckdb.ColumnInfo{Name: rollout.RowAddrColumn, T: addr})
	return duckdb.RegisterTableUDF(conn, baseFunc, duckdb.ChunkTableFunction{
		Config: duckdb.TableFunctionConfig{Arguments: []duckdb.TypeInfo{vc}},
		BindArguments: func(_ map[string]any, args ...any) (duckdb.ChunkTableSource, error) {
			q := cur()
			if q.direct == nil {
				return nil, q.fail(invalidf("no such table function: it serves the charts only"))
			}
			return bindScan(q, args, baseInfos, q.direct)
		},
	})
}

// bindScan binds one scan of a store for query q: of its source through
// the store's own scan, or (direct not nil) of the fragments direct names.
func bindScan(q *query, args []any, infos []duckdb.ColumnInfo, direct *directScan) (duckdb.ChunkTableSource, error) {
	name, _ := args[0].(string)
	t, err := q.open(q.ctx, name)
	if err != nil {
		return nil, q.fail(fmt.Errorf("store %q: %w", name, err))
	}
	s := &scanSource{q: q, store: name, source: q.source, table: t, infos: infos, direct: direct}
	if direct == nil {
		s.card, s.stats = estimate(q.ctx, t, q.source)
	}
	if name == q.hintStore {
		s.hints, s.top = q.hints, q.top
	}
	q.mu.Lock()
	if q.binds == nil {
		q.binds = map[string]int{}
	}
	q.binds[name]++
	q.mu.Unlock()
	return s, nil
}

// scanSource feeds one store scan to DuckDB. A goroutine runs the store's
// push-style Scan and hands batches over a channel; FillChunk copies them
// into DuckDB's vectors.
type scanSource struct {
	q      *query
	store  string
	source rollout.Source
	table  Table
	infos  []duckdb.ColumnInfo
	direct *directScan // a chart base update's read of base table fragments, or nil
	card   *duckdb.CardinalityInfo
	stats  *rollout.Stats // read when bound, or nil

	hints     []hint
	top       *topN    // ORDER BY ... LIMIT bound (late scans only), or nil
	projected []string // columns read, learnt on the first FillChunk
	proj      []int    // their positions in scanColumns
	late      bool     // set before done closes: the scan materialized late
	indexed   bool     // set before done closes: the scan read through a BTree index
	rows      atomic.Int64
	kept      atomic.Int64
	batches   chan scanBatch
	done      chan struct{}
	scanErr   error // set before done closes
	cur       scanBatch
	off       int
}

// scanBatch is a batch and the rows of it the hints keep (nil: all).
type scanBatch struct {
	rec arrow.RecordBatch
	sel []int32
}

func (b scanBatch) len() int {
	if b.sel != nil {
		return len(b.sel)
	}
	return int(b.rec.NumRows())
}

func (s *scanSource) ColumnInfos() []duckdb.ColumnInfo     { return s.infos }
func (s *scanSource) Cardinality() *duckdb.CardinalityInfo { return s.card }

// statser is a Table that can count its rows from manifests.
type statser interface {
	Stats(ctx context.Context) (*rollout.Stats, error)
}

// estimate is the row count DuckDB plans with (join order, build side):
// from the store's manifests, without reading data; nil when unknown. It
// returns the statistics it read too (nil when none).
func estimate(ctx context.Context, t Table, src rollout.Source) (*duckdb.CardinalityInfo, *rollout.Stats) {
	st, ok := t.(statser)
	if !ok {
		return nil, nil
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return nil, nil
	}
	n := stats.BaseRows
	switch src {
	case rollout.SourceWAL:
		n = stats.PendingRows
	case rollout.SourceAll:
		n += stats.PendingRows
	}
	return &duckdb.CardinalityInfo{Cardinality: uint(max(n, 0))}, stats
}
func (s *scanSource) Init() {}

// start learns the projection from the chunk (a column DuckDB did not
// project has no vector) and starts the store scan of those columns.
func (s *scanSource) start(chunk duckdb.DataChunk) {
	for i, f := range s.infos {
		if _, err := chunk.GetVector(i); err == nil {
			s.proj = append(s.proj, i)
			s.projected = append(s.projected, f.Name)
		}
	}
	s.q.mu.Lock()
	s.q.scans = append(s.q.scans, s)
	// The hints hold for the query's one scan of the store; a store read
	// twice (a subquery) would get them on a scan they do not describe.
	if s.q.binds[s.store] != 1 {
		s.hints, s.top = nil, nil
	}
	s.q.mu.Unlock()
	s.batches = make(chan scanBatch, 2)
	s.done = make(chan struct{})
	cols := s.projected
	if len(cols) == 0 {
		cols = []string{rollout.ColSequenceOrder} // count(*): the narrowest column
	}
	s.q.wg.Add(1)
	go func() {
		defer s.q.wg.Done()
		defer close(s.done)
		var err error
		if s.direct != nil {
			err = s.scanDirect()
		} else if base, eqs := s.indexBase(); base != nil {
			s.indexed = true
			err = s.scanIndexed(base, eqs)
		} else if base, filter := s.lateBase(); base != nil {
			s.late = true
			err = s.scanLate(base, filter)
		} else {
			err = s.table.Scan(s.q.ctx, rollout.ScanOptions{Source: s.source, Columns: cols}, func(b arrow.RecordBatch) error {
				s.read(b.NumRows())
				sb := scanBatch{rec: b, sel: selection(s.hints, s.projected, b)}
				if err := s.count(int64(sb.len())); err != nil {
					return err
				}
				return s.push(sb)
			})
		}
		if err != nil {
			s.scanErr = s.q.fail(fmt.Errorf("scan %s: %w", s.store, err))
		}
		close(s.batches)
	}()
}

// read notes n rows read from storage (ScanStat.Rows).
func (s *scanSource) read(n int64) { s.rows.Add(n) }

// count adds n rows the scan hands to DuckDB (after index lookups and scan
// filters), failing past max_rows_scanned. Rows an index never pointed at,
// or a scan filter dropped, cost no engine work and do not count: a
// selective filter on a large store is not refused for the store's size.
func (s *scanSource) count(n int64) error {
	if total := s.q.scanned.Add(n); total > s.q.limits.MaxRowsScanned {
		return s.q.fail(s.q.limits.exceeded("max_rows_scanned", fmt.Sprint(s.q.limits.MaxRowsScanned),
			"filter on an indexed column (id, rollout_id, ...) or a smaller source, aggregate in fewer queries, or raise the limit"))
	}
	return nil
}

// push hands the rows of a batch the hints kept to FillChunk.
func (s *scanSource) push(sb scanBatch) error {
	if sb.len() == 0 {
		return nil
	}
	s.kept.Add(int64(sb.len()))
	sb.rec.Retain()
	select {
	case s.batches <- sb:
		return nil
	case <-s.q.ctx.Done():
		sb.rec.Release()
		return s.q.ctx.Err()
	}
}

func (s *scanSource) FillChunk(chunk duckdb.DataChunk) error {
	if s.batches == nil {
		s.start(chunk)
	}
	capacity := duckdb.GetDataChunkCapacity()
	n := 0
	for n < capacity {
		if s.cur.rec == nil {
			b, ok := <-s.batches
			if !ok {
				<-s.done
				if s.scanErr != nil {
					return s.scanErr
				}
				break
			}
			s.cur, s.off = b, 0
		}
		k := min(capacity-n, s.cur.len()-s.off)
		if len(s.projected) > 0 {
			for ci, col := range s.proj {
				if err := fill(chunk, col, s.cur.rec.Column(ci), s.cur.sel, s.off, n, k); err != nil {
					return err
				}
			}
		}
		n += k
		s.off += k
		if s.off == s.cur.len() {
			s.cur.rec.Release()
			s.cur = scanBatch{}
		}
	}
	return chunk.SetSize(n)
}

// fill copies rows [from, from+k) of arr (of its selection sel, when not
// nil) into column col of chunk at row to. The type is switched on once
// per column, not per cell.
func fill(chunk duckdb.DataChunk, col int, arr arrow.Array, sel []int32, from, to, k int) error {
	switch a := arr.(type) {
	case *array.String:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.LargeString:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.Int32:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.Int64:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.Uint64:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.Float32:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.Boolean:
		return fillWith(chunk, col, arr, sel, from, to, k, a.Value)
	case *array.Timestamp:
		return fillWith(chunk, col, arr, sel, from, to, k, func(r int) time.Time { return time.UnixMicro(int64(a.Value(r))).UTC() })
	}
	var err error
	for i := 0; i < k && err == nil; i++ {
		r := from + i
		if sel != nil {
			r = int(sel[r])
		}
		err = chunk.SetValue(col, to+i, goValue(arr, r))
	}
	return err
}

func fillWith[T any](chunk duckdb.DataChunk, col int, arr arrow.Array, sel []int32, from, to, k int, value func(int) T) error {
	nulls := arr.NullN() > 0
	for i := 0; i < k; i++ {
		r := from + i
		if sel != nil {
			r = int(sel[r])
		}
		var err error
		if nulls && arr.IsNull(r) {
			err = chunk.SetValue(col, to+i, nil)
		} else {
			err = duckdb.SetChunkValue(chunk, col, to+i, value(r))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// goValue converts one non-scalar cell (a list, a struct) to the Go value
// duckdb-go writes: []any and map[string]any.
func goValue(arr arrow.Array, r int) any {
	if arr.IsNull(r) {
		return nil
	}
	switch a := arr.(type) {
	case *array.List:
		s, e := a.ValueOffsets(r)
		out := make([]any, 0, e-s)
		for j := s; j < e; j++ {
			out = append(out, goValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for f := 0; f < a.NumField(); f++ {
			m[st.Field(f).Name] = goValue(a.Field(f), r)
		}
		return m
	case *array.String:
		return a.Value(r)
	case *array.LargeString:
		return a.Value(r)
	case *array.Int8:
		return a.Value(r)
	case *array.Int32:
		return a.Value(r)
	case *array.Int64:
		return a.Value(r)
	case *array.Float32:
		return a.Value(r)
	case *array.Float64:
		return a.Value(r)
	case *array.Boolean:
		return a.Value(r)
	case *array.LargeBinary:
		return a.Value(r)
	}
	return nil
}
