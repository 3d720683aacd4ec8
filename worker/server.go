package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// Server is the worker HTTP service over a catalog.
type Server struct {
	cfg     Config
	catalog *rollout.Catalog
	reg     *prometheus.Registry
	metrics *httpapi.Metrics
	log     *slog.Logger

	// The handler counts what only it sees (requests by format, ?flush,
	// merges by trigger); records appended, seals and merged rows are the
	// storage's counters (wal.Metrics, rollout's merge metrics), counted
	// once where they happen.
	appends        *prometheus.CounterVec
	appendsFlushed prometheus.Counter
	merges         *prometheus.CounterVec

	maint  *rollout.Maintainer
	bodies bodyBudget // append bodies held at once (budget.go)
	blobs  bodyBudget // multipart bodies being uploaded at once (multipart.go)

	// Registry, when set, learns of stores created and deleted here.
	Registry StoreRegistry

	// The start-up warm, for /readyz (warm.go); warmHook, when set (tests),
	// replaces a store's warm.
	warm     warmState
	warmHook func(ctx context.Context, store string, deep bool) (rollout.WarmStats, error)
}

// StoreRegistry is where the worker announces stores (etcd, via coord).
type StoreRegistry interface {
	RegisterStore(ctx context.Context, name string) error
	UnregisterStore(ctx context.Context, name string) error
}

// NewServer returns the service. Register its Routes on a router.
func NewServer(cfg Config, catalog *rollout.Catalog, reg *prometheus.Registry) *Server {
	s := &Server{cfg: cfg, catalog: catalog, reg: reg, log: slog.Default().With("component", "worker")}
	s.bodies.max = cfg.InflightBodyBytes
	if s.bodies.max <= 0 {
		s.bodies.max = 1 << 62 // a Config built without FromEnv: no bound
	}
	s.blobs = bodyBudget{max: cfg.InflightBlobBytes, what: "payload uploads", setting: "LC_INFLIGHT_BLOB_BYTES"}
	if s.blobs.max <= 0 {
		s.blobs.max = 1 << 62
	}
	s.metrics = httpapi.NewMetrics(reg, "worker")
	s.appends = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_appends_total", Help: "Append requests acknowledged, by body format."}, []string{"format"})
	s.appendsFlushed = prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_appends_flushed_total", Help: "Appends that asked for ?flush and sealed before responding."})
	s.merges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_merges_total", Help: "Merge passes, by trigger and result."}, []string{"trigger", "result"})
	reg.MustRegister(s.appends, s.appendsFlushed, s.merges)
	s.maint = rollout.NewMaintainer(catalog, cfg.MaintainPolicy(), rollout.MaintainEvents{
		Merged: func(trigger string, _ *rollout.MergeResult, err error) {
			result := "ok"
			if err != nil {
				result = "error"
			}
			s.merges.WithLabelValues(trigger, result).Inc()
		},
	}, s.log)
	_ = catalog.RegisterMetrics(reg) // storage metrics: WAL, seals, damaged stores
	return s
}

// Handler returns the whole worker HTTP handler: /api/v1/... and /metrics.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.metrics.Middleware)
	r.NotFound(httpapi.NotFound)
	r.MethodNotAllowed(httpapi.MethodNotAllowed)
	r.Use(httpapi.Auth(s.cfg.APIToken, httpapi.IsPublic))
	s.Mount(r)
	s.MountProbes(r)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return r
}

// MountProbes serves /healthz and /livez (liveness) and /readyz (the
// start-up warm, warm.go) on r.
func (s *Server) MountProbes(r chi.Router) { httpapi.MountProbes(r, s.ready) }

// Mount registers the worker API routes (under /api/v1) on r.
func (s *Server) Mount(r chi.Router) {
	r.Get("/api/v1/health", s.health)
	r.Get(httpapi.OpenAPIPath, httpapi.OpenAPI)
	r.Route("/api/v1/rollouts", func(r chi.Router) {
		r.Use(httpapi.DecodeBodies(s.cfg.MaxBodyBytes)) // gzip and zstd bodies
		r.Post("/", s.createStore)
		r.Get("/", s.listStores)
		r.Route("/{name}", func(r chi.Router) {
			r.Use(s.refuseDamaged)
			r.Get("/", s.storeInfo)
			r.Delete("/", s.deleteStore)
			r.Post("/records", s.appendRecords)
			// The reference's worker lists base and WAL together when no
			// source is named; the master's browser defaults to fragments.
			reads := httpapi.RecordReads{Catalog: s.catalog, MaxLimit: 1000, DefaultSource: rollout.SourceAll}
			r.Get("/records", reads.List)
			r.Get("/records/{id}", reads.Get)
			r.Get("/records/{id}/blob", reads.Blob)
			r.Get("/trajectories/{rollout_id}", reads.Trajectory)
			r.Post("/sample", s.sample)
			r.Post("/flush", s.flush)
			r.Post("/merge", s.merge)
			r.Post("/compact", s.compact)
			r.Get("/compact/stats", s.compactStats)
			r.Post("/checkout", s.checkout)
			r.Post("/cleanup", s.cleanup)
			r.Get("/retention", s.getRetention)
			r.Put("/retention", s.putRetention)
			r.Get("/tags", s.listTags)
			r.Post("/tags", s.createTag)
			r.Get("/tags/{tag}", s.getTag)
			r.Delete("/tags/{tag}", s.deleteTag)
			r.Get("/leases", s.listLeases)
			r.Post("/leases", s.takeLease)
			r.Get("/leases/{lease}", s.getLease)
			r.Post("/leases/{lease}/renew", s.renewLease)
			r.Delete("/leases/{lease}", s.releaseLease)
			r.Get("/snapshots", s.listSnapshots) // snapshots.go
			r.Post("/snapshots", s.createSnapshot)
			r.Get("/snapshots/{snapshot}", s.getSnapshot)
			r.Post("/snapshots/{snapshot}/renew", s.renewSnapshot)
			r.Delete("/snapshots/{snapshot}", s.releaseSnapshot)
			r.Get("/export", s.export) // export.go
			r.Get("/feed", s.feed)     // feed.go
			r.Post("/feed/commit", s.commitFeed)
			r.Get("/feed/groups", s.feedGroups)
			r.Get("/feed/groups/{group}", s.feedGroup)
			r.Delete("/feed/groups/{group}", s.deleteFeedGroup)
		})
	})
}

func (s *Server) store(r *http.Request) (*rollout.Store, error) {
	return s.catalog.Open(r.Context(), httpapi.PathParam(r, "name"))
}

// storeURI is where a store lives, as the reference reports it.
func (s *Server) storeURI(name string) string { return rollout.StoreURI(s.cfg.DataDir, name) }

func (s *Server) createStore(w http.ResponseWriter, r *http.Request) {
	var body api.CreateStoreRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<20), r.ContentLength, &body); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	for _, k := range slices.Sorted(maps.Keys(body.StorageOptions)) {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			"storage_options.%s cannot be set per store: storage is configured per deployment (DATA_DIR and the object store's environment); send storage_options null or {}", k))
		return
	}
	st, err := s.catalog.Create(r.Context(), body.Name)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if s.Registry != nil {
		// Best effort: masters also backfill stores they find on storage.
		if err := s.Registry.RegisterStore(r.Context(), st.Name()); err != nil {
			s.log.Warn("register store in etcd", "store", st.Name(), "err", err)
		}
	}
	v := st.Version()
	httpapi.WriteJSON(w, http.StatusCreated, api.StoreInfo{Name: st.Name(), URI: s.storeURI(st.Name()), Version: &v})
}

func (s *Server) listStores(w http.ResponseWriter, r *http.Request) {
	names, err := s.catalog.List(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := api.ListStoresResponse{Stores: make([]api.StoreInfo, len(names)), Count: len(names)}
	for i, n := range names {
		out.Stores[i] = api.StoreInfo{Name: n, URI: s.storeURI(n)}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// storeInfo answers GET /rollouts/{name}: the reference's {name, uri,
// version} and the store's statistics beside them.
func (s *Server) storeInfo(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	stats, err := st.Stats(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	stats.URI = s.storeURI(st.Name())
	httpapi.WriteJSON(w, http.StatusOK, stats)
}

func (s *Server) deleteStore(w http.ResponseWriter, r *http.Request) {
	name := httpapi.PathParam(r, "name")
	if err := s.catalog.Delete(r.Context(), name); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if s.Registry != nil {
		if err := s.Registry.UnregisterStore(r.Context(), name); err != nil {
			s.log.Warn("unregister store in etcd", "store", name, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) appendRecords(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	release, err := s.bodies.admit(r, s.cfg.MaxBodyBytes)
	if err != nil {
		refuseUnread(w, r, err)
		return
	}
	defer release()
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	limit := s.cfg.MaxBodyBytes
	var blobs []rollout.Blob // payloads streamed to objects by this request
	if mediaType == "multipart/form-data" {
		// Parts above the inline size stream to objects: the body may be
		// as large as a part may be, plus the inline rest.
		limit += s.blobLimit()
		releaseBlobs, err := s.blobs.admit(r, limit)
		if err != nil {
			refuseUnread(w, r, err)
			return
		}
		defer releaseBlobs()
		if s.cfg.BlobTimeout > 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BlobTimeout))
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var (
		recs    []rollout.Record
		batches []arrow.RecordBatch
		format  string
	)
	switch mediaType {
	case "application/json":
		format = "json"
		recs, err = s.decodeJSONRecords(body, r.ContentLength)
	case "multipart/form-data":
		format = "multipart"
		recs, blobs, err = s.decodeMultipart(r.Context(), st, body, params["boundary"])
	case api.ArrowStream:
		format = "arrow"
		batches, err = s.decodeArrow(body, r.ContentLength)
		defer func() {
			for _, b := range batches {
				b.Release()
			}
		}()
	default:
		err = httpapi.Errorf(http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType,
			"Content-Type %q is not supported: use application/json, multipart/form-data or %s", r.Header.Get("Content-Type"), api.ArrowStream)
	}
	if err == nil && format != "arrow" {
		err = s.checkLimits(recs)
	}
	if err != nil {
		s.dropBlobs(st, blobs)
		httpapi.WriteError(w, r, err)
		return
	}
	var ids []string
	if format == "arrow" {
		// Straight from the stream's columns to the WAL (no Records).
		ids, err = st.AppendArrow(r.Context(), batches...)
	} else {
		ids, err = st.Append(r.Context(), recs)
	}
	if err != nil {
		if ve := (*rollout.ValidationError)(nil); errors.As(err, &ve) {
			// Refused before anything reached the log: no row refers to
			// the payloads. (After another error the entry may have
			// landed; a cleanup collects what no row refers to.)
			s.dropBlobs(st, blobs)
		}
		httpapi.WriteError(w, r, err)
		return
	}
	flushed := false
	if api.WantsFlush(r.URL.RawQuery) {
		if err := st.Flush(r.Context()); err != nil {
			// The append is durable; only visibility failed. Say so.
			httpapi.WriteError(w, r, fmt.Errorf("records are durable (ids %s...) but the flush failed, retry the flush: %w", ids[0], err))
			return
		}
		flushed = true
		s.appendsFlushed.Inc()
		s.maint.Flushed(st)
	} else {
		s.maint.MaybeMerge(st) // a full memtable may have sealed
		s.maint.MaybeSeal()
	}
	s.appends.WithLabelValues(format).Inc()
	writeAppended(w, st.Version(), ids, flushed)
}

// writeAppended writes the 201 of an append (api.AppendResponse), built by
// hand with its length set: it is the response the service sends most, and
// encoding/json's reflection cost more than the rest of a small append's
// handler.
func writeAppended(w http.ResponseWriter, version uint64, ids []string, flushed bool) {
	n := 72
	for _, id := range ids {
		n += len(id) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"version":`...)
	b = strconv.AppendUint(b, version, 10)
	b = append(b, `,"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
	}
	b = append(b, `],"count":`...)
	b = strconv.AppendInt(b, int64(len(ids)), 10)
	b = append(b, `,"flushed":`...)
	b = strconv.AppendBool(b, flushed)
	b = append(b, "}\n"...)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
}

// appendJSONString appends s as a JSON string: as is when it needs no
// escaping (generated and typical ids), else through the JSON encoder.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := fastjson.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// recordsPool holds decodeJSONRecords' slices, of at most maxPooledRecords.
var recordsPool = sync.Pool{New: func() any { return new([]api.RecordJSON) }}

const maxPooledRecords = 1024
