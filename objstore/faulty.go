package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/lance-context/lance-context/objstore/internal/sleep"
)

// ErrInjected is matched (errors.Is) by every error the Faulty store and
// TearingTransport invent. The concrete type of the Faulty store's is
// *InjectedError.
var ErrInjected = errors.New("objstore: injected fault")

// Op names a Store operation, for fault configuration.
type Op uint8

// The operations a Faulty store can fail. OpCreate, OpWrite and OpCommit are
// the three steps of a streaming write: Create, each Write, and Close.
const (
	OpGet Op = iota + 1
	OpGetRange
	OpPut
	OpPutIfAbsent
	OpList
	OpDelete
	OpHead
	OpCreate
	OpWrite
	OpCommit
	// OpDeleteMany is one request of a batch delete, as Counting counts it
	// (Faulty draws a batch's faults per key, as OpDelete).
	OpDeleteMany

	numOps = iota + 1 // one more than the last Op
)

var opNames = [...]string{"", "get", "getrange", "put", "putifabsent", "list", "delete", "head", "create", "write", "commit", "deletemany"}

func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// Fault is what a Faulty store does to one call.
type Fault uint8

const (
	// FaultNone runs the call normally. Returned by a Hook, it lets the random
	// faults of the configuration decide.
	FaultNone Fault = iota
	// FaultError fails the call without touching the inner store.
	FaultError
	// FaultLostAck runs the call on the inner store and then fails it, as if
	// the reply had been lost: a write is durable although the caller saw an
	// error. (If the inner call fails, its error is returned.)
	FaultLostAck
	// FaultPass runs the call normally, skipping the random faults (Hook only).
	FaultPass
)

func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultError:
		return "error"
	case FaultLostAck:
		return "lost-ack"
	case FaultPass:
		return "pass"
	}
	return fmt.Sprintf("fault(%d)", f)
}

// Rates are the random faults of one operation. Error and LostAck are
// probabilities in [0, 1]; every call is delayed by a uniform random latency
// in [MinLatency, MaxLatency] (none if MaxLatency is 0).
type Rates struct {
	Error      float64
	LostAck    float64
	MinLatency time.Duration
	MaxLatency time.Duration
}

// FaultConfig configures a Faulty store.
type FaultConfig struct {
	// Seed seeds the random faults: the same seed and the same sequence of
	// calls give the same faults. (Concurrent callers make the sequence, and
	// so the outcome, depend on scheduling.)
	Seed uint64
	// Default applies to every operation without an entry in PerOp.
	Default Rates
	PerOp   map[Op]Rates
	// Hook, if set, is asked first about every call; call is the 1-based
	// count of calls of op so far (including this one). It lets a test fail
	// one precise step; see FailNth and FailKey.
	Hook func(op Op, key string, call int) Fault
}

// InjectedError is the error a Faulty store returns for an injected fault.
type InjectedError struct {
	Op      Op
	Key     string
	Call    int  // 1-based count of calls of Op
	LostAck bool // the inner call was carried out
}

func (e *InjectedError) Error() string {
	what := "error"
	if e.LostAck {
		what = "lost ack (the operation was carried out)"
	}
	return fmt.Sprintf("objstore: injected %s: %s %s (call %d)", what, e.Op, e.Key, e.Call)
}

// Is makes errors.Is(err, ErrInjected) true.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// Event records one injected fault.
type Event struct {
	Op    Op
	Key   string
	Call  int
	Fault Fault
}

// Faulty wraps a Store and injects errors, latency and lost
// acknowledgements, randomly (seeded) or exactly where a Hook says.
type Faulty struct {
	inner Store
	cfg   FaultConfig

	mu     sync.Mutex
	rng    *rand.Rand
	hook   func(op Op, key string, call int) Fault
	calls  map[Op]int
	events []Event
}

var _ Store = (*Faulty)(nil)

// NewFaulty returns a fault-injecting wrapper around inner. A zero
// FaultConfig injects nothing.
func NewFaulty(inner Store, cfg FaultConfig) *Faulty {
	return &Faulty{
		inner: inner,
		cfg:   cfg,
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		hook:  cfg.Hook,
		calls: make(map[Op]int),
	}
}

// Inner returns the wrapped store.
func (f *Faulty) Inner() Store { return f.inner }

// SetHook replaces the hook (nil removes it).
func (f *Faulty) SetHook(h func(op Op, key string, call int) Fault) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

// Calls returns how many calls of op the store has seen.
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Events returns the faults injected so far, in order.
func (f *Faulty) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.events...)
}

// FailNth returns a hook that injects fault into the nth call (1-based) of op
// and nothing else.
func FailNth(op Op, n int, fault Fault) func(Op, string, int) Fault {
	return func(o Op, _ string, call int) Fault {
		if o == op && call == n {
			return fault
		}
		return FaultPass
	}
}

// FailKey returns a hook that injects fault into every call of op whose key
// satisfies match, and nothing else.
func FailKey(op Op, match func(key string) bool, fault Fault) func(Op, string, int) Fault {
	return func(o Op, key string, _ int) Fault {
		if o == op && match(key) {
			return fault
		}
		return FaultPass
	}
}

// decide draws the fate of one call. It always draws the same number of
// random values, so that a hook or a rate change for one operation does not
// shift the faults of the others.
func (f *Faulty) decide(op Op, key string) (Fault, int, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	call := f.calls[op]
	uErr, uLost, uLat := f.rng.Float64(), f.rng.Float64(), f.rng.Float64()
	r, ok := f.cfg.PerOp[op]
	if !ok {
		r = f.cfg.Default
	}
	fault := FaultNone
	if f.hook != nil {
		fault = f.hook(op, key, call)
	}
	switch fault {
	case FaultPass:
		fault = FaultNone
	case FaultNone:
		if uErr < r.Error {
			fault = FaultError
		} else if uLost < r.LostAck {
			fault = FaultLostAck
		}
	}
	var lat time.Duration
	if r.MaxLatency > 0 {
		lat = r.MinLatency + time.Duration(uLat*float64(r.MaxLatency-r.MinLatency))
	}
	if fault != FaultNone {
		f.events = append(f.events, Event{Op: op, Key: key, Call: call, Fault: fault})
	}
	return fault, call, lat
}

// do runs fn under the fault drawn for (op, key).
func (f *Faulty) do(ctx context.Context, op Op, key string, fn func() error) error {
	fault, call, lat := f.decide(op, key)
	if lat > 0 {
		if err := sleep.Ctx(ctx, lat); err != nil {
			return err
		}
	}
	if fault == FaultError {
		return &InjectedError{Op: op, Key: key, Call: call}
	}
	err := fn()
	if err == nil && fault == FaultLostAck {
		return &InjectedError{Op: op, Key: key, Call: call, LostAck: true}
	}
	return err
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string) (data []byte, err error) {
	err = f.do(ctx, OpGet, key, func() error { data, err = f.inner.Get(ctx, key); return err })
	if err != nil {
		return nil, err
	}
	return data, nil
}

// GetRange implements Store.
func (f *Faulty) GetRange(ctx context.Context, key string, offset, length int64) (data []byte, err error) {
	err = f.do(ctx, OpGetRange, key, func() error { data, err = f.inner.GetRange(ctx, key, offset, length); return err })
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, OpPut, key, func() error { return f.inner.Put(ctx, key, data) })
}

// PutIfAbsent implements Store.
func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, OpPutIfAbsent, key, func() error { return f.inner.PutIfAbsent(ctx, key, data) })
}

// List implements Store. The key of its faults is the prefix.
func (f *Faulty) List(ctx context.Context, prefix string) (infos []ObjectInfo, err error) {
	err = f.do(ctx, OpList, prefix, func() error { infos, err = f.inner.List(ctx, prefix); return err })
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.do(ctx, OpDelete, key, func() error { return f.inner.Delete(ctx, key) })
}

// Head implements Store.
func (f *Faulty) Head(ctx context.Context, key string) (info ObjectInfo, err error) {
	err = f.do(ctx, OpHead, key, func() error { info, err = f.inner.Head(ctx, key); return err })
	if err != nil {
		return ObjectInfo{}, err
	}
	return info, nil
}

// Create implements Store. Faults apply to Create (OpCreate), to each Write
// (OpWrite) and to Close (OpCommit: FaultError aborts the inner writer,
// FaultLostAck commits it and then fails). A lost-ack Create opens the inner
// writer and abandons it, failing the call.
func (f *Faulty) Create(ctx context.Context, key string) (ObjectWriter, error) {
	var w ObjectWriter
	err := f.do(ctx, OpCreate, key, func() (err error) { w, err = f.inner.Create(ctx, key); return err })
	if err != nil {
		if w != nil {
			w.Abort()
		}
		return nil, err
	}
	return &faultyWriter{f: f, ctx: ctx, key: key, w: w}, nil
}

type faultyWriter struct {
	f   *Faulty
	ctx context.Context
	key string
	w   ObjectWriter
}

func (fw *faultyWriter) Write(p []byte) (n int, err error) {
	err = fw.f.do(fw.ctx, OpWrite, fw.key, func() error { n, err = fw.w.Write(p); return err })
	return n, err
}

func (fw *faultyWriter) Close() error {
	err := fw.f.do(fw.ctx, OpCommit, fw.key, fw.w.Close)
	var ie *InjectedError
	if errors.As(err, &ie) && !ie.LostAck {
		fw.w.Abort()
	}
	return err
}

func (fw *faultyWriter) Abort() error { return fw.w.Abort() }

// TearConfig configures a TearingTransport.
type TearConfig struct {
	// Seed seeds the random tears, as FaultConfig.Seed does the faults.
	Seed uint64
	// Rate is the probability that a response body is torn; where it is
	// torn is uniform over its Content-Length.
	Rate float64
	// Hook, if set, is asked first about every response with a body:
	// call is the 1-based count of such responses, size the body's
	// Content-Length (-1: unknown). It returns how many bytes arrive
	// before the tear, or a negative number to let the random tears
	// decide.
	Hook func(r *http.Request, call int, size int64) int64
}

// TearingTransport is an HTTP transport for the cloud drivers (their
// Transport option) that tears response bodies mid-way, as a connection
// reset does: the response and its headers arrive, then some of the body,
// then a read fails with ECONNRESET. It is the wire's counterpart of
// Faulty, which fails whole calls: the drivers resume a torn body, and
// what a store's callers see is whether that worked.
type TearingTransport struct {
	inner http.RoundTripper
	cfg   TearConfig

	mu    sync.Mutex
	rng   *rand.Rand
	calls int
	torn  int
}

// NewTearingTransport returns a transport sending requests through inner
// (nil: http.DefaultTransport) and tearing bodies as cfg says.
func NewTearingTransport(inner http.RoundTripper, cfg TearConfig) *TearingTransport {
	if inner == nil {
		inner = http.DefaultTransport
	}
	return &TearingTransport{inner: inner, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
}

// Torn returns how many bodies have been torn so far (whose reader came
// to the tear).
func (t *TearingTransport) Torn() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.torn
}

// RoundTrip implements http.RoundTripper.
func (t *TearingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(r)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody || r.Method == http.MethodHead {
		return resp, err
	}
	size := resp.ContentLength
	t.mu.Lock()
	t.calls++
	u, v := t.rng.Float64(), t.rng.Float64() // always two draws: replayable
	at := int64(-1)
	if t.cfg.Hook != nil {
		at = t.cfg.Hook(r, t.calls, size)
	}
	if at < 0 && size > 0 && u < t.cfg.Rate {
		at = int64(v * float64(size))
	}
	if at >= 0 && (size < 0 || at < size) {
		resp.Body = &tornBody{ReadCloser: resp.Body, t: t, at: at, left: at, size: size}
	}
	t.mu.Unlock()
	return resp, nil
}

// tornBody passes the first at bytes of a body on, then fails.
type tornBody struct {
	io.ReadCloser
	t              *TearingTransport
	at, left, size int64
	counted        bool
}

func (b *tornBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if !b.counted {
			b.counted = true
			b.t.mu.Lock()
			b.t.torn++
			b.t.mu.Unlock()
		}
		return 0, fmt.Errorf("%w: body torn after %d of %d bytes: %w", ErrInjected, b.at, b.size, syscall.ECONNRESET)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
