package file

import (
	"bytes"
	"os"
	"strconv"
	"sync"

	"github.com/lance-context/lance-context/internal/lru"
)

// EnvIOConcurrency names the environment variable that sets IOConcurrency.
const EnvIOConcurrency = "LC_IO_CONCURRENCY"

// DefaultIOConcurrency is the reads one fetch of a Read keeps in flight by
// default. It is sized for object-store latency, not for cores: a read
// waits, it does not compute, and 32 ranges in flight cost one round trip
// where 2 would cost 16.
const DefaultIOConcurrency = 32

var ioConcurrency = sync.OnceValue(func() int {
	if v, err := strconv.Atoi(os.Getenv(EnvIOConcurrency)); err == nil && v > 0 {
		return v
	}
	return DefaultIOConcurrency
})

// IOConcurrency returns the most range reads one fetch of a Read issues at
// once: LC_IO_CONCURRENCY when set to a positive integer, else
// DefaultIOConcurrency.
func IOConcurrency() int { return ioConcurrency() }

// maxCachedOffsets: the offsets buffer of a string or list page up to this
// size is read whole, the first time any of its rows is read, and kept in
// the process-wide cache (internal/lru), so that later reads of that page
// know where their bytes are without reading offsets first (one dependent
// round trip less on an object store). Larger buffers are read by the
// slice the rows need.
const maxCachedOffsets = 1 << 20

// offsetsKey names a cached offsets buffer: files are immutable, and a
// Reader is one file.
type offsetsKey struct {
	r   *Reader
	off int64
}

// cachedOffsets returns the cached whole buffer b if it holds at least need
// bytes.
func (rc *readCtx) cachedOffsets(b bufRange, need int64) ([]byte, bool) {
	v, ok := lru.Shared().Get(offsetsKey{rc.r, b.off})
	if !ok {
		return nil, false
	}
	w := v.([]byte)
	if int64(len(w)) != b.size || b.size < need {
		return nil, false
	}
	return w, true
}

// keepOffsets caches a copy of the whole buffer b (got may point into a
// larger coalesced read) and returns it.
func (rc *readCtx) keepOffsets(b bufRange, got []byte) []byte {
	w := bytes.Clone(got)
	lru.Shared().Put(offsetsKey{rc.r, b.off}, w, int64(len(w))+64)
	return w
}
