package rollout

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout/row"
	"github.com/lance-context/lance-context/wal"
)

// GenCache keeps decoded generations (as wal.LoadedGeneration with its id
// index) in memory, bounded by bytes: of a small generation every column
// but the payload, of a large one only the narrow columns (see
// cachedColumns). Generations are immutable, so an entry never goes
// stale; it is keyed by the generation file's key.
type GenCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // front = most recently used
	entries map[cacheKey]*list.Element
	// readers holds an open Reader of a cached generation whose wide
	// columns a read fetched (pendingBatch), dropped with its entry:
	// opening one reads and decodes the file's metadata, and a page of
	// ids met every pending generation.
	readers map[*wal.LoadedGeneration]*file.Reader

	hits, misses, loaded atomic.Int64 // for the metrics (loaded: bytes)
}

type cacheKey struct {
	root objstore.Store
	key  string
}

type cacheEntry struct {
	k cacheKey
	d *wal.LoadedGeneration
}

// NewGenCache returns a cache holding up to maxBytes of decoded generations.
func NewGenCache(maxBytes int64) *GenCache {
	return &GenCache{max: maxBytes, order: list.New(), entries: map[cacheKey]*list.Element{}, readers: map[*wal.LoadedGeneration]*file.Reader{}}
}

func (c *GenCache) get(ctx context.Context, root objstore.Store, ref wal.GenRef) (*wal.LoadedGeneration, error) {
	k := cacheKey{root, ref.Key()}
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		c.order.MoveToFront(e)
		d := e.Value.(*cacheEntry).d
		c.mu.Unlock()
		c.hits.Add(1)
		return d, nil
	}
	c.mu.Unlock()
	c.misses.Add(1)
	cols := cachedColumns(ref.Gen)
	d, err := wal.LoadGeneration(ctx, root, ref, wal.ReadOptions{
		KeyColumn: ColID, Columns: cols,
		Project: func(rec arrow.RecordBatch) (arrow.RecordBatch, error) { return project(rec, cols) },
	})
	if err != nil {
		return nil, err
	}
	c.loaded.Add(d.Bytes())
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok { // loaded concurrently
		return e.Value.(*cacheEntry).d, nil
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{k, d})
	c.size += d.Bytes()
	for c.size > c.max && c.order.Len() > 1 {
		e := c.order.Back()
		ce := e.Value.(*cacheEntry)
		c.order.Remove(e)
		delete(c.entries, ce.k)
		c.size -= ce.d.Bytes()
		if r, ok := c.readers[ce.d]; ok {
			c.size -= r.MetadataBytes()
			delete(c.readers, ce.d)
		}
		// Readers may still hold ce.d; arrow memory is garbage collected.
	}
	return d, nil
}

// reader returns a Reader of generation g's file: the one kept beside g's
// entry, else one opened now (and kept when g is still cached).
func (c *GenCache) reader(ctx context.Context, root objstore.Store, g *wal.LoadedGeneration) (*file.Reader, error) {
	c.mu.Lock()
	r, ok := c.readers[g]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := wal.OpenGeneration(ctx, root, g.Ref.Shard, g.Ref.Gen)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[cacheKey{root, g.Ref.Key()}]; ok && e.Value.(*cacheEntry).d == g {
		if kept, ok := c.readers[g]; ok { // opened concurrently
			return kept, nil
		}
		c.readers[g] = r
		c.size += r.MetadataBytes() // evicted with g, or by the next load
	}
	return r, nil
}

// cachedColumns returns the columns the cache keeps of generation g:
// genColumns when its file is at most wal.SmallGeneration (read whole
// anyway, so its wide columns cost no request), else slimGenColumns.
//
// Why: every read of the union walks every pending generation. A worker
// taking 17k records/s seals generations of ~17 MB, ~30 MB decoded: a
// backlog of seconds outgrew the cache, which then missed in a cycle and
// decoded ~1 GB/s of text no read returned (a soak's collector took a
// growing share of the CPU). Narrow, the backlog fits, and the wide
// columns are read only for the rows a read returns.
func cachedColumns(g wal.Generation) []string {
	if g.Bytes > 0 && g.Bytes <= wal.SmallGeneration {
		return genColumns
	}
	return slimGenColumns
}

// holdsAll reports whether every generation of refs is decoded in the
// cache, so that reading them costs no request.
func (c *GenCache) holdsAll(root objstore.Store, refs []wal.GenRef) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ref := range refs {
		if _, ok := c.entries[cacheKey{root, ref.Key()}]; !ok {
			return false
		}
	}
	return true
}

// loader returns the cache as a wal.Loader of root's generations.
func (c *GenCache) loader(root objstore.Store) wal.Loader {
	return func(ctx context.Context, ref wal.GenRef) (*wal.LoadedGeneration, error) { return c.get(ctx, root, ref) }
}

// bytes returns the bytes of decoded generations held.
func (c *GenCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// project returns rec's columns named cols, in that order, filling columns
// rec lacks with nulls of Schema's type.
func project(rec arrow.RecordBatch, cols []string) (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, name := range cols {
		idx := Schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("rollout: no column %q", name)
		}
		fields[i] = Schema.Field(idx[0])
		if j := rec.Schema().FieldIndices(name); len(j) == 1 {
			arrs[i] = row.AsSchemaType(name, rec.Column(j[0])) // a reference table's role and created_at
		} else {
			arrs[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[i].Type, int(rec.NumRows()))
		}
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
	for _, a := range arrs {
		a.Release()
	}
	return out, nil
}
