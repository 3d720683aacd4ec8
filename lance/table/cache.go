package table

import (
	"context"
	"fmt"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/objstore"
)

// fileCache keeps opened data file readers (their footers and column
// metadata) and decoded deletion files. Both are immutable once written (a
// deletion file's name holds the fragment id, read version and a random id,
// so a new one never reuses a name), so entries never go stale.
type fileCache struct {
	readers   immutableCache[*file.Reader]
	deletions immutableCache[*roaring.Bitmap]
}

var sharedFileCache = &fileCache{readers: newImmutableCache[*file.Reader](4096), deletions: newImmutableCache[*roaring.Bitmap](4096)}

type cacheKey struct {
	store objstore.Store
	key   string
}

// immutableCache maps (store, key) to a value derived from an immutable
// object. It is bounded by entry count and evicts at random, which is cheap
// and good enough for a working set of open files.
type immutableCache[V any] struct {
	mu  sync.Mutex
	m   map[cacheKey]V
	max int
}

func newImmutableCache[V any](max int) immutableCache[V] {
	return immutableCache[V]{m: map[cacheKey]V{}, max: max}
}

func (c *immutableCache[V]) get(s objstore.Store, key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[cacheKey{s, key}]
	return v, ok
}

func (c *immutableCache[V]) put(s objstore.Store, key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[cacheKey{s, key}] = v
}

// objectSource adapts an object to file.Source.
type objectSource struct {
	store objstore.Store
	key   string
}

func (o objectSource) ReadRange(ctx context.Context, off, n int64) ([]byte, error) {
	b, err := o.store.GetRange(ctx, o.key, off, n)
	if err != nil {
		return nil, fmt.Errorf("read %s [%d,+%d): %w", o.key, off, n, err)
	}
	return b, nil
}

// objectSourceInto is an objectSource over a store that reads into the
// caller's buffers (file.SourceInto), which saves a copy per page on scans.
type objectSourceInto struct {
	objectSource
	into objstore.RangeIntoReader
}

func (o objectSourceInto) ReadRangeInto(ctx context.Context, off int64, dst []byte) error {
	if err := o.into.GetRangeInto(ctx, o.key, off, dst); err != nil {
		return fmt.Errorf("read %s [%d,+%d): %w", o.key, off, len(dst), err)
	}
	return nil
}

// sourceFor returns the best file.Source for an object of store.
func sourceFor(store objstore.Store, key string) file.Source {
	src := objectSource{store, key}
	if in, ok := store.(objstore.RangeIntoReader); ok {
		return objectSourceInto{src, in}
	}
	return src
}
