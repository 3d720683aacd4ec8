package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// DebugListenEnv names the address of the profiling listener. Unset, there
// is none: profiles expose internals, so they are served only on an address
// an operator chose, apart from the API and its token.
const DebugListenEnv = "LC_DEBUG_LISTEN"

// DebugHandler serves Go's runtime profiles under /debug/pprof/.
func DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// ServeDebugFromEnv starts the profiling listener on $LC_DEBUG_LISTEN, if
// set, until ctx ends. It returns the bound address (nil when unset).
func ServeDebugFromEnv(ctx context.Context) (net.Addr, error) {
	addr := os.Getenv(DebugListenEnv)
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", DebugListenEnv, addr, err)
	}
	// No write timeout: a CPU profile or trace answers after its seconds.
	hs := &http.Server{Handler: DebugHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Warn("debug listener", "err", err)
		}
	}()
	slog.Info("profiles served", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return ln.Addr(), nil
}
