// Package httpapi holds what the worker and master HTTP services share: the
// JSON error envelope, the mapping from domain errors to status codes, bearer
// token auth, and request metrics.
package httpapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/internal/multierr"
	"github.com/lance-context/lance-context/rollout"
)

// Error is an error with an HTTP status and a stable code.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter int // seconds; 0 for none
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Classify maps an error from the domain packages to an *Error.
func Classify(err error) *Error {
	var he *Error
	var ve *rollout.ValidationError
	var mbe *http.MaxBytesError
	var ce *rollout.ClaimedElsewhereError
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &ve):
		return &Error{Status: http.StatusBadRequest, Code: api.CodeInvalidRequest, Message: ve.Msg}
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodePayloadTooLarge,
			Message: "request body is larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes; send smaller batches"}
	case rollout.IsNoSpace(err):
		// Not a passing fault: retrying at once only fills the logs.
		return &Error{Status: http.StatusInsufficientStorage, Code: api.CodeInsufficientStorage, Message: err.Error(), RetryAfter: 10}
	case errors.As(err, &ce):
		// 503, not 409: the state is the server's, and it passes by itself
		// when the other process is a crashed predecessor whose heartbeat
		// is about to lapse; clients retry after Retry-After. A real
		// duplicate goes on answering it, with health and a metric.
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeShardClaimedElsewhere, Message: err.Error(),
			RetryAfter: max(1, int(ce.TTL.Round(time.Second)/time.Second))}
	case errors.Is(err, rollout.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: err.Error()}
	case errors.Is(err, rollout.ErrExists):
		return &Error{Status: http.StatusConflict, Code: api.CodeAlreadyExists, Message: err.Error()}
	case errors.Is(err, rollout.ErrCorrupt):
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeWALCorrupt, Message: err.Error(), RetryAfter: 30}
	case errors.Is(err, rollout.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: err.Error()}
	case errors.Is(err, rollout.ErrCompacting):
		return &Error{Status: http.StatusConflict, Code: api.CodeCompactionInProgress, Message: err.Error() + "; retry when it ends"}
	case errors.Is(err, rollout.ErrOverloaded):
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeOverloaded, Message: err.Error(), RetryAfter: 10}
	case errors.Is(err, rollout.ErrFenced), errors.Is(err, rollout.ErrClosed), errors.Is(err, rollout.ErrWriterClosed):
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: err.Error(), RetryAfter: 1}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeTimeout, Message: "the request timed out: " + err.Error(), RetryAfter: 1}
	}
	// Anything else comes from storage: report it as retryable, never as
	// success.
	return &Error{Status: http.StatusServiceUnavailable, Code: api.CodeStorageUnavailable, Message: err.Error(), RetryAfter: 1}
}

// WriteError writes the JSON error envelope (api.ErrorResponse). The
// message and the log line are bounded (multierr.Shorten): an error joined
// from many alike failures names each kind once.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	e := Classify(err)
	if e.Status >= 500 {
		slog.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", multierr.Shorten(err.Error()))
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, e.Status, api.ErrorResponse{Error: api.ErrorBody{Code: e.Code, Message: multierr.Shorten(e.Message)}})
}

// WriteJSON writes v as JSON with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Auth requires "Authorization: Bearer <token>" on every request whose
// path is not exempt. The scheme is matched case-insensitively (RFC 9110
// 11.1: "bearer" is the same scheme). An empty token disables auth.
func Auth(token string, exempt func(path string) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if token == "" {
			return next
		}
		want := []byte(token)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !exempt(r.URL.Path) && subtle.ConstantTimeCompare(bearer(r.Header.Get("Authorization")), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="lance-context"`)
				WriteError(w, r, Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong bearer token: send Authorization: Bearer <LC_API_TOKEN>"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// bearer returns the credentials of a Bearer authorization header, or nil.
func bearer(h string) []byte {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	return []byte(strings.TrimSpace(cred))
}

// UIExempt is the auth exemption of a service that serves the UI: health,
// the API document and the UI's own files need no token (the UI asks for
// it and sends it with its API calls); the API and /metrics (which lists
// every store) do.
func UIExempt(path string) bool {
	return IsPublic(path) || (!strings.HasPrefix(path, "/api/") && path != "/metrics" && !strings.HasPrefix(path, "/metrics/"))
}

// NewRegistry returns a Prometheus registry with the Go and process
// collectors, for a service's /metrics. Beside the defaults it exports the
// CPU the collector spends (go_cpu_classes_gc_total_cpu_seconds_total)
// and its cycles: a worker's caches fill its heap, and what that costs in
// collections is the figure an operator (and the soak) watches.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(gcRuntimeMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

var gcRuntimeMetrics = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|total):cpu-seconds$|^/gc/cycles/total:gc-cycles$`)}

// Metrics counts requests and their latency by route pattern (never by raw
// path, so label values stay bounded).
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the request metrics with reg.
func NewMetrics(reg prometheus.Registerer, service string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total", Help: "HTTP requests by route pattern, method and status code.",
			ConstLabels: prometheus.Labels{"service": service},
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_request_duration_seconds", Help: "HTTP request latency by route pattern.",
			ConstLabels: prometheus.Labels{"service": service},
			Buckets:     []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// Middleware records each request.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil {
			// Built by joining the matched patterns: once, not twice (2% of
			// a small append's CPU).
			if p := rc.RoutePattern(); p != "" {
				route = p
			}
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
		m.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// IsHealth reports whether path is a health check, exempt from auth.
func IsHealth(path string) bool {
	return strings.HasSuffix(path, "/health") || path == "/healthz" || path == "/livez" || path == ReadinessPath
}

// IsPublic reports whether path needs no token: health checks and the API
// document.
func IsPublic(path string) bool { return IsHealth(path) || path == OpenAPIPath }

// HealthAliases are the probe paths Kubernetes and load balancers ask by
// habit; MountHealthAliases answers them as /api/v1/health. Before, a
// service with the UI answered them with the UI's page and 200, which a
// probe takes for health whatever the service's state.
var HealthAliases = []string{"/healthz", "/livez", "/readyz"}

// ReadinessPath is the readiness probe of HealthAliases: a service that
// has a readiness of its own (a worker warming its caches at start) serves
// it there, through MountProbes; the others answer it as /api/v1/health.
const ReadinessPath = "/readyz"

// MountHealthAliases serves HealthAliases on r by the route of
// /api/v1/health that r itself has.
func MountHealthAliases(r chi.Router) { MountProbes(r, nil) }

// MountProbes serves HealthAliases on r: the liveness ones by the route of
// /api/v1/health that r itself has, and ReadinessPath by ready, or as
// /api/v1/health too when ready is nil.
func MountProbes(r chi.Router, ready http.HandlerFunc) {
	for _, p := range HealthAliases {
		if p == ReadinessPath && ready != nil {
			r.Get(p, ready)
			continue
		}
		r.Get(p, func(w http.ResponseWriter, req *http.Request) {
			req2 := req.Clone(req.Context())
			req2.URL.Path, req2.URL.RawPath, req2.RequestURI = "/api/v1/health", "", "/api/v1/health"
			req2 = req2.WithContext(context.WithValue(req2.Context(), chi.RouteCtxKey, chi.NewRouteContext()))
			r.ServeHTTP(w, req2)
		})
	}
}

// OpenAPIPath is where both services serve api.OpenAPI.
const OpenAPIPath = "/api/v1/openapi.json"

// OpenAPI serves the API document.
func OpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	_, _ = w.Write(api.OpenAPI)
}

// PathParam returns a URL parameter, unescaped. chi matches on the escaped
// path when the URL has escapes (RawPath set), so an id like "a/b" sent as
// "a%2Fb" arrives escaped; unescape it once.
func PathParam(r *http.Request, key string) string {
	v := chi.URLParam(r, key)
	if r.URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// NotFound and MethodNotAllowed answer unknown routes with the JSON error
// envelope, like every other error.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, r, Errorf(http.StatusNotFound, api.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
}

// MethodNotAllowed is the 405 counterpart of NotFound.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	WriteError(w, r, Errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
}
