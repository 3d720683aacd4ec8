// Package lru is a least-recently-used cache bounded by bytes, shared by the
// readers of one process for what is immutable or validated on use:
// decoded table manifests, data file footers and column metadata, deletion
// bitmaps and string page offsets (packages lance/table and lance/file),
// small whole objects and local directory listings (package objstore).
//
// Shared returns the process-wide cache. Its size is LC_METADATA_CACHE_BYTES
// (bytes; default a sixteenth of the process's memory budget, at most
// 1 GiB; 0 disables caching), read once at first use. At 256 MiB a
// 10M-row store's offsets did not fit (10 fragments of ~20 string and list
// columns, packed), and reads over HTTP at 10M kept re-reading whole
// offsets buffers: get p50 1.6-2.5 ms after 3,000 reads, 0.96 ms at 1 GiB.
// What it holds is left out of the collector's goal (gctune.RegisterHeld).
// Each entry is charged the bytes its owner states (an estimate of the
// memory it holds) and EntryOverhead, the cache's own memory per entry;
// the least recently used entries are evicted beyond the bound, and an
// entry larger than the bound is not kept.
package lru

import (
	"container/list"
	"os"
	"strconv"
	"sync"

	"github.com/lance-context/lance-context/internal/gctune"
)

// EntryOverhead is what an entry costs the cache itself: its list element,
// its entry, its key boxed in an interface and its map slot. Uncharged,
// it let small entries (offsets chunks of ~100 bytes) number in millions
// within the bound, at two to three times its bytes.
const EntryOverhead = 192

// DefaultBytes is the size of the shared cache when LC_METADATA_CACHE_BYTES
// is not set.
const DefaultBytes = 1 << 30

// EnvBytes names the environment variable that sizes the shared cache.
const EnvBytes = "LC_METADATA_CACHE_BYTES"

// Cache maps comparable keys to values, bounded by the bytes charged.
// It is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	ll    *list.List
	m     map[any]*list.Element
}

type entry struct {
	key any
	val any
	n   int64
}

// New returns a cache holding at most maxBytes (<= 0: holds nothing).
func New(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, ll: list.New(), m: map[any]*list.Element{}}
}

var (
	sharedOnce sync.Once
	shared     *Cache
)

// Shared returns the process-wide cache (see the package documentation).
func Shared() *Cache {
	sharedOnce.Do(func() {
		n := gctune.Share(16, DefaultBytes)
		if v := os.Getenv(EnvBytes); v != "" {
			if p, err := strconv.ParseInt(v, 10, 64); err == nil && p >= 0 {
				n = p
			}
		}
		shared = New(n)
		// The process's caches are left out of the collector's goal.
		gctune.RegisterHeld(func() int64 { _, b := shared.Stats(); return b })
	})
	return shared
}

// Get returns the value under key and marks it recently used.
func (c *Cache) Get(key any) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*entry).val, true
}

// Put stores val under key, charged n bytes, replacing any value there,
// and evicts the least recently used entries beyond the bound.
func (c *Cache) Put(key, val any, n int64) {
	n = max(n, 0) + EntryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.bytes -= e.Value.(*entry).n
		c.ll.Remove(e)
		delete(c.m, key)
	}
	if n > c.max {
		return
	}
	c.m[key] = c.ll.PushFront(&entry{key, val, n})
	c.bytes += n
	for c.bytes > c.max {
		e := c.ll.Back()
		en := e.Value.(*entry)
		c.ll.Remove(e)
		delete(c.m, en.key)
		c.bytes -= en.n
	}
}

// Remove drops key.
func (c *Cache) Remove(key any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.bytes -= e.Value.(*entry).n
		c.ll.Remove(e)
		delete(c.m, key)
	}
}

// Stats returns the entries held and the bytes charged.
func (c *Cache) Stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}
