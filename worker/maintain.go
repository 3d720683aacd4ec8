package worker

import (
	"context"
	"net/http"

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
	if err := s.maint.Flush(r.Context(), st); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.FlushResponse{Flushed: true})
}

func (s *Server) merge(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	res, err := s.maint.MergeNow(r.Context(), st, "api")
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
	res, cr, err := s.maint.Compact(r.Context(), st, o)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := api.CompactResponse{FragmentsRemoved: res.Removed, FragmentsAdded: res.Added,
		FilesRemoved: res.FilesRemoved, FilesAdded: res.FilesAdded, Version: res.Dataset.Version()}
	if cr != nil {
		out.Cleanup = cleanupResponse(cr)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
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
	if body.Version == 0 {
		// Versions start at 1; {} used to answer 404 "version 0".
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			`version is required: send {"version": N}, a base table version >= 1 (GET .../rollouts/{name} shows the current one)`))
		return
	}
	v, err := st.Checkout(r.Context(), body.Version)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.VersionResponse{Version: v})
}

// RunSweepers runs the worker's periodic upkeep (rollout.Maintainer.Run)
// until ctx ends.
func (s *Server) RunSweepers(ctx context.Context) { s.maint.Run(ctx) }
