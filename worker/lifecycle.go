package worker

import (
	"net/http"
	"strings"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/rollout"
)

// maxLeaseTTL bounds a lease: one forgotten by its holder keeps a version
// (and its files) for at most this long.
const maxLeaseTTL = 7 * 24 * time.Hour

// storeFor resolves the request's store and, when body is not nil,
// decodes the JSON body into it (an empty body leaves it zero unless
// required). On failure it writes the error and returns nil.
func (s *Server) storeFor(w http.ResponseWriter, r *http.Request, body any, required bool) *rollout.Store {
	st, err := s.store(r)
	if err == nil && body != nil && (required || r.ContentLength != 0) {
		err = decodeJSON(http.MaxBytesReader(w, r.Body, 1<<16), r.ContentLength, body)
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return nil
	}
	return st
}

// writeResult writes v with status, or err.
func writeResult(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	httpapi.WriteJSON(w, status, v)
}

func cleanupResponse(r *rollout.CleanupResult) *api.CleanupResponse {
	return &api.CleanupResponse{VersionsRemoved: r.VersionsRemoved, FilesRemoved: r.FilesRemoved, BytesRemoved: r.BytesRemoved,
		VersionsKept: r.VersionsKept, LatestVersion: r.Latest, OldestKeptVersion: r.OldestKept, LeasesExpired: r.LeasesExpired, RowsExpired: r.RowsExpired,
		HeldVersions: r.HeldVersions, TaggedVersions: r.TaggedVersion, BlobsRemoved: r.BlobsRemoved, BlobBytesRemoved: r.BlobBytesRemoved}
}

// cleanup removes old base versions: POST .../cleanup {older_than_seconds}.
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request) {
	var body api.CleanupRequest
	st := s.storeFor(w, r, &body, false)
	if st == nil {
		return
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
	if v := body.BlobGraceSeconds; v != nil {
		if *v < 0 {
			httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "blob_grace_seconds must be 0 or more, got %d", *v))
			return
		}
		g := time.Duration(*v) * time.Second
		o.BlobGrace = &g
	}
	o.DeleteUnverified = body.DeleteUnverified
	res, err := rollout.CleanupWith(r.Context(), st, o)
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
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	tags, err := st.Tags(r.Context())
	out := api.TagsResponse{Tags: make([]api.Tag, len(tags))}
	for i, t := range tags {
		out.Tags[i] = wireTag(t)
	}
	writeResult(w, r, http.StatusOK, out, err)
}

func (s *Server) createTag(w http.ResponseWriter, r *http.Request) {
	var body api.TagRequest
	st := s.storeFor(w, r, &body, true)
	if st == nil {
		return
	}
	if err := userTag(body.Name, st.Name(), false); err != nil {
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
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	t, err := st.Tag(r.Context(), httpapi.PathParam(r, "tag"))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireTag(*t))
}

func (s *Server) deleteTag(w http.ResponseWriter, r *http.Request) {
	if st := s.storeFor(w, r, nil, false); st != nil {
		tag := httpapi.PathParam(r, "tag")
		if err := userTag(tag, st.Name(), true); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		writeResult(w, r, http.StatusNoContent, nil, st.DeleteTag(r.Context(), tag))
	}
}

// userTag refuses, on the tags routes, a tag name in the snapshots'
// reserved space (api.SnapshotTagPrefix): a user's tag there would be
// deleted by the next cleanup as an expired snapshot's, and deleting a
// snapshot's tag would leave its lease keeping a version nothing names.
func userTag(name, store string, deleting bool) error {
	id, ok := strings.CutPrefix(name, api.SnapshotTagPrefix)
	if !ok {
		return nil
	}
	if deleting {
		return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			"tag %s is snapshot %s's (names starting with %q are reserved for snapshots): release the snapshot instead, "+
				"DELETE /api/v1/rollouts/%s/snapshots/%s (lance-context snapshot release %s %s)", name, id, api.SnapshotTagPrefix, store, id, store, id)
	}
	return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
		"tag names starting with %q are reserved for snapshots, whose tags cleanup deletes when their lease ends; "+
			"choose another name, or make a snapshot: POST /api/v1/rollouts/%s/snapshots", api.SnapshotTagPrefix, store)
}

// leaseHolder reads a new lease's time to live (leaseTTL) and checks its
// holder's name: what taking a lease and a snapshot share.
func leaseHolder(secs int64, holder string) (time.Duration, error) {
	ttl, err := leaseTTL(secs)
	if err == nil && len(holder) > 256 {
		err = httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "holder is %d bytes; at most 256", len(holder))
	}
	return ttl, err
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
	var body api.LeaseRequest
	st := s.storeFor(w, r, &body, false)
	if st == nil {
		return
	}
	ttl, err := leaseHolder(body.TTLSeconds, body.Holder)
	var l *rollout.Lease
	if err == nil {
		l, err = st.TakeLease(r.Context(), body.Version, ttl, body.Holder)
	}
	writeResult(w, r, http.StatusCreated, l, err)
}

func (s *Server) listLeases(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	ls, err := st.Leases(r.Context())
	if ls == nil {
		ls = []rollout.Lease{}
	}
	writeResult(w, r, http.StatusOK, api.LeasesResponse{Leases: ls}, err)
}

func (s *Server) getLease(w http.ResponseWriter, r *http.Request) {
	if st := s.storeFor(w, r, nil, false); st != nil {
		l, err := st.Lease(r.Context(), httpapi.PathParam(r, "lease"))
		writeResult(w, r, http.StatusOK, l, err)
	}
}

func (s *Server) renewLease(w http.ResponseWriter, r *http.Request) {
	var body api.LeaseRequest
	st := s.storeFor(w, r, &body, false)
	if st == nil {
		return
	}
	ttl, err := leaseTTL(body.TTLSeconds)
	var l *rollout.Lease
	if err == nil {
		l, err = st.RenewLease(r.Context(), httpapi.PathParam(r, "lease"), ttl)
	}
	writeResult(w, r, http.StatusOK, l, err)
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request) {
	if st := s.storeFor(w, r, nil, false); st != nil {
		writeResult(w, r, http.StatusNoContent, nil, st.ReleaseLease(r.Context(), httpapi.PathParam(r, "lease")))
	}
}

func (s *Server) getRetention(w http.ResponseWriter, r *http.Request) {
	if st := s.storeFor(w, r, nil, false); st != nil {
		ret, err := st.Retention(r.Context())
		writeResult(w, r, http.StatusOK, api.RetentionConfig{MaxAgeSeconds: int64(ret.MaxAge / time.Second), KeepPolicyVersions: ret.KeepPolicyVersions}, err)
	}
}

func (s *Server) putRetention(w http.ResponseWriter, r *http.Request) {
	var body api.RetentionConfig
	st := s.storeFor(w, r, &body, true)
	if st == nil {
		return
	}
	if body.MaxAgeSeconds < 0 || body.KeepPolicyVersions < 0 {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			"max_age_seconds and keep_policy_versions must be 0 (no bound) or positive, got %d and %d", body.MaxAgeSeconds, body.KeepPolicyVersions))
		return
	}
	err := st.SetRetention(r.Context(), rollout.Retention{MaxAge: time.Duration(body.MaxAgeSeconds) * time.Second, KeepPolicyVersions: body.KeepPolicyVersions})
	writeResult(w, r, http.StatusOK, body, err)
}
