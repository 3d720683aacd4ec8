package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestServeDebugFromEnv(t *testing.T) {
	t.Setenv(DebugListenEnv, "")
	if addr, err := ServeDebugFromEnv(t.Context()); addr != nil || err != nil {
		t.Fatalf("unset: got %v, %v; want no listener", addr, err)
	}
	t.Setenv(DebugListenEnv, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(t.Context())
	addr, err := ServeDebugFromEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.200s", resp.StatusCode, body)
	}
	cancel()
	// The listener closes with its context.
	for range 100 {
		if _, err := http.Get("http://" + addr.String() + "/debug/pprof/"); err != nil {
			return
		}
	}
	t.Fatal("debug listener still serving after its context ended")
}
