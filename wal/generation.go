package wal

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/internal/lru"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

// GenerationKey returns the object key of a generation file of a shard.
func GenerationKey(shard string, g Generation) string { return shardDir(shard) + g.Path }

// writeGeneration writes a memtable as one Lance data file, keeping only
// the newest row of each key (later batches and later rows are newer), with
// each row's sequence number in cols.seq.
//
// With place set the file is the segment that holds the memtable's frames
// (inplace.go): what they lack is written after them and the segment is
// linked into gen/; else a new object is written.
func writeGeneration(ctx context.Context, store objstore.Store, shard string, gen uint64, cols genColumns, mem memtable, place *inPlace) (Generation, error) {
	keyCol, batches := cols.key, mem.batches
	g := Generation{Generation: gen, Path: fmt.Sprintf("gen/%010d-%s.lance", gen, uuid.NewString())}
	if len(batches) == 0 {
		return g, fmt.Errorf("wal: empty generation")
	}
	s := batches[0].Schema()
	ls, err := schema.FromArrow(s, 0)
	if err != nil {
		return g, fmt.Errorf("wal: generation schema: %w", err)
	}
	masks, err := newestPerKey(batches, keyCol)
	if err != nil {
		return g, err
	}
	obj, err := newGenOut(ctx, store, GenerationKey(shard, g), place)
	if err != nil {
		return g, err
	}
	wopts := file.WriterOptions{HoldValues: true} // a memtable's arrays do not change
	if place != nil {
		wopts.Base, wopts.Placed = place.end, place.lookup
	}
	fw, err := file.NewWriter(obj, ls, wopts)
	if err != nil {
		_ = obj.abort()
		return g, err
	}
	seqCol := -1
	if cols.seq != "" {
		if idx := s.FieldIndices(cols.seq); len(idx) == 1 {
			seqCol = idx[0]
		}
	}
	first := true
	for i, b := range batches {
		if seqCol >= 0 {
			if b, err = withSeq(b, seqCol, mem.seq0[i]); err != nil {
				_ = obj.abort()
				return g, err
			}
		} else {
			b.Retain()
		}
		rec := b
		if masks[i] != nil {
			mask := masks[i]
			rec, err = compute.FilterRecordBatch(ctx, b, mask, compute.DefaultFilterOptions())
			mask.Release()
			if err != nil {
				b.Release()
				_ = obj.abort()
				return g, fmt.Errorf("wal: dedup generation: %w", err)
			}
		} else {
			rec.Retain()
		}
		b.Release()
		if rec.NumRows() > 0 {
			keys := rec.Column(rec.Schema().FieldIndices(keyCol)[0]).(*array.String)
			for r := 0; r < keys.Len(); r++ {
				k := keys.Value(r)
				if first || k < g.MinID {
					g.MinID = k
				}
				if first || k > g.MaxID {
					g.MaxID = k
				}
				first = false
			}
			g.Rows += rec.NumRows()
			err = fw.Write(rec)
		}
		rec.Release()
		if err != nil {
			_ = obj.abort()
			return g, fmt.Errorf("wal: write generation: %w", err)
		}
	}
	info, err := fw.Finish()
	if err != nil {
		_ = obj.abort()
		return g, fmt.Errorf("wal: finish generation: %w", err)
	}
	if err := obj.finish(info.Size); err != nil {
		return g, fmt.Errorf("wal: close generation: %w", err)
	}
	g.Bytes = info.Size
	g.SealedAt = time.Now().UTC()
	return g, nil
}

// genOut is where writeGeneration writes: a new object, or the rest of a
// segment sealed in place.
type genOut struct {
	io.Writer
	finish func(size int64) error
	abort  func() error
}

func newGenOut(ctx context.Context, store objstore.Store, key string, place *inPlace) (*genOut, error) {
	if place == nil {
		obj, err := store.Create(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("wal: create generation: %w", err)
		}
		return &genOut{Writer: obj, finish: func(int64) error { return obj.Close() }, abort: obj.Abort}, nil
	}
	f, bw, err := place.open()
	if err != nil {
		return nil, err
	}
	finish := func(size int64) error {
		if err := place.finish(f, bw, size, key); err != nil {
			return err
		}
		// The store must see the linked file as the object (Log.Objects
		// says it does); else the generation would be listed unreadable.
		if info, err := store.Head(ctx, key); err != nil || info.Size != size {
			return fmt.Errorf("%w: %s (%d bytes) not seen by the store: %v", errNotShared, key, size, err)
		}
		return nil
	}
	return &genOut{Writer: bw, finish: finish, abort: f.Close}, nil
}

// newestPerKey returns, per batch, a keep-mask (nil when every row is kept)
// that keeps only the newest write of each key across all batches (later
// batches and later rows are newer: the Newest rule).
func newestPerKey(batches []arrow.RecordBatch, keyCol string) ([]*array.Boolean, error) {
	n := NewNewest(0, false) // the batches outlive it
	out := make([]*array.Boolean, len(batches))
	for i := len(batches) - 1; i >= 0; i-- {
		keys, err := keyColumn(batches[i], keyCol)
		if err != nil {
			return nil, err
		}
		if keys.NullN() > 0 {
			return nil, fmt.Errorf("wal: null key in column %q", keyCol)
		}
		if k := n.offerRows(keys.Len(), keys.Value); k != nil {
			b := array.NewBooleanBuilder(memory.DefaultAllocator)
			b.AppendValues(k, nil)
			out[i] = b.NewBooleanArray()
			b.Release()
		}
	}
	return out, nil
}

// keyColumn returns rec's key column, which must be utf8.
func keyColumn(rec arrow.RecordBatch, keyCol string) (*array.String, error) {
	idx := rec.Schema().FieldIndices(keyCol)
	if len(idx) != 1 {
		return nil, fmt.Errorf("wal: batch has no key column %q", keyCol)
	}
	keys, ok := rec.Column(idx[0]).(*array.String)
	if !ok {
		return nil, fmt.Errorf("wal: key column %q must be utf8, is %s", keyCol, rec.Column(idx[0]).DataType())
	}
	return keys, nil
}

// LoadedGeneration is a generation read into memory: the columns a reader
// asked for and an index from each key to its newest row. Like the file, it
// never changes, so readers share it (a cache holds it by file key).
type LoadedGeneration struct {
	Ref   GenRef
	Rec   arrow.RecordBatch // the columns asked for, as ReadOptions.Project made them
	keys  *array.String
	index map[string]int
	bytes int64
}

// NumRows returns the generation's number of rows.
func (g *LoadedGeneration) NumRows() int { return g.keys.Len() }

// Key returns the key of a row.
func (g *LoadedGeneration) Key(row int) string { return g.keys.Value(row) }

// Lookup returns the newest row of key in the generation.
func (g *LoadedGeneration) Lookup(key string) (int, bool) {
	row, ok := g.index[key]
	return row, ok
}

// Bytes returns the memory the decoded columns take.
func (g *LoadedGeneration) Bytes() int64 { return g.bytes }

// ReadOptions says what LoadGeneration reads.
type ReadOptions struct {
	KeyColumn string   // the utf8 key column; it must be among the result's columns
	Columns   []string // the columns to read, when the file has them; nil: all
	// Project, when set, turns the columns read (the file's, in the file's
	// order) into the caller's shape: its order, its types, absent
	// columns as nulls. It must not release its argument.
	Project func(arrow.RecordBatch) (arrow.RecordBatch, error)
	// Whole reads the file with one request whatever its size: a reader of
	// every column needs every byte anyway.
	Whole bool
	// NoIndex skips the key index (Lookup then finds nothing): a merge
	// only walks the rows.
	NoIndex bool
}

// LoadGeneration reads a generation into memory.
func LoadGeneration(ctx context.Context, store objstore.Reader, ref GenRef, o ReadOptions) (*LoadedGeneration, error) {
	r, err := openGeneration(ctx, loadIO(), store, ref.Shard, ref.Gen, o.Whole)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, f := range r.Schema().Fields {
		if o.Columns == nil || slices.Contains(o.Columns, f.Name) {
			ids = append(ids, f.ID)
		}
	}
	rec, err := r.Read(ctx, ids, 0, r.NumRows())
	if err != nil {
		return nil, fmt.Errorf("wal: read generation %s: %w", ref.Key(), err)
	}
	if o.Project != nil {
		out, err := o.Project(rec)
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("wal: generation %s: %w", ref.Key(), err)
		}
		rec = out
	}
	keys, err := keyColumn(rec, o.KeyColumn)
	if err != nil {
		rec.Release()
		return nil, fmt.Errorf("wal: generation %s: %w", ref.Key(), err)
	}
	g := &LoadedGeneration{Ref: ref, Rec: rec, keys: keys}
	if !o.NoIndex {
		g.index = make(map[string]int, keys.Len())
		for i := 0; i < keys.Len(); i++ {
			g.index[keys.Value(i)] = i // the last row of a key is its newest
		}
	}
	for _, c := range rec.Columns() {
		g.bytes += int64(c.Data().Len()) * 8
		for _, b := range c.Data().Buffers() {
			if b != nil {
				g.bytes += int64(b.Len())
			}
		}
	}
	return g, nil
}

// StreamNewest reads the generations refs (listed as NewestFirst takes
// them) and hands them to fn one at a time, newest first, each with the
// rows that hold the newest write of their key (keep; nil when all do). A
// generation is read once, through load. Reads run concurrently ahead of
// fn, so memory holds at most readAhead generations (readAheadBytes of
// files in all, and always one) besides a copy of every key. It returns
// the set of keys.
func StreamNewest(ctx context.Context, refs []GenRef, load Loader, fn func(g *LoadedGeneration, keep []bool) error) (map[string]struct{}, error) {
	order := NewestFirst(refs)
	var rows int64
	for _, r := range order {
		rows += r.Gen.Rows
	}
	n := NewNewest(int(rows), true)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type loaded struct {
		g   *LoadedGeneration
		err error
	}
	results := make([]chan loaded, len(order))
	for i := range results {
		results[i] = make(chan loaded, 1)
	}
	// Reads run ahead of fn by up to readAhead generations and
	// readAheadBytes of files, concurrently; a generation's budget is
	// released once fn is done with it.
	done := make(chan int64, len(order))
	go func() {
		var inFlight int64
		ahead := 0
		for i, ref := range order {
			for ahead > 0 && (ahead >= readAhead || inFlight+ref.Gen.Bytes > readAheadBytes) {
				select {
				case b := <-done:
					inFlight -= b
					ahead--
				case <-ctx.Done():
					return
				}
			}
			inFlight += ref.Gen.Bytes
			ahead++
			go func() {
				g, err := load(ctx, ref)
				results[i] <- loaded{g, err}
			}()
		}
	}()
	for i, ref := range order {
		var l loaded
		select {
		case l = <-results[i]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if l.err != nil {
			return nil, l.err
		}
		keep := n.offerRows(l.g.NumRows(), l.g.Key)
		err := fn(l.g, keep)
		done <- ref.Gen.Bytes
		if err != nil {
			return nil, err
		}
	}
	return n.Keys(), nil
}

// Read-ahead of StreamNewest: at S3 latencies a merge of many small
// generations waits on requests, not on decoding.
const (
	readAhead      = 16
	readAheadBytes = 64 << 20
)

// OpenGeneration opens a generation file for reading, with loadIO: the
// offsets its reads find are not kept.
func OpenGeneration(ctx context.Context, store objstore.Reader, shard string, g Generation) (*file.Reader, error) {
	return openGeneration(ctx, loadIO(), store, shard, g, false)
}

// loadIO is the IO of generation Readers. A generation lives seconds to
// minutes (a merge folds it in), and its Readers read some rows once and
// are dropped, so the offsets they read are not kept: in the shared cache
// they would only push out those that point reads of the base use. (They
// did: a reader of wide columns of pending rows kept ~1.5M small entries
// there under a soak's ingest, and the collector's marking of them took a
// quarter of the CPU.)
var loadIO = sync.OnceValue(func() *file.IO {
	return file.NewIO(file.IOOptions{Concurrency: file.IOConcurrency(), Cache: lru.New(0)})
})

func openGeneration(ctx context.Context, fio *file.IO, store objstore.Reader, shard string, g Generation, whole bool) (*file.Reader, error) {
	key := GenerationKey(shard, g)
	size := g.Bytes
	if size <= 0 {
		info, err := store.Head(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("wal: generation %s: %w", key, err)
		}
		size = info.Size
	}
	var src file.Source = rangeSource{store, key}
	if size <= SmallGeneration || whole {
		b, err := store.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("wal: generation %s: %w", key, err)
		}
		src, size = bytesSource(b), int64(len(b))
	}
	r, err := fio.Open(ctx, src, size)
	if err != nil {
		return nil, fmt.Errorf("wal: open generation %s: %w", key, err)
	}
	return r, nil
}

// SmallGeneration is the size up to which a generation file is read whole,
// with one request, and served from memory. Read range by range, a file
// costs one request per column page it touches (about 34 for the rollout
// schema): on S3 that, not the bytes, is the cost of a cold read, and a
// backlog is made of many small generations.
const SmallGeneration = 1 << 20

// bytesSource serves ranges of a file held in memory. It returns copies, so
// decoded arrays never pin the whole file.
type bytesSource []byte

func (b bytesSource) ReadRange(_ context.Context, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(b)) {
		return nil, fmt.Errorf("wal: read [%d, +%d) of %d bytes: %w", off, n, len(b), objstore.ErrInvalidRange)
	}
	return append([]byte(nil), b[off:min(off+n, int64(len(b)))]...), nil
}

type rangeSource struct {
	store objstore.Reader
	key   string
}

func (s rangeSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	return s.store.GetRange(ctx, s.key, off, n)
}
