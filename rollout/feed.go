package rollout

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// The feed (doc.go, "The feed"): every row in the order it became
// durable, per shard, from wherever it is now (the base table, a pending
// generation, or this process's unsealed tail), after a position.

// ShardKey is a shard's value in lc_shard: the first 8 bytes of its id (a
// UUID) as a big-endian int64; an id that is not a UUID is hashed.
func ShardKey(shard string) int64 {
	if u, err := uuid.Parse(shard); err == nil {
		return int64(binary.BigEndian.Uint64(u[:8]))
	}
	h := fnv.New64a()
	h.Write([]byte(shard))
	return int64(h.Sum64())
}

// setInt64 returns rec with column c (int64) replaced by v(i) for each row.
func setInt64(rec arrow.RecordBatch, c int, v func(i int) int64) arrow.RecordBatch {
	n := int(rec.NumRows())
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.UnsafeAppend(v(i))
	}
	col := b.NewArray()
	defer col.Release()
	cols := slices.Clone(rec.Columns())
	cols[c] = col
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// stampShard returns rec with lc_shard set to key in every row.
func stampShard(rec arrow.RecordBatch, key int64) (arrow.RecordBatch, error) {
	idx := rec.Schema().FieldIndices(ColShard)
	if len(idx) != 1 || rec.Column(idx[0]).DataType().ID() != arrow.INT64 {
		return nil, fmt.Errorf("rollout: batch has no int64 %s column", ColShard)
	}
	return setInt64(rec, idx[0], func(int) int64 { return key }), nil
}

// Position is a place in the feed: for each shard (by ShardKey) the
// sequence number of the last row delivered or passed over. The zero
// Position is the beginning of the store.
type Position struct {
	seqs map[int64]int64
}

// After returns the last seq passed in shard k (0: none).
func (p Position) After(k int64) int64 { return p.seqs[k] }

func (p *Position) advance(k, seq int64) {
	if p.seqs == nil {
		p.seqs = map[int64]int64{}
	}
	if seq > p.seqs[k] {
		p.seqs[k] = seq
	}
}

func (p Position) clone() Position {
	out := Position{seqs: make(map[int64]int64, len(p.seqs))}
	for k, v := range p.seqs {
		out.seqs[k] = v
	}
	return out
}

// positionPrefix versions the encoding of a position.
const positionPrefix = "f1."

// String encodes p: the prefix, then base64url of (uvarint shard key,
// uvarint seq) pairs in shard key order.
func (p Position) String() string {
	keys := make([]int64, 0, len(p.seqs))
	for k := range p.seqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b []byte
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(k))
		b = binary.AppendUvarint(b, uint64(p.seqs[k]))
	}
	return positionPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParsePosition reads a position String made; "" is the beginning.
func ParsePosition(s string) (Position, error) {
	var p Position
	if s == "" {
		return p, nil
	}
	bad := func() (Position, error) {
		return Position{}, invalid("position %q is not a feed position: give one a feed answer returned, or none to start at the beginning", clip(s, 40))
	}
	rest, ok := strings.CutPrefix(s, positionPrefix)
	if !ok {
		return bad()
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return bad()
	}
	for len(b) > 0 {
		k, n := binary.Uvarint(b)
		if n <= 0 {
			return bad()
		}
		b = b[n:]
		v, n := binary.Uvarint(b)
		if n <= 0 || int64(v) < 0 {
			return bad()
		}
		b = b[n:]
		p.advance(int64(k), int64(v))
	}
	return p, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// FeedOptions selects a feed read.
type FeedOptions struct {
	After   Position
	Limit   int // rows; default 100
	Filters []Filter
	// Columns are the columns of the listing to return (nil: all);
	// lc_shard and lc_seq always come last.
	Columns []string
	// Wait is how long to wait for a row when there is none yet.
	Wait time.Duration
}

// FeedColumns checks cols (columns of the records listing; nil: all) and
// returns the feed's columns for them: cols, then lc_shard and lc_seq.
func FeedColumns(cols []string) ([]string, error) {
	if len(cols) == 0 {
		return feedColumns, nil
	}
	out := make([]string, 0, len(cols)+2)
	for _, c := range cols {
		if !slices.Contains(listColumns, c) {
			return nil, invalid("no column %q in the feed; columns: %s", clip(c, 40), strings.Join(listColumns, ", "))
		}
		if slices.Contains(out, c) {
			return nil, invalid("column %q named twice", c)
		}
		out = append(out, c)
	}
	return append(out, ColShard, ColSeq), nil
}

// FeedSchema is the schema of the feed's rows of columns cols (FeedColumns
// made them), with meta.
func FeedSchema(cols []string, meta arrow.Metadata) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = Schema.Field(schemaIndex[c])
	}
	return arrow.NewSchema(fields, &meta)
}

// FeedResult is one read of the feed: rows of feedColumns (no payload;
// lc_shard and lc_seq set), each shard's in seq order, and the
// position after them (and after rows the filters passed over).
type FeedResult struct {
	Columns  []string // of the batches (FeedColumns)
	Batches  []arrow.RecordBatch
	Rows     int
	Position Position
}

// Release releases the batches.
func (r *FeedResult) Release() {
	for _, b := range r.Batches {
		b.Release()
	}
	r.Batches = nil
}

// Records converts the rows to Records.
func (r *FeedResult) Records() ([]Record, error) {
	out := make([]Record, 0, r.Rows)
	for _, b := range r.Batches {
		rs, err := recordsFromBatch(b)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Feed returns the rows after o.After, waiting up to o.Wait for one when
// there is none. It answers with no rows (and the position unchanged, or
// moved past rows the filters passed over) when the wait ends.
func (s *Store) Feed(ctx context.Context, o FeedOptions) (*FeedResult, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	deadline := time.Now().Add(o.Wait)
	pos := o.After
	fresh := false
	for passes := 0; ; passes++ {
		signal := s.feedSignal()
		res, passed, err := s.feedOnce(ctx, pos, o, fresh)
		if err != nil {
			return nil, err
		}
		if res.Rows > 0 || ctx.Err() != nil {
			return res, nil
		}
		pos = res.Position
		left := time.Until(deadline)
		if passed > 0 && (left > 0 || passes < feedPasses) {
			continue // the filters passed over rows: go on after them
		}
		if left <= 0 {
			return res, nil
		}
		// This process's appends wake the wait at once; other shards'
		// rows show up in their manifests, read again every poll.
		t := time.NewTimer(min(left, feedPoll))
		select {
		case <-signal:
			fresh = false
		case <-t.C:
			fresh = true
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// feedPasses is how many reads a feed call without a wait makes past rows
// its filters do not match before it answers with none (and the position
// after them).
const feedPasses = 16

// feedPoll is how often a waiting feed reads the shard manifests again.
const feedPoll = 200 * time.Millisecond

// feedSignal returns a channel closed at this process's next acknowledged
// append to the store.
func (s *Store) feedSignal() <-chan struct{} {
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	if s.feedCh == nil {
		s.feedCh = make(chan struct{})
	}
	return s.feedCh
}

func (s *Store) feedNotify() {
	s.feedMu.Lock()
	if s.feedCh != nil {
		close(s.feedCh)
		s.feedCh = nil
	}
	s.feedMu.Unlock()
}

// feedPart is a run of one shard's rows from one place, in seq order.
type feedPart struct {
	seqs []int64 // the rows' seqs
	// one of:
	base []baseRow         // base rows (seqs[i] = base[i].seq)
	rec  arrow.RecordBatch // a generation's or the tail's rows: rec[from:from+len(seqs)]
	from int
	gen  *wal.LoadedGeneration // rec's generation (nil: the tail): its file holds the columns the cache does not
}

// feedShard is one shard's rows after the position, up to the limit.
type feedShard struct {
	key   int64
	parts []feedPart
	n     int
}

func (sh *feedShard) add(p feedPart) { sh.parts = append(sh.parts, p); sh.n += len(p.seqs) }

// feedOnce reads once: the tail of this process's shard first, then a
// snapshot, so every row acknowledged in this shard before the call is
// either in the snapshot or in the tail (wal.Writer.Tail). It returns the
// rows and the count of rows the filters passed over.
func (s *Store) feedOnce(ctx context.Context, after Position, o FeedOptions, fresh bool) (*FeedResult, int, error) {
	for attempt := 0; ; attempt++ {
		// After two gaps, the snapshot's rows alone: they all come before
		// the tail's, so the position passes none of the gap's rows, and
		// the tail's rows come at the next read.
		withTail := attempt < 2
		res, passed, err := s.feedRead(ctx, after, o, fresh || attempt > 0, withTail)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 2 {
			continue // a merge deleted a generation the snapshot named
		}
		if errors.Is(err, errTailGap) && withTail {
			continue
		}
		return res, passed, err
	}
}

// errTailGap: the snapshot's manifest of this process's shard is older
// than the tail (a seal committed in between) or than the snapshot's base
// (a seal and a merge): read it again.
var errTailGap = errors.New("rollout: feed: tail ahead of the snapshot")

func (s *Store) feedRead(ctx context.Context, after Position, o FeedOptions, fresh, withTail bool) (*FeedResult, int, error) {
	var tail []wal.TailBatch
	if w := s.writer.Load(); w != nil && withTail {
		tail = w.Tail()
	}
	defer func() {
		for _, t := range tail {
			t.Rec.Release()
		}
	}()
	snap, err := s.snapshot(ctx, true, readPlan{latest: true, fresh: fresh})
	if err != nil {
		return nil, 0, err
	}
	if s.feedRace != nil {
		s.feedRace(snap)
	}
	defer s.hold(snap.base.Version())()
	own := ShardKey(s.shard)
	shards := map[int64]*feedShard{}
	order := []int64{}
	shardOf := func(k int64) *feedShard {
		sh := shards[k]
		if sh == nil {
			sh = &feedShard{key: k}
			shards[k] = sh
			order = append(order, k)
		}
		return sh
	}
	limit := o.Limit

	// The base: every shard whose rows it holds (retired shards too).
	hasSeq := snap.base.Schema().Field(ColSeq) != nil && snap.base.Schema().Field(ColShard) != nil
	if hasSeq {
		keys := map[int64]bool{}
		live := map[string]bool{}
		for _, f := range snap.base.Fragments() {
			live[feedFragKey(f)] = true
			ranges, err := s.feed.rangesOf(ctx, snap.base, f)
			if err != nil {
				return nil, 0, err
			}
			for k, r := range ranges {
				if r.last > after.After(k) {
					keys[k] = true
				}
			}
		}
		s.feed.forget(snap.base.Version(), live)
		sorted := make([]int64, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			rows, err := s.feed.next(ctx, snap.base, k, after.After(k), limit)
			if err != nil {
				return nil, 0, err
			}
			if len(rows) > 0 {
				p := feedPart{base: rows, seqs: make([]int64, len(rows))}
				for i, r := range rows {
					p.seqs[i] = r.seq
				}
				shardOf(k).add(p)
			}
		}
	}

	// Pending generations, oldest first per shard.
	gens, err := s.loadPending(ctx, snap)
	if err != nil {
		return nil, 0, err
	}
	gi := 0
	var ownView *shardView
	for i := range snap.shards {
		sv := &snap.shards[i]
		if sv.id == s.shard {
			ownView = sv
		}
		k := ShardKey(sv.id)
		for range sv.pending {
			g := gens[gi]
			gi++
			sh := shardOf(k)
			if sh.n >= limit {
				continue
			}
			seqs, ok := columnOf(g.Rec, ColSeq).(*array.Int64)
			if !ok || seqs.NullN() == seqs.Len() {
				continue // sealed before rows had sequence numbers
			}
			p := partAfter(g.Rec, seqs, after.After(k), limit-sh.n)
			p.gen = g
			if len(p.seqs) > 0 {
				sh.add(p)
			}
		}
	}

	// This process's unsealed rows.
	if len(tail) > 0 && s.shard != "" {
		replayed := uint64(0)
		if ownView != nil {
			replayed = ownView.man.ReplayAfter
		}
		ahead := tail[0].Position() > replayed+1
		if s.tailAhead != nil {
			ahead = s.tailAhead(tail[0].Position(), replayed)
		}
		// The base and the shard manifests are read at once: a base that
		// has merged a generation the manifest does not know yet (a seal
		// and a merge between the two reads) may hold tail rows the
		// manifest's replay position does not cover, which would be
		// delivered twice.
		if ownView != nil && Watermark(snap.base, s.shard) >= ownView.man.NextGeneration {
			ahead = true
		}
		if ahead {
			return nil, 0, errTailGap
		}
		sh := shardOf(own)
		for _, t := range tail {
			if t.Position() <= replayed || sh.n >= limit {
				continue
			}
			p := tailPart(t, after.After(own), limit-sh.n)
			if len(p.seqs) > 0 {
				sh.add(p)
			}
		}
	}

	// Share the limit among the shards, then read the rows: the columns
	// asked for and those the filters need.
	out, err := FeedColumns(o.Columns)
	if err != nil {
		return nil, 0, err
	}
	read := out
	for _, f := range o.Filters {
		if !slices.Contains(read, f.Column) {
			read = append(slices.Clone(read), f.Column)
		}
	}
	quota := shareLimit(order, shards, limit)
	res := &FeedResult{Position: after.clone(), Columns: out}
	passed := 0
	for _, k := range order {
		sh := shards[k]
		take := quota[k]
		for _, p := range sh.parts {
			if take == 0 {
				break
			}
			n := min(take, len(p.seqs))
			take -= n
			rec, err := s.feedRows(ctx, snap, p, n, k, read)
			if err != nil {
				res.Release()
				return nil, 0, err
			}
			res.Position.advance(k, p.seqs[n-1])
			if len(o.Filters) > 0 {
				kept, err := filterBatch(ctx, rec, o.Filters)
				rec.Release()
				if err != nil {
					res.Release()
					return nil, 0, err
				}
				passed += n - int(kept.NumRows())
				rec = kept
			}
			if len(read) != len(out) {
				projected, err := project(rec, out)
				rec.Release()
				if err != nil {
					res.Release()
					return nil, 0, err
				}
				rec = projected
			}
			if rec.NumRows() == 0 {
				rec.Release()
				continue
			}
			res.Batches = append(res.Batches, rec)
			res.Rows += int(rec.NumRows())
		}
	}
	return res, passed, nil
}

// partAfter is the rows of rec (seqs ascending, as a seal writes them)
// with seq > after, at most n.
func partAfter(rec arrow.RecordBatch, seqs *array.Int64, after int64, n int) feedPart {
	vals := seqs.Int64Values()
	i, _ := slices.BinarySearch(vals, after+1)
	j := min(len(vals), i+n)
	return feedPart{rec: rec, from: i, seqs: vals[i:j]}
}

// tailPart is the rows of a tail batch with seq > after, at most n.
func tailPart(t wal.TailBatch, after int64, n int) feedPart {
	rows := int(t.Rec.NumRows())
	i := 0
	if after >= t.Seq0 {
		i = int(after - t.Seq0 + 1)
	}
	j := min(rows, i+n)
	if i >= j {
		return feedPart{}
	}
	seqs := make([]int64, j-i)
	for x := range seqs {
		seqs[x] = t.Seq0 + int64(i+x)
	}
	return feedPart{rec: t.Rec, from: i, seqs: seqs}
}

// shareLimit gives each shard an equal share of limit, and what a shard
// cannot use to the others (water filling), so one shard's backlog does
// not starve another's new rows.
func shareLimit(order []int64, shards map[int64]*feedShard, limit int) map[int64]int {
	quota := make(map[int64]int, len(order))
	left := limit
	open := slices.Clone(order)
	for left > 0 && len(open) > 0 {
		share := max(left/len(open), 1)
		next := open[:0]
		for _, k := range open {
			if left == 0 {
				break
			}
			give := min(share, shards[k].n-quota[k], left)
			quota[k] += give
			left -= give
			if quota[k] < shards[k].n {
				next = append(next, k)
			}
		}
		open = next
	}
	return quota
}

// feedRows reads the first n rows of a part as a batch of cols with
// lc_shard and lc_seq set.
func (s *Store) feedRows(ctx context.Context, snap *snapshot, p feedPart, n int, k int64, cols []string) (arrow.RecordBatch, error) {
	var rec arrow.RecordBatch
	if p.base != nil {
		addrs := make([]table.RowAddr, n)
		for i := range addrs {
			addrs[i] = p.base[i].addr
		}
		b, err := snap.base.TakeRows(ctx, addrs, baseColumns(snap.base, cols))
		if err != nil {
			return nil, err
		}
		rec, err = project(b, cols)
		b.Release()
		if err != nil {
			return nil, err
		}
	} else if p.gen != nil {
		var err error
		if rec, err = s.pendingBatch(ctx, p.gen, [][2]int64{{int64(p.from), int64(p.from + n)}}, cols); err != nil {
			return nil, err
		}
	} else {
		sl := p.rec.NewSlice(int64(p.from), int64(p.from+n))
		var err error
		rec, err = project(sl, cols)
		sl.Release()
		if err != nil {
			return nil, err
		}
	}
	// Generations and the tail do not carry lc_shard (a merge sets it),
	// the tail not lc_seq either.
	seqs := p.seqs[:n]
	withSeq := setInt64(rec, slices.Index(cols, ColSeq), func(i int) int64 { return seqs[i] })
	rec.Release()
	out := setInt64(withSeq, slices.Index(cols, ColShard), func(int) int64 { return k })
	withSeq.Release()
	return out, nil
}

// filterBatch keeps the rows of rec that match every filter.
func filterBatch(ctx context.Context, rec arrow.RecordBatch, fs []Filter) (arrow.RecordBatch, error) {
	keep := make([]bool, rec.NumRows())
	all := true
	idx := make([]int, len(fs))
	for j, f := range fs {
		idx[j] = rec.Schema().FieldIndices(f.Column)[0]
	}
	for i := range keep {
		keep[i] = true
		for j, f := range fs {
			keep[i] = keep[i] && valueMatches(rec.Column(idx[j]), i, f.Value)
		}
		all = all && keep[i]
	}
	if all {
		rec.Retain()
		return rec, nil
	}
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	b.AppendValues(keep, nil)
	mask := b.NewArray()
	b.Release()
	defer mask.Release()
	return compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
}
