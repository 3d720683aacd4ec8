package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lance-context/lance-context/internal/bgwork"
	"github.com/lance-context/lance-context/internal/lru"
	"github.com/lance-context/lance-context/internal/multierr"
)

// DefaultIOConcurrency is the reads one fetch of a Read keeps in flight by
// default. It is sized for object-store latency, not for cores: a read
// waits, it does not compute, and 32 ranges in flight cost one round trip
// where 2 would cost 16.
const DefaultIOConcurrency = 32

// IOOptions configure an IO. The zero value is the default. The process
// reads them from the environment in cmd (internal/config): Concurrency
// is LC_IO_CONCURRENCY.
type IOOptions struct {
	// Concurrency is the most range reads one fetch of a Read issues at
	// once; <= 0: DefaultIOConcurrency.
	Concurrency int
	// PrefetchSlots bounds the offsets buffers read in the background at
	// once; <= 0: half the CPUs (at least 1), so that the warm-up of a
	// large store (every page of every short-string column read whole
	// once) leaves the reads that started it CPUs to run on.
	PrefetchSlots int
	// Cache keeps offsets buffers and chunks of them (packed); nil: the
	// process-wide metadata cache (lru.Shared).
	Cache *lru.Cache
	// WholeOffsets makes a point read of an object (a Source that is not
	// a LocalSource) read the offsets buffers it touches whole (up to
	// maxCachedOffsets; larger ones in the background) and warm its
	// column's others in the background, as a local file's reads always
	// do: later random reads then find every offset cached, at the cost of
	// downloading the offsets of every touched column. By default such a
	// read takes the offsetsChunk-entry chunks its rows need (cached), so
	// that what a cold read downloads is bounded by what it returns.
	WholeOffsets bool
}

// IO is what the Readers opened through it share: the read concurrency,
// the cache of offsets buffers and the slots and count of the background
// offsets reads. A process makes one (DefaultIO unless it installs its
// own with SetDefaultIO); a test that must not share cached offsets or
// prefetch slots with others makes its own with NewIO and opens its
// Readers with its Open and OpenTail.
type IO struct {
	concurrency int
	whole       bool // IOOptions.WholeOffsets
	cache       *lru.Cache
	slots       chan struct{} // prefetch slots
	prefetches  bgwork.Group  // background reads started and not yet done
}

// NewIO returns an IO with options o.
func NewIO(o IOOptions) *IO {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultIOConcurrency
	}
	if o.PrefetchSlots <= 0 {
		o.PrefetchSlots = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if o.Cache == nil {
		o.Cache = lru.Shared()
	}
	return &IO{concurrency: o.Concurrency, whole: o.WholeOffsets, cache: o.Cache, slots: make(chan struct{}, o.PrefetchSlots)}
}

var defaultIO atomic.Pointer[IO]

// DefaultIO returns the IO of Open and OpenTail: the one SetDefaultIO
// installed, else one with the zero IOOptions.
func DefaultIO() *IO {
	if io := defaultIO.Load(); io != nil {
		return io
	}
	defaultIO.CompareAndSwap(nil, NewIO(IOOptions{}))
	return defaultIO.Load()
}

// SetDefaultIO makes io the IO of Open and OpenTail, for Readers opened
// after it. The process calls it once at start, with the options it read
// from the environment.
func SetDefaultIO(io *IO) { defaultIO.Store(io) }

// IOConcurrency returns the most range reads one fetch of a Read issues at
// once under the default IO: IOOptions.Concurrency (LC_IO_CONCURRENCY)
// when positive, else DefaultIOConcurrency.
func IOConcurrency() int { return DefaultIO().concurrency }

// Concurrency returns the most range reads one fetch of a Read issues at
// once.
func (io *IO) Concurrency() int { return io.concurrency }

// Open is the package's Open for a Reader that shares io.
func (io *IO) Open(ctx context.Context, src Source, size int64) (*Reader, error) {
	return io.OpenTail(ctx, src, size, nil)
}

// OpenTail is the package's OpenTail for a Reader that shares io.
func (io *IO) OpenTail(ctx context.Context, src Source, size int64, tail []byte) (*Reader, error) {
	r, err := openTail(ctx, src, size, tail)
	if err != nil {
		return nil, err
	}
	r.io = io
	return r, nil
}

// Wait returns once no background offsets read of io (prefetchOffsets,
// warmColumnOffsets) is running or queued, or when ctx ends.
func (io *IO) Wait(ctx context.Context) error { return io.prefetches.Wait(ctx) }

// maxCachedOffsets: the offsets buffer of a string or list page up to this
// size is read whole, the first time any of its rows is read, and kept in
// the IO's cache (by default the process-wide internal/lru), so that later reads of that page
// know where their bytes are without reading offsets first (one dependent
// round trip less on an object store). Larger buffers, up to
// maxPrefetchedOffsets, are read by the slice the rows need, and read
// whole in the background (prefetchOffsets) for the reads after it: a
// page of short strings (ids, names) holds up to a fragment's rows, and
// at 10M rows every point read touched one such 8 MB buffer per column.
// (Caching slices of large buffers by aligned chunks was measured instead:
// on local disk a point read of a cold chunk cost more than the read it
// saves once warm, and at 10M rows the chunks stay cold.) Buffers are kept
// packed (packedOffsets: row lengths by blocks of 256, bit-packed to their
// range; a column of equal-width values or an all-null list column costs a
// few bytes per block, not 8 per row), so the cache holds about 8x more
// pages' offsets.
const (
	maxCachedOffsets     = 1 << 20
	maxPrefetchedOffsets = 32 << 20
)

// offsetsKey names a cached offsets buffer: files are immutable, and a
// Reader is one file. Entries of a Reader no longer used are evicted in
// time, and meanwhile hold only their own bytes (what they are charged).
type offsetsKey struct {
	r   uint64 // Reader.id
	off int64
}

// offsetsChunk is the entries of one chunk of an offsets buffer read by
// range (4 KiB): a point read of an object reads and caches the chunks
// holding its rows' offsets, not the whole buffer (byRange).
const offsetsChunk = 512

// offsetsChunkKey names chunk k (entries [k*offsetsChunk, ...)) of the
// offsets buffer at off, cached packed.
type offsetsChunkKey struct {
	r     uint64 // Reader.id
	off   int64
	chunk int64
}

// byRange reports whether this Read reads offsets by chunk (see
// IOOptions.WholeOffsets): an object's, unless its IO says whole.
func (rc *readCtx) byRange() bool { return !rc.local && !rc.r.io.whole }

// pointRead reports whether a read of entries [i0, hi) of offsets buffer
// b takes little of it (at most 1/64): a scan takes much, reads what it
// needs and is done with it.
func pointRead(b bufRange, i0, hi int64) bool { return 64*8*(hi-i0) <= b.size }

// cachedOffsets returns entries [i0, hi) of offsets buffer b (raw u64 LE)
// when the cache holds the buffer, or every chunk of it they fall in.
func (rc *readCtx) cachedOffsets(b bufRange, i0, hi int64) ([]byte, bool) {
	if b.size > maxPrefetchedOffsets || b.size < 8*hi || i0 >= hi {
		return nil, false
	}
	if v, ok := rc.r.io.cache.Get(offsetsKey{rc.r.id, b.off}); ok {
		p := v.(*packedOffsets)
		if int64(p.n) != b.size/8 {
			return nil, false
		}
		return p.appendRange(make([]byte, 0, 8*(hi-i0)), int(i0), int(hi)), true
	}
	k0, k1 := i0/offsetsChunk, (hi-1)/offsetsChunk
	if k1-k0 >= 64 || !pointRead(b, i0, hi) {
		return nil, false
	}
	out := make([]byte, 0, 8*(hi-i0))
	for k := k0; k <= k1; k++ {
		v, ok := rc.r.io.cache.Get(offsetsChunkKey{rc.r.id, b.off, k})
		if !ok {
			return nil, false
		}
		p := v.(*packedOffsets)
		lo := max(i0, k*offsetsChunk) - k*offsetsChunk
		end := min(hi, (k+1)*offsetsChunk) - k*offsetsChunk
		if int64(p.n) < end {
			return nil, false
		}
		out = p.appendRange(out, int(lo), int(end))
	}
	return out, true
}

// offsetsRead returns the range of offsets buffer b that a read of its
// entries [i0, hi) reads to keep (keepOffsets), and false when it reads
// just the entries, keeping nothing. A point read of an object
// (byRange) reads the chunks the entries fall in; other reads read a
// buffer up to maxCachedOffsets whole; larger ones, the entries.
func (rc *readCtx) offsetsRead(b bufRange, i0, hi int64) (bufRange, bool) {
	if b.size < 8*hi || i0 >= hi {
		return bufRange{}, false
	}
	if rc.byRange() && pointRead(b, i0, hi) && b.size > 8*offsetsChunk {
		n := b.size / 8
		lo, end := i0/offsetsChunk*offsetsChunk, min(n, ((hi-1)/offsetsChunk+1)*offsetsChunk)
		return bufRange{b.off + 8*lo, 8 * (end - lo)}, true
	}
	return b, b.size <= maxCachedOffsets
}

// WaitPrefetches returns once no background offsets read of the default
// IO (prefetchOffsets, warmColumnOffsets) is running or queued, or when
// ctx ends. Benchmarks call it to time the steady state.
func WaitPrefetches(ctx context.Context) error { return DefaultIO().Wait(ctx) }

// prefetchOffsets starts a background read of offsets buffer b, too large
// to be read whole by a read that needs entries [i0, hi) of it, and caches
// it packed (adj: the page's null adjustment). A buffer is read this way
// at most once per Reader, so a cache too small for a store's offsets
// costs each buffer one read, not one per eviction. A read of much of the
// buffer (a scan) starts none: it reads what it needs and is done with it.
// Reads wait their turn for a slot (IOOptions.PrefetchSlots): a store of 10M rows
// has hundreds of such buffers, and dropping the ones asked for while the
// slots were busy left them to be asked for again, at random, for tens of
// thousands of reads.
func (rc *readCtx) prefetchOffsets(b bufRange, adj uint64, i0, hi int64) {
	if rc.byRange() || b.size <= maxCachedOffsets || b.size > maxPrefetchedOffsets || 64*8*(hi-i0) > b.size {
		return
	}
	r := rc.r
	ps := r.prefetched
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, done := ps.offs[b.off]; done {
		return
	}
	ps.offs[b.off] = struct{}{}
	// Not the read's context: the read does not wait for this one, and
	// its end must not cancel it.
	ctx := context.WithoutCancel(rc.ctx)
	r.io.prefetches.Go(func() {
		// On an error the reads that need these offsets read their slice.
		cacheOffsetsInSlot(ctx, r, b, adj)
	})
}

// warmColumnOffsets: a point read that reads a small offsets buffer whole
// (offsetsRead, a first touch: keepOffsets caches it) starts, once per
// Reader and column, a background read of the column's other small
// offsets buffers, so that later point reads of the column find theirs
// cached. A page of ~1 KB strings holds ~8,000 rows, so a 1M-row
// fragment has ~120 such buffers per text column: at 10M rows random
// reads kept meeting uncached ones for thousands of reads, each paying a
// 64 KB read and its packing (and on an object store a dependent round
// trip). The column's buffers are read one at a time, each waiting for a
// prefetch slot (IOOptions.PrefetchSlots), and only when together they are at most
// maxPrefetchedOffsets; a read of much of a page (a scan) starts none.
func (rc *readCtx) warmColumnOffsets(c *column, b bufRange, i0, hi int64) {
	if rc.byRange() || !pointRead(b, i0, hi) || !columnWarmOn() {
		return
	}
	r := rc.r
	ps := r.prefetched
	ps.mu.Lock()
	_, done := ps.cols[c.index]
	if !done {
		ps.cols[c.index] = struct{}{}
	}
	ps.mu.Unlock()
	if done {
		return
	}
	type buf struct {
		b   bufRange
		adj uint64
	}
	var bufs []buf
	var total int64
	for _, pg := range c.pages {
		var ob bufRange
		var adj uint64
		switch d := pg.desc.(type) {
		case *binDesc:
			if d.dict != nil || d.outer.allNull {
				continue
			}
			ob, adj = d.indices, d.adj
		case *listDesc:
			ob, adj = d.offsets, d.adj
		default:
			continue
		}
		if ob.size < 8 || ob.size > maxCachedOffsets {
			continue
		}
		bufs = append(bufs, buf{ob, adj})
		total += ob.size
	}
	if len(bufs) < 2 || total > maxPrefetchedOffsets {
		return
	}
	ctx := context.WithoutCancel(rc.ctx) // as prefetchOffsets
	r.io.prefetches.Go(func() {
		for _, x := range bufs {
			if _, ok := r.io.cache.Get(offsetsKey{r.id, x.b.off}); ok {
				continue
			}
			if !cacheOffsetsInSlot(ctx, r, x.b, x.adj) {
				return // the reads that need them read their own
			}
		}
	})
}

// columnWarmOn reports whether warmColumnOffsets runs (this package's
// tests that count a read's bytes turn it off).
var columnWarmOn = func() bool { return true }

// cacheOffsetsInSlot reads offsets buffer b of r whole, in a prefetch
// slot, and caches it packed; false when the read failed.
func cacheOffsetsInSlot(ctx context.Context, r *Reader, b bufRange, adj uint64) bool {
	r.io.slots <- struct{}{}
	defer func() { <-r.io.slots }()
	ctx, cancel := context.WithTimeout(ctx, prefetchTimeout)
	defer cancel()
	raw, err := r.readAt(ctx, b.off, b.size)
	if err != nil {
		return false
	}
	p := packOffsets(raw[:b.size/8*8], adj)
	r.io.cache.Put(offsetsKey{r.id, b.off}, p, p.bytes())
	return true
}

// prefetchTimeout bounds a background offsets read.
const prefetchTimeout = time.Minute

// keepOffsets caches got, the bytes at rq of offsets buffer b (rq from
// offsetsRead: the whole buffer, or whole chunks of it), packed, and
// returns its entries [i0, hi). adj is the page's null adjustment (nulls
// are stored as end + adj; 0: none).
func (rc *readCtx) keepOffsets(b, rq bufRange, got []byte, adj uint64, i0, hi int64) []byte {
	if rq == b {
		p := packOffsets(got[:b.size/8*8], adj)
		rc.r.io.cache.Put(offsetsKey{rc.r.id, b.off}, p, p.bytes())
		return got[8*i0 : 8*hi]
	}
	first := (rq.off - b.off) / 8
	for at := int64(0); at < int64(len(got))/8; at += offsetsChunk {
		end := min(int64(len(got))/8, at+offsetsChunk)
		p := packOffsets(got[8*at:8*end], adj)
		rc.r.io.cache.Put(offsetsChunkKey{rc.r.id, b.off, (first + at) / offsetsChunk}, p, p.bytes())
	}
	return got[8*(i0-first) : 8*(hi-first)]
}

// offsetsBlock is the entries per block of packedOffsets.
const offsetsBlock = 256

// packedOffsets holds u64 end offsets compactly: per block of
// offsetsBlock entries, the first (null adjustment removed), the smallest
// difference between neighbours, and the differences above it packed in
// the fewest whole bytes (0 when they are all equal), with the nulls as
// none, all or a bitmap. Offsets that do not ascend (a corrupt file) are
// kept raw, for the decoder to report.
type packedOffsets struct {
	n      int
	adj    uint64
	raw    []byte // not packed
	blocks []offBlock
	data   []byte
}

type offBlock struct {
	first, minGap uint64
	width         uint8 // bytes per packed gap: 0, 1, 2, 4 or 8
	nulls         uint8 // 0: none, 1: all, 2: a bitmap in data
	at            uint32
}

func (p *packedOffsets) bytes() int64 {
	return int64(len(p.raw)+len(p.data)+24*len(p.blocks)) + 96
}

func packOffsets(raw []byte, adj uint64) *packedOffsets {
	n := len(raw) / 8
	p := &packedOffsets{n: n, adj: adj}
	p.blocks = make([]offBlock, 0, (n+offsetsBlock-1)/offsetsBlock)
	// One pass over the raw entries per block, into vals and nulls (the
	// block's entries, adjustment removed); the packing then reads those.
	var vals [offsetsBlock]uint64
	for s := 0; s < n; s += offsetsBlock {
		e := min(s+offsetsBlock, n)
		k := e - s
		var nulls [offsetsBlock / 8]byte // the block's null bitmap, as stored
		nnull := 0
		for i := range k {
			v := binary.LittleEndian.Uint64(raw[8*(s+i):])
			if adj > 0 && v >= adj {
				v -= adj
				nulls[i/8] |= 1 << (i % 8)
				nnull++
			}
			vals[i] = v
		}
		blk := offBlock{first: vals[0], at: uint32(len(p.data))}
		minGap, maxGap := ^uint64(0), uint64(0)
		for i := 1; i < k; i++ {
			if vals[i] < vals[i-1] {
				return &packedOffsets{n: n, adj: adj, raw: append([]byte(nil), raw...)}
			}
			g := vals[i] - vals[i-1]
			minGap, maxGap = min(minGap, g), max(maxGap, g)
		}
		if k == 1 {
			minGap = 0
		}
		blk.minGap = minGap
		switch r := maxGap - minGap; {
		case k == 1 || r == 0:
			blk.width = 0
		case r < 1<<8:
			blk.width = 1
		case r < 1<<16:
			blk.width = 2
		case r < 1<<32:
			blk.width = 4
		default:
			blk.width = 8
		}
		if w := int(blk.width); w > 0 {
			at := len(p.data)
			p.data = slices.Grow(p.data, (k-1)*w)[:at+(k-1)*w]
			d := p.data[at:]
			for i := 1; i < k; i++ {
				g := vals[i] - vals[i-1] - minGap
				switch w {
				case 1:
					d[i-1] = byte(g)
				case 2:
					binary.LittleEndian.PutUint16(d[2*(i-1):], uint16(g))
				case 4:
					binary.LittleEndian.PutUint32(d[4*(i-1):], uint32(g))
				default:
					binary.LittleEndian.PutUint64(d[8*(i-1):], g)
				}
			}
		}
		switch {
		case nnull == k:
			blk.nulls = 1
		case nnull > 0:
			blk.nulls = 2
			p.data = append(p.data, nulls[:]...) // after the gaps
		}
		p.blocks = append(p.blocks, blk)
	}
	if cap(p.data) > len(p.data)+len(p.data)/8 {
		p.data = slices.Clip(append([]byte(nil), p.data...)) // the cache charges len
	}
	return p
}

// appendRange appends entries [lo, hi) as raw u64 LE (null adjustment
// restored) to out.
func (p *packedOffsets) appendRange(out []byte, lo, hi int) []byte {
	if p.raw != nil {
		return append(out, p.raw[8*lo:8*hi]...)
	}
	for k := lo / offsetsBlock; k*offsetsBlock < hi; k++ {
		blk := &p.blocks[k]
		s := k * offsetsBlock
		e := min(s+offsetsBlock, p.n)
		gaps := p.data[blk.at:]
		var bits []byte
		if blk.nulls == 2 {
			bits = gaps[int(blk.width)*(e-s-1):]
		}
		v := blk.first
		from := s
		if lo > s {
			// Skip to lo: equal gaps in one step, others summed.
			from = lo
			v += uint64(lo-s) * blk.minGap
			switch blk.width {
			case 1:
				for _, g := range gaps[:lo-s] {
					v += uint64(g)
				}
			case 2:
				for j := range lo - s {
					v += uint64(binary.LittleEndian.Uint16(gaps[2*j:]))
				}
			case 4:
				for j := range lo - s {
					v += uint64(binary.LittleEndian.Uint32(gaps[4*j:]))
				}
			case 8:
				for j := range lo - s {
					v += binary.LittleEndian.Uint64(gaps[8*j:])
				}
			}
		}
		for i := from; i < min(e, hi); i++ {
			if i > from {
				j := i - s - 1
				g := blk.minGap
				switch blk.width {
				case 1:
					g += uint64(gaps[j])
				case 2:
					g += uint64(binary.LittleEndian.Uint16(gaps[2*j:]))
				case 4:
					g += uint64(binary.LittleEndian.Uint32(gaps[4*j:]))
				case 8:
					g += binary.LittleEndian.Uint64(gaps[8*j:])
				}
				v += g
			}
			w := v
			if blk.nulls == 1 || (blk.nulls == 2 && bits[(i-s)/8]&(1<<((i-s)%8)) != 0) {
				w += p.adj
			}
			out = binary.LittleEndian.AppendUint64(out, w)
		}
	}
	return out
}

// fetchNow is fetch without waiting for other fields' reads. Nearby
// ranges are coalesced into one read (their gap read too), and no byte is
// read twice by one Read: what Open's tail or an earlier wave of the Read
// holds (heldSpans: a coalesced read's gaps, often the bytes a string
// column's next wave asks for; a data page inside the 64 KiB tail) is
// taken from there, and a group of ranges reads only the parts around it.
func (rc *readCtx) fetchNow(reqs []bufRange, dsts [][]byte) ([][]byte, error) {
	out := make([][]byte, len(reqs))
	into, _ := rc.r.src.(SourceInto)
	idx := make([]int, 0, len(reqs))
	var direct []int
	for i, q := range reqs {
		switch {
		case q.size <= 0:
			out[i] = []byte{}
		case into != nil && dsts != nil && dsts[i] != nil && q.size >= rc.r.directMin && len(rc.heldIn(q.off, q.off+q.size)) == 0:
			direct = append(direct, i)
		default:
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return reqs[idx[a]].off < reqs[idx[b]].off })
	type group struct {
		off, end int64
		members  []int
		held     []heldSpan // what the Read holds of it, in order
		reads    []heldSpan // the rest, read now (b set by the read)
	}
	var groups []*group
	for _, i := range idx {
		q := reqs[i]
		if n := len(groups); n > 0 && q.off <= groups[n-1].end+coalesceGap {
			g := groups[n-1]
			g.end = max(g.end, q.off+q.size)
			g.members = append(g.members, i)
			continue
		}
		groups = append(groups, &group{off: q.off, end: q.off + q.size, members: []int{i}})
	}
	var reads []*heldSpan
	for _, g := range groups {
		g.held = rc.heldIn(g.off, g.end)
		pos := g.off
		for _, h := range g.held {
			if h.off > pos {
				g.reads = append(g.reads, heldSpan{off: pos, b: make([]byte, 0, h.off-pos)})
			}
			pos = h.off + int64(len(h.b))
		}
		if pos < g.end {
			g.reads = append(g.reads, heldSpan{off: pos, b: make([]byte, 0, g.end-pos)})
		}
		for k := range g.reads {
			reads = append(reads, &g.reads[k])
		}
	}
	jobs := make([]func() error, 0, len(reads)+len(direct))
	for _, rd := range reads {
		jobs = append(jobs, func() error {
			b, err := readExact(rc.ctx, rc.r.src, rd.off, int64(cap(rd.b)))
			rd.b = b
			return err
		})
	}
	for _, i := range direct {
		jobs = append(jobs, func() error {
			q := reqs[i]
			dst := dsts[i][:q.size:q.size]
			if err := into.ReadRangeInto(rc.ctx, q.off, dst); err != nil {
				return fmt.Errorf("lance/file: read [%d, +%d): %w", q.off, q.size, err)
			}
			out[i] = dst
			return nil
		})
	}
	if err := rc.runJobs(jobs); err != nil {
		return out, err
	}
	for _, g := range groups {
		var b []byte
		switch {
		case len(g.held) == 0 && len(g.reads) == 1:
			b = g.reads[0].b
		case len(g.reads) == 0 && len(g.held) == 1:
			b = g.held[0].b
		default: // pieces held and read: one buffer of them
			b = make([]byte, g.end-g.off)
			for _, h := range g.held {
				copy(b[h.off-g.off:], h.b)
			}
			for _, h := range g.reads {
				copy(b[h.off-g.off:], h.b)
			}
		}
		for _, i := range g.members {
			q := reqs[i]
			out[i] = b[q.off-g.off : q.off-g.off+q.size : q.off-g.off+q.size]
		}
	}
	// Kept for the Read's later waves. Direct reads are not: they went into
	// output arrays, and are large ranges read once.
	for _, rd := range reads {
		rc.held.add(rd.off, rd.b)
	}
	return out, nil
}

// runJobs runs the reads of one fetch. A few reads of a local file go one
// after another (page-cache reads cost less than goroutines); many go in
// parallel, as a cold disk answers them faster so.
func (rc *readCtx) runJobs(jobs []func() error) error {
	if len(jobs) == 1 || (rc.local && len(jobs) <= localSerialReads) {
		for _, job := range jobs {
			if err := job(); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, rc.r.io.Concurrency()) // the reader's IO, not the default
	for k, job := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[k] = job()
		}()
	}
	wg.Wait()
	return multierr.Join(errs...)
}

// heldSpans are the bytes one Read has fetched, sorted by file offset and
// disjoint (fetchNow reads only what is not held).
type heldSpans struct {
	mu    sync.Mutex
	spans []heldSpan
}

// heldSpan is the bytes of the file at [off, off+len(b)).
type heldSpan struct {
	off int64
	b   []byte
}

func (h *heldSpans) add(off int64, b []byte) {
	if len(b) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.spans), func(i int) bool { return h.spans[i].off >= off })
	h.spans = slices.Insert(h.spans, i, heldSpan{off, b})
}

// heldIn returns what the Read holds of [off, end): the pieces of its
// earlier reads and of Open's tail, clipped to the range, in order.
func (rc *readCtx) heldIn(off, end int64) []heldSpan {
	var out []heldSpan
	clip := func(s heldSpan) {
		lo, hi := max(off, s.off), min(end, s.off+int64(len(s.b)))
		if lo < hi {
			out = append(out, heldSpan{lo, s.b[lo-s.off : hi-s.off : hi-s.off]})
		}
	}
	h := &rc.held
	h.mu.Lock()
	for _, s := range h.spans {
		if s.off >= end {
			break
		}
		clip(s)
	}
	h.mu.Unlock()
	if t := rc.r.tail; len(t) > 0 {
		clip(heldSpan{rc.r.size - int64(len(t)), t})
	}
	// The tail starts after every span the Read read (those never overlap
	// it), so out stays in order.
	return out
}
