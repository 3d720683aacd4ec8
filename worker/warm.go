package worker

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// The start-up warm and readiness. A worker that has just started would
// serve its first thousands of reads from cold caches (index pages, data
// file metadata, offsets, pending generations), each read pulling in what
// it touched. At start it warms every store of the catalog instead
// (rollout.Store.Warm), one at a time, in the background, and /readyz
// answers 503 with Retry-After and what is warming until that is done or
// Config.ReadyWarmWait has passed, so that a load balancer sends learners
// to it once it serves them warm. Reads are served during the warm all the
// same (never refused); /api/v1/health, /healthz and /livez stay liveness.

// On an object store the wait is for the open part of each store's warm
// (rollout.Store.WarmOpen: metadata, a few MB); the rest (its data read
// ahead: offsets buffers and index pages, 584 MB at 10M rows on S3) runs
// after, in the background, so that a worker is ready after a handful of
// round trips, not a download of its stores. On local disk, where that
// rest is page-cache reads, readiness waits for all of it
// (Config.ReadyWarm says otherwise).

// readyRetryAfter is the Retry-After of /readyz while the worker warms.
const readyRetryAfter = 1

// warmState is the start-up warm as /readyz reports it. The zero value is
// a worker with no warm to wait for: ready.
type warmState struct {
	mu       sync.Mutex
	waiting  bool          // a warm began and /readyz waits for it
	began    time.Time     // when it began
	wait     time.Duration // the longest /readyz waits for it
	done     bool          // it ended (every store warmed, or given up)
	warming  string        // the store being warmed now
	left     []string      // the stores not warmed yet, in order
	warmed   int           // stores warmed
	skipped  int           // stores past Config.WarmMaxStores, not warmed
	failed   map[string]string
	listErr  string // the catalog could not be listed
	finished time.Duration
	after    []string         // stores whose data warm runs after readiness
	now      func() time.Time // nil: time.Now (tests set it)
}

func (w *warmState) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// readiness is /readyz's answer.
type readiness struct {
	Status    string            `json:"status"` // "warming" or "ready"
	Warm      string            `json:"warm"`   // "none", "running", "done", or "timed_out" (ready; the warm goes on)
	Warming   string            `json:"warming,omitempty"`
	Waiting   []string          `json:"waiting,omitempty"`
	Warmed    int               `json:"warmed_stores"`
	Skipped   int               `json:"skipped_stores,omitempty"` // past LC_WARM_MAX_STORES
	Failed    map[string]string `json:"failed,omitempty"`
	After     []string          `json:"warming_after_ready,omitempty"` // stores whose data warm runs now, after readiness
	ElapsedMS int64             `json:"elapsed_ms"`
	WaitMS    int64             `json:"wait_ms,omitempty"` // the longest readiness waits for the warm
	Error     string            `json:"error,omitempty"`
}

// StartupWarm marks the worker not ready until the warm it returns has
// run, or cfg.ReadyWarmWait has passed since this call (0: ready at once;
// the warm still runs), and returns that warm: run it in the background
// once the worker serves (after Catalog.Recover, so that it warms the
// rows the recovery made readable). Call it before the listener accepts,
// so that no probe finds the worker ready before the warm began.
func (s *Server) StartupWarm() func(context.Context) {
	w := &s.warm
	w.mu.Lock()
	w.waiting, w.began, w.wait = s.cfg.ReadyWarmWait > 0, w.clock(), s.cfg.ReadyWarmWait
	w.mu.Unlock()
	return s.warmStores
}

// warmStores warms every store of the catalog, one at a time (the warm of
// one store already reads in parallel, and its index prewarm takes half a
// CPU: more at once would take the CPU from the reads it serves). Where
// readiness waits only for each store's open part (metadata, on an object
// store: round trips, not CPU), warmOpenParallel stores open at once, and
// their data warms follow one at a time.
func (s *Server) warmStores(ctx context.Context) {
	w := &s.warm
	names, err := s.catalog.List(ctx)
	w.mu.Lock()
	w.left = slices.Clone(names)
	if err != nil {
		w.listErr = err.Error()
	}
	w.mu.Unlock()
	ended := false
	end := func() { // readiness: the warm it waits for is over
		if ended {
			return
		}
		ended = true
		w.mu.Lock()
		w.done, w.warming, w.finished = true, "", w.clock().Sub(w.began)
		w.mu.Unlock()
	}
	defer end()
	if err != nil {
		s.log.Warn("start-up warm: listing the stores failed; reads warm the caches", "err", err)
		return
	}
	if skip := len(names) - max(s.cfg.WarmMaxStores, 0); skip > 0 {
		s.log.Info("start-up warm: more stores than LC_WARM_MAX_STORES; the rest warm as they are read", "stores", len(names), "skipped", skip)
		names = names[:len(names)-skip]
		w.mu.Lock()
		w.left, w.skipped = slices.Clone(names), skip
		w.mu.Unlock()
	}
	par := 1
	if s.openFirst() {
		par = warmOpenParallel
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		w.mu.Lock()
		w.warming, w.left = name, w.left[1:]
		w.mu.Unlock()
		wg.Go(func() {
			defer func() { <-sem }()
			s.warmOne(ctx, name)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	warmed, after := w.warmed, slices.Clone(w.after)
	w.mu.Unlock()
	s.log.Info("start-up warm done", "stores", len(names), "warmed", warmed, "elapsed", w.clock().Sub(w.began), "data_warm_after", len(after))
	end()
	for _, name := range after {
		if ctx.Err() != nil {
			return
		}
		st, _, err := s.warmStore(ctx, name, true)
		w.mu.Lock()
		w.after = w.after[1:]
		w.mu.Unlock()
		if err != nil {
			s.log.Warn("data warm of a store failed; its reads warm the caches", "store", name, "err", err)
			continue
		}
		s.log.Info("store data warmed", "store", name, "elapsed", st.Elapsed)
	}
}

// warmOpenParallel is how many stores the start-up warm opens at once
// where readiness waits only for their open part.
const warmOpenParallel = 8

// warmOne runs the start-up warm of store name and records its outcome.
func (s *Server) warmOne(ctx context.Context, name string) {
	w := &s.warm
	st, rest, err := s.warmStore(ctx, name, false)
	w.mu.Lock()
	if rest && err == nil {
		w.after = append(w.after, name)
	}
	if err != nil {
		if w.failed == nil {
			w.failed = map[string]string{}
		}
		w.failed[name] = err.Error()
	} else {
		w.warmed++
	}
	w.mu.Unlock()
	if err != nil {
		s.log.Warn("start-up warm of a store failed; its reads warm the caches", "store", name, "err", err)
		return
	}
	s.log.Info("store warmed", "store", name, "base_version", st.BaseVersion, "fragments", st.Fragments,
		"indexes", st.Indexes, "pending_generations", st.Generations, "elapsed", st.Elapsed)
}

// warmStore warms one store: all of it with deep, or, where readiness
// waits only for that (an object store, Config.ReadyWarm), its open part,
// and then rest says its data warm is left. Opened for the warm, not held:
// an idle store may close afterwards (as Catalog.Recover opens them).
func (s *Server) warmStore(ctx context.Context, name string, deep bool) (st rollout.WarmStats, rest bool, err error) {
	if s.warmHook != nil {
		st, err := s.warmHook(ctx, name, deep)
		return st, !deep && s.cfg.ReadyWarm == ReadyWarmOpen, err
	}
	store, err := s.catalog.Open(context.WithoutCancel(ctx), name)
	if err != nil {
		return rollout.WarmStats{}, false, err
	}
	if deep || !s.openFirst() {
		st, err = store.Warm(ctx)
		return st, false, err
	}
	st, err = store.WarmOpen(ctx)
	return st, true, err
}

// openFirst reports whether readiness waits only for the open part of
// each store's warm (Config.ReadyWarm; auto: where the stores are on an
// object store).
func (s *Server) openFirst() bool {
	switch s.cfg.ReadyWarm {
	case ReadyWarmOpen:
		return true
	case ReadyWarmAuto:
		return !s.catalog.Local()
	}
	return false
}

// ready answers /readyz: 503 with Retry-After while the start-up warm
// runs (for at most Config.ReadyWarmWait), 200 after; the body says what
// is warming.
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	st := &s.warm
	st.mu.Lock()
	body := readiness{Status: "ready", Warm: "none", Warming: st.warming, Warmed: st.warmed, Skipped: st.skipped, Failed: maps.Clone(st.failed), Error: st.listErr}
	if !st.began.IsZero() {
		body.Warm = "running"
		body.ElapsedMS = st.clock().Sub(st.began).Milliseconds()
		body.WaitMS = st.wait.Milliseconds()
	}
	if !st.done {
		body.Waiting = slices.Clone(st.left)
	}
	body.After = slices.Clone(st.after)
	notReady := false
	switch {
	case st.done:
		body.Warm, body.ElapsedMS = "done", st.finished.Milliseconds()
	case st.waiting && st.clock().Sub(st.began) >= st.wait:
		body.Warm = "timed_out"
	case st.waiting:
		body.Status, notReady = "warming", true
	}
	st.mu.Unlock()
	if notReady {
		w.Header().Set("Retry-After", strconv.Itoa(readyRetryAfter))
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, body)
}
