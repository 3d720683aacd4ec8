package wal

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

// GenerationKey returns the object key of a generation file of a shard.
func GenerationKey(shard string, g Generation) string { return shardDir(shard) + g.Path }

// writeGeneration writes batches as one Lance data file, keeping only the
// newest row of each key (later batches and later rows are newer).
func writeGeneration(ctx context.Context, store objstore.Store, shard string, gen uint64, keyCol string, batches []arrow.RecordBatch) (Generation, error) {
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
	obj, err := store.Create(ctx, GenerationKey(shard, g))
	if err != nil {
		return g, fmt.Errorf("wal: create generation: %w", err)
	}
	fw, err := file.NewWriter(obj, ls, file.WriterOptions{})
	if err != nil {
		_ = obj.Abort()
		return g, err
	}
	first := true
	for i, b := range batches {
		rec := b
		if masks[i] != nil {
			mask := masks[i]
			rec, err = compute.FilterRecordBatch(ctx, b, mask, compute.DefaultFilterOptions())
			mask.Release()
			if err != nil {
				_ = obj.Abort()
				return g, fmt.Errorf("wal: dedup generation: %w", err)
			}
		} else {
			rec.Retain()
		}
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
			_ = obj.Abort()
			return g, fmt.Errorf("wal: write generation: %w", err)
		}
	}
	info, err := fw.Finish()
	if err != nil {
		_ = obj.Abort()
		return g, fmt.Errorf("wal: finish generation: %w", err)
	}
	if err := obj.Close(); err != nil {
		return g, fmt.Errorf("wal: close generation: %w", err)
	}
	g.Bytes = info.Size
	g.SealedAt = time.Now().UTC()
	return g, nil
}

// newestPerKey returns, per batch, a keep-mask (nil when every row is kept)
// that keeps only the last occurrence of each key across all batches.
func newestPerKey(batches []arrow.RecordBatch, keyCol string) ([]*array.Boolean, error) {
	seen := make(map[string]struct{})
	keep := make([][]bool, len(batches))
	for i := len(batches) - 1; i >= 0; i-- {
		idx := batches[i].Schema().FieldIndices(keyCol)
		if len(idx) != 1 {
			return nil, fmt.Errorf("wal: batch has no key column %q", keyCol)
		}
		keys, ok := batches[i].Column(idx[0]).(*array.String)
		if !ok {
			return nil, fmt.Errorf("wal: key column %q must be utf8", keyCol)
		}
		k := make([]bool, keys.Len())
		dropped := false
		for r := keys.Len() - 1; r >= 0; r-- {
			if keys.IsNull(r) {
				return nil, fmt.Errorf("wal: null key in column %q", keyCol)
			}
			if _, dup := seen[keys.Value(r)]; dup {
				dropped = true
				continue
			}
			seen[keys.Value(r)] = struct{}{}
			k[r] = true
		}
		if dropped {
			keep[i] = k
		}
	}
	out := make([]*array.Boolean, len(batches))
	for i, k := range keep {
		if k == nil {
			continue
		}
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		b.AppendValues(k, nil)
		out[i] = b.NewBooleanArray()
		b.Release()
	}
	return out, nil
}

// OpenGeneration opens a generation file for reading.
func OpenGeneration(ctx context.Context, store objstore.Reader, shard string, g Generation) (*file.Reader, error) {
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
	if size <= smallGeneration {
		b, err := store.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("wal: generation %s: %w", key, err)
		}
		src, size = bytesSource(b), int64(len(b))
	}
	r, err := file.Open(ctx, src, size)
	if err != nil {
		return nil, fmt.Errorf("wal: open generation %s: %w", key, err)
	}
	return r, nil
}

// smallGeneration is the size up to which a generation file is read whole,
// with one request, and served from memory. Read range by range, a file
// costs one request per column page it touches (about 34 for the rollout
// schema): on S3 that, not the bytes, is the cost of a cold read, and a
// backlog is made of many small generations.
const smallGeneration = 1 << 20

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
