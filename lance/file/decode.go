package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/internal/multierr"
)

const (
	// coalesceGap: two byte ranges closer than this are fetched in one read.
	coalesceGap = 16 << 10
	// directReadMin: ranges at least this big are read straight into the
	// output arrays when the Source implements SourceInto.
	directReadMin = 64 << 10
)

// SourceInto is an optional interface of a Source: ReadRangeInto reads
// exactly len(dst) bytes at off into dst. When the Source has it, Read reads
// large page buffers directly into the arrays it returns, saving a copy
// (worth it for local files: os.File.ReadAt).
type SourceInto interface {
	Source
	ReadRangeInto(ctx context.Context, off int64, dst []byte) error
}

// LocalSource is a Source that reads a local file: a read costs a system
// call answered from the page cache, less than the goroutines that would
// read the fields of a Read in parallel waves.
type LocalSource interface {
	Local() bool
}

// localSerialReads is the most range reads of one fetch of a local file
// issued one after another.
const localSerialReads = 8

// decodeLimitFloor is the smallest decode budget of one Read call. The
// budget is max(decodeLimitFloor, 16 x file size): bytes a Read allocates
// for decoded output beyond what it reads. It bounds what a corrupt or
// hostile file (say, an all-null page claiming 2^60 rows) can make the
// reader allocate. Tests lower it.
var decodeLimitFloor int64 = 1 << 30

// Read returns rows [start, end) of the given top-level fields (by field id,
// in the order given) as one record batch with the file's field names and
// types. Only the pages overlapping the rows are read, and within a page
// only the byte ranges the rows need; nearby ranges are coalesced into one
// read. Fields are decoded concurrently.
func (r *Reader) Read(ctx context.Context, fieldIDs []int32, start, end int64) (arrow.RecordBatch, error) {
	return r.ReadWith(ctx, fieldIDs, start, end, ReadOptions{})
}

// ReadOptions changes what Read returns.
type ReadOptions struct {
	// PlainDictionaries returns a dictionary-typed field as a plain array
	// of its value type (utf8 for dictionary<int8, utf8>). A dictionary
	// array's keys bound the distinct values one read may return (128 for
	// int8); plain arrays have no such bound.
	PlainDictionaries bool
	// ValueBytes, when set, is the caller's estimate of where the values
	// of rows [lo, hi) of string field field lie among the field's values:
	// [start, end), in the estimate's own units (each page places rows
	// within its own rows' estimate, scaled to its bytes). A point read on
	// an object store reads there too, beside its guess from the page's
	// mean row size, in the same wave: a caller that knows its values'
	// lengths along the file (an index, from its lookup table's page
	// bounds) places rows whose lengths drift, which the mean misplaces
	// (sorted ids of 10 and then 11 characters).
	ValueBytes func(field int32, lo, hi int64) (start, end int64, ok bool)
}

// ReadWith is Read with options.
func (r *Reader) ReadWith(ctx context.Context, fieldIDs []int32, start, end int64, opts ReadOptions) (arrow.RecordBatch, error) {
	if start < 0 || end < start || end > r.numRows {
		return nil, fmt.Errorf("lance/file: rows [%d, %d) out of range [0, %d)", start, end, r.numRows)
	}
	return r.read(ctx, fieldIDs, []rowRange{{start, end}}, end-start, opts)
}

// ReadRanges returns the rows of several row ranges of the given top-level
// fields, concatenated in one record batch: ranges[i] = {start, end} reads
// rows [start, end); ranges must be ascending and disjoint. It is Read for
// scattered rows (a take of a listing page, a late-materializing scan):
// one call decodes each field once for all the rows, and the byte ranges
// they need go out together, where a Read per range would pay a decode
// setup and a read per range and field.
func (r *Reader) ReadRanges(ctx context.Context, fieldIDs []int32, ranges [][2]int64, opts ReadOptions) (arrow.RecordBatch, error) {
	rgs := make([]rowRange, 0, len(ranges))
	var rows, prev int64
	for i, rg := range ranges {
		if rg[0] < 0 || rg[1] < rg[0] || rg[1] > r.numRows || (i > 0 && rg[0] < prev) {
			return nil, fmt.Errorf("lance/file: row ranges must be ascending, disjoint and within [0, %d); range %d is [%d, %d)", r.numRows, i, rg[0], rg[1])
		}
		prev = rg[1]
		if rg[1] > rg[0] {
			rgs = append(rgs, rowRange{rg[0], rg[1]})
			rows += rg[1] - rg[0]
		}
	}
	return r.read(ctx, fieldIDs, rgs, rows, opts)
}

// read decodes rows (the number of rows in ranges) of fieldIDs.
func (r *Reader) read(ctx context.Context, fieldIDs []int32, ranges []rowRange, rows int64, opts ReadOptions) (arrow.RecordBatch, error) {
	nodes := make([]*node, len(fieldIDs))
	for i, id := range fieldIDs {
		n, ok := r.top[id]
		if !ok {
			return nil, fmt.Errorf("lance/file: no top-level field with id %d", id)
		}
		nodes[i] = n
	}
	ls, ok := r.src.(LocalSource)
	rc := &readCtx{ctx: ctx, r: r, limit: max(decodeLimitFloor, 16*r.size), plainDicts: opts.PlainDictionaries, valueBytes: opts.ValueBytes, local: ok && ls.Local()}
	datas := make([]arrow.ArrayData, len(nodes))
	errs := make([]error, len(nodes))
	if len(nodes) == 1 || rc.local {
		for i, n := range nodes {
			datas[i], errs[i] = rc.decode(n, ranges)
		}
	} else {
		// Every field decodes in its own goroutine, and their reads go out
		// in waves (see waves): the fields' first reads in one wave, then
		// what those reads tell them to read next.
		rc.waves = &waves{active: len(nodes)}
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer rc.waves.leave(rc)
				datas[i], errs[i] = rc.decode(n, ranges)
			}()
		}
		wg.Wait()
	}
	if err := multierr.Join(errs...); err != nil {
		for _, d := range datas {
			if d != nil {
				d.Release()
			}
		}
		return nil, err
	}
	cols := make([]arrow.Array, len(nodes))
	for i, d := range datas {
		cols[i] = array.MakeFromData(d)
		d.Release()
	}
	rec := array.NewRecordBatch(r.schemas.get(fieldIDs, opts, nodes, cols), cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// readCtx carries one Read call: the source, and the decode budget.
type readCtx struct {
	ctx   context.Context
	r     *Reader
	used  atomic.Int64
	limit int64
	// plainDicts: decode dictionary-typed fields to their value type.
	plainDicts bool
	// valueBytes: ReadOptions.ValueBytes.
	valueBytes func(field int32, lo, hi int64) (start, end int64, ok bool)
	// waves gathers the reads of concurrently decoded fields (nil: one field).
	waves *waves
	// local: the source is a local file (LocalSource): no waves, and few
	// reads in turn.
	local bool
	// held: the bytes this Read has fetched (fetchNow, io.go).
	held heldSpans
}

// waves batches the reads of the fields one Read decodes concurrently: a
// field's fetch waits until every field still decoding is waiting in a
// fetch too, then the reads of all of them are coalesced and issued at once
// (nearby ranges of different columns in one ranged read). On an object
// store the Read then costs one round trip per dependent step (a string
// column's offsets, then its bytes), not one per column and step.
type waves struct {
	mu      sync.Mutex
	active  int // fields still decoding
	waiting []*waveCall
}

type waveCall struct {
	reqs []bufRange
	dsts [][]byte
	out  [][]byte
	err  error
	done chan struct{}
}

// fetch joins the next wave and returns its part of the results.
func (w *waves) fetch(rc *readCtx, reqs []bufRange, dsts [][]byte) ([][]byte, error) {
	c := &waveCall{reqs: reqs, dsts: dsts, done: make(chan struct{})}
	w.mu.Lock()
	w.waiting = append(w.waiting, c)
	batch := w.ready()
	w.mu.Unlock()
	if batch != nil {
		rc.issue(batch)
	}
	<-c.done
	return c.out, c.err
}

// leave marks a field done; the fields waiting may now make a full wave.
func (w *waves) leave(rc *readCtx) {
	w.mu.Lock()
	w.active--
	batch := w.ready()
	w.mu.Unlock()
	if batch != nil {
		rc.issue(batch)
	}
}

// ready takes the waiting calls when they are all the active fields.
// Called with mu held.
func (w *waves) ready() []*waveCall {
	if len(w.waiting) == 0 || len(w.waiting) < w.active {
		return nil
	}
	b := w.waiting
	w.waiting = nil
	return b
}

// issue reads one wave's ranges together and hands each call its part.
func (rc *readCtx) issue(batch []*waveCall) {
	var reqs []bufRange
	var dsts [][]byte
	hasDst := false
	for _, c := range batch {
		reqs = append(reqs, c.reqs...)
		if c.dsts != nil {
			hasDst = true
		}
	}
	if hasDst {
		for _, c := range batch {
			if c.dsts != nil {
				dsts = append(dsts, c.dsts...)
			} else {
				dsts = append(dsts, make([][]byte, len(c.reqs))...)
			}
		}
	}
	out, err := rc.fetchNow(reqs, dsts)
	at := 0
	for _, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.out = out[at : at+len(c.reqs) : at+len(c.reqs)]
		}
		at += len(c.reqs)
		close(c.done)
	}
}

// alloc returns n zeroed bytes charged to the Read's budget (the all-null
// case of assembleBinary relies on the zeroes).
func (rc *readCtx) alloc(n int64) ([]byte, error) {
	if n < 0 || rc.used.Add(n) > rc.limit {
		return nil, fmt.Errorf("%w (more than %d bytes of decoded output)", ErrTooLarge, rc.limit)
	}
	return make([]byte, n), nil
}

// fetch reads the given file ranges, coalescing nearby ones and issuing the
// reads concurrently. out[i] holds exactly reqs[i]. When dsts[i] is not nil
// (it must hold reqs[i].size bytes) and the source implements SourceInto, a
// large range is read straight into dsts[i] and out[i] is dsts[i]: callers
// copy with copyInto, which skips that case.
func (rc *readCtx) fetch(reqs []bufRange, dsts [][]byte) ([][]byte, error) {
	if rc.waves != nil {
		return rc.waves.fetch(rc, reqs, dsts)
	}
	return rc.fetchNow(reqs, dsts)
}

// copyInto copies src to the start of dst unless fetch already read it there.
func copyInto(dst, src []byte) {
	if len(src) == 0 || (len(dst) > 0 && &dst[0] == &src[0]) {
		return
	}
	copy(dst, src)
}

func (rc *readCtx) decode(n *node, ranges []rowRange) (arrow.ArrayData, error) {
	if err := rc.ctx.Err(); err != nil {
		return nil, err
	}
	switch n.kind {
	case kindFixed:
		return rc.decodeFixed(n, ranges)
	case kindBinary:
		return rc.decodeBinary(n, ranges)
	case kindList:
		return rc.decodeList(n, ranges)
	case kindStruct:
		return rc.decodeStruct(n, ranges)
	case kindDict:
		return rc.decodeDict(n, ranges)
	default:
		return nil, n.err
	}
}

// touched returns the pieces of ranges in n's column, failing if any touched
// page could not be parsed.
func touched(n *node, ranges []rowRange) ([]piece, int64, error) {
	ps, err := n.col.pieces(ranges)
	if err != nil {
		return nil, 0, fmt.Errorf("field %q: %w", n.f.Name, err)
	}
	var rows int64
	for _, p := range ps {
		if e := n.col.pages[p.page].err; e != nil {
			return nil, 0, e
		}
		rows += p.hi - p.lo
	}
	return ps, rows, nil
}

// bitRange is the byte range of bits [lo, hi) of a bitmap buffer.
func bitRange(b bufRange, lo, hi int64) bufRange {
	return bufRange{b.off + lo/8, (hi+7)/8 - lo/8}
}

func bufOf(b []byte) *memory.Buffer {
	if b == nil {
		return nil
	}
	return memory.NewBufferBytes(b)
}

func nullCount(validity []byte) int {
	if validity == nil {
		return 0
	}
	return array.UnknownNullCount
}

// ---------------------------------------------------------------- fixed width

func (rc *readCtx) decodeFixed(n *node, ranges []rowRange) (arrow.ArrayData, error) {
	ps, rows, err := touched(n, ranges)
	if err != nil {
		return nil, err
	}
	dim, bits := int64(n.dim), n.bits
	fsl := n.f.Type.ID() == arrow.FIXED_SIZE_LIST
	if rows > math.MaxInt64/dim {
		return nil, ErrTooLarge
	}
	nItems := rows * dim
	valuesLen := bitsBytes(nItems, bits)
	if valuesLen < 0 {
		return nil, ErrTooLarge
	}
	descs := make([]*fixedDesc, len(ps))
	reqs := make([]bufRange, 3*len(ps))
	anyRowNull, anyItemNull := false, false
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*fixedDesc)
		descs[i] = d
		anyRowNull = anyRowNull || d.rows.hasNulls()
		if d.rows.allNull {
			continue
		}
		if d.rows.bitmap != nil {
			reqs[3*i] = bitRange(*d.rows.bitmap, p.lo, p.hi)
		}
		anyItemNull = anyItemNull || d.items.hasNulls()
		if d.items.allNull {
			continue
		}
		if d.items.bitmap != nil {
			reqs[3*i+1] = bitRange(*d.items.bitmap, p.lo*dim, p.hi*dim)
		}
		if bits == 1 {
			reqs[3*i+2] = bitRange(d.values, p.lo*dim, p.hi*dim)
		} else {
			w := int64(bits / 8)
			reqs[3*i+2] = bufRange{d.values.off + p.lo*dim*w, (p.hi - p.lo) * dim * w}
		}
	}
	var values, rowValid, itemValid []byte
	zeroCopy := len(ps) == 1 && bits%8 == 0 && !descs[0].rows.allNull && !descs[0].items.allNull &&
		(descs[0].rows.bitmap == nil || ps[0].lo%8 == 0) &&
		(descs[0].items.bitmap == nil || (ps[0].lo*dim)%8 == 0)
	var dsts [][]byte
	if !zeroCopy {
		if values, err = rc.alloc(valuesLen); err != nil {
			return nil, err
		}
		if anyRowNull {
			if rowValid, err = rc.alloc(bitsBytes(rows, 1)); err != nil {
				return nil, err
			}
		}
		if anyItemNull {
			if itemValid, err = rc.alloc(bitsBytes(nItems, 1)); err != nil {
				return nil, err
			}
		}
		if bits%8 == 0 {
			dsts = make([][]byte, len(reqs))
			var pos int64
			for i, p := range ps {
				if reqs[3*i+2].size > 0 {
					dsts[3*i+2] = values[pos*dim*int64(bits/8):]
				}
				pos += p.hi - p.lo
			}
		}
	}
	got, err := rc.fetch(reqs, dsts)
	if err != nil {
		return nil, err
	}
	if zeroCopy {
		// One page, byte-aligned: use the fetched bytes as they are.
		values = got[2]
		if descs[0].rows.bitmap != nil {
			rowValid = got[0]
		}
		if descs[0].items.bitmap != nil {
			itemValid = got[1]
		}
	} else {
		var pos int64 // output row
		for i, p := range ps {
			d, cnt := descs[i], p.hi-p.lo
			if !d.rows.allNull {
				if rowValid != nil {
					copyBits(rowValid, pos, got[3*i], p.lo, cnt, d.rows.bitmap != nil)
				}
				if !d.items.allNull {
					if itemValid != nil {
						copyBits(itemValid, pos*dim, got[3*i+1], p.lo*dim, cnt*dim, d.items.bitmap != nil)
					}
					if bits == 1 {
						bitutil.CopyBitmap(got[3*i+2], int((p.lo*dim)%8), int(cnt*dim), values, int(pos*dim))
					} else {
						copyInto(values[pos*dim*int64(bits/8):], got[3*i+2])
					}
				}
			}
			pos += cnt
		}
	}
	if !fsl {
		return array.NewData(n.f.Type, int(rows), []*memory.Buffer{bufOf(rowValid), memory.NewBufferBytes(values)},
			nil, nullCount(rowValid), 0), nil
	}
	elem := n.f.Type.(*arrow.FixedSizeListType).Elem()
	child := array.NewData(elem, int(nItems), []*memory.Buffer{bufOf(itemValid), memory.NewBufferBytes(values)},
		nil, nullCount(itemValid), 0)
	defer child.Release()
	return array.NewData(n.f.Type, int(rows), []*memory.Buffer{bufOf(rowValid)},
		[]arrow.ArrayData{child}, nullCount(rowValid), 0), nil
}

// copyBits copies cnt validity bits to dst at dstPos: from src (a fetched
// bitmap slice starting at the byte holding bit srcLo) when hasSrc, else
// all set.
func copyBits(dst []byte, dstPos int64, src []byte, srcLo, cnt int64, hasSrc bool) {
	if hasSrc {
		bitutil.CopyBitmap(src, int(srcLo%8), int(cnt), dst, int(dstPos))
	} else {
		bitutil.SetBitsTo(dst, dstPos, cnt, true)
	}
}

// ---------------------------------------------------------------- binary

// binPiece is one page-local row range of a string/binary column, with what
// was fetched for it.
type binPiece struct {
	d      *binDesc
	lo, hi int64
	idx    []byte // plain: u64 end offsets of rows [lo-1 or lo, hi); dict: indices of [lo, hi)
	outer  []byte // outer validity bits (byte holding bit lo first)
	start  uint64 // plain: first byte
	end    uint64 // plain: end byte
	data   []byte // plain: bytes [start, end); dict: items bytes
	// dict items
	itemEnds  []uint64 // n+1 offsets into data
	itemValid []bool
}

// guessBytes is a guess at where the bytes of rows [lo, hi) of a page lie,
// from the page's mean row size, with a margin for rows of uneven size
// (two rows, and half the spread of lo rows whose sizes vary by the mean;
// at most guessMaxMargin). A point read of an object reads it beside the
// rows' offsets: when the bytes fall inside it (rows of even size, as ids
// are, always do) the read costs one round trip instead of two, offsets
// then bytes; a miss costs the margins' bytes. None (size 0) when the
// guess would read more than guessMax bytes.
func guessBytes(d *binDesc, lo, hi int64) bufRange {
	n := d.indices.size / 8
	if n <= 0 || d.bytes.size <= 0 || hi <= lo {
		return bufRange{}
	}
	mean := float64(d.bytes.size) / float64(n)
	margin := int64(mean * (2 + math.Sqrt(float64(lo))/4))
	margin = min(max(margin, guessMinMargin), guessMaxMargin)
	start := max(0, int64(mean*float64(lo))-margin)
	end := min(d.bytes.size, int64(mean*float64(hi))+margin)
	if end <= start || end-start > guessMax {
		return bufRange{}
	}
	return bufRange{d.bytes.off + start, end - start}
}

// hintedBytes is the caller's guess (ReadOptions.ValueBytes) at where the
// bytes of rows [lo, hi) of page pg lie: the caller's estimate for them,
// placed within its estimate for the whole page and scaled to the page's
// bytes, with a margin of four mean rows; none when the caller has none.
func (rc *readCtx) hintedBytes(n *node, pg int, d *binDesc, lo, hi int64) bufRange {
	rows := d.indices.size / 8
	if rc.valueBytes == nil || rows <= 0 || d.bytes.size <= 0 || pg+1 >= len(n.col.starts) {
		return bufRange{}
	}
	first := n.col.starts[pg]
	ps, pe, ok := rc.valueBytes(n.f.ID, first, n.col.starts[pg+1])
	if !ok || pe <= ps {
		return bufRange{}
	}
	s, e, ok := rc.valueBytes(n.f.ID, first+lo, first+hi)
	if !ok || e <= s {
		return bufRange{}
	}
	scale := float64(d.bytes.size) / float64(pe-ps)
	margin := min(max(4*d.bytes.size/rows, guessMinMargin), guessMaxMargin)
	start := max(0, int64(float64(s-ps)*scale)-margin)
	end := min(d.bytes.size, int64(float64(e-ps)*scale)+margin)
	if end <= start || end-start > guessMax {
		return bufRange{}
	}
	return bufRange{d.bytes.off + start, end - start}
}

// guessed returns need from the first guess (reqs, their bytes got) that
// holds it.
func guessed(need bufRange, reqs []bufRange, got [][]byte) ([]byte, bool) {
	for k, g := range reqs {
		if g.size > 0 && need.off >= g.off && need.off+need.size <= g.off+g.size {
			return got[k][need.off-g.off : need.off-g.off+need.size], true
		}
	}
	return nil, false
}

// The bounds of guessBytes: a guess reads at most guessMax bytes, with a
// margin of guessMinMargin to guessMaxMargin on each side.
const (
	guessMax       = 128 << 10
	guessMinMargin = 512
	guessMaxMargin = 16 << 10
)

func (rc *readCtx) decodeBinary(n *node, ranges []rowRange) (arrow.ArrayData, error) {
	ps, rows, err := touched(n, ranges)
	if err != nil {
		return nil, err
	}
	bps := make([]binPiece, len(ps))
	// Per piece: [0] validity, [1] offsets (or dictionary indices), [2]
	// dictionary item ends, [3] the bytes, when the offsets are cached
	// (pre), else a guess at them (guessBytes), [4] the caller's guess at
	// them (ReadOptions.ValueBytes, hintedBytes).
	reqs := make([]bufRange, 5*len(ps))
	whole := make([]bool, len(ps)) // [1] reads the page's whole offsets buffer
	pre := make([]bool, len(ps))   // [3] reads the bytes in the first wave
	// span sets a piece's byte range from its offsets.
	span := func(bp *binPiece) error {
		d := bp.d
		norm := func(v uint64) uint64 {
			if d.adj > 0 && v >= d.adj {
				return v - d.adj
			}
			return v
		}
		if len(bp.idx) < 8 {
			return corruptf("field %q: string offsets missing", n.f.Name)
		}
		if bp.lo > 0 {
			bp.start = norm(binary.LittleEndian.Uint64(bp.idx))
		}
		bp.end = norm(binary.LittleEndian.Uint64(bp.idx[len(bp.idx)-8:]))
		if bp.end < bp.start || bp.end > uint64(d.bytes.size) {
			return corruptf("field %q: string bytes [%d, %d) outside the page's %d bytes", n.f.Name, bp.start, bp.end, d.bytes.size)
		}
		return nil
	}
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*binDesc)
		bp := &bps[i]
		bp.d, bp.lo, bp.hi = d, p.lo, p.hi
		if d.outer.allNull {
			continue
		}
		if d.outer.bitmap != nil {
			reqs[5*i] = bitRange(*d.outer.bitmap, p.lo, p.hi)
		}
		if dd := d.dict; dd != nil {
			w := int64(dd.bits / 8)
			reqs[5*i+1] = bufRange{dd.indices.off + p.lo*w, (p.hi - p.lo) * w}
			if !dd.items.outer.allNull {
				reqs[5*i+2] = bufRange{dd.items.indices.off, 8 * dd.n}
			}
			continue
		}
		i0 := p.lo
		if i0 > 0 {
			i0--
		}
		if w, ok := rc.cachedOffsets(d.indices, i0, p.hi); ok {
			bp.idx = w
			if err := span(bp); err != nil {
				return nil, err
			}
			reqs[5*i+3] = bufRange{d.bytes.off + int64(bp.start), int64(bp.end - bp.start)}
			pre[i] = true
			continue
		}
		if rc.byRange() && pointRead(d.indices, i0, p.hi) {
			reqs[5*i+3] = guessBytes(d, p.lo, p.hi)
			reqs[5*i+4] = rc.hintedBytes(n, p.page, d, p.lo, p.hi)
		}
		if rq, ok := rc.offsetsRead(d.indices, i0, p.hi); ok {
			reqs[5*i+1], whole[i] = rq, true
			rc.warmColumnOffsets(n.col, d.indices, i0, p.hi)
			continue
		}
		reqs[5*i+1] = bufRange{d.indices.off + 8*i0, 8 * (p.hi - i0)}
		rc.prefetchOffsets(d.indices, d.adj, i0, p.hi)
	}
	got, err := rc.fetch(reqs, nil)
	if err != nil {
		return nil, err
	}
	// Second round: the bytes.
	reqs2 := make([]bufRange, len(ps))
	var total uint64
	for i := range bps {
		bp := &bps[i]
		d := bp.d
		if d.outer.allNull {
			continue
		}
		bp.outer = got[5*i]
		if pre[i] {
			bp.data = got[5*i+3]
			total += bp.end - bp.start
			continue
		}
		bp.idx = got[5*i+1]
		if dd := d.dict; dd != nil {
			if !dd.items.outer.allNull {
				ends, valid, err := itemOffsets(got[5*i+2], dd.items.adj, dd.n)
				if err != nil {
					return nil, err
				}
				if ends[dd.n] > uint64(dd.items.bytes.size) {
					return nil, corruptf("dictionary items end at %d, beyond their %d bytes", ends[dd.n], dd.items.bytes.size)
				}
				bp.itemEnds, bp.itemValid = ends, valid
				reqs2[i] = bufRange{dd.items.bytes.off, int64(ends[dd.n])}
			}
			continue
		}
		if whole[i] {
			i0 := bp.lo
			if i0 > 0 {
				i0--
			}
			bp.idx = rc.keepOffsets(d.indices, reqs[5*i+1], bp.idx, d.adj, i0, bp.hi)
		}
		if err := span(bp); err != nil {
			return nil, err
		}
		need := bufRange{d.bytes.off + int64(bp.start), int64(bp.end - bp.start)}
		total += bp.end - bp.start
		if b, ok := guessed(need, reqs[5*i+3:5*i+5], got[5*i+3:5*i+5]); ok {
			bp.data, pre[i] = b, true
			continue
		}
		reqs2[i] = need
	}
	// Without dictionary pages the output size is known now: read the bytes
	// straight into it where the source allows.
	hasDict := false
	for i := range bps {
		hasDict = hasDict || bps[i].d.dict != nil
	}
	zeroCopy := len(bps) == 1 && bps[0].d.dict == nil && !bps[0].d.outer.allNull
	large := n.f.Type.ID() == arrow.LARGE_STRING || n.f.Type.ID() == arrow.LARGE_BINARY
	var data []byte
	var dsts [][]byte
	if !hasDict && !zeroCopy {
		if total > math.MaxInt64/2 || (!large && total > math.MaxInt32) {
			return nil, fmt.Errorf("%w: field %q: %d bytes of values", ErrTooLarge, n.f.Name, total)
		}
		if data, err = rc.alloc(int64(total)); err != nil {
			return nil, err
		}
		dsts = make([][]byte, len(reqs2))
		var pos uint64
		for i := range bps {
			if reqs2[i].size > 0 {
				dsts[i] = data[pos:]
			}
			pos += bps[i].end - bps[i].start
		}
	}
	second := false
	for _, q := range reqs2 {
		second = second || q.size > 0
	}
	got2 := make([][]byte, len(reqs2))
	for i := range got2 {
		got2[i] = []byte{}
	}
	if second {
		if got2, err = rc.fetch(reqs2, dsts); err != nil {
			return nil, err
		}
	}
	for i := range bps {
		bp := &bps[i]
		if !pre[i] {
			bp.data = got2[i]
		}
		if bp.d.dict != nil && bp.itemEnds != nil {
			t, err := dictBytes(bp)
			if err != nil {
				return nil, err
			}
			total += t
		}
	}
	if !large && total > math.MaxInt32 {
		return nil, fmt.Errorf("%w: field %q: %d bytes exceed 32-bit offsets", ErrTooLarge, n.f.Name, total)
	}
	if total > math.MaxInt64/2 {
		return nil, ErrTooLarge
	}
	switch {
	case zeroCopy:
		data = bps[0].data
	case data == nil:
		if data, err = rc.alloc(int64(total)); err != nil {
			return nil, err
		}
	}
	var offs, valid []byte
	if large {
		offs, valid, err = assembleBinary[int64](rc, n, bps, rows, data)
	} else {
		offs, valid, err = assembleBinary[int32](rc, n, bps, rows, data)
	}
	if err != nil {
		return nil, err
	}
	return array.NewData(n.f.Type, int(rows), []*memory.Buffer{bufOf(valid), memory.NewBufferBytes(offs), memory.NewBufferBytes(data)},
		nil, nullCount(valid), 0), nil
}

// itemOffsets decodes n u64 end offsets of a Binary page (the dictionary
// items) into n+1 start/end positions and validity.
func itemOffsets(idx []byte, adj uint64, n int64) ([]uint64, []bool, error) {
	ends := make([]uint64, n+1)
	valid := make([]bool, n)
	for i := range n {
		v := binary.LittleEndian.Uint64(idx[8*i:])
		valid[i] = true
		if adj > 0 && v >= adj {
			v -= adj
			valid[i] = false
		}
		if v < ends[i] {
			return nil, nil, corruptf("dictionary item offsets decrease")
		}
		ends[i+1] = v
	}
	return ends, valid, nil
}

// dictBytes returns the bytes a dictionary piece's rows will take, checking
// every index.
func dictBytes(bp *binPiece) (uint64, error) {
	dd := bp.d.dict
	var t uint64
	cnt := bp.hi - bp.lo
	for i := range cnt {
		k := dictIndex(bp.idx, dd.bits, i)
		if k == 0 {
			continue
		}
		if int64(k) > dd.n {
			return 0, corruptf("dictionary index %d of %d items", k, dd.n)
		}
		t += bp.itemEnds[k] - bp.itemEnds[k-1]
	}
	return t, nil
}

func dictIndex(b []byte, bits int, i int64) uint64 {
	switch bits {
	case 8:
		return uint64(b[i])
	case 16:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	default:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// lazyValidity builds a validity bitmap only once the first null shows up.
type lazyValidity struct {
	rc   *readCtx
	n    int64
	bits []byte
}

// null notes that row pos is null (the caller leaves its bit clear). Small
// enough to inline: once the bitmap exists, a null costs a compare.
func (v *lazyValidity) null(pos int64) error {
	if v.bits != nil {
		return nil
	}
	return v.ensure(pos)
}

// ensure allocates the bitmap if needed, with rows before pos valid.
func (v *lazyValidity) ensure(pos int64) error {
	if v.bits == nil {
		b, err := v.rc.alloc(bitsBytes(v.n, 1))
		if err != nil {
			return err
		}
		bitutil.SetBitsTo(b, 0, pos, true)
		v.bits = b
	}
	return nil
}

func (v *lazyValidity) valid(pos int64) {
	if v.bits != nil {
		bitutil.SetBit(v.bits, int(pos))
	}
}

func assembleBinary[T int32 | int64](rc *readCtx, n *node, bps []binPiece, rows int64, data []byte) (offsBytes, valid []byte, err error) {
	var zero T
	width := int64(unsafe.Sizeof(zero))
	offsBytes, err = rc.alloc((rows + 1) * width)
	if err != nil {
		return nil, nil, err
	}
	var offs []T
	if width == 4 {
		offs = any(arrow.Int32Traits.CastFromBytes(offsBytes)).([]T)
	} else {
		offs = any(arrow.Int64Traits.CastFromBytes(offsBytes)).([]T)
	}
	lv := &lazyValidity{rc: rc, n: rows}
	var pos int64 // output row
	var cur T     // output byte
	zeroCopy := len(bps) == 1 && bps[0].d.dict == nil && !bps[0].d.outer.allNull
	for i := range bps {
		bp := &bps[i]
		d := bp.d
		cnt := bp.hi - bp.lo
		if d.outer.bitmap != nil {
			if err := lv.ensure(pos); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case d.outer.allNull || (d.dict != nil && bp.itemEnds == nil):
			// Every row null: their bits are still clear (rows are
			// visited once, in order, and ensure sets only those before
			// pos), and each offset repeats cur, which alloc's zeroed
			// memory already holds while cur is 0.
			if cnt > 0 {
				if err := lv.ensure(pos); err != nil {
					return nil, nil, err
				}
			}
			if cur != 0 {
				o := offs[pos+1 : pos+cnt+1]
				for k := range o {
					o[k] = cur
				}
			}
		case d.dict != nil:
			for k := range cnt {
				idx := dictIndex(bp.idx, d.dict.bits, k)
				if idx == 0 || !bp.itemValid[idx-1] {
					if err := lv.null(pos + k); err != nil {
						return nil, nil, err
					}
				} else {
					lv.valid(pos + k)
					item := bp.data[bp.itemEnds[idx-1]:bp.itemEnds[idx]]
					copy(data[cur:], item)
					cur += T(len(item))
				}
				offs[pos+k+1] = cur
			}
		default:
			skip := int64(0)
			if bp.lo > 0 {
				skip = 1
			}
			base := cur
			if !zeroCopy {
				copyInto(data[cur:], bp.data)
			}
			prev := bp.start
			adj := d.adj
			idx := bp.idx[8*skip:]
			for k := range cnt {
				v := binary.LittleEndian.Uint64(idx[8*k:])
				ok := true
				if adj > 0 && v >= adj {
					v -= adj
					ok = false
				}
				if v < prev || v > bp.end {
					return nil, nil, corruptf("field %q: string offsets are not increasing", n.f.Name)
				}
				prev = v
				if ok {
					lv.valid(pos + k)
				} else if err := lv.null(pos + k); err != nil {
					return nil, nil, err
				}
				offs[pos+k+1] = base + T(v-bp.start)
			}
			cur = base + T(bp.end-bp.start)
		}
		if d.outer.bitmap != nil {
			for k := range cnt {
				if !bitutil.BitIsSet(bp.outer, int(bp.lo%8+k)) {
					bitutil.ClearBit(lv.bits, int(pos+k))
				}
			}
		}
		pos += cnt
	}
	return offsBytes, lv.bits, nil
}

// ---------------------------------------------------------------- list

func (rc *readCtx) decodeList(n *node, ranges []rowRange) (arrow.ArrayData, error) {
	ps, rows, err := touched(n, ranges)
	if err != nil {
		return nil, err
	}
	// Offsets buffers are read whole and cached when small (see
	// maxCachedOffsets); cached ones need no read.
	reqs := make([]bufRange, len(ps))
	got := make([][]byte, len(ps))
	whole := make([]bool, len(ps))
	need := false
	var spec []bufRange // guesses at the items (guessItems), held for the child's decode
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*listDesc)
		i0 := p.lo
		if i0 > 0 {
			i0--
		}
		if w, ok := rc.cachedOffsets(d.offsets, i0, p.hi); ok {
			got[i] = w
			continue
		}
		if rc.byRange() && pointRead(d.offsets, i0, p.hi) {
			spec = append(spec, guessItems(n, p, d)...)
		}
		switch rq, ok := rc.offsetsRead(d.offsets, i0, p.hi); {
		case ok:
			reqs[i], whole[i], need = rq, true, true
			rc.warmColumnOffsets(n.col, d.offsets, i0, p.hi)
		default:
			reqs[i], need = bufRange{d.offsets.off + 8*i0, 8 * (p.hi - i0)}, true
			rc.prefetchOffsets(d.offsets, d.adj, i0, p.hi)
		}
	}
	if need {
		fetched, err := rc.fetch(append(reqs, spec...), nil)
		if err != nil {
			return nil, err
		}
		for i, p := range ps {
			switch {
			case got[i] != nil:
			case whole[i]:
				i0 := p.lo
				if i0 > 0 {
					i0--
				}
				d := n.col.pages[p.page].desc.(*listDesc)
				got[i] = rc.keepOffsets(d.offsets, reqs[i], fetched[i], d.adj, i0, p.hi)
			default:
				got[i] = fetched[i]
			}
		}
	}
	for i := range got {
		if len(got[i]) < 8 {
			return nil, corruptf("field %q: list offsets missing", n.f.Name)
		}
	}
	large := n.f.Type.ID() == arrow.LARGE_LIST
	var (
		items  []rowRange
		total  uint64
		starts = make([]uint64, len(ps))
		ends   = make([]uint64, len(ps))
	)
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*listDesc)
		norm := func(v uint64) uint64 {
			if d.adj > 0 && v >= d.adj {
				return v - d.adj
			}
			return v
		}
		if p.lo > 0 {
			starts[i] = norm(binary.LittleEndian.Uint64(got[i]))
		}
		ends[i] = norm(binary.LittleEndian.Uint64(got[i][len(got[i])-8:]))
		if ends[i] < starts[i] || ends[i] > d.numItems {
			return nil, corruptf("field %q: list items [%d, %d) outside the page's %d items", n.f.Name, starts[i], ends[i], d.numItems)
		}
		total += ends[i] - starts[i]
		if ends[i] > starts[i] {
			base := n.itemBase[p.page]
			rg := rowRange{base + int64(starts[i]), base + int64(ends[i])}
			if k := len(items); k > 0 && items[k-1].hi == rg.lo {
				items[k-1].hi = rg.hi
			} else {
				items = append(items, rg)
			}
		}
	}
	if !large && total > math.MaxInt32 {
		return nil, fmt.Errorf("%w: field %q: %d list items exceed 32-bit offsets", ErrTooLarge, n.f.Name, total)
	}
	var offs, valid []byte
	if large {
		offs, valid, err = assembleList[int64](rc, n, ps, got, starts, ends, rows)
	} else {
		offs, valid, err = assembleList[int32](rc, n, ps, got, starts, ends, rows)
	}
	if err != nil {
		return nil, err
	}
	child, err := rc.decode(n.children[0], items)
	if err != nil {
		return nil, err
	}
	defer child.Release()
	if uint64(child.Len()) != total {
		return nil, corruptf("field %q: list items decoded to %d values, want %d", n.f.Name, child.Len(), total)
	}
	return array.NewData(n.f.Type, int(rows), []*memory.Buffer{bufOf(valid), memory.NewBufferBytes(offs)},
		[]arrow.ArrayData{child}, nullCount(valid), 0), nil
}

// guessItems is a guess at the byte ranges of the items of rows [p.lo,
// p.hi) of a list page whose items are fixed-width (token ids), from the
// page's mean items per row with a margin as guessBytes has. A point read
// of an object reads them beside the rows' offsets: the items' decode
// then finds them held by the Read and costs no round trip of its own
// (a cold get's list column took one). None for other item types, or
// when the guess would read more than guessMax bytes.
func guessItems(n *node, p piece, d *listDesc) []bufRange {
	rows := d.offsets.size / 8
	c := n.children[0]
	if rows <= 0 || d.numItems == 0 || c.kind != kindFixed || c.bits%8 != 0 || p.hi <= p.lo {
		return nil
	}
	mean := float64(d.numItems) / float64(rows)
	margin := int64(mean*(2+math.Sqrt(float64(p.lo))/4)) + 1
	lo := max(0, int64(mean*float64(p.lo))-margin)
	hi := min(int64(d.numItems), int64(mean*float64(p.hi))+margin)
	w := int64(c.dim) * int64(c.bits/8)
	if hi <= lo || (hi-lo)*w > guessMax {
		return nil
	}
	base := n.itemBase[p.page]
	cps, err := c.col.pieces([]rowRange{{base + lo, base + hi}})
	if err != nil {
		return nil
	}
	var out []bufRange
	for _, cp := range cps {
		pg := c.col.pages[cp.page]
		fd, ok := pg.desc.(*fixedDesc)
		if pg.err != nil || !ok || fd.rows.allNull || fd.items.allNull {
			continue
		}
		if fd.rows.bitmap != nil {
			out = append(out, bitRange(*fd.rows.bitmap, cp.lo, cp.hi))
		}
		if fd.items.bitmap != nil {
			out = append(out, bitRange(*fd.items.bitmap, cp.lo*int64(c.dim), cp.hi*int64(c.dim)))
		}
		out = append(out, bufRange{fd.values.off + cp.lo*w, (cp.hi - cp.lo) * w})
	}
	return out
}

func assembleList[T int32 | int64](rc *readCtx, n *node, ps []piece, got [][]byte, starts, ends []uint64, rows int64) ([]byte, []byte, error) {
	var zero T
	width := int64(unsafe.Sizeof(zero))
	offsBytes, err := rc.alloc((rows + 1) * width)
	if err != nil {
		return nil, nil, err
	}
	var offs []T
	if width == 4 {
		offs = any(arrow.Int32Traits.CastFromBytes(offsBytes)).([]T)
	} else {
		offs = any(arrow.Int64Traits.CastFromBytes(offsBytes)).([]T)
	}
	lv := &lazyValidity{rc: rc, n: rows}
	var pos int64
	var cur T
	for i, p := range ps {
		d := n.col.pages[p.page].desc.(*listDesc)
		cnt := p.hi - p.lo
		idx := got[i]
		if p.lo > 0 {
			idx = idx[8:]
		}
		prev := starts[i]
		base := cur
		for k := range cnt {
			v := binary.LittleEndian.Uint64(idx[8*k:])
			ok := true
			if d.adj > 0 && v >= d.adj {
				v -= d.adj
				ok = false
			}
			if v < prev || v > ends[i] {
				return nil, nil, corruptf("field %q: list offsets are not increasing", n.f.Name)
			}
			prev = v
			if ok {
				lv.valid(pos + k)
			} else if err := lv.null(pos + k); err != nil {
				return nil, nil, err
			}
			offs[pos+k+1] = base + T(v-starts[i])
		}
		cur = base + T(ends[i]-starts[i])
		pos += cnt
	}
	return offsBytes, lv.bits, nil
}

// ---------------------------------------------------------------- struct

func (rc *readCtx) decodeStruct(n *node, ranges []rowRange) (arrow.ArrayData, error) {
	_, rows, err := touched(n, ranges)
	if err != nil {
		return nil, err
	}
	children := make([]arrow.ArrayData, 0, len(n.children))
	defer func() {
		for _, c := range children {
			c.Release()
		}
	}()
	for _, cn := range n.children {
		c, err := rc.decode(cn, ranges)
		if err != nil {
			return nil, err
		}
		children = append(children, c)
		if int64(c.Len()) != rows {
			return nil, corruptf("struct field %q: member %q decoded to %d rows, want %d", n.f.Name, cn.f.Name, c.Len(), rows)
		}
	}
	return array.NewData(n.f.Type, int(rows), []*memory.Buffer{nil}, children, 0, 0), nil
}

// schemaMemo holds the schemas of a Reader's batches by field ids and
// options: keyed reads ask for the same few on every call, and a schema
// built per read was a good share of the bytes a get allocated.
type schemaMemo struct {
	mu sync.Mutex
	m  map[string]*arrow.Schema
}

// maxSchemas bounds a Reader's memo (field lists come from callers).
const maxSchemas = 32

// get returns the schema of a batch of cols, read from nodes (fieldIDs).
func (sm *schemaMemo) get(fieldIDs []int32, opts ReadOptions, nodes []*node, cols []arrow.Array) *arrow.Schema {
	var kb [128]byte
	k := kb[:0]
	if opts.PlainDictionaries {
		k = append(k, 1)
	} else {
		k = append(k, 0)
	}
	for _, id := range fieldIDs {
		k = binary.LittleEndian.AppendUint32(k, uint32(id))
	}
	sm.mu.Lock()
	s, ok := sm.m[string(k)]
	sm.mu.Unlock()
	if ok && sameTypes(s, cols) {
		return s
	}
	fields := make([]arrow.Field, len(nodes))
	for i, n := range nodes {
		fields[i] = n.f.ArrowField()
		fields[i].Type = cols[i].DataType() // a plain dictionary's value type
	}
	s = arrow.NewSchema(fields, nil)
	sm.mu.Lock()
	if len(sm.m) < maxSchemas {
		sm.m[string(k)] = s
	}
	sm.mu.Unlock()
	return s
}

// sameTypes reports whether s's fields have the types of cols.
func sameTypes(s *arrow.Schema, cols []arrow.Array) bool {
	for i, c := range cols {
		if t := s.Field(i).Type; t != c.DataType() && !arrow.TypeEqual(t, c.DataType()) {
			return false
		}
	}
	return true
}
