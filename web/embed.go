// Package web holds the built data-browser UI (a React single-page application) and serves it.
//
// The sources live next to this file (src/, index.html); `npm ci && npm run build` writes the
// production bundle to dist/, which is committed so that `go build` needs no Node toolchain.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Dist is the built UI: dist/index.html and the content-hashed files under dist/assets/.
// Rebuild it with `cd web && npm ci && npm run build`.
//
//go:embed all:dist
var Dist embed.FS

const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

type file struct {
	data  []byte
	ctype string
	etag  string
}

var (
	loadOnce sync.Once
	files    map[string]*file // by slash path without the leading "/", e.g. "assets/index-x.js"
)

func load() {
	files = make(map[string]*file)
	root, err := fs.Sub(Dist, "dist")
	if err != nil {
		return
	}
	_ = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(root, p)
		if err != nil {
			return nil
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = http.DetectContentType(data)
		}
		sum := sha256.Sum256(data)
		files[p] = &file{data: data, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
}

// Handler serves the UI. Files in dist are served as they are: the content-hashed files under
// /assets/ with a one-year immutable cache, everything else (index.html included) with
// "no-cache" and an ETag, so a new build shows up on the next load. Any other path outside
// /assets/ answers index.html, so client-side routes (/experiments/x/records, /tasks) survive a
// reload. Paths under /api/ and /metrics are never answered with the UI: they get a JSON 404,
// which matters when the API is mounted on the same mux and a route is unknown. Only GET and
// HEAD are allowed.
//
// Mount it as the catch-all of the master's mux, after the API routes:
//
//	mux.Handle("/", web.Handler())
func Handler() http.Handler {
	loadOnce.Do(load)
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if p == "/api" || strings.HasPrefix(p, "/api/") || p == "/metrics" || strings.HasPrefix(p, "/metrics/") {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"NOT_FOUND","message":"no such endpoint"}}` + "\n"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean(p), "/")
	if f, ok := files[name]; ok && name != "index.html" {
		if strings.HasPrefix(name, "assets/") {
			send(w, r, f, cacheImmutable)
		} else {
			send(w, r, f, cacheRevalidate)
		}
		return
	}
	if strings.HasPrefix(name, "assets/") {
		// A missing hashed asset (an old page after a deploy) must not receive index.html.
		http.NotFound(w, r)
		return
	}
	index, ok := files["index.html"]
	if !ok {
		http.Error(w, "the web UI is not built (cd web && npm ci && npm run build)", http.StatusServiceUnavailable)
		return
	}
	send(w, r, index, cacheRevalidate)
}

func send(w http.ResponseWriter, r *http.Request, f *file, cache string) {
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", cache)
	h.Set("ETag", f.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	// ServeContent answers If-None-Match with 304 and handles HEAD and Range.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
}
