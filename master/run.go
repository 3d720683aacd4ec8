package master

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/web"
)

// Handler returns the master's HTTP handler: its API, /metrics and the UI.
func (m *Master) Handler(reg *prometheus.Registry, token string) http.Handler {
	r := chi.NewRouter()
	r.Use(m.metrics.Middleware)
	r.NotFound(httpapi.NotFound)
	r.MethodNotAllowed(httpapi.MethodNotAllowed)
	r.Use(httpapi.Auth(token, httpapi.UIExempt))
	m.Mount(r, true)
	httpapi.MountHealthAliases(r)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	r.Handle("/*", web.Handler())
	return r
}
