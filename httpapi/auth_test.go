package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/lance-context/lance-context/httpapi"
)

// authServer is a service shaped like the master and dev mode: the API,
// /metrics, the UI as the catch-all, auth with UIExempt.
func authServer(token string) http.Handler {
	r := chi.NewRouter()
	r.Use(httpapi.Auth(token, httpapi.UIExempt))
	r.Get("/api/v1/health", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/api/v1/experiments", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	r.Get("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("store_rows{store=\"secret\"} 1\n"))
	})
	httpapi.MountHealthAliases(r)
	r.Get("/*", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>ui</html>")) })
	return r
}

func status(t *testing.T, h http.Handler, path, auth string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// Regression: the scheme of an Authorization header is case-insensitive
// (RFC 9110 11.1); "bearer <token>" was refused with 401.
func TestRegression_BearerSchemeCaseInsensitive(t *testing.T) {
	h := authServer("s3cret")
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret "} {
		if code, _ := status(t, h, "/api/v1/experiments", auth); code != http.StatusOK {
			t.Fatalf("%q: %d", auth, code)
		}
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic s3cret", "s3cret", "Bearer", "Bearers3cret"} {
		if code, _ := status(t, h, "/api/v1/experiments", auth); code != http.StatusUnauthorized {
			t.Fatalf("%q: %d, want 401", auth, code)
		}
	}
}

// Regression: dev mode (and the master) answered /metrics, which lists
// every store, without the token, while a worker answered 401.
func TestRegression_MetricsNeedTheToken(t *testing.T) {
	h := authServer("s3cret")
	if code, body := status(t, h, "/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d %q", code, body)
	}
	if code, _ := status(t, h, "/metrics", "Bearer s3cret"); code != http.StatusOK {
		t.Fatalf("/metrics with the token: %d", code)
	}
	// The UI's files and health stay open.
	for _, p := range []string{"/", "/experiments/x", "/api/v1/health", "/healthz"} {
		if code, _ := status(t, h, p, ""); code != http.StatusOK {
			t.Fatalf("%s without the token: %d", p, code)
		}
	}
}

// Regression: /healthz (and /livez, /readyz) answered the UI's page with
// 200 whatever the service's state; they answer the health check's JSON.
func TestRegression_HealthzIsTheHealthCheck(t *testing.T) {
	h := authServer("")
	for _, p := range httpapi.HealthAliases {
		code, body := status(t, h, p, "")
		var v map[string]string
		if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil || v["status"] != "ok" {
			t.Fatalf("%s: %d %q, want the health JSON", p, code, body)
		}
	}
}
