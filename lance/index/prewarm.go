package index

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/table"
)

// prewarmOn reports whether any index is prewarmed (this package's tests
// turn it off; CacheOptions.NoPrewarm turns it off for a Cache).
var prewarmOn = func() bool { return true }

// prewarmShare: an index is prewarmed when its page_data file is at most
// this share of the page cache, so that one index never pushes a cache's
// worth of other pages out, and a cache too small for it is not churned.
const prewarmShare = 2

// prewarmMemShare: nor when it is more than this share of the Go memory
// limit (GOMEMLIMIT; internal/gctune sets 3/4 of the container's memory):
// the cache's bound is set apart from the container's, and a prewarm
// fills it in seconds where reads fill it over hours.
const prewarmMemShare = 8

// fitsPrewarm reports whether an index whose page_data has size bytes is
// prewarmed with a cache of cacheMax bytes.
func fitsPrewarm(size, cacheMax int64) bool {
	return cacheMax > 0 && size <= cacheMax/prewarmShare && size <= debug.SetMemoryLimit(-1)/prewarmMemShare
}

// prewarmTimeout bounds one index's prewarm.
const prewarmTimeout = 10 * time.Minute

// prewarmChunk is the pages one read of a prewarm decodes.
const prewarmChunk = 64

// WaitPrewarm returns once no index prewarm of the default Cache is
// running or waiting, or when ctx ends. Benchmarks call it to time the
// steady state.
func WaitPrewarm(ctx context.Context) error { return DefaultCache().WaitPrewarm(ctx) }

// WaitPrewarm returns once no index prewarm of c is running or waiting,
// or when ctx ends.
func (c *Cache) WaitPrewarm(ctx context.Context) error { return c.prewarms.Wait(ctx) }

// prewarm reads every page of t, values and row ids, into the page cache
// in the background, when t fits the cache's prewarm share: a point
// lookup then never decodes a cold page. Without it, a store of 10M rows
// has ~39,000 pages per key index, and a random lookup found its page
// cold nearly every time until tens of thousands of lookups had passed.
// A reader's lookups call it, once per opened index, and so do Prewarm (a
// worker's start-up warm) and PrewarmNext (after a commit, for indexes the
// reads had prewarmed): a merge's batch lookup asks the key filter and
// reads few pages, and a process that only merges would pay the read and
// the memory for nothing. It stops when f
// no longer holds t open.
func (f *Finder) prewarm(t *BTree) {
	// Considered once per opened index: later lookups pay an atomic load.
	if t.prewarmed.Load() || !t.prewarmed.CompareAndSwap(false, true) {
		return
	}
	c := f.owner
	if !prewarmOn() || !c.prewarm || f.cache == nil || !fitsPrewarm(t.pages.Size(), f.cache.max) {
		return
	}
	c.prewarms.Go(func() {
		c.slot <- struct{}{}
		defer func() { <-c.slot }()
		ctx, cancel := context.WithTimeout(context.Background(), prewarmTimeout)
		defer cancel()
		start := time.Now()
		n, err := t.prewarm(ctx, func() bool { return f.holds(t) })
		if err != nil {
			slog.Warn("lance/index: index prewarm stopped", "index", t.uuid, "pages_read", n, "err", err)
			return
		}
		slog.Debug("lance/index: index prewarmed", "index", t.uuid, "pages_read", n, "elapsed", time.Since(start))
	})
}

// Prewarm opens the BTree indexes of d on columns (as Warm) and starts the
// prewarm of each, as a reader's first lookup of it would, then returns
// once every prewarm of f's Cache has ended, or when ctx ends. A worker
// calls it at start, so that its first reads meet warm pages instead of
// each starting a prewarm that then competes with them for the CPU. An
// index the cache's prewarm share does not fit (or with prewarming off)
// is opened only.
func (f *Finder) Prewarm(ctx context.Context, d *table.Dataset, columns ...string) error {
	f.Warm(ctx, d, columns...) // opens them in parallel
	for _, c := range columns {
		segs, _, err := f.segments(ctx, d, c)
		if err != nil {
			return fmt.Errorf("lance/index: prewarm the indexes on %s: %w", c, err)
		}
		for _, sg := range segs {
			f.prewarm(sg.t)
		}
	}
	return f.owner.WaitPrewarm(ctx)
}

// PrewarmNext carries a warm index over a commit that made next from prev
// (a merge's new fragment and its index segment, or a consolidation of
// segments): for each column on which f had prewarmed an index of prev
// (its reads looked it up), it opens the indexes of next and starts their
// prewarm, so that readers meet a new segment warm rather than cold. A
// process that only merges (its batch lookups start no prewarm) reads
// nothing more. It returns once the indexes are open; the prewarms run in
// the background.
func (f *Finder) PrewarmNext(ctx context.Context, prev, next *table.Dataset, columns ...string) {
	for _, c := range columns {
		if !f.prewarmedOn(prev, c) {
			continue
		}
		segs, _, err := f.segments(ctx, next, c)
		if err != nil {
			continue // the reads meet it and report it
		}
		for _, sg := range segs {
			f.prewarm(sg.t)
		}
	}
}

// prewarmedOn reports whether f has considered an index of d on column for
// a prewarm: a reader looked it up (or Prewarm asked for it).
func (f *Finder) prewarmedOn(d *table.Dataset, column string) bool {
	idxs, err := BTreeIndexes(d, column)
	if err != nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range idxs {
		if t, ok := f.trees[uuidString(m)]; ok && t.prewarmed.Load() {
			return true
		}
	}
	return false
}

// holds reports whether f still keeps t open.
func (f *Finder) holds(t *BTree) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.trees[t.uuid] == t
}

// prewarm reads the pages of t that the cache lacks (or holds without row
// ids), prewarmChunk pages a read and prewarmWave reads at once, resting
// after each wave so that it uses at most half a CPU. It returns the pages
// read.
func (t *BTree) prewarm(ctx context.Context, live func() bool) (int, error) {
	np := len(t.maxs)
	read := 0
	for p := 0; p < np; {
		if !live() {
			return read, nil
		}
		// The next wave: up to prewarmWave chunks the cache lacks.
		var wave [][2]int
		for ; p < np && len(wave) < prewarmWave; p += prewarmChunk {
			if q := min(p+prewarmChunk, np); !t.cachedWithIDs(p, q) {
				wave = append(wave, [2]int{p, q})
			}
		}
		if len(wave) == 0 {
			continue
		}
		start, cpu := time.Now(), processCPU()
		errs := make([]error, len(wave))
		var wg sync.WaitGroup
		for i, c := range wave {
			wg.Go(func() { errs[i] = t.readPagesWithIDs(ctx, c[0], c[1]) })
		}
		wg.Wait()
		for i, c := range wave {
			if errs[i] != nil {
				return read, errs[i]
			}
			read += c[1] - c[0]
		}
		select {
		case <-ctx.Done():
			return read, ctx.Err()
		case <-time.After(prewarmRest(time.Since(start), processCPU()-cpu, cpu >= 0, len(wave))):
		}
	}
	return read, nil
}

// prewarmWave is the reads of a prewarm in flight at once: on object
// storage a read mostly waits on its round trip, and one at a time made a
// 1M-row store's start-up warm take 334 round trips one after another.
const prewarmWave = 4

// prewarmRest is the rest after a wave of reads reads that took wall,
// while the process used cpu (known says whether it could be read). The
// wave's own CPU c is at most cpu, and at most reads*wall, so resting
// 2c - wall keeps it at c/(wall+rest) <= 1/2 a CPU, also when its reads
// ran on several cores; a wave that mostly waited on object storage (an
// idle process on S3) rests little instead of as long as its round trips
// took.
func prewarmRest(wall, cpu time.Duration, known bool, reads int) time.Duration {
	c := time.Duration(reads) * wall
	if known && cpu >= 0 {
		c = min(c, cpu)
	}
	return max(0, 2*c-wall)
}

// cachedWithIDs reports whether the cache holds pages [p, q) with their
// row ids.
func (t *BTree) cachedWithIDs(p, q int) bool {
	for i := p; i < q; i++ {
		pg, ok := t.cache.get(pageKey{uuid: t.uuid, page: i})
		if !ok {
			return false
		}
		pg.mu.Lock()
		has := pg.ids != nil
		pg.mu.Unlock()
		if !has {
			return false
		}
	}
	return true
}

// readPagesWithIDs reads pages [p, q), values and row ids, in one read and
// caches each page with its ids. Each page gets buffers of its own: pages
// sharing a chunk's buffers would keep the whole chunk alive while any one
// of them stayed cached.
func (t *BTree) readPagesWithIDs(ctx context.Context, p, q int) error {
	s, e := int64(p)*t.batchSize, min(int64(q)*t.batchSize, t.rows)
	rec, err := t.pages.Read(ctx, []int32{t.valuesID, t.idsID}, s, e)
	if err != nil {
		return fmt.Errorf("lance/index: prewarm %s pages %d-%d: %w", t.uuid, p, q-1, err)
	}
	defer rec.Release()
	ids, ok := rec.Column(1).(*array.Uint64)
	if !isString(rec.Column(0).DataType()) || !ok || ids.NullN() > 0 || int64(ids.Len()) != e-s || int64(rec.Column(0).Len()) != e-s {
		return fmt.Errorf("%w: %s pages %d-%d: not %d string values and row ids", ErrCorrupt, t.uuid, p, q-1, e-s)
	}
	for i := p; i < q; i++ {
		ps, pe := int64(i)*t.batchSize-s, min(int64(i+1)*t.batchSize, t.rows)-s
		vals, err := copyStrings(rec.Column(0), ps, pe)
		if err != nil {
			return fmt.Errorf("%w: %s page %d: %w", ErrCorrupt, t.uuid, i, err)
		}
		pids := copyUint64s(ids.Uint64Values()[ps:pe])
		key := pageKey{uuid: t.uuid, page: i}
		if pg, ok := t.cache.get(key); ok {
			// Cached by a lookup meanwhile, perhaps without its row ids.
			pg.mu.Lock()
			if pg.ids == nil {
				pg.ids = pids
				t.cache.grow(key, 8*(pe-ps))
			}
			pg.mu.Unlock()
			vals.Release()
			continue
		}
		pg := &page{start: s + ps, index: i, values: vals, ids: pids, bytes: valuesBytes(vals) + 8*(pe-ps)}
		t.cache.put(key, pg)
	}
	return nil
}

// copyStrings returns rows [s, e) of string array a in buffers of their
// own (offsets rebased to 0).
func copyStrings(a arrow.Array, s, e int64) (strArr, error) {
	sl := array.NewSlice(a, s, e)
	defer sl.Release()
	var data arrow.ArrayData
	switch v := sl.(type) {
	case *array.String:
		data = stringData(v, arrow.Int32Traits.CastToBytes(rebase(v.ValueOffsets())), v.ValueBytes())
	case *array.LargeString:
		data = stringData(v, arrow.Int64Traits.CastToBytes(rebase(v.ValueOffsets())), v.ValueBytes())
	default:
		return strArr{}, fmt.Errorf("values are %s", a.DataType())
	}
	defer data.Release()
	return strs(array.MakeFromData(data)), nil
}

// rebase returns offs less its first entry.
func rebase[T int32 | int64](offs []T) []T {
	out := make([]T, len(offs))
	for i, o := range offs {
		out[i] = o - offs[0]
	}
	return out
}

// stringData is the data of a string array like a, with offsets offs and
// a copy of values.
func stringData(a arrow.Array, offs, values []byte) arrow.ArrayData {
	bufs := []*memory.Buffer{validityCopy(a), memory.NewBufferBytes(offs), memory.NewBufferBytes(append([]byte(nil), values...))}
	return array.NewData(a.DataType(), a.Len(), bufs, nil, a.NullN(), 0)
}

// validityCopy returns a's validity bitmap in a buffer of its own starting
// at bit 0, nil when a has no nulls.
func validityCopy(a arrow.Array) *memory.Buffer {
	if a.NullN() == 0 {
		return nil
	}
	bm := make([]byte, (a.Len()+7)/8)
	for i := 0; i < a.Len(); i++ {
		if a.IsValid(i) {
			bm[i/8] |= 1 << (i % 8)
		}
	}
	return memory.NewBufferBytes(bm)
}

// copyUint64s returns vs as an array of its own.
func copyUint64s(vs []uint64) *array.Uint64 {
	c := append([]uint64(nil), vs...)
	data := array.NewData(arrow.PrimitiveTypes.Uint64, len(c), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Uint64Traits.CastToBytes(c))}, nil, 0, 0)
	defer data.Release()
	return array.NewUint64Data(data)
}
