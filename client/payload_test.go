package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lance-context/lance-context/api"
)

// TestAppendPayloadStreamsAndRetriesFromTheStart: AppendPayload sends the
// payload as a multipart part, and a retry after a 503 that cut the first
// upload short sends the whole payload again, not what was left of it.
func TestAppendPayloadStreamsAndRetriesFromTheStart(t *testing.T) {
	real := newWorker(t, "")
	target, _ := url.Parse(real.URL)
	var attempts atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/records") && attempts.Add(1) == 1 {
			_, _ = io.CopyN(io.Discard, r.Body, 1000) // a part of the first upload only
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"OVERLOADED","message":"busy"}}`))
			return
		}
		r.URL.Scheme, r.URL.Host, r.RequestURI = target.Scheme, target.Host, ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer front.Close()
	ctx := context.Background()
	c := New(front.URL)
	if _, err := c.CreateStore(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	res, err := c.AppendPayload(ctx, "p", api.Record{RolloutID: "r"}, bytes.NewReader(payload), AppendOptions{Flush: true})
	if err != nil || res.Count != 1 {
		t.Fatalf("append: %+v %v", res, err)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	got, _, err := c.Blob(ctx, "p", res.IDs[0])
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("payload back: %d bytes, %v", len(got), err)
	}
	rec, err := c.Get(ctx, "p", res.IDs[0])
	if err != nil || rec.PayloadSize == nil || *rec.PayloadSize != int64(len(payload)) {
		t.Fatalf("record %+v %v", rec, err)
	}
}
