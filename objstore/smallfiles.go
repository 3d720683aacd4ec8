package objstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/lance-context/lance-context/internal/lru"
)

// SmallFiles wraps a store so that small immutable objects (those match
// selects, such as index files whose names are never reused) are read
// whole, once per process, and then served from memory: a Head or GetTail
// of such an object also reads max bytes of it (its last max bytes, with
// its size, in one request where the store has one-request tail reads,
// TailReader; else its first max bytes in parallel with a Head); when that
// is the whole object it is kept in the process-wide cache (internal/lru)
// and every later Head, Get and ranged read of it costs no request. A
// reader that opens a file (Head, then its footer, then its pages one
// dependent read after another) so pays one round trip instead of
// several. Larger objects pay for the speculative read once per Head and
// are read as usual. Writes and deletes of a key drop its entry;
// everything else goes to the inner store unchanged, optional interfaces
// included.
type SmallFiles struct {
	inner Store
	match func(key string) bool
	max   int64
	cache *lru.Cache
}

var (
	_ Store           = (*SmallFiles)(nil)
	_ RangeIntoReader = (*SmallFiles)(nil)
	_ Discarder       = (*SmallFiles)(nil)
	_ FirstLister     = (*SmallFiles)(nil)
)

// NewSmallFiles returns the wrapper; objects up to maxBytes are kept.
func NewSmallFiles(inner Store, match func(key string) bool, maxBytes int64) *SmallFiles {
	return &SmallFiles{inner: inner, match: match, max: maxBytes, cache: lru.Shared()}
}

type smallKey struct {
	s   *SmallFiles
	key string
}

type smallObject struct {
	data []byte
	info ObjectInfo
}

func (s *SmallFiles) cached(key string) (*smallObject, bool) {
	if !s.match(key) {
		return nil, false
	}
	v, ok := s.cache.Get(smallKey{s, key})
	if !ok {
		return nil, false
	}
	return v.(*smallObject), true
}

func (s *SmallFiles) drop(key string) {
	if s.match(key) {
		s.cache.Remove(smallKey{s, key})
		s.cache.Remove(largeKey{s, key})
	}
}

// largeKey names a selected object found larger than max: its
// ObjectInfo and the last bytes the speculative read took (largeObject).
// A later Head of it costs no request, and a later GetTail or ranged read
// within those bytes none either (a cold index lookup opened its 20 MB
// page_data file twice: the preload's tail read, then its opener's).
type largeKey struct {
	s   *SmallFiles
	key string
}

type largeObject struct {
	info ObjectInfo
	tail []byte // the object's last len(tail) bytes (none when unknown)
}

// large returns what is cached of a selected object found large.
func (s *SmallFiles) large(key string) (*largeObject, bool) {
	if !s.match(key) {
		return nil, false
	}
	v, ok := s.cache.Get(largeKey{s, key})
	if !ok {
		return nil, false
	}
	return v.(*largeObject), true
}

// putLarge caches a selected object found large, with its last bytes.
func (s *SmallFiles) putLarge(key string, info ObjectInfo, tail []byte) {
	s.cache.Put(largeKey{s, key}, &largeObject{info, tail}, int64(len(tail))+128)
}

// inTail returns [offset, offset+length) of o when its cached tail holds it.
func (o *largeObject) inTail(offset, length int64) ([]byte, bool) {
	start := o.info.Size - int64(len(o.tail))
	if offset < start || length < 0 || offset+length > o.info.Size {
		return nil, false
	}
	return o.tail[offset-start : offset-start+length], true
}

// Head implements Store; see SmallFiles.
func (s *SmallFiles) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if o, ok := s.cached(key); ok {
		return o.info, nil
	}
	if o, ok := s.large(key); ok {
		return o.info, nil
	}
	if !s.match(key) {
		return s.inner.Head(ctx, key)
	}
	if oneRequestTail(s.inner) {
		// One request: the object's last max bytes, with its size.
		_, info, err := s.GetTail(ctx, key, 0)
		return info, err
	}
	var (
		wg   sync.WaitGroup
		data []byte
		rerr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		data, rerr = s.inner.GetRange(ctx, key, 0, s.max)
	}()
	info, err := s.inner.Head(ctx, key)
	wg.Wait()
	if err == nil && rerr == nil && info.Size <= s.max && int64(len(data)) == info.Size {
		s.cache.Put(smallKey{s, key}, &smallObject{data, info}, int64(len(data))+128)
	} else if err == nil && info.Size > s.max {
		s.putLarge(key, info, nil) // data is its head, not its tail
	}
	return info, err
}

// Get implements Store.
func (s *SmallFiles) Get(ctx context.Context, key string) ([]byte, error) {
	if o, ok := s.cached(key); ok {
		return append([]byte(nil), o.data...), nil
	}
	return s.inner.Get(ctx, key)
}

// GetRange implements Store.
func (s *SmallFiles) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if o, ok := s.cached(key); ok {
		n := int64(len(o.data))
		if offset < 0 || length < 0 || offset > n {
			return nil, fmt.Errorf("%w: [%d, +%d) of %d bytes", ErrInvalidRange, offset, length, n)
		}
		return append([]byte(nil), o.data[offset:min(n, offset+length)]...), nil
	}
	if o, ok := s.large(key); ok {
		if b, ok := o.inTail(offset, length); ok {
			return append([]byte(nil), b...), nil
		}
	}
	return s.inner.GetRange(ctx, key, offset, length)
}

// GetRangeInto implements RangeIntoReader.
func (s *SmallFiles) GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) error {
	if o, ok := s.cached(key); ok {
		n := int64(len(o.data))
		if offset < 0 || offset+int64(len(dst)) > n {
			return fmt.Errorf("%w: [%d, +%d) of %d bytes", ErrInvalidRange, offset, len(dst), n)
		}
		copy(dst, o.data[offset:])
		return nil
	}
	if o, ok := s.large(key); ok {
		if b, ok := o.inTail(offset, int64(len(dst))); ok {
			copy(dst, b)
			return nil
		}
	}
	if in, ok := s.inner.(RangeIntoReader); ok {
		return in.GetRangeInto(ctx, key, offset, dst)
	}
	b, err := s.inner.GetRange(ctx, key, offset, int64(len(dst)))
	if err != nil {
		return err
	}
	if len(b) != len(dst) {
		return fmt.Errorf("%w: [%d, +%d) runs past the end", ErrInvalidRange, offset, len(dst))
	}
	copy(dst, b)
	return nil
}

// Put implements Store.
func (s *SmallFiles) Put(ctx context.Context, key string, data []byte) error {
	s.drop(key)
	return s.inner.Put(ctx, key, data)
}

// PutIfAbsent implements Store.
func (s *SmallFiles) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	s.drop(key)
	return s.inner.PutIfAbsent(ctx, key, data)
}

// List implements Store.
func (s *SmallFiles) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return s.inner.List(ctx, prefix)
}

// ListFirst implements FirstLister.
func (s *SmallFiles) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	return ListFirst(ctx, s.inner, prefix, n)
}

// Delete implements Store.
func (s *SmallFiles) Delete(ctx context.Context, key string) error {
	s.drop(key)
	return s.inner.Delete(ctx, key)
}

// Discard implements Discarder.
func (s *SmallFiles) Discard(ctx context.Context, key string) error {
	s.drop(key)
	return Discard(ctx, s.inner, key)
}

// Create implements Store.
func (s *SmallFiles) Create(ctx context.Context, key string) (ObjectWriter, error) {
	s.drop(key)
	return s.inner.Create(ctx, key)
}

// LocalPath forwards to the inner store when it is on a local filesystem.
func (s *SmallFiles) LocalPath(key string) (string, bool) {
	return LocalPath(s.inner, key)
}

// PreloadTails is Preload for objects the caller expects to be larger
// than the wrapper's maximum (an index's page_data file over a million
// rows): each is read as its last tail bytes, which hold its footer and
// metadata, instead of its last max bytes, so that a cold read of many
// such files downloads their metadata, not a speculative MiB of each. An
// object no larger than tail is kept whole, as Preload keeps it. On a
// store without one-request tails it is Preload.
func (s *SmallFiles) PreloadTails(ctx context.Context, tail int64, keys ...string) {
	if !oneRequestTail(s.inner) || tail >= s.max {
		s.Preload(ctx, keys...)
		return
	}
	s.preload(keys, func(k string) { _, _, _ = s.readTail(ctx, k, 0, tail) })
}

// Preload reads the selected objects among keys that are not cached yet,
// all in parallel (each as a Head does, above), so that a reader opening
// several of them afterwards pays one round trip in all instead of one per
// object. Errors are left to the reads that follow.
func (s *SmallFiles) Preload(ctx context.Context, keys ...string) {
	s.preload(keys, func(k string) { _, _ = s.Head(ctx, k) })
}

// preload runs read, in parallel, on each selected key not known yet
// (cached whole, or found large), and waits for them.
func (s *SmallFiles) preload(keys []string, read func(key string)) {
	var wg sync.WaitGroup
	for _, k := range keys {
		if _, ok := s.cached(k); ok || !s.match(k) {
			continue
		}
		if _, ok := s.large(k); ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			read(k)
		}()
	}
	wg.Wait()
}
