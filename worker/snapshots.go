package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/coord"
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
// version holding everything this worker acknowledged before the call,
// and with etcd what the other live workers did (rollout/snapshots.go
// says what else), tagged and leased.
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
	sn, err := st.CreateSnapshotWith(r.Context(), ttl, body.Holder, s.snapshotPeers())
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

// workerLister lists the live workers: the etcd registry (coord.Coord)
// the worker announces its stores to, when it runs with etcd.
type workerLister interface {
	ListWorkers(ctx context.Context) ([]coord.WorkerInfo, error)
}

// snapshotPeers reaches the other live workers of a snapshot through the
// endpoints they register in etcd; nil without etcd (a snapshot then lists
// their pending shards as excluded).
func (s *Server) snapshotPeers() rollout.SnapshotPeers {
	wl, ok := s.Registry.(workerLister)
	if !ok {
		return nil
	}
	return &httpPeers{workers: wl, token: s.cfg.APIToken}
}

// httpPeers is rollout.SnapshotPeers over the worker API of the shard's
// owner: POST .../flush seals, POST .../merge merges one pass (the routes a
// master's merge task calls; no new route, and neither calls back).
// Workers of one deployment share LC_API_TOKEN.
type httpPeers struct {
	workers workerLister
	token   string
}

func (p *httpPeers) owner(ctx context.Context, x api.SnapshotShard) (string, error) {
	ws, err := p.workers.ListWorkers(ctx)
	if err != nil {
		return "", err
	}
	for _, w := range ws {
		if w.ShardID == x.ShardID && w.Endpoint != "" {
			return w.Endpoint, nil
		}
	}
	return "", fmt.Errorf("no worker registered in etcd for shard %s (instance %q)", x.ShardID, x.InstanceID)
}

// post makes one attempt (a worker that fails is listed, not waited for:
// the round's callers are) at POST {owner}/api/v1/rollouts/{store}/{verb}.
// It speaks HTTP itself rather than through package client, whose tests
// run this package's server.
func (p *httpPeers) post(ctx context.Context, store, verb string, x api.SnapshotShard) error {
	endpoint, err := p.owner(ctx, x)
	if err != nil {
		return err
	}
	u := strings.TrimRight(endpoint, "/") + "/api/v1/rollouts/" + url.PathEscape(store) + "/" + verb
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s of %s on %s: %w", verb, store, endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e api.ErrorResponse
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return fmt.Errorf("%s of %s on %s: %d %s", verb, store, endpoint, resp.StatusCode, msg)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

func (p *httpPeers) Seal(ctx context.Context, store string, x api.SnapshotShard) error {
	return p.post(ctx, store, "flush", x)
}

func (p *httpPeers) Merge(ctx context.Context, store string, x api.SnapshotShard) error {
	return p.post(ctx, store, "merge", x)
}
