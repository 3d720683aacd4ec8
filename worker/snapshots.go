package worker

import (
	"net/http"
	"path/filepath"
	"strings"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// datasetURI is the store's base table as an engine on another machine
// names it: the data directory's URL, with a local path made absolute. It
// never holds credentials: object stores are configured from the
// environment (objstore.Open), not from the URL.
func (s *Server) datasetURI(name string) string {
	u := s.storeURI(name)
	if !strings.Contains(u, "://") {
		if abs, err := filepath.Abs(u); err == nil {
			u = abs
		}
	}
	return u
}

func (s *Server) wireSnapshot(store string, sn *rollout.SnapshotInfo) api.Snapshot {
	return api.Snapshot{ID: sn.ID, URI: s.datasetURI(store), Version: sn.Version, Tag: sn.Tag,
		Lease: api.SnapshotLease{ID: sn.ID, ExpiresAt: sn.ExpiresAt}, Holder: sn.Holder, ExcludedShards: sn.ExcludedShards}
}

// createSnapshot answers POST .../snapshots {ttl_seconds, holder}: a base
// version holding everything this worker acknowledged before the call
// (rollout/snapshots.go says what else), tagged and leased.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var body api.SnapshotRequest
	st := s.storeFor(w, r, &body, false)
	if st == nil {
		return
	}
	ttl, err := leaseHolder(body.TTLSeconds, body.Holder)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	sn, err := st.CreateSnapshot(r.Context(), ttl, body.Holder)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, s.wireSnapshot(st.Name(), sn))
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	sns, err := st.Snapshots(r.Context())
	out := api.SnapshotsResponse{Snapshots: make([]api.Snapshot, len(sns))}
	for i := range sns {
		out.Snapshots[i] = s.wireSnapshot(st.Name(), &sns[i])
	}
	writeResult(w, r, http.StatusOK, out, err)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	sn, err := st.Snapshot(r.Context(), httpapi.PathParam(r, "snapshot"))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, s.wireSnapshot(st.Name(), sn))
}

func (s *Server) renewSnapshot(w http.ResponseWriter, r *http.Request) {
	var body api.SnapshotRequest
	st := s.storeFor(w, r, &body, false)
	if st == nil {
		return
	}
	ttl, err := leaseTTL(body.TTLSeconds)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	sn, err := st.RenewSnapshot(r.Context(), httpapi.PathParam(r, "snapshot"), ttl)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, s.wireSnapshot(st.Name(), sn))
}

func (s *Server) releaseSnapshot(w http.ResponseWriter, r *http.Request) {
	if st := s.storeFor(w, r, nil, false); st != nil {
		writeResult(w, r, http.StatusNoContent, nil, st.ReleaseSnapshot(r.Context(), httpapi.PathParam(r, "snapshot")))
	}
}
