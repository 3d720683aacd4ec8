package table

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lance-context/lance-context/internal/lru"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/objstore"
)

// fileCache keeps opened data file readers (their footers and column
// metadata), decoded deletion files and decoded manifests in a
// byte-bounded LRU (internal/lru; by default the process-wide one,
// LC_METADATA_CACHE_BYTES), and opens data files through its file.IO.
// Data and deletion files are immutable once written (a data file's name is
// a fresh uuid; a deletion file's name holds the fragment id, read version
// and a random id), so their entries never go stale. A manifest's name is
// reused when a table is deleted and created again, so a manifest entry is
// used only when the object's size and modification time match the listing
// that found it (see openListed). A Cache is its exported face.
type fileCache struct {
	c  *lru.Cache
	io *file.IO
}

// CacheOptions configure a Cache. The zero value is the default.
type CacheOptions struct {
	// LRU holds the entries; nil: the process-wide metadata cache
	// (lru.Shared).
	LRU *lru.Cache
	// IO opens the data files (their offsets cache, read concurrency and
	// prefetch slots); nil: file.DefaultIO at each open.
	IO *file.IO
}

// Cache is what the Datasets opened through it share: decoded manifests,
// opened data file readers and deletion bitmaps, and the file.IO their
// reads go through. A Dataset and every version committed from it keep
// the Cache they were opened with. A process uses one (DefaultCache, what
// Open, Checkout, Create and Commit use unless it installs its own with
// SetDefaultCache); a test whose tables must share no cached state with
// others makes its own with NewCache and opens them with its methods.
type Cache struct{ f *fileCache }

// NewCache returns a Cache with options o.
func NewCache(o CacheOptions) *Cache {
	if o.LRU == nil {
		o.LRU = lru.Shared()
	}
	return &Cache{&fileCache{c: o.LRU, io: o.IO}}
}

var defaultCache atomic.Pointer[Cache]

// DefaultCache returns the Cache of the package's Open, Checkout, Create
// and Commit: the one SetDefaultCache installed, else one with the zero
// CacheOptions.
func DefaultCache() *Cache {
	if c := defaultCache.Load(); c != nil {
		return c
	}
	defaultCache.CompareAndSwap(nil, NewCache(CacheOptions{}))
	return defaultCache.Load()
}

// SetDefaultCache makes c the Cache of the package's functions, for tables
// opened after it.
func SetDefaultCache(c *Cache) { defaultCache.Store(c) }

// fileIO returns the IO data files are opened with.
func (f *fileCache) fileIO() *file.IO {
	if f.io != nil {
		return f.io
	}
	return file.DefaultIO()
}

type cacheKey struct {
	store objstore.Store
	key   string
}

// Typed keys keep the kinds of entries apart in the one cache.
type (
	readerKey   cacheKey
	delFileKey  cacheKey
	manifestKey cacheKey
)

func (f *fileCache) reader(s objstore.Store, key string) (*file.Reader, bool) {
	v, ok := f.c.Get(readerKey{s, key})
	if !ok {
		return nil, false
	}
	return v.(*file.Reader), true
}

func (f *fileCache) putReader(s objstore.Store, key string, r *file.Reader) {
	// Decoded metadata takes a few times its encoded bytes.
	f.c.Put(readerKey{s, key}, r, 512+4*r.MetadataBytes())
}

func (f *fileCache) deletion(s objstore.Store, key string) (*roaring.Bitmap, bool) {
	v, ok := f.c.Get(delFileKey{s, key})
	if !ok {
		return nil, false
	}
	return v.(*roaring.Bitmap), true
}

func (f *fileCache) putDeletion(s objstore.Store, key string, bm *roaring.Bitmap) {
	f.c.Put(delFileKey{s, key}, bm, 64+int64(bm.GetSizeInBytes()))
}

// cachedManifest is a decoded version and the identity of the object it
// was read from.
type cachedManifest struct {
	size    int64
	modTime time.Time
	ds      *Dataset
}

func (f *fileCache) manifest(s objstore.Store, key string, info objstore.ObjectInfo) (*Dataset, bool) {
	v, ok := f.c.Get(manifestKey{s, key})
	if !ok {
		return nil, false
	}
	m := v.(*cachedManifest)
	if m.size != info.Size || !m.modTime.Equal(info.ModTime) {
		return nil, false
	}
	return m.ds, true
}

func (f *fileCache) putManifest(s objstore.Store, key string, info objstore.ObjectInfo, ds *Dataset) {
	// A decoded manifest takes a few times its encoded bytes.
	f.c.Put(manifestKey{s, key}, &cachedManifest{info.Size, info.ModTime, ds}, 1024+4*info.Size)
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

// WarmFiles opens the data files of the newest max fragments of d (their
// footers and column metadata) in parallel and keeps them in the file
// cache, so that the first read after a new version pays one round trip
// for all of them instead of one before each read. Errors are left to the
// reads.
func (d *Dataset) WarmFiles(ctx context.Context, max int) {
	frags := d.Fragments()
	frags = frags[len(frags)-min(max, len(frags)):]
	var wg sync.WaitGroup
	for _, f := range frags {
		for _, df := range f.GetFiles() {
			if _, ok := d.files.reader(d.store, dataDir+df.GetPath()); ok {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = d.openFile(ctx, df)
			}()
		}
	}
	wg.Wait()
}
