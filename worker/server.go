package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
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

	appends        *prometheus.CounterVec
	appendRecs     prometheus.Counter
	appendsFlushed prometheus.Counter
	seals          prometheus.Counter
	merges         *prometheus.CounterVec
	mergedRows     prometheus.Counter

	mergeMu sync.Mutex
	merging map[string]bool // stores with a background merge running

	// Registry, when set, learns of stores created and deleted here.
	Registry StoreRegistry
}

// StoreRegistry is where the worker announces stores (etcd, via coord).
type StoreRegistry interface {
	RegisterStore(ctx context.Context, name string) error
	UnregisterStore(ctx context.Context, name string) error
}

// NewServer returns the service. Register its Routes on a router.
func NewServer(cfg Config, catalog *rollout.Catalog, reg *prometheus.Registry) *Server {
	s := &Server{cfg: cfg, catalog: catalog, reg: reg, log: slog.Default().With("component", "worker"), merging: map[string]bool{}}
	s.metrics = httpapi.NewMetrics(reg, "worker")
	s.appends = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_appends_total", Help: "Append requests acknowledged, by body format."}, []string{"format"})
	s.appendRecs = prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_append_records_total", Help: "Records acknowledged by appends."})
	s.appendsFlushed = prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_appends_flushed_total", Help: "Appends that asked for ?flush and sealed before responding."})
	s.seals = prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_flushes_total", Help: "Flushes (seals) requested by the sweeper or the API."})
	s.merges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_merges_total", Help: "Merge passes, by trigger and result."}, []string{"trigger", "result"})
	s.mergedRows = prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_merged_rows_total", Help: "Rows folded into base tables."})
	reg.MustRegister(s.appends, s.appendRecs, s.appendsFlushed, s.seals, s.merges, s.mergedRows)
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
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return r
}

// Mount registers the worker API routes (under /api/v1) on r.
func (s *Server) Mount(r chi.Router) {
	r.Get("/api/v1/health", s.health)
	r.Get(httpapi.OpenAPIPath, httpapi.OpenAPI)
	r.Route("/api/v1/rollouts", func(r chi.Router) {
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
			r.Post("/flush", s.flush)
			r.Post("/merge", s.merge)
			r.Post("/compact", s.compact)
			r.Get("/compact/stats", s.compactStats)
			r.Post("/checkout", s.checkout)
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
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
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
		recs, err = s.decodeMultipart(body, params["boundary"])
	case api.ArrowStream:
		format = "arrow"
		batches, err = s.decodeArrow(body)
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
		s.seals.Inc()
		s.maybeMerge(st, "count")
	}
	s.appends.WithLabelValues(format).Inc()
	s.appendRecs.Add(float64(len(ids)))
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

func (s *Server) checkLimits(recs []rollout.Record) error {
	if len(recs) > s.cfg.MaxRecords {
		return httpapi.Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
			"%d records in one request; the limit is %d (LC_MAX_RECORDS_PER_REQUEST): split the batch", len(recs), s.cfg.MaxRecords)
	}
	for i, rec := range recs {
		if int64(len(rec.BinaryPayload)) > s.cfg.MaxPayloadBytes {
			return httpapi.Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
				"record %d: payload of %d bytes; the limit is %d (LC_MAX_PAYLOAD_BYTES)", i, len(rec.BinaryPayload), s.cfg.MaxPayloadBytes)
		}
	}
	return nil
}

// decodeJSON decodes one JSON value strictly (unknown fields are errors).
// It reads the whole body, then parses it with segmentio's decoder, which
// is over ten times faster than encoding/json on record bodies (1 KB of
// text per record: 1.4 µs against 21 µs) with the same struct rules.
// Strings alias the body buffer, which is fresh per request.
func decodeJSON(r io.Reader, sizeHint int64, v any) error {
	b, err := readBody(r, sizeHint)
	if err != nil {
		return err
	}
	return parseJSON(b, v)
}

// parseJSON is decodeJSON's parse of a body already read.
func parseJSON(b []byte, v any) error {
	rest, err := fastjson.Parse(b, v, fastjson.DisallowUnknownFields|fastjson.DontCopyString|fastjson.DontCopyRawMessage)
	if err != nil {
		return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body: %v", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body: more than one value")
	}
	return nil
}

// readBody reads a body whose size is probably sizeHint (the request's
// Content-Length; -1 when unknown) into one buffer.
func readBody(r io.Reader, sizeHint int64) ([]byte, error) {
	n := 512
	if sizeHint > 0 && sizeHint < 64<<20 {
		n = int(sizeHint) + bytes.MinRead // room for ReadFrom to see EOF without growing
	}
	buf := bytes.NewBuffer(make([]byte, 0, n))
	if _, err := buf.ReadFrom(r); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "reading the body: %v", err)
	}
	return buf.Bytes(), nil
}

func (s *Server) decodeJSONRecords(body io.Reader, sizeHint int64) ([]rollout.Record, error) {
	// RecordJSON, not Record: one strict decoding pass over the body
	// instead of a nested decoder per record.
	b, err := readBody(body, sizeHint)
	if err != nil {
		return nil, err
	}
	var req struct {
		Records []api.RecordJSON `json:"records"`
	}
	// The decoder would start the slice at 10 records (4.5 KB) and double
	// it, most of an append's garbage; a pooled slice is reused instead, as
	// the records are copied out of it below.
	pooled := recordsPool.Get().(*[]api.RecordJSON)
	req.Records = (*pooled)[:0]
	defer func() {
		// Zero what the decoder wrote, so that no field of this body leaks
		// into the next one (fields a body omits keep their old values).
		clear(req.Records[:min(len(req.Records)+1, cap(req.Records))])
		if cap(req.Records) <= maxPooledRecords {
			*pooled = req.Records[:0]
			recordsPool.Put(pooled)
		}
	}()
	if err := parseJSON(b, &req); err != nil {
		return nil, explainRecordsError(b, err)
	}
	if len(req.Records) == 0 {
		return nil, nil
	}
	recs := make([]rollout.Record, len(req.Records))
	for i := range req.Records {
		recs[i] = req.Records[i].Record()
	}
	return recs, nil
}

// recordsPool holds decodeJSONRecords' slices, of at most maxPooledRecords.
var recordsPool = sync.Pool{New: func() any { return new([]api.RecordJSON) }}

const maxPooledRecords = 1024

// decodeMultipart reads a "metadata" part ({"records":[...]}) followed by
// payload parts named by record index.
func (s *Server) decodeMultipart(body io.Reader, boundary string) ([]rollout.Record, error) {
	if boundary == "" {
		return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "multipart body without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	var recs []rollout.Record
	var parts []bool // parts[i]: record i's payload part arrived
	seen := false
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "malformed multipart body: %v", err)
		}
		name := p.FormName()
		if !seen {
			if name != "metadata" {
				return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "the first multipart part must be \"metadata\" (JSON {\"records\":[...]}), got %q", name)
			}
			if recs, err = s.decodeJSONRecords(p, -1); err != nil {
				return nil, err
			}
			parts = make([]bool, len(recs))
			seen = true
			continue
		}
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || i >= len(recs) {
			return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "payload part %q must be named by a record index 0..%d", name, len(recs)-1)
		}
		data, err := io.ReadAll(io.LimitReader(p, s.cfg.MaxPayloadBytes+1))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "reading payload part %q: %v", name, err)
		}
		if int64(len(data)) > s.cfg.MaxPayloadBytes {
			return nil, httpapi.Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "payload part %q is larger than %d bytes (LC_MAX_PAYLOAD_BYTES)", name, s.cfg.MaxPayloadBytes)
		}
		if parts[i] {
			return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "duplicate payload part for record index %d: send one part per record", i)
		}
		parts[i] = true
		if want := recs[i].PayloadSize; want != nil && *want != int64(len(data)) {
			return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "record %d: payload_size %d does not match the %d bytes of its part", i, *want, len(data))
		}
		recs[i].BinaryPayload = data
	}
	if !seen {
		return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "multipart body has no \"metadata\" part")
	}
	// A record that declares a payload but got no bytes would be stored
	// without its artifact: refuse it, as the reference does.
	for i := range recs {
		if recs[i].PayloadSize != nil && !parts[i] && recs[i].BinaryPayload == nil {
			return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "record %d declares payload_size but no part named %q carries its bytes", i, strconv.Itoa(i))
		}
	}
	return recs, nil
}

// decodeArrow reads an Arrow IPC stream's batches, checking the limits on
// records per request and payload bytes per record as it goes.
func (s *Server) decodeArrow(body io.Reader) ([]arrow.RecordBatch, error) {
	rd, err := ipc.NewReader(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid Arrow IPC stream: %v", err)
	}
	defer rd.Release()
	var (
		out  []arrow.RecordBatch
		rows int
	)
	fail := func(err error) ([]arrow.RecordBatch, error) {
		for _, b := range out {
			b.Release()
		}
		return nil, err
	}
	for rd.Next() {
		rec := rd.RecordBatch()
		if err := s.checkArrowPayloads(rec, rows); err != nil {
			return fail(err)
		}
		rows += int(rec.NumRows())
		if rows > s.cfg.MaxRecords {
			return fail(httpapi.Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
				"more than %d records in one request (LC_MAX_RECORDS_PER_REQUEST): split the batch", s.cfg.MaxRecords))
		}
		rec.Retain()
		out = append(out, rec)
	}
	if err := rd.Err(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fail(err)
		}
		return fail(httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid Arrow IPC stream: %v", err))
	}
	return out, nil
}

// checkArrowPayloads applies the payload size limit to a batch's payload
// column; base is the index of its first row in the request.
func (s *Server) checkArrowPayloads(rec arrow.RecordBatch, base int) error {
	idx := rec.Schema().FieldIndices(rollout.ColPayload)
	if len(idx) == 0 {
		return nil
	}
	col, ok := rec.Column(idx[0]).(interface{ ValueLen(int) int })
	if !ok {
		return nil // a wrong type is the store's validation error
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		if n := int64(col.ValueLen(i)); n > s.cfg.MaxPayloadBytes {
			return httpapi.Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
				"record %d: payload of %d bytes; the limit is %d (LC_MAX_PAYLOAD_BYTES)", base+i, n, s.cfg.MaxPayloadBytes)
		}
	}
	return nil
}

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
