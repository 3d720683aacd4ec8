package worker

import (
	"context"
	"net/http"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

func (s *Server) flush(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if err := st.Flush(r.Context()); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	s.seals.Inc()
	s.maybeMerge(st, "count")
	httpapi.WriteJSON(w, http.StatusOK, api.FlushResponse{Flushed: true})
}

func (s *Server) merge(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	res, err := s.mergeNow(r.Context(), st, "api")
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}

func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.CompactRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<20), r.ContentLength, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	o := rollout.CompactOptions{}
	if v := body.TargetRowsPerFragment; v != nil {
		if *v < 1 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "target_rows_per_fragment must be at least 1, got %d", *v))
			return
		}
		o.TargetRows = *v
	}
	if v := body.MaterializeDeletions; v != nil {
		o.KeepDeletions = !*v
	}
	res, err := st.Compact(r.Context(), o)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.CompactResponse{FragmentsRemoved: res.Removed, FragmentsAdded: res.Added,
		FilesRemoved: res.FilesRemoved, FilesAdded: res.FilesAdded, Version: res.Dataset.Version()})
}

func (s *Server) compactStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out, err := st.CompactionStats(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// checkout pins this worker's reads of the store to a base version (time
// travel, as the reference's checkout); the latest version unpins.
func (s *Server) checkout(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.CheckoutRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<20), r.ContentLength, &body); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	v, err := st.Checkout(r.Context(), body.Version)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.VersionResponse{Version: v})
}

func (s *Server) mergeNow(ctx context.Context, st *rollout.Store, trigger string) (*rollout.MergeResult, error) {
	res, err := st.Merge(ctx)
	result := "ok"
	if err != nil {
		result = "error"
	} else {
		s.mergedRows.Add(float64(res.Rows))
	}
	s.merges.WithLabelValues(trigger, result).Inc()
	return res, err
}

// maybeMerge starts a background merge of st's own shard when its pending
// generations reach ROLLOUT_MERGE_AFTER_GENERATIONS (0: never).
func (s *Server) maybeMerge(st *rollout.Store, trigger string) {
	n := s.cfg.MergeAfterGenerations
	if n <= 0 || st.PendingOwn() < n {
		return
	}
	s.mergeMu.Lock()
	if s.merging[st.Name()] {
		s.mergeMu.Unlock()
		return
	}
	s.merging[st.Name()] = true
	s.mergeMu.Unlock()
	go func() {
		defer func() {
			s.mergeMu.Lock()
			delete(s.merging, st.Name())
			s.mergeMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := s.mergeNow(ctx, st, trigger); err != nil {
			s.log.Warn("count-triggered merge failed", "store", st.Name(), "err", err)
		}
	}()
}

// RunSweepers runs the flush and cleanup sweepers until ctx ends.
func (s *Server) RunSweepers(ctx context.Context) {
	var flushC, cleanC <-chan time.Time
	if s.cfg.FlushInterval > 0 {
		t := time.NewTicker(s.cfg.FlushInterval)
		defer t.Stop()
		flushC = t.C
	}
	if s.cfg.CleanupInterval > 0 {
		t := time.NewTicker(s.cfg.CleanupInterval)
		defer t.Stop()
		cleanC = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-flushC:
			for _, st := range s.catalog.Opened() {
				if st.UnflushedRows() == 0 {
					continue
				}
				if err := st.Flush(ctx); err != nil {
					s.log.Warn("flush sweeper", "store", st.Name(), "err", err)
					continue
				}
				s.seals.Inc()
				s.maybeMerge(st, "count")
			}
		case <-cleanC:
			// Cleanup: fold everything this shard holds into the base.
			for _, st := range s.catalog.Opened() {
				for {
					res, err := s.mergeNow(ctx, st, "cleanup")
					if err != nil {
						s.log.Warn("cleanup sweeper", "store", st.Name(), "err", err)
						break
					}
					if res.Remaining == 0 {
						break
					}
				}
			}
		}
	}
}
