package rollout

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// GenCache keeps decoded generations (every column but the payload) in
// memory, bounded by bytes. Generations are immutable, so an entry never goes
// stale; it is keyed by the generation file's key.
type GenCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // front = most recently used
	entries map[cacheKey]*list.Element
}

type cacheKey struct {
	root objstore.Store
	key  string
}

// genData is one decoded generation.
type genData struct {
	rec   arrow.RecordBatch // listColumns, in Schema order
	ids   []string
	index map[string]int // id -> last row with it
	bytes int64
}

type cacheEntry struct {
	k cacheKey
	d *genData
}

// NewGenCache returns a cache holding up to maxBytes of decoded generations.
func NewGenCache(maxBytes int64) *GenCache {
	return &GenCache{max: maxBytes, order: list.New(), entries: map[cacheKey]*list.Element{}}
}

func (c *GenCache) get(ctx context.Context, root objstore.Store, shard string, g wal.Generation) (*genData, error) {
	k := cacheKey{root, wal.GenerationKey(shard, g)}
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		c.order.MoveToFront(e)
		d := e.Value.(*cacheEntry).d
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()
	d, err := loadGeneration(ctx, root, shard, g)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok { // loaded concurrently
		return e.Value.(*cacheEntry).d, nil
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{k, d})
	c.size += d.bytes
	for c.size > c.max && c.order.Len() > 1 {
		e := c.order.Back()
		ce := e.Value.(*cacheEntry)
		c.order.Remove(e)
		delete(c.entries, ce.k)
		c.size -= ce.d.bytes
		// Readers may still hold ce.d; arrow memory is garbage collected.
	}
	return d, nil
}

// peek returns a cached generation, or nil; it never loads one.
func (c *GenCache) peek(root objstore.Store, shard string, g wal.Generation) *genData {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[cacheKey{root, wal.GenerationKey(shard, g)}]; ok {
		return e.Value.(*cacheEntry).d
	}
	return nil
}

func loadGeneration(ctx context.Context, root objstore.Store, shard string, g wal.Generation) (*genData, error) {
	r, err := wal.OpenGeneration(ctx, root, shard, g)
	if err != nil {
		return nil, err
	}
	fs := r.Schema()
	var ids []int32
	var names []string
	for _, name := range listColumns {
		if f := fs.Field(name); f != nil {
			ids = append(ids, f.ID)
			names = append(names, name)
		}
	}
	rec, err := r.Read(ctx, ids, 0, r.NumRows())
	if err != nil {
		return nil, fmt.Errorf("rollout: read generation %s: %w", g.Path, err)
	}
	defer rec.Release()
	full, err := project(rec, listColumns)
	if err != nil {
		return nil, err
	}
	d := &genData{rec: full, index: make(map[string]int, full.NumRows())}
	idCol := full.Column(0).(*array.String)
	d.ids = make([]string, idCol.Len())
	for i := range d.ids {
		d.ids[i] = idCol.Value(i)
		d.index[d.ids[i]] = i
	}
	for _, c := range full.Columns() {
		d.bytes += int64(c.Data().Len()) * 8
		for _, b := range c.Data().Buffers() {
			if b != nil {
				d.bytes += int64(b.Len())
			}
		}
	}
	return d, nil
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
			arrs[i] = asSchemaType(name, rec.Column(j[0])) // a reference table's role and created_at
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
