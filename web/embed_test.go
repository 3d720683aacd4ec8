package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func firstAsset(t *testing.T) string {
	t.Helper()
	entries, err := fs.ReadDir(Dist, "dist/assets")
	if err != nil || len(entries) == 0 {
		t.Fatalf("dist/assets is empty (run npm run build): %v", err)
	}
	return "/assets/" + entries[0].Name()
}

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandler(t *testing.T) {
	h := Handler()
	asset := firstAsset(t)
	tests := []struct {
		name, method, path string
		code               int
		cache              string
		bodyHas            string
	}{
		{"root is index", "GET", "/", 200, "no-cache", `<div id="root">`},
		{"index.html", "GET", "/index.html", 200, "no-cache", `<div id="root">`},
		{"client route", "GET", "/experiments/demo/records?source=wal", 200, "no-cache", `<div id="root">`},
		{"tasks route", "GET", "/tasks", 200, "no-cache", `<div id="root">`},
		{"hashed asset", "GET", asset, 200, "public, max-age=31536000, immutable", ""},
		{"head asset", "HEAD", asset, 200, "public, max-age=31536000, immutable", ""},
		{"missing asset", "GET", "/assets/nope-123.js", 404, "", ""},
		{"unknown api", "GET", "/api/v1/nope", 404, "", `"NOT_FOUND"`},
		{"api root", "GET", "/api", 404, "", `"NOT_FOUND"`},
		{"metrics", "GET", "/metrics", 404, "", `"NOT_FOUND"`},
		{"post to ui", "POST", "/tasks", 405, "", ""},
		{"dot segments", "GET", "/assets/../index.html", 200, "no-cache", `<div id="root">`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := get(t, h, tc.method, tc.path, nil)
			if rec.Code != tc.code {
				t.Fatalf("%s %s: code %d, want %d", tc.method, tc.path, rec.Code, tc.code)
			}
			if got := rec.Header().Get("Cache-Control"); tc.cache != "" && got != tc.cache {
				t.Errorf("Cache-Control = %q, want %q", got, tc.cache)
			}
			if tc.bodyHas != "" && !strings.Contains(rec.Body.String(), tc.bodyHas) {
				t.Errorf("body lacks %q: %.200s", tc.bodyHas, rec.Body.String())
			}
		})
	}
}

func TestHandlerContentTypes(t *testing.T) {
	h := Handler()
	if ct := get(t, h, "GET", "/", nil).Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("index Content-Type = %q", ct)
	}
	entries, _ := fs.ReadDir(Dist, "dist/assets")
	for _, e := range entries {
		rec := get(t, h, "GET", "/assets/"+e.Name(), nil)
		ct := rec.Header().Get("Content-Type")
		switch {
		case strings.HasSuffix(e.Name(), ".js") && !strings.Contains(ct, "javascript"):
			t.Errorf("%s: Content-Type %q", e.Name(), ct)
		case strings.HasSuffix(e.Name(), ".css") && !strings.HasPrefix(ct, "text/css"):
			t.Errorf("%s: Content-Type %q", e.Name(), ct)
		}
	}
}

func TestHandlerETag(t *testing.T) {
	h := Handler()
	first := get(t, h, "GET", "/", nil)
	etag := first.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag on index.html")
	}
	if rec := get(t, h, "GET", "/experiments/x", map[string]string{"If-None-Match": etag}); rec.Code != http.StatusNotModified {
		t.Fatalf("conditional GET: code %d, want 304", rec.Code)
	}
}

func TestNoSourceMaps(t *testing.T) {
	_ = fs.WalkDir(Dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".map") {
			t.Errorf("source map embedded: %s", p)
		}
		return nil
	})
}
