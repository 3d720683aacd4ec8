package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	fastjson "github.com/segmentio/encoding/json"

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
	r.Use(httpapi.Auth(s.cfg.APIToken, httpapi.IsHealth))
	s.Mount(r)
	r.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return r
}

// Mount registers the worker API routes (under /api/v1) on r.
func (s *Server) Mount(r chi.Router) {
	r.Get("/api/v1/health", s.health)
	r.Route("/api/v1/rollouts", func(r chi.Router) {
		r.Post("/", s.createStore)
		r.Get("/", s.listStores)
		r.Route("/{name}", func(r chi.Router) {
			r.Use(s.refuseDamaged)
			r.Get("/", s.storeStats)
			r.Delete("/", s.deleteStore)
			r.Post("/records", s.appendRecords)
			reads := RecordReads{Catalog: s.catalog, MaxLimit: 1000}
			r.Get("/records", reads.List)
			r.Get("/records/{id}", reads.Get)
			r.Get("/records/{id}/blob", reads.Blob)
			r.Get("/trajectories/{rollout_id}", s.trajectory)
			r.Post("/flush", s.flush)
			r.Post("/merge", s.merge)
			r.Post("/compact", s.compact)
		})
	})
}

func (s *Server) store(r *http.Request) (*rollout.Store, error) {
	return s.catalog.Open(r.Context(), httpapi.PathParam(r, "name"))
}

func (s *Server) createStore(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<20), r.ContentLength, &body); err != nil {
		httpapi.WriteError(w, r, err)
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
	httpapi.WriteJSON(w, http.StatusCreated, map[string]any{"name": st.Name()})
}

func (s *Server) listStores(w http.ResponseWriter, r *http.Request) {
	names, err := s.catalog.List(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := make([]map[string]string, len(names))
	for i, n := range names {
		out[i] = map[string]string{"name": n}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"rollouts": out, "count": len(out)})
}

func (s *Server) storeStats(w http.ResponseWriter, r *http.Request) {
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

// wantsFlush reports whether the query opts in to a seal: exactly
// "flush", "flush=true" or "flush=1". Any other spelling is ignored, so a
// typo cannot make every append pay for a seal.
func wantsFlush(rawQuery string) bool {
	for _, p := range strings.Split(rawQuery, "&") {
		if p == "flush" || p == "flush=true" || p == "flush=1" {
			return true
		}
	}
	return false
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
	case "application/vnd.apache.arrow.stream":
		format = "arrow"
		batches, err = s.decodeArrow(body)
		defer func() {
			for _, b := range batches {
				b.Release()
			}
		}()
	default:
		err = httpapi.Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Content-Type %q is not supported: use application/json, multipart/form-data or application/vnd.apache.arrow.stream", r.Header.Get("Content-Type"))
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
	if wantsFlush(r.URL.RawQuery) {
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
	writeAppended(w, ids, flushed)
}

// writeAppended writes the 201 of an append, {"ids":[...],"count":N,
// "flushed":bool}, built by hand with its length set: it is the response
// the service sends most, and encoding/json's reflection on a map cost more
// than the rest of a small append's handler.
func writeAppended(w http.ResponseWriter, ids []string, flushed bool) {
	n := 48
	for _, id := range ids {
		n += len(id) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"ids":[`...)
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
		return httpapi.Errorf(http.StatusRequestEntityTooLarge, "payload_too_large",
			"%d records in one request; the limit is %d (LC_MAX_RECORDS_PER_REQUEST): split the batch", len(recs), s.cfg.MaxRecords)
	}
	for i, rec := range recs {
		if int64(len(rec.BinaryPayload)) > s.cfg.MaxPayloadBytes {
			return httpapi.Errorf(http.StatusRequestEntityTooLarge, "payload_too_large",
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
		return httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "invalid JSON body: %v", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "invalid JSON body: more than one value")
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
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "reading the body: %v", err)
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
		Records []rollout.RecordJSON `json:"records"`
	}
	// The decoder would start the slice at 10 records (4.5 KB) and double
	// it, most of an append's garbage; a pooled slice is reused instead, as
	// the records are copied out of it below.
	pooled := recordsPool.Get().(*[]rollout.RecordJSON)
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
		return nil, err
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
var recordsPool = sync.Pool{New: func() any { return new([]rollout.RecordJSON) }}

const maxPooledRecords = 1024

// decodeMultipart reads a "metadata" part ({"records":[...]}) followed by
// payload parts named by record index.
func (s *Server) decodeMultipart(body io.Reader, boundary string) ([]rollout.Record, error) {
	if boundary == "" {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "multipart body without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	var recs []rollout.Record
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
			return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "malformed multipart body: %v", err)
		}
		name := p.FormName()
		if !seen {
			if name != "metadata" {
				return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "the first multipart part must be \"metadata\" (JSON {\"records\":[...]}), got %q", name)
			}
			if recs, err = s.decodeJSONRecords(p, -1); err != nil {
				return nil, err
			}
			seen = true
			continue
		}
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || i >= len(recs) {
			return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "payload part %q must be named by a record index 0..%d", name, len(recs)-1)
		}
		data, err := io.ReadAll(io.LimitReader(p, s.cfg.MaxPayloadBytes+1))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "reading payload part %q: %v", name, err)
		}
		if int64(len(data)) > s.cfg.MaxPayloadBytes {
			return nil, httpapi.Errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "payload part %q is larger than %d bytes (LC_MAX_PAYLOAD_BYTES)", name, s.cfg.MaxPayloadBytes)
		}
		recs[i].BinaryPayload = data
	}
	if !seen {
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "multipart body has no \"metadata\" part")
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
		return nil, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "invalid Arrow IPC stream: %v", err)
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
			return fail(httpapi.Errorf(http.StatusRequestEntityTooLarge, "payload_too_large",
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
		return fail(httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "invalid Arrow IPC stream: %v", err))
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
			return httpapi.Errorf(http.StatusRequestEntityTooLarge, "payload_too_large",
				"record %d: payload of %d bytes; the limit is %d (LC_MAX_PAYLOAD_BYTES)", base+i, n, s.cfg.MaxPayloadBytes)
		}
	}
	return nil
}

// ListQuery parses source, limit, offset and filters of a list request.
func ListQuery(r *http.Request, maxLimit int) (rollout.ListOptions, error) {
	q := r.URL.Query()
	var o rollout.ListOptions
	var err error
	if o.Source, err = rollout.ParseSource(q.Get("source")); err != nil {
		return o, err
	}
	o.Limit = 25
	if v := q.Get("limit"); v != "" {
		if o.Limit, err = strconv.Atoi(v); err != nil || o.Limit < 1 || o.Limit > maxLimit {
			return o, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "limit must be an integer from 1 to %d, got %q", maxLimit, v)
		}
	}
	if v := q.Get("offset"); v != "" {
		if o.Offset, err = strconv.Atoi(v); err != nil || o.Offset < 0 {
			return o, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "offset must be a non-negative integer, got %q", v)
		}
	}
	filters := map[string]string{}
	for k, vs := range q {
		switch k {
		case "source", "limit", "offset":
			continue
		}
		if len(vs) != 1 {
			return o, httpapi.Errorf(http.StatusBadRequest, "invalid_argument", "filter %q given %d times; give it once", k, len(vs))
		}
		filters[k] = vs[0]
	}
	o.Filters, err = rollout.ParseFilters(filters)
	return o, err
}

func (s *Server) trajectory(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	recs, err := st.Trajectory(r.Context(), httpapi.PathParam(r, "rollout_id"))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	if recs == nil {
		recs = []rollout.Record{}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"rollout_id": httpapi.PathParam(r, "rollout_id"), "records": recs, "count": len(recs)})
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
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"flushed": true})
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
	res, err := st.Compact(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"fragments_removed": res.Removed, "fragments_added": res.Added, "version": res.Dataset.Version()})
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
