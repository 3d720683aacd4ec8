// Package latencyproxy is an HTTP reverse proxy for object-store servers
// (S3, GCS's JSON API, Azure Blob) that adds a fixed latency to every
// request and counts the requests by method and by kind of operation, so
// that a test or a benchmark can say how many requests, and how many
// sequential round trips, an operation of the code above the store costs.
//
// The counts are served as JSON by AdminHandler (GET /__stats; POST
// /__reset zeroes them; POST /__delay?ms=N changes the latency). A test
// can also make the proxy lose the answer to chosen requests after the
// server has carried them out (POST /__lose?op=put_conditional&n=1), the
// lost-acknowledgement case of objstore.Store.PutIfAbsent. It can cut
// the body of chosen answers after some bytes and drop the connection
// (POST /__tear?op=get_range&n=1&after=1000), as a connection reset
// mid-body does.
//
// Besides these one-off orders the proxy injects random faults at set
// rates (SetFaults, POST /__faults): 503 SlowDown answers, connections
// dropped without an answer (before the request reaches the server, or
// after it was carried out), bodies torn at a random byte, and stalls of
// a few seconds before a request is forwarded or in the middle of its
// answer's body. The draws come from a seeded source, so a run's faults
// follow from its seed and the order of its requests.
//
// Kinds of operation (Op):
//
//	get              whole-object read
//	get_range        read with a Range header
//	head             object metadata (HEAD; GCS: GET of the object resource)
//	list             listing (S3 list-type=2 or a GET of the bucket, GCS .../o, Azure comp=list)
//	put              unconditional write
//	put_conditional  write with If-None-Match or If-Match (S3, Azure) or ifGenerationMatch (GCS)
//	multipart        a part of a multipart or resumable upload, its start, commit or abort
//	delete           delete
//	other            anything else (bucket creation, ...)
package latencyproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Op names a kind of object-store request.
type Op string

// The kinds of request the proxy tells apart.
const (
	OpGet            Op = "get"
	OpGetRange       Op = "get_range"
	OpHead           Op = "head"
	OpList           Op = "list"
	OpPut            Op = "put"
	OpPutConditional Op = "put_conditional"
	OpMultipart      Op = "multipart"
	OpDelete         Op = "delete"
	OpOther          Op = "other"
)

// Stats are the counters since the last reset.
type Stats struct {
	Requests    int            `json:"requests"`
	ByMethod    map[string]int `json:"by_method"`
	ByOp        map[Op]int     `json:"by_op"`
	MaxInFlight int            `json:"max_in_flight"`
	// Sequential is the depth of the longest chain of requests each of
	// which started after the previous one was answered: the round trips an
	// operation waited for one after the other.
	Sequential int   `json:"sequential"`
	BytesIn    int64 `json:"bytes_in"`  // request bodies forwarded to the server (Content-Length)
	BytesOut   int64 `json:"bytes_out"` // response bodies returned (Content-Length)
	DelayMS    int64 `json:"delay_ms"`
	Lost       int   `json:"lost"` // answers dropped by /__lose
	Torn       int   `json:"torn"` // bodies cut by /__tear or by the Tear rate
	// Random faults of SetFaults.
	Injected503 int `json:"injected_503"` // answered 503 SlowDown, not forwarded
	Reset       int `json:"reset"`        // connections dropped without an answer
	Stalled     int `json:"stalled"`      // requests or bodies held for StallFor
	// Trace lists the requests since the reset, in the order they ended,
	// while SetTrace(true).
	Trace []TraceEntry `json:"trace,omitempty"`
}

// TraceEntry is one request of a trace (SetTrace): when it started and
// ended (ms since the reset), its depth in the chain of requests that
// waited for one another, its kind, object, range and response bytes.
type TraceEntry struct {
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
	Depth   int     `json:"depth"`
	Op      Op      `json:"op"`
	Key     string  `json:"key"`
	Range   string  `json:"range,omitempty"`
	Bytes   int64   `json:"bytes"`
}

// Faults are the rates of random faults, each a fraction of the requests
// of the kinds in Ops (all kinds when Ops is empty). One request gets at
// most one fault; the rates are tried in the order of the fields.
type Faults struct {
	Seed uint64 `json:"seed"`
	// Error503 answers 503 SlowDown (S3's XML error) without forwarding.
	Error503 float64 `json:"error_503"`
	// Reset drops the connection without an answer: half of them before
	// the request is forwarded (the server never sees it whole), half after
	// the server carried it out (the acknowledgement is lost).
	Reset float64 `json:"reset"`
	// Tear cuts the answer's body at a random byte and drops the
	// connection. Answers without a body pass whole.
	Tear float64 `json:"tear"`
	// Stall holds the request for StallFor before forwarding it or, for
	// half of them, after a part of its answer's body.
	Stall    float64       `json:"stall"`
	StallFor time.Duration `json:"stall_for"`
	Ops      []Op          `json:"ops,omitempty"`
}

// fault is what one request draws.
type fault int

const (
	faultNone fault = iota
	fault503
	faultResetBefore
	faultResetAfter
	faultTear
	faultStallBefore
	faultStallBody
)

// Proxy is the reverse proxy. It is an http.Handler; serve it on the
// address the clients use as their endpoint.
type Proxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy

	mu       sync.Mutex
	delay    time.Duration
	stats    Stats
	inFlight int
	doneMax  int
	period   int        // incremented by each reset
	total    int        // requests ever received, never reset
	lose     map[Op]int // answers still to drop, per op
	tear     map[Op]tear
	faults   Faults
	rng      *rand.Rand // draws of faults; nil when no rate is set
	tracing  bool
	resetAt  time.Time
}

// tear is a /__tear order: cut the next n bodies of an op after after bytes.
type tear struct {
	n     int
	after int64
}

// New returns a proxy to target (scheme://host:port) that delays every
// request by delay before forwarding it.
func New(target *url.URL, delay time.Duration) *Proxy {
	p := &Proxy{target: target, delay: delay, lose: map[Op]int{}, tear: map[Op]tear{}}
	p.resetLocked()
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// Keep the Host the client signed (S3 SigV4 covers it).
			r.Out.Host = r.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			// Resumable-upload sessions (GCS) name the server: keep the
			// client on the proxy.
			if loc := resp.Header.Get("Location"); loc != "" {
				if u, err := url.Parse(loc); err == nil && u.Host == target.Host {
					u.Scheme, u.Host = "http", resp.Request.Host
					resp.Header.Set("Location", u.String())
				}
			}
			return nil
		},
		FlushInterval: -1,
	}
	return p
}

// resetLocked zeroes the counters. Requests in flight count as in flight,
// but their depth does not count toward the new period.
func (p *Proxy) resetLocked() {
	p.stats = Stats{ByMethod: map[string]int{}, ByOp: map[Op]int{}, DelayMS: p.delay.Milliseconds(), MaxInFlight: p.inFlight}
	p.doneMax = 0
	p.period++
	p.resetAt = time.Now()
}

// SetTrace turns the trace of requests (Stats.Trace) on or off.
func (p *Proxy) SetTrace(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tracing = on
}

// WaitIdle waits until no request has arrived or been in flight for quiet,
// or ctx ends, so that a client's background requests are counted with
// the operation that caused them rather than the next one.
func (p *Proxy) WaitIdle(ctx context.Context, quiet time.Duration) error {
	for {
		p.mu.Lock()
		before, busy := p.total, p.inFlight > 0
		p.mu.Unlock()
		t := time.NewTimer(quiet)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		p.mu.Lock()
		idle := !busy && p.inFlight == 0 && p.total == before
		p.mu.Unlock()
		if idle {
			return nil
		}
	}
}

// SetErrorLog sets where the proxy logs failed forwards (a client that
// went away, a server that did not answer); the default is the log
// package's standard logger. Call it before serving.
func (p *Proxy) SetErrorLog(l *log.Logger) { p.rp.ErrorLog = l }

// Reset zeroes the counters.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
}

// SetDelay changes the latency added to each request.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
	p.stats.DelayMS = d.Milliseconds()
}

// Lose makes the proxy drop the answers of the next n requests of kind op
// after the server has carried them out, answering 503 instead.
func (p *Proxy) Lose(op Op, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose[op] = n
}

// Tear makes the proxy cut the response bodies of the next n requests of
// kind op after after bytes and drop their connections, as a connection
// reset mid-body does: the client has the headers (with the
// Content-Length the server sent) and after bytes, then the connection
// ends. A body no
// longer than after arrives whole (and uses up one of the n).
func (p *Proxy) Tear(op Op, n int, after int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tear[op] = tear{n: n, after: after}
}

// SetFaults sets the rates of random faults; the zero Faults turns them
// off. The draws restart from f.Seed.
func (p *Proxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	p.rng = nil
	if f.Error503 > 0 || f.Reset > 0 || f.Tear > 0 || f.Stall > 0 {
		p.rng = rand.New(rand.NewPCG(f.Seed, 0x9e3779b97f4a7c15))
	}
}

// Faults returns the rates SetFaults set.
func (p *Proxy) Faults() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// drawLocked picks the random fault of one request of kind op.
func (p *Proxy) drawLocked(op Op) fault {
	f := p.faults
	if p.rng == nil || (len(f.Ops) > 0 && !slices.Contains(f.Ops, op)) {
		return faultNone
	}
	x := p.rng.Float64()
	half := p.rng.IntN(2) == 0
	switch {
	case x < f.Error503:
		return fault503
	case x < f.Error503+f.Reset:
		if half {
			return faultResetBefore
		}
		return faultResetAfter
	case x < f.Error503+f.Reset+f.Tear:
		return faultTear
	case x < f.Error503+f.Reset+f.Tear+f.Stall && f.StallFor > 0:
		if half {
			return faultStallBefore
		}
		return faultStallBody
	}
	return faultNone
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.ByMethod = make(map[string]int, len(p.stats.ByMethod))
	for k, v := range p.stats.ByMethod {
		s.ByMethod[k] = v
	}
	s.ByOp = make(map[Op]int, len(p.stats.ByOp))
	for k, v := range p.stats.ByOp {
		s.ByOp[k] = v
	}
	s.Trace = slices.Clone(p.stats.Trace)
	return s
}

// Classify tells what kind of object-store request r is.
func Classify(r *http.Request) Op {
	q := r.URL.Query()
	path := strings.Trim(r.URL.Path, "/")
	gcs := strings.HasPrefix(path, "storage/v1/") || strings.HasPrefix(path, "upload/storage/v1/")
	switch r.Method {
	case http.MethodHead:
		return OpHead
	case http.MethodGet:
		switch {
		case q.Get("comp") == "list" || q.Has("list-type") || q.Has("uploads"):
			return OpList
		case gcs && strings.HasSuffix(path, "/o"):
			return OpList
		case gcs && q.Get("alt") != "media":
			return OpHead // object resource: its metadata
		case !gcs && !strings.Contains(path, "/") && q.Get("restype") != "":
			return OpOther // Azure container properties
		case !gcs && !strings.Contains(path, "/"):
			return OpList // S3 ListObjects (v1) on the bucket
		case r.Header.Get("Range") != "" || r.Header.Get("X-Ms-Range") != "":
			return OpGetRange
		}
		return OpGet
	case http.MethodPut, http.MethodPost:
		switch {
		case q.Has("uploadId") || q.Has("uploads") || q.Has("partNumber"):
			return OpMultipart // S3 multipart
		case q.Get("comp") == "block" || q.Get("comp") == "blocklist":
			return OpMultipart // Azure staged blocks
		case gcs && (q.Get("uploadType") == "resumable" || q.Has("upload_id")):
			return OpMultipart
		case gcs && !strings.HasPrefix(path, "upload/"):
			return OpOther // bucket creation and the like
		case q.Get("restype") == "container":
			return OpOther
		case r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != "" || q.Has("ifGenerationMatch"):
			return OpPutConditional
		}
		return OpPut
	case http.MethodDelete:
		if q.Has("uploadId") {
			return OpMultipart
		}
		return OpDelete
	}
	return OpOther
}

// ServeHTTP counts r, waits the latency and forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := Classify(r)
	began := time.Now()
	var cw *countingWriter
	p.mu.Lock()
	p.total++
	period := p.period
	p.stats.Requests++
	p.stats.ByMethod[r.Method]++
	p.stats.ByOp[op]++
	if r.ContentLength > 0 {
		p.stats.BytesIn += r.ContentLength
	}
	p.inFlight++
	p.stats.MaxInFlight = max(p.stats.MaxInFlight, p.inFlight)
	depth := p.doneMax + 1
	p.stats.Sequential = max(p.stats.Sequential, depth)
	delay := p.delay
	lose := p.lose[op] > 0
	if lose {
		p.lose[op]--
		p.stats.Lost++
	}
	cut := int64(-1)
	if tr := p.tear[op]; tr.n > 0 && !lose {
		cut = tr.after
		tr.n--
		p.tear[op] = tr
	}
	var fl fault
	var stallFor time.Duration
	var frac float64 // where a random tear or body stall falls, as a fraction of the body
	if !lose && cut < 0 {
		fl = p.drawLocked(op)
		stallFor = p.faults.StallFor
		if fl == faultTear || fl == faultStallBody {
			frac = p.rng.Float64()
		}
	}
	switch fl {
	case fault503:
		p.stats.Injected503++
	case faultResetBefore, faultResetAfter:
		p.stats.Reset++
	case faultStallBefore:
		p.stats.Stalled++ // a body stall counts when it happens
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		if period == p.period {
			p.doneMax = max(p.doneMax, depth)
			if p.tracing {
				e := TraceEntry{StartMS: ms(began.Sub(p.resetAt)), EndMS: ms(time.Since(p.resetAt)), Depth: depth, Op: op,
					Key: r.URL.Path, Range: r.Header.Get("Range")}
				if op == OpList {
					e.Key += "?prefix=" + r.URL.Query().Get("prefix") // what was listed
				}
				if cw != nil {
					e.Bytes = cw.n
				}
				p.stats.Trace = append(p.stats.Trace, e)
			}
		}
		p.mu.Unlock()
	}()

	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if lose {
		// Carry the request out, then answer as if the reply had been lost.
		rec := &discardWriter{h: http.Header{}}
		p.rp.ServeHTTP(rec, r)
		http.Error(w, "latencyproxy: answer dropped on purpose (the request was carried out)", http.StatusServiceUnavailable)
		return
	}
	switch fl {
	case fault503:
		// Read the body first, as a server does before it answers: a
		// client still sending would see a reset instead of the 503.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>latencyproxy: injected 503</Message><RequestId>lp-%d</RequestId></Error>", time.Now().UnixNano())
		return
	case faultResetBefore:
		// Take part of the body, then drop the connection: the server
		// never sees the request.
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		panic(http.ErrAbortHandler)
	case faultResetAfter:
		p.rp.ServeHTTP(&discardWriter{h: http.Header{}}, r)
		panic(http.ErrAbortHandler)
	case faultStallBefore:
		if !sleepCtx(r.Context(), stallFor) {
			return
		}
	case faultTear:
		w = &tearingWriter{ResponseWriter: w, left: -1, frac: frac, p: p}
	case faultStallBody:
		w = &stallingWriter{ResponseWriter: w, left: -1, frac: frac, stall: stallFor, ctx: r.Context(), p: p}
	}
	if cut >= 0 {
		w = &tearingWriter{ResponseWriter: w, left: cut, p: p}
	}
	cw = &countingWriter{ResponseWriter: w, p: p}
	p.rp.ServeHTTP(cw, r)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bodyPoint is where a fault falls in a body of the length the server
// declared: frac of it, or of 64 KiB when it declared none.
func bodyPoint(h http.Header, frac float64) int64 {
	n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		n = 64 << 10
	}
	return int64(frac * float64(n))
}

// errTorn ends a response body cut on purpose. The reverse proxy answers
// a failed write by aborting the handler (http.ErrAbortHandler), and the
// server then drops the connection without finishing the response.
var errTorn = errors.New("latencyproxy: body cut on purpose")

// tearingWriter passes left bytes of the body on, flushes them to the
// client, and fails the write that would pass more.
type tearingWriter struct {
	http.ResponseWriter
	left int64   // < 0: not known yet, frac of the declared length
	frac float64 // the cut as a fraction of the body, when left < 0
	p    *Proxy
}

func (t *tearingWriter) Write(b []byte) (int, error) {
	if t.left < 0 {
		t.left = bodyPoint(t.Header(), t.frac)
	}
	if int64(len(b)) <= t.left {
		n, err := t.ResponseWriter.Write(b)
		t.left -= int64(n)
		return n, err
	}
	n, _ := t.ResponseWriter.Write(b[:t.left])
	t.left = 0
	t.Flush()
	t.p.mu.Lock()
	t.p.stats.Torn++
	t.p.mu.Unlock()
	return n, errTorn
}

func (t *tearingWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// stallingWriter passes left bytes of the body on and flushes them, then
// holds the rest for stall: a server that stops sending mid-body.
type stallingWriter struct {
	http.ResponseWriter
	left    int64   // < 0: not known yet
	frac    float64 // the stall's place in the body, when left < 0
	stall   time.Duration
	ctx     context.Context
	stalled bool
	p       *Proxy
}

func (s *stallingWriter) Write(b []byte) (int, error) {
	if s.left < 0 {
		s.left = bodyPoint(s.Header(), s.frac)
	}
	if s.stalled || int64(len(b)) <= s.left {
		n, err := s.ResponseWriter.Write(b)
		s.left -= int64(n)
		return n, err
	}
	n, err := s.ResponseWriter.Write(b[:s.left])
	if err != nil {
		return n, err
	}
	s.Flush()
	s.stalled = true
	s.p.mu.Lock()
	s.p.stats.Stalled++
	s.p.mu.Unlock()
	if !sleepCtx(s.ctx, s.stall) {
		return n, s.ctx.Err()
	}
	m, err := s.ResponseWriter.Write(b[s.left:])
	return n + m, err
}

func (s *stallingWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// countingWriter counts a response's bytes as they are written, before
// they can reach the client: counted when the handler returned, a client
// that had read the whole body could read the stats without them.
type countingWriter struct {
	http.ResponseWriter
	p *Proxy
	n int64 // this response's bytes
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.p.mu.Lock()
	c.n += int64(n)
	c.p.stats.BytesOut += int64(n)
	c.p.mu.Unlock()
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

var validOps = map[Op]bool{OpGet: true, OpGetRange: true, OpHead: true, OpList: true, OpPut: true,
	OpPutConditional: true, OpMultipart: true, OpDelete: true, OpOther: true}

// AdminHandler serves the counters and controls:
//
//	GET  /__stats               the Stats as JSON
//	POST /__reset               zero the counters (answers the Stats before)
//	POST /__delay?ms=N          set the latency to N ms
//	POST /__lose?op=OP&n=N      drop the answers of the next N requests of kind OP
//	POST /__tear?op=OP&n=N&after=B  cut the bodies of the next N requests of kind OP after B bytes
//	GET  /__faults              the random faults' rates (Faults as JSON)
//	POST /__faults?error_503=R&reset=R&tear=R&stall=R&stall_ms=N&seed=S&ops=OP,OP
//	                            set them (ParseFaults); no parameters turn them off
func (p *Proxy) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /__stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, p.Stats()) })
	mux.HandleFunc("POST /__reset", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		before := p.stats
		p.resetLocked()
		p.mu.Unlock()
		writeJSON(w, before)
	})
	mux.HandleFunc("POST /__delay", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.ParseFloat(r.URL.Query().Get("ms"), 64)
		if err != nil || ms < 0 {
			http.Error(w, "latencyproxy: want ?ms=N with N >= 0 (milliseconds)", http.StatusBadRequest)
			return
		}
		p.SetDelay(time.Duration(ms * float64(time.Millisecond)))
		writeJSON(w, p.Stats())
	})
	valid := validOps
	mux.HandleFunc("POST /__lose", func(w http.ResponseWriter, r *http.Request) {
		op := Op(r.URL.Query().Get("op"))
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 || !valid[op] {
			http.Error(w, "latencyproxy: want ?op=KIND&n=N (KIND: get, get_range, head, list, put, put_conditional, multipart, delete, other)", http.StatusBadRequest)
			return
		}
		p.Lose(op, n)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /__tear", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		op := Op(q.Get("op"))
		n, err := strconv.Atoi(q.Get("n"))
		after, aerr := strconv.ParseInt(q.Get("after"), 10, 64)
		if err != nil || aerr != nil || n < 0 || after < 0 || !valid[op] {
			http.Error(w, "latencyproxy: want ?op=KIND&n=N&after=BYTES (KIND as for /__lose)", http.StatusBadRequest)
			return
		}
		p.Tear(op, n, after)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /__faults", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, p.Faults()) })
	mux.HandleFunc("POST /__faults", func(w http.ResponseWriter, r *http.Request) {
		f, err := ParseFaults(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.SetFaults(f)
		writeJSON(w, f)
	})
	return mux
}

// ParseFaults reads the parameters of POST /__faults: error_503, reset,
// tear and stall (fractions of requests, 0..1), stall_ms, seed, and ops
// (kinds, comma-separated). Missing parameters are zero: no parameters
// turn the faults off.
func ParseFaults(q url.Values) (Faults, error) {
	var f Faults
	rates := []struct {
		name string
		v    *float64
	}{{"error_503", &f.Error503}, {"reset", &f.Reset}, {"tear", &f.Tear}, {"stall", &f.Stall}}
	sum := 0.0
	for _, r := range rates {
		if v := q.Get(r.name); v != "" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x > 1 {
				return Faults{}, fmt.Errorf("latencyproxy: %s=%q: want a fraction of requests between 0 and 1", r.name, v)
			}
			*r.v = x
			sum += x
		}
	}
	if sum > 1 {
		return Faults{}, fmt.Errorf("latencyproxy: the fault rates add up to %g; at most 1", sum)
	}
	if v := q.Get("stall_ms"); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 {
			return Faults{}, fmt.Errorf("latencyproxy: stall_ms=%q: want milliseconds >= 0", v)
		}
		f.StallFor = time.Duration(ms * float64(time.Millisecond))
	}
	if f.Stall > 0 && f.StallFor == 0 {
		return Faults{}, errors.New("latencyproxy: stall needs stall_ms")
	}
	if v := q.Get("seed"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Faults{}, fmt.Errorf("latencyproxy: seed=%q: want an unsigned integer", v)
		}
		f.Seed = seed
	}
	if v := q.Get("ops"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if !validOps[Op(o)] {
				return Faults{}, fmt.Errorf("latencyproxy: ops: unknown kind %q (get, get_range, head, list, put, put_conditional, multipart, delete, other)", o)
			}
			f.Ops = append(f.Ops, Op(o))
		}
	}
	return f, nil
}

// Serve runs the proxy on listen and the admin handler on admin until ctx
// ends.
func (p *Proxy) Serve(ctx context.Context, listen, admin string) error {
	srv := &http.Server{Addr: listen, Handler: p, ReadHeaderTimeout: 10 * time.Second}
	adm := &http.Server{Addr: admin, Handler: p.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.ListenAndServe() }()
	go func() { errc <- adm.ListenAndServe() }()
	select {
	case err := <-errc:
		srv.Close()
		adm.Close()
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		adm.Shutdown(sctx)
		return nil
	}
}
