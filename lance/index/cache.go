package index

import (
	"container/list"
	"sync"
)

type pageKey struct {
	uuid string
	page int
	// idsOnly marks an entry holding only a page's row ids (a page every
	// row of which holds one value, known from the lookup: its values
	// need not be read).
	idsOnly bool
	// filter marks the entry holding the segment's key filter.
	filter bool
}

// pageCache is an LRU of decoded index pages, bounded by bytes. Index files
// are immutable (a new uuid for every rebuild), so entries never go stale.
type pageCache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	ll    *list.List
	m     map[pageKey]*list.Element
}

type cacheEntry struct {
	key pageKey
	p   *page
	f   *keyFilter // an entry holds a page or a segment's key filter
	n   int64
}

// NewPageCache returns a cache holding up to maxBytes of decoded pages.
func NewPageCache(maxBytes int64) *pageCache {
	return &pageCache{max: maxBytes, ll: list.New(), m: map[pageKey]*list.Element{}}
}

// held returns the bytes of the entries c holds.
func (c *pageCache) held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func (c *pageCache) get(k pageKey) (*page, bool) {
	if ce := c.lookup(k); ce != nil {
		return ce.p, true
	}
	return nil, false
}

// lookup returns k's entry, marked recently used, or nil.
func (c *pageCache) lookup(k pageKey) *cacheEntry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry)
	}
	return nil
}

func (c *pageCache) put(k pageKey, p *page) {
	if c == nil {
		return
	}
	c.insert(&cacheEntry{key: k, p: p, n: p.size()})
}

// getFilter returns the key filter of segment uuid, nil when not cached.
func (c *pageCache) getFilter(uuid string) *keyFilter {
	if ce := c.lookup(pageKey{uuid: uuid, filter: true}); ce != nil {
		return ce.f
	}
	return nil
}

func (c *pageCache) putFilter(uuid string, f *keyFilter) {
	if c == nil {
		return
	}
	c.insert(&cacheEntry{key: pageKey{uuid: uuid, filter: true}, f: f, n: f.size()})
}

func (c *pageCache) insert(ce *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[ce.key]; ok || ce.n > c.max {
		return
	}
	c.m[ce.key] = c.ll.PushFront(ce)
	c.bytes += ce.n
	for c.bytes > c.max {
		e := c.ll.Back()
		ce := e.Value.(*cacheEntry)
		c.ll.Remove(e)
		delete(c.m, ce.key)
		c.bytes -= ce.n
	}
}

// forget drops every entry of the index segments uuids (replaced ones:
// a read of an older version reads them again).
func (c *pageCache) forget(uuids map[string]bool) {
	if c == nil || len(uuids) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.ll.Front(); e != nil; {
		next := e.Next()
		if ce := e.Value.(*cacheEntry); uuids[ce.key.uuid] {
			c.ll.Remove(e)
			delete(c.m, ce.key)
			c.bytes -= ce.n
		}
		e = next
	}
}

// grow adds n bytes to the size of k's entry (a page's row ids, read after
// the page was cached), evicting older entries past the bound.
func (c *pageCache) grow(k pageKey, n int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return
	}
	e.Value.(*cacheEntry).n += n
	c.bytes += n
	for c.bytes > c.max && c.ll.Len() > 1 {
		b := c.ll.Back()
		ce := b.Value.(*cacheEntry)
		c.ll.Remove(b)
		delete(c.m, ce.key)
		c.bytes -= ce.n
	}
}
