//go:build cgo

package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/rollout"
)

// chartCols are the base table columns a chart base reads.
var chartCols = []string{rollout.ColID, "reward", "policy_version", rollout.ColCreatedAt, "num_output_tokens", "content", rollout.ColRole}

// directScan is what baseFunc reads: fragments of one base table version
// (frags; nil: every fragment), each row with its address, read from the
// table itself rather than through the store's scan, so a chart base
// knows which rows it holds and which version they are of.
type directScan struct {
	d     *rollout.BaseTable
	frags *roaring.Bitmap

	mu   sync.Mutex
	read map[uint64]int64 // rows read, by fragment (scans with a filter count them once per statement)
}

// note counts a batch read from the table: every batch holds rows of one
// fragment, and its last column is the row address.
func (ds *directScan) note(b arrow.RecordBatch) {
	if b.NumRows() == 0 {
		return
	}
	a, ok := b.Column(int(b.NumCols()) - 1).(*array.Uint64)
	if !ok {
		return
	}
	ds.mu.Lock()
	if ds.read == nil {
		ds.read = map[uint64]int64{}
	}
	ds.read[a.Value(0)>>32] += b.NumRows()
	ds.mu.Unlock()
}

// scanDirect streams the rows of the fragments s.direct names, with the
// projected columns and the row address last. With hints on projected
// columns it reads those columns of every row first and the others only
// for the rows the hints keep (as a late scan does; a chart base's content
// lengths are those of the rows without num_output_tokens).
func (s *scanSource) scanDirect() error {
	ds := s.direct
	ctx := s.q.ctx
	var cols []string // projected table columns; the address comes with every batch
	for _, c := range s.projected {
		if c != rollout.RowAddrColumn {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		cols = []string{rollout.ColID}
	}
	var filter []string
	for _, h := range s.hints {
		if slices.Contains(cols, h.Column) && !slices.Contains(filter, h.Column) {
			filter = append(filter, h.Column)
		}
	}
	opts := rollout.BaseScan{Fragments: ds.frags, BatchRows: 32 << 10, WithRowAddr: true}
	if len(filter) == 0 {
		// The address column is last, after the projected ones (or
		// ignored: FillChunk reads the projected positions only).
		opts.Columns = cols
		return ds.d.Scan(ctx, opts, func(b arrow.RecordBatch) error {
			ds.note(b)
			s.read(b.NumRows())
			if err := s.count(b.NumRows()); err != nil {
				return err
			}
			return s.push(scanBatch{rec: b})
		})
	}
	return ds.d.Scan(ctx, rollout.BaseScan{
		Filter: filter, Columns: cols, BatchRows: opts.BatchRows,
		Fragments: ds.frags, WithRowAddr: true,
		Keep: func(b arrow.RecordBatch) ([]int, error) {
			ds.note(b)
			s.read(b.NumRows())
			out := keptRows(s.hints, filter, b)
			if err := s.count(int64(len(out))); err != nil {
				return nil, err
			}
			return out, nil
		},
	}, func(b arrow.RecordBatch) error {
		return s.push(scanBatch{rec: b})
	})
}

// baseState is what a chart base built or updated from a direct scan
// knows of the base table it holds: enough to tell, of a later version,
// which rows are gone and which are new.
type baseState struct {
	sig   string // chartCols' field ids and types
	frags map[uint64]rollout.BaseFragment
}

// chartSig is the signature of the chart columns of d: their field ids
// and types. ok is false when d lacks one or holds it in another type than
// the store's scan gives (an older or reference table, which the store's
// scan converts): such a table is read through the store's scan, and its
// chart base has no row addresses.
func chartSig(d *rollout.BaseTable) (sig string, ok bool) {
	var sb strings.Builder
	for _, name := range chartCols {
		c, ok := d.Column(name)
		if !ok {
			return "", false
		}
		i := rollout.Schema.FieldIndices(name)
		if len(i) != 1 || !arrow.TypeEqual(c.Type, rollout.Schema.Field(i[0]).Type) {
			return "", false
		}
		fmt.Fprintf(&sb, "%s:%d:%s;", name, c.ID, c.Type)
	}
	return sb.String(), true
}

// stateOf describes every fragment of d.
func stateOf(ctx context.Context, d *rollout.BaseTable, sig string) (*baseState, error) {
	frags, err := d.Fragments(ctx)
	if err != nil {
		return nil, err
	}
	st := &baseState{sig: sig, frags: map[uint64]rollout.BaseFragment{}}
	for _, f := range frags {
		st.frags[f.ID] = f
	}
	return st, nil
}

// baseDelta is how a chart base follows a new base table version: the
// rows of fragments gone, the newly deleted rows of surviving fragments,
// and the new fragments to read.
type baseDelta struct {
	gone     []uint64 // fragment ids
	goneRows int64
	deleted  []uint64 // row addresses
	fresh    *roaring.Bitmap
	newRows  int64
	state    *baseState
}

// planUpdate compares the state of a chart base with d. ok is false when
// the chart base cannot follow d exactly by deleting and adding rows: its
// columns changed, a fragment id names other data files, or a deletion
// was undone (a checkout of an older version).
func planUpdate(ctx context.Context, old *baseState, d *rollout.BaseTable) (delta *baseDelta, ok bool, err error) {
	sig, ok := chartSig(d)
	if !ok || sig != old.sig {
		return nil, false, nil
	}
	frags, err := d.Fragments(ctx)
	if err != nil {
		return nil, false, err
	}
	delta = &baseDelta{fresh: roaring.New(), state: &baseState{sig: sig, frags: map[uint64]rollout.BaseFragment{}}}
	for _, f := range frags {
		id := f.ID
		delta.state.frags[id] = f
		was, had := old.frags[id]
		if !had {
			delta.fresh.Add(uint32(id))
			delta.newRows += f.Live()
			continue
		}
		if was.Files != f.Files || was.Rows != f.Rows {
			return nil, false, nil
		}
		if was.DeletionKey == f.DeletionKey {
			continue
		}
		before, now := was.Deleted, f.Deleted
		if before == nil {
			before = roaring.New()
		}
		if now == nil {
			now = roaring.New()
		}
		if before.AndCardinality(now) != before.GetCardinality() {
			return nil, false, nil // a deleted row is live again
		}
		it := roaring.AndNot(now, before).Iterator()
		for it.HasNext() {
			delta.deleted = append(delta.deleted, id<<32|uint64(it.Next()))
		}
	}
	for id, was := range old.frags {
		if _, ok := delta.state.frags[id]; !ok {
			delta.gone = append(delta.gone, id)
			delta.goneRows += was.Live()
		}
	}
	slices.Sort(delta.gone)
	return delta, true, nil
}

// deleteChunk bounds the row addresses one DELETE names.
const deleteChunk = 20_000

// updateBase brings chart base b (locked, built for another base table)
// to the base table bs reads now: it deletes the rows of fragments gone
// and the rows newly deleted in the others, and reads the new fragments
// alone. It returns the rows it read; ok is false (and b unchanged or
// dropped) when it cannot follow the table exactly or at a cost below a
// rebuild's: then the caller builds a new chart base. A failed update
// drops b; a limit or a cancel is returned.
func (e *Engine) updateBase(ctx context.Context, store string, bs baseStore, b *chartBase) (read int64, ok bool, err error) {
	d, ident, err := openBase(ctx, bs)
	if err != nil {
		return 0, false, nil
	}
	delta, ok, err := planUpdate(ctx, b.state, d)
	if err != nil || !ok {
		return 0, false, nil
	}
	removed := delta.goneRows + int64(len(delta.deleted))
	// More than half the rows changed: a rebuild reads less, or as much
	// and leaves no deleted rows behind in the database. Deleted rows
	// kept by earlier updates count too.
	if 2*(delta.newRows+removed) > b.rows || b.dead+removed > b.rows/2 {
		return 0, false, nil
	}
	ds := &directScan{d: d, frags: delta.fresh}
	var rows, bytes int64
	q, err := b.use(ctx, e, store, rollout.SourceFragments, func(ctx context.Context, c *duckdb.Conn, q *query) error {
		q.direct = ds
		if len(delta.gone) > 0 {
			ids := make([]string, len(delta.gone))
			for i, id := range delta.gone {
				ids[i] = fmt.Sprint(id)
			}
			in := strings.Join(ids, ",")
			for _, t := range []string{"cb", "cc"} {
				if err := exec(ctx, c, `DELETE FROM `+t+` WHERE addr >> 32 IN (`+in+`)`); err != nil {
					return err
				}
			}
		}
		for rest := delta.deleted; len(rest) > 0; {
			n := min(len(rest), deleteChunk)
			addrs := make([]string, n)
			for i, a := range rest[:n] {
				addrs[i] = fmt.Sprint(a)
			}
			rest = rest[n:]
			list := `(SELECT unnest([` + strings.Join(addrs, ",") + `]::UBIGINT[]))`
			for _, t := range []string{"cb", "cc"} {
				if err := exec(ctx, c, `DELETE FROM `+t+` WHERE addr IN `+list); err != nil {
					return err
				}
			}
		}
		if !delta.fresh.IsEmpty() {
			if err := fillBase(ctx, c, q, store, "INSERT INTO"); err != nil {
				return err
			}
		}
		rows, bytes, err = measure(ctx, c)
		return err
	})
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) || errors.Is(err, context.Canceled) {
			e.bases.drop(b)
			return 0, false, err
		}
		e.bases.drop(b)
		return 0, false, nil
	}
	b.state, b.dead, b.rows = delta.state, b.dead+removed, rows
	b.lastRead = ds.read
	e.bases.moved(b, ident, bytes)
	return q.scanned.Load(), true, nil
}

// fillBase reads the rows of q.direct into cb and cc (verb: CREATE TABLE
// ... AS or INSERT INTO): every row into cb, and the content length of the
// rows without num_output_tokens into cc, reading content for those rows
// alone.
func fillBase(ctx context.Context, c *duckdb.Conn, q *query, store, verb string) error {
	src := fmt.Sprintf("%s('%s')", baseFunc, strings.ReplaceAll(store, "'", "''"))
	as := " "
	if verb == "CREATE TABLE" {
		as = " AS "
	}
	if err := exec(ctx, c, verb+` cb`+as+`SELECT id, `+rewardExpr+` AS reward, policy_version,
		epoch_us(created_at) AS us, `+arrivalExpr+` AS arr, `+lenExpr+` AS len, `+rollout.RowAddrColumn+` AS addr FROM `+src); err != nil {
		return err
	}
	return hinted(q, clenHints, func() error {
		return exec(ctx, c, verb+` cc`+as+`SELECT id, epoch_us(created_at) AS us, length(content)::BIGINT AS len,
			`+rollout.RowAddrColumn+` AS addr FROM `+src+` WHERE `+clenWhere)
	})
}

// measure counts the rows of cb and estimates the storage of a chart base.
func measure(ctx context.Context, c *duckdb.Conn) (rows, bytes int64, err error) {
	size, err := all(ctx, c, fmt.Sprintf(`SELECT
		(SELECT count(*) FROM cb),
		(SELECT count(*) * %d + coalesce(sum(strlen(id)), 0) + coalesce(sum(strlen(policy_version)), 0) FROM cb)
		+ (SELECT count(*) * %d + coalesce(sum(strlen(id)), 0) FROM cc)`, cbRowBytes, ccRowBytes))
	if err != nil {
		return 0, 0, err
	}
	rows, bytes = asInt(size[0][0]), asInt(size[0][1])
	// DuckDB's own account, once the scans' temporary memory is freed:
	// its blocks hold more than the values (and, after an update, the
	// rows it deleted).
	if used, err := all(ctx, c, `SELECT sum(memory_usage_bytes) FROM duckdb_memory()`); err == nil {
		bytes = max(bytes, asInt(used[0][0]))
	}
	return rows, bytes, nil
}
