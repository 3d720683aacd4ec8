package objstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/objstore/internal/sleep"
)

// Counting wraps a Store and counts what goes through it: calls per
// operation, bytes read and written, the greatest number of calls in flight
// at once, and the depth of the longest chain of dependent calls (the
// sequential round trips an operation would cost where each request takes a
// fixed latency). Tests use it to pin the requests per operation of the
// code above the store.
//
// A call's depth is one more than the greatest depth of the calls that had
// finished when it started; the chain depth is the greatest depth seen. A
// call that starts before another finishes is counted as concurrent with
// it, so on a store that answers instantly, calls issued in parallel may
// run one after the other and count as a chain: set Latency to make them
// overlap as they would on a remote store.
type Counting struct {
	inner   Store
	latency time.Duration

	mu       sync.Mutex
	calls    [numOps]int
	read     int64
	written  int64
	inFlight int
	maxIn    int
	doneMax  int // greatest depth among finished calls
	depth    int // greatest depth of any call
	period   int // incremented by Reset
	total    int // calls ever started, never reset
}

var (
	_ Store           = (*Counting)(nil)
	_ RangeIntoReader = (*Counting)(nil)
	_ Discarder       = (*Counting)(nil)
)

// NewCounting returns a counting wrapper of inner. Each call sleeps latency
// before it goes to inner (0: none), holding its place in flight.
func NewCounting(inner Store, latency time.Duration) *Counting {
	return &Counting{inner: inner, latency: latency}
}

// Inner returns the wrapped store.
func (c *Counting) Inner() Store { return c.inner }

// Counts is a snapshot of a Counting store's counters.
type Counts struct {
	Calls        map[Op]int // calls per operation; a streaming write counts OpCreate and, if closed, OpCommit
	BytesRead    int64      // bytes returned by Get, GetRange and GetRangeInto
	BytesWritten int64      // bytes given to Put, PutIfAbsent and streaming writes
	MaxInFlight  int        // greatest number of calls in flight at once
	Sequential   int        // depth of the longest chain of dependent calls
}

// Requests is the number of calls of every operation but OpWrite (a
// streaming write's Write calls are buffered, not requests).
func (c Counts) Requests() int {
	n := 0
	for op, k := range c.Calls {
		if op != OpWrite {
			n += k
		}
	}
	return n
}

// String lists the non-zero counters, e.g.
// "7 requests (get 1, getrange 4, head 2), 2 sequential, 4 in flight, 9120 B read".
func (c Counts) String() string {
	var ops []string
	for op, k := range c.Calls {
		if k > 0 && op != OpWrite {
			ops = append(ops, fmt.Sprintf("%s %d", op, k))
		}
	}
	sort.Strings(ops)
	return fmt.Sprintf("%d requests (%s), %d sequential, %d in flight, %d B read, %d B written",
		c.Requests(), strings.Join(ops, ", "), c.Sequential, c.MaxInFlight, c.BytesRead, c.BytesWritten)
}

// Counts returns the counters accumulated since the last Reset.
func (c *Counting) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Counts{Calls: map[Op]int{}, BytesRead: c.read, BytesWritten: c.written, MaxInFlight: c.maxIn, Sequential: c.depth}
	for op, n := range c.calls {
		if n > 0 {
			out.Calls[Op(op)] = n
		}
	}
	return out
}

// Reset zeroes the counters. Calls in flight during Reset count as in
// flight, but neither their bytes nor their depth count toward the new
// period.
func (c *Counting) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = [numOps]int{}
	c.read, c.written = 0, 0
	c.maxIn = c.inFlight
	c.doneMax, c.depth = 0, 0
	c.period++
}

// WaitIdle waits until no call has started or been in flight for quiet, or
// ctx ends: background work (a flush's cleanup, say) belongs to the
// operation that started it.
func (c *Counting) WaitIdle(ctx context.Context, quiet time.Duration) error {
	for {
		c.mu.Lock()
		before, busy := c.total, c.inFlight > 0
		c.mu.Unlock()
		if err := sleep.Ctx(ctx, quiet); err != nil {
			return err
		}
		c.mu.Lock()
		idle := !busy && c.inFlight == 0 && c.total == before
		c.mu.Unlock()
		if idle {
			return nil
		}
	}
}

// callRef identifies a call in flight for finish.
type callRef struct{ depth, period int }

// start records the start of a call.
func (c *Counting) start(op Op, written int) callRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	c.total++
	c.written += int64(written)
	c.inFlight++
	c.maxIn = max(c.maxIn, c.inFlight)
	d := c.doneMax + 1
	c.depth = max(c.depth, d)
	return callRef{d, c.period}
}

func (c *Counting) finish(ref callRef, read int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	if ref.period != c.period {
		return // started before a Reset
	}
	c.read += int64(read)
	c.doneMax = max(c.doneMax, ref.depth)
}

func (c *Counting) wait(ctx context.Context) error {
	if c.latency <= 0 {
		return nil
	}
	return sleep.Ctx(ctx, c.latency)
}

// Get implements Store.
func (c *Counting) Get(ctx context.Context, key string) ([]byte, error) {
	d := c.start(OpGet, 0)
	var b []byte
	err := c.wait(ctx)
	if err == nil {
		b, err = c.inner.Get(ctx, key)
	}
	c.finish(d, len(b))
	return b, err
}

// GetRange implements Store.
func (c *Counting) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	d := c.start(OpGetRange, 0)
	var b []byte
	err := c.wait(ctx)
	if err == nil {
		b, err = c.inner.GetRange(ctx, key, offset, length)
	}
	c.finish(d, len(b))
	return b, err
}

// GetRangeInto implements RangeIntoReader, counted as OpGetRange; it uses
// the inner store's GetRangeInto when it has one.
func (c *Counting) GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) error {
	d := c.start(OpGetRange, 0)
	err := c.wait(ctx)
	n := 0
	if err == nil {
		if in, ok := c.inner.(RangeIntoReader); ok {
			err = in.GetRangeInto(ctx, key, offset, dst)
		} else {
			var b []byte
			b, err = c.inner.GetRange(ctx, key, offset, int64(len(dst)))
			if err == nil && len(b) != len(dst) {
				err = fmt.Errorf("%w: %s: [%d, +%d) runs past the end", ErrInvalidRange, key, offset, len(dst))
			}
			copy(dst, b)
		}
		if err == nil {
			n = len(dst)
		}
	}
	c.finish(d, n)
	return err
}

// Put implements Store.
func (c *Counting) Put(ctx context.Context, key string, data []byte) error {
	d := c.start(OpPut, len(data))
	err := c.wait(ctx)
	if err == nil {
		err = c.inner.Put(ctx, key, data)
	}
	c.finish(d, 0)
	return err
}

// PutIfAbsent implements Store.
func (c *Counting) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	d := c.start(OpPutIfAbsent, len(data))
	err := c.wait(ctx)
	if err == nil {
		err = c.inner.PutIfAbsent(ctx, key, data)
	}
	c.finish(d, 0)
	return err
}

// List implements Store.
func (c *Counting) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	d := c.start(OpList, 0)
	var out []ObjectInfo
	err := c.wait(ctx)
	if err == nil {
		out, err = c.inner.List(ctx, prefix)
	}
	c.finish(d, 0)
	return out, err
}

// Delete implements Store.
func (c *Counting) Delete(ctx context.Context, key string) error {
	d := c.start(OpDelete, 0)
	err := c.wait(ctx)
	if err == nil {
		err = c.inner.Delete(ctx, key)
	}
	c.finish(d, 0)
	return err
}

// Discard implements Discarder, counted as OpDelete.
func (c *Counting) Discard(ctx context.Context, key string) error {
	d := c.start(OpDelete, 0)
	err := c.wait(ctx)
	if err == nil {
		err = Discard(ctx, c.inner, key)
	}
	c.finish(d, 0)
	return err
}

// Head implements Store.
func (c *Counting) Head(ctx context.Context, key string) (ObjectInfo, error) {
	d := c.start(OpHead, 0)
	var info ObjectInfo
	err := c.wait(ctx)
	if err == nil {
		info, err = c.inner.Head(ctx, key)
	}
	c.finish(d, 0)
	return info, err
}

// LocalPath forwards to the inner store when it is on a local filesystem,
// so that wrapping a store does not change the code paths above it.
func (c *Counting) LocalPath(key string) (string, bool) {
	return LocalPath(c.inner, key)
}

// Create implements Store. Create itself is not a request on any backend
// (S3 starts its upload on the first full part), so it is counted but adds
// no depth; the writer's Close counts as OpCommit, one request, and its
// Write calls as OpWrite with the bytes written.
func (c *Counting) Create(ctx context.Context, key string) (ObjectWriter, error) {
	c.mu.Lock()
	c.calls[OpCreate]++
	c.mu.Unlock()
	w, err := c.inner.Create(ctx, key)
	if err != nil {
		return nil, err
	}
	return &countingWriter{c: c, ctx: ctx, w: w}, nil
}

type countingWriter struct {
	c   *Counting
	ctx context.Context
	w   ObjectWriter
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	cw.c.mu.Lock()
	cw.c.calls[OpWrite]++
	cw.c.written += int64(len(p))
	cw.c.mu.Unlock()
	return cw.w.Write(p)
}

func (cw *countingWriter) Close() error {
	d := cw.c.start(OpCommit, 0)
	err := cw.c.wait(cw.ctx)
	if err == nil {
		err = cw.w.Close()
	} else {
		cw.w.Abort()
	}
	cw.c.finish(d, 0)
	return err
}

func (cw *countingWriter) Abort() error { return cw.w.Abort() }
