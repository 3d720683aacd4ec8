package worker

import (
	"net/http"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/rollout"
)

// maxLeaseTTL bounds a lease: one forgotten by its holder keeps a version
// (and its files) for at most this long.
const maxLeaseTTL = 7 * 24 * time.Hour

func cleanupResponse(r *rollout.CleanupResult) *api.CleanupResponse {
	return &api.CleanupResponse{VersionsRemoved: r.VersionsRemoved, FilesRemoved: r.FilesRemoved, BytesRemoved: r.BytesRemoved,
		VersionsKept: r.VersionsKept, LatestVersion: r.Latest, OldestKeptVersion: r.OldestKept, LeasesExpired: r.LeasesExpired,
		HeldVersions: r.HeldVersions, TaggedVersions: r.TaggedVersion}
}

// cleanup removes old base versions: POST .../cleanup {older_than_seconds}.
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.CleanupRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<16), r.ContentLength, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	o := s.cfg.Retention
	if v := body.OlderThanSeconds; v != nil {
		if *v < 0 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "older_than_seconds must be 0 or more, got %d", *v))
			return
		}
		o.OlderThan = time.Duration(*v) * time.Second
	}
	if v := body.ReadGraceSeconds; v != nil {
		if *v < 0 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "read_grace_seconds must be 0 or more, got %d", *v))
			return
		}
		g := time.Duration(*v) * time.Second
		o.ReadGrace = &g
	}
	o.DeleteUnverified = body.DeleteUnverified
	res, err := st.Cleanup(r.Context(), o)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, cleanupResponse(res))
}

func wireTag(t table.Tag) api.Tag {
	return api.Tag{Name: t.Name, Version: t.Version, ManifestSize: t.ManifestSize}
}

func (s *Server) listTags(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	tags, err := st.Tags(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := api.TagsResponse{Tags: make([]api.Tag, len(tags))}
	for i, t := range tags {
		out.Tags[i] = wireTag(t)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) createTag(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.TagRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<16), r.ContentLength, &body); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	t, err := st.CreateTag(r.Context(), body.Name, body.Version)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, wireTag(*t))
}

func (s *Server) getTag(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	name := httpapi.PathParam(r, "tag")
	tags, err := st.Tags(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	for _, t := range tags {
		if t.Name == name {
			httpapi.WriteJSON(w, http.StatusOK, wireTag(t))
			return
		}
	}
	httpapi.WriteError(w, r, httpapi.Errorf(http.StatusNotFound, api.CodeNotFound, "tag %q of store %s not found", name, st.Name()))
}

func (s *Server) deleteTag(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if err := st.DeleteTag(r.Context(), httpapi.PathParam(r, "tag")); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// leaseTTL reads a lease request's time to live (default an hour).
func leaseTTL(secs int64) (time.Duration, error) {
	switch {
	case secs == 0:
		return time.Hour, nil
	case secs < 0 || time.Duration(secs)*time.Second > maxLeaseTTL:
		return 0, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "ttl_seconds must be between 1 and %d, got %d", int64(maxLeaseTTL/time.Second), secs)
	}
	return time.Duration(secs) * time.Second, nil
}

func (s *Server) takeLease(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.LeaseRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<16), r.ContentLength, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	ttl, err := leaseTTL(body.TTLSeconds)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if len(body.Holder) > 256 {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "holder is %d bytes; at most 256", len(body.Holder)))
		return
	}
	l, err := st.TakeLease(r.Context(), body.Version, ttl, body.Holder)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, l)
}

func (s *Server) listLeases(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	ls, err := st.Leases(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if ls == nil {
		ls = []rollout.Lease{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.LeasesResponse{Leases: ls})
}

func (s *Server) getLease(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	l, err := st.Lease(r.Context(), httpapi.PathParam(r, "lease"))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, l)
}

func (s *Server) renewLease(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.LeaseRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<16), r.ContentLength, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
	}
	ttl, err := leaseTTL(body.TTLSeconds)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	l, err := st.RenewLease(r.Context(), httpapi.PathParam(r, "lease"), ttl)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, l)
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if err := st.ReleaseLease(r.Context(), httpapi.PathParam(r, "lease")); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
