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
// metadata) and decoded deletion files. Both are immutable once written, so
// entries never go stale; the cache is bounded by entry count and evicts at
// random, which is cheap and good enough for a working set of open files.
type fileCache struct {
	mu        sync.Mutex
	readers   map[cacheKey]*file.Reader
	deletions map[cacheKey]*roaring.Bitmap
	max       int
}

type cacheKey struct {
	store objstore.Store
	key   string
}

var sharedFileCache = &fileCache{readers: map[cacheKey]*file.Reader{}, deletions: map[cacheKey]*roaring.Bitmap{}, max: 4096}

func (c *fileCache) reader(s objstore.Store, key string) (*file.Reader, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.readers[cacheKey{s, key}]
	return r, ok
}

func (c *fileCache) putReader(s objstore.Store, key string, r *file.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.readers) >= c.max {
		for k := range c.readers {
			delete(c.readers, k)
			break
		}
	}
	c.readers[cacheKey{s, key}] = r
}

// deletion files are keyed by store and path; the name holds the fragment
// id, read version and a random id, so a new deletion file never reuses one.
func (c *fileCache) deletion(s objstore.Store, key string) (*roaring.Bitmap, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bm, ok := c.deletions[cacheKey{s, key}]
	return bm, ok
}

func (c *fileCache) putDeletion(s objstore.Store, key string, bm *roaring.Bitmap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.deletions) >= c.max {
		for k := range c.deletions {
			delete(c.deletions, k)
			break
		}
	}
	c.deletions[cacheKey{s, key}] = bm
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
