package latencyproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	req := func(method, target string, hdr ...string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	for _, c := range []struct {
		r    *http.Request
		want Op
	}{
		// S3, path style.
		{req("GET", "/lc-test/t/_versions/1.manifest"), OpGet},
		{req("GET", "/lc-test/t/data/x.lance", "Range", "bytes=0-99"), OpGetRange},
		{req("HEAD", "/lc-test/t/x"), OpHead},
		{req("GET", "/lc-test?list-type=2&prefix=t%2F"), OpList},
		{req("GET", "/lc-test"), OpList},
		{req("PUT", "/lc-test/t/x"), OpPut},
		{req("PUT", "/lc-test/t/wal/1", "If-None-Match", "*"), OpPutConditional},
		{req("POST", "/lc-test/t/big?uploads"), OpMultipart},
		{req("PUT", "/lc-test/t/big?partNumber=1&uploadId=u"), OpMultipart},
		{req("POST", "/lc-test/t/big?uploadId=u"), OpMultipart},
		{req("DELETE", "/lc-test/t/big?uploadId=u"), OpMultipart},
		{req("DELETE", "/lc-test/t/x"), OpDelete},
		{req("PUT", "/lc-test"), OpPut},
		// GCS JSON API.
		{req("GET", "/storage/v1/b/lc-test/o/t%2Fx?alt=media"), OpGet},
		{req("GET", "/storage/v1/b/lc-test/o/t%2Fx?alt=media", "Range", "bytes=5-9"), OpGetRange},
		{req("GET", "/storage/v1/b/lc-test/o/t%2Fx?alt=json&prettyPrint=false"), OpHead},
		{req("GET", "/storage/v1/b/lc-test/o?prefix=t%2F"), OpList},
		{req("POST", "/upload/storage/v1/b/lc-test/o?uploadType=multipart&ifGenerationMatch=0"), OpPutConditional},
		{req("POST", "/upload/storage/v1/b/lc-test/o?uploadType=multipart"), OpPut},
		{req("POST", "/upload/storage/v1/b/lc-test/o?uploadType=resumable"), OpMultipart},
		{req("PUT", "/upload/storage/v1/b/lc-test/o?uploadType=resumable&upload_id=abc"), OpMultipart},
		{req("DELETE", "/storage/v1/b/lc-test/o/t%2Fx"), OpDelete},
		{req("POST", "/storage/v1/b?project=p"), OpOther},
		// Azure Blob.
		{req("GET", "/devstoreaccount1/lc-test/t/x"), OpGet},
		{req("GET", "/devstoreaccount1/lc-test/t/x", "X-Ms-Range", "bytes=0-9"), OpGetRange},
		{req("HEAD", "/devstoreaccount1/lc-test/t/x"), OpHead},
		{req("GET", "/devstoreaccount1/lc-test?restype=container&comp=list&prefix=t%2F"), OpList},
		{req("PUT", "/devstoreaccount1/lc-test/t/x", "X-Ms-Blob-Type", "BlockBlob"), OpPut},
		{req("PUT", "/devstoreaccount1/lc-test/t/x", "If-None-Match", "*"), OpPutConditional},
		{req("PUT", "/devstoreaccount1/lc-test/t/x?comp=block&blockid=YQ%3D%3D"), OpMultipart},
		{req("PUT", "/devstoreaccount1/lc-test/t/x?comp=blocklist"), OpMultipart},
		{req("PUT", "/devstoreaccount1/lc-test?restype=container"), OpOther},
		{req("DELETE", "/devstoreaccount1/lc-test/t/x"), OpDelete},
		{req("OPTIONS", "/x/y"), OpOther},
	} {
		if got := Classify(c.r); got != c.want {
			t.Errorf("%s %s %v: %s, want %s", c.r.Method, c.r.URL, c.r.Header, got, c.want)
		}
	}
}

// upstream is a tiny object server: GET returns the body stored by PUT.
func upstream(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	objs := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			objs[r.URL.Path] = b
			w.Header().Set("X-Host-Seen", r.Host)
		case http.MethodGet:
			b, ok := objs[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Write(b)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func startProxy(t *testing.T, target string, delay time.Duration) (*Proxy, *httptest.Server, *httptest.Server) {
	u, _ := url.Parse(target)
	p := New(u, delay)
	front := httptest.NewServer(p)
	admin := httptest.NewServer(p.AdminHandler())
	t.Cleanup(front.Close)
	t.Cleanup(admin.Close)
	return p, front, admin
}

func do(t *testing.T, method, url, body string, hdr ...string) *http.Response {
	t.Helper()
	r, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestBytesOutCountedBeforeTheClientHasThem: the bytes of a response are
// in the stats once the client has read them, though the proxy's handler
// has not returned. They were counted when it returned, and a client that
// read a whole body and then the stats could miss them (CI: "bytes out 20,
// want 25" after four GETs at once).
func TestBytesOutCountedBeforeTheClientHasThem(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello"))
		w.(http.Flusher).Flush() // no Content-Length: the proxy streams it on
		<-release
	}))
	t.Cleanup(up.Close)
	p, front, _ := startProxy(t, up.URL, 0)
	t.Cleanup(func() { close(release) }) // before the servers close
	resp := do(t, "GET", front.URL+"/b/k", "")
	b := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	if s := p.Stats(); s.BytesOut != 5 {
		t.Fatalf("bytes out %d once the client has the 5 bytes, want 5", s.BytesOut)
	}
}

func TestProxyForwardsDelaysAndCounts(t *testing.T) {
	up := upstream(t)
	const delay = 40 * time.Millisecond
	p, front, admin := startProxy(t, up.URL, delay)

	start := time.Now()
	resp := do(t, "PUT", front.URL+"/b/k", "hello")
	if d := time.Since(start); d < delay {
		t.Fatalf("PUT took %v, want at least the %v delay", d, delay)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: %s", resp.Status)
	}
	// The Host the client sent reaches the server (S3 signatures cover it).
	if got, want := resp.Header.Get("X-Host-Seen"), strings.TrimPrefix(front.URL, "http://"); got != want {
		t.Fatalf("server saw Host %q, want %q", got, want)
	}
	resp = do(t, "GET", front.URL+"/b/k", "", "Range", "bytes=0-1")
	if b, _ := io.ReadAll(resp.Body); string(b) != "hello" {
		t.Fatalf("GET through the proxy = %q", b)
	}
	// Four GETs at once: one round trip, four in flight.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r, err := http.Get(front.URL + "/b/k")
			if err == nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
		})
	}
	wg.Wait()
	s := p.Stats()
	if s.Requests != 6 || s.ByMethod["PUT"] != 1 || s.ByMethod["GET"] != 5 ||
		s.ByOp[OpPut] != 1 || s.ByOp[OpGetRange] != 1 || s.ByOp[OpGet] != 4 {
		t.Fatalf("stats %+v", s)
	}
	if s.Sequential != 3 || s.MaxInFlight != 4 {
		t.Fatalf("sequential %d, in flight %d; want 3 and 4", s.Sequential, s.MaxInFlight)
	}
	if s.BytesIn != 5 || s.BytesOut != 25 || s.DelayMS != 40 {
		t.Fatalf("bytes in %d out %d, delay %d ms; want 5, 25, 40", s.BytesIn, s.BytesOut, s.DelayMS)
	}

	// Admin: stats as JSON, reset, delay.
	var got Stats
	if err := json.NewDecoder(do(t, "GET", admin.URL+"/__stats", "").Body).Decode(&got); err != nil || got.Requests != 6 {
		t.Fatalf("/__stats = %+v, %v", got, err)
	}
	if r := do(t, "POST", admin.URL+"/__reset", ""); r.StatusCode != 200 {
		t.Fatalf("/__reset: %s", r.Status)
	}
	if s := p.Stats(); s.Requests != 0 || len(s.ByOp) != 0 || s.Sequential != 0 {
		t.Fatalf("after reset: %+v", s)
	}
	if r := do(t, "POST", admin.URL+"/__delay?ms=0", ""); r.StatusCode != 200 {
		t.Fatalf("/__delay: %s", r.Status)
	}
	start = time.Now()
	do(t, "GET", front.URL+"/b/k", "")
	if d := time.Since(start); d >= delay {
		t.Errorf("GET after /__delay?ms=0 took %v", d)
	}
	for _, bad := range []string{"/__delay?ms=-1", "/__delay", "/__lose?op=nope&n=1", "/__lose?op=get"} {
		if r := do(t, "POST", admin.URL+bad, ""); r.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s: %s, want 400", bad, r.Status)
		}
	}
}

func TestProxyLose(t *testing.T) {
	up := upstream(t)
	p, front, admin := startProxy(t, up.URL, 0)
	if r := do(t, "POST", admin.URL+"/__lose?op=put_conditional&n=1", ""); r.StatusCode != http.StatusNoContent {
		t.Fatalf("/__lose: %s", r.Status)
	}
	if r := do(t, "PUT", front.URL+"/b/plain", "p"); r.StatusCode != 200 {
		t.Fatalf("unconditional PUT: %s (only put_conditional answers are dropped)", r.Status)
	}
	if r := do(t, "PUT", front.URL+"/b/k", "v", "If-None-Match", "*"); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("conditional PUT: %s, want 503", r.Status)
	}
	// The request was carried out all the same.
	if b, _ := io.ReadAll(do(t, "GET", front.URL+"/b/k", "").Body); string(b) != "v" {
		t.Fatalf("object after the lost answer = %q, want v", b)
	}
	if r := do(t, "PUT", front.URL+"/b/k2", "w", "If-None-Match", "*"); r.StatusCode != 200 {
		t.Fatalf("second conditional PUT: %s (n=1 drops one answer)", r.Status)
	}
	if s := p.Stats(); s.Lost != 1 {
		t.Fatalf("lost = %d, want 1", s.Lost)
	}
}

// TestProxyTear: /__tear cuts the next n bodies of a kind after the bytes
// asked for and drops the connection: the client has those bytes and then
// a read error. Later requests, and bodies no longer than the cut, arrive
// whole.
func TestProxyTear(t *testing.T) {
	up := upstream(t)
	p, front, admin := startProxy(t, up.URL, 0)
	body := strings.Repeat("0123456789", 10000)
	do(t, "PUT", front.URL+"/b/big", body)
	do(t, "PUT", front.URL+"/b/small", "tiny")
	if r := do(t, "POST", admin.URL+"/__tear?op=get&n=2&after=1000", ""); r.StatusCode != http.StatusNoContent {
		t.Fatalf("/__tear: %s", r.Status)
	}
	if r := do(t, "POST", admin.URL+"/__tear?op=get&n=1", ""); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("/__tear without after: %s, want 400", r.Status)
	}
	r := do(t, "GET", front.URL+"/b/big", "")
	got, err := io.ReadAll(r.Body)
	if err == nil || string(got) != body[:1000] {
		t.Fatalf("torn GET: %d bytes, err %v; want the first 1000 and an error", len(got), err)
	}
	if b, err := io.ReadAll(do(t, "GET", front.URL+"/b/small", "").Body); err != nil || string(b) != "tiny" {
		t.Fatalf("a body shorter than the cut: %q, %v", b, err)
	}
	if b, err := io.ReadAll(do(t, "GET", front.URL+"/b/big", "").Body); err != nil || string(b) != body {
		t.Fatalf("GET after the tears: %d bytes, %v", len(b), err)
	}
	if s := p.Stats(); s.Torn != 1 {
		t.Fatalf("torn = %d, want 1", s.Torn)
	}
}

func TestServe(t *testing.T) {
	up := upstream(t)
	u, _ := url.Parse(up.URL)
	p := New(u, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, "127.0.0.1:0", "127.0.0.1:0") }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	// An address in use is an error, not a hang.
	l := httptest.NewServer(http.NotFoundHandler())
	defer l.Close()
	err := p.Serve(context.Background(), strings.TrimPrefix(l.URL, "http://"), "127.0.0.1:0")
	if err == nil {
		t.Fatal("Serve on an address in use succeeded")
	}
}

// TestProxyResetDuringRequest: a request in flight across a reset neither
// deepens the new period's chain nor hides from WaitIdle.
func TestProxyResetDuringRequest(t *testing.T) {
	up := upstream(t)
	p, front, _ := startProxy(t, up.URL, 0)
	do(t, "PUT", front.URL+"/b/k", "v")
	do(t, "PUT", front.URL+"/b/k", "v") // depth 2
	p.SetDelay(150 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := http.Get(front.URL + "/b/k") // depth 3, finishes after the reset
		if err == nil {
			r.Body.Close()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	p.Reset()
	start := time.Now()
	if err := p.WaitIdle(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("WaitIdle returned while a request was in flight")
	}
	<-done
	p.SetDelay(0)
	do(t, "GET", front.URL+"/b/k", "")
	if s := p.Stats(); s.Sequential != 1 || s.Requests != 1 {
		t.Fatalf("after the reset: %d requests, sequential %d; want 1 and 1", s.Requests, s.Sequential)
	}
}

// TestProxyFaults: each random fault at rate 1 does what it says to every
// request of the kinds chosen, and the admin route sets and clears them.
func TestProxyFaults(t *testing.T) {
	up := upstream(t)
	p, front, admin := startProxy(t, up.URL, 0)
	body := strings.Repeat("0123456789", 10000)
	do(t, "PUT", front.URL+"/b/big", body)
	get := func(key string) (int, string, error) {
		resp, err := http.Get(front.URL + key)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	setFaults := func(q string) {
		t.Helper()
		if r := do(t, "POST", admin.URL+"/__faults?"+q, ""); r.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(r.Body)
			t.Fatalf("/__faults?%s: %s %s", q, r.Status, b)
		}
	}

	// 503: not forwarded, an S3 error body.
	setFaults("error_503=1&seed=1")
	if r := do(t, "PUT", front.URL+"/b/k503", "v"); r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("PUT under error_503=1: %s", r.Status)
	}
	if st, b, _ := get("/b/big"); st != http.StatusServiceUnavailable || !strings.Contains(b, "<Code>SlowDown</Code>") {
		t.Fatalf("GET under error_503=1: %d %q", st, b)
	}

	// Resets: no answer; some requests were carried out, some not.
	setFaults("reset=1&seed=7")
	const n = 24
	for i := range n {
		r, _ := http.NewRequest("PUT", fmt.Sprintf("%s/b/r%d", front.URL, i), strings.NewReader("v"))
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
			t.Fatalf("PUT under reset=1 was answered: %s", resp.Status)
		}
	}

	// Tears: the body stops short with an error.
	setFaults("tear=1&seed=3")
	for range 5 {
		if _, b, err := get("/b/big"); err == nil || len(b) >= len(body) || body[:len(b)] != b {
			t.Fatalf("GET under tear=1: %d bytes, err %v; want a prefix and an error", len(b), err)
		}
	}

	// Stalls: late, but whole.
	setFaults("stall=1&stall_ms=200&seed=5")
	for range 4 {
		start := time.Now()
		if st, b, err := get("/b/big"); err != nil || st != 200 || b != body {
			t.Fatalf("GET under stall=1: %d, %d bytes, %v", st, len(b), err)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("GET under stall=1 took %v, want >= 200ms", d)
		}
	}

	// Only the kinds named.
	setFaults("error_503=1&ops=get,get_range")
	if r := do(t, "PUT", front.URL+"/b/ok", "v"); r.StatusCode != 200 {
		t.Fatalf("PUT with faults on gets only: %s", r.Status)
	}

	// Off: everything passes, and the resets were half before, half after.
	setFaults("")
	if st, b, err := get("/b/big"); err != nil || st != 200 || b != body {
		t.Fatalf("GET with faults off: %d, %d bytes, %v", st, len(b), err)
	}
	if st, _, _ := get("/b/k503"); st != http.StatusNotFound {
		t.Fatalf("the PUT answered 503 reached the server: GET %d", st)
	}
	carried := 0
	for i := range n {
		if st, _, _ := get(fmt.Sprintf("/b/r%d", i)); st == 200 {
			carried++
		}
	}
	if carried == 0 || carried == n {
		t.Fatalf("%d of %d reset PUTs were carried out; want some but not all", carried, n)
	}
	s := p.Stats()
	if s.Injected503 != 2 || s.Reset != n || s.Torn != 5 || s.Stalled != 4 {
		t.Fatalf("stats: 503 %d, reset %d, torn %d, stalled %d; want 2, %d, 5, 4", s.Injected503, s.Reset, s.Torn, s.Stalled, n)
	}
	for _, bad := range []string{"error_503=2", "tear=-0.1", "stall=0.1", "error_503=0.6&reset=0.6", "ops=nope", "seed=x", "stall=0.1&stall_ms=-1"} {
		if r := do(t, "POST", admin.URL+"/__faults?"+bad, ""); r.StatusCode != http.StatusBadRequest {
			t.Errorf("POST /__faults?%s: %s, want 400", bad, r.Status)
		}
	}
}

// TestTrace: with SetTrace(true) each request since the reset is listed
// once it ends: its kind, object, range, bytes and depth (a request sent
// after another's answer is one deeper).
func TestTrace(t *testing.T) {
	up := upstream(t)
	p, front, _ := startProxy(t, up.URL, 5*time.Millisecond)
	io.Copy(io.Discard, do(t, "PUT", front.URL+"/b/k", "0123456789").Body)
	if s := p.Stats(); len(s.Trace) != 0 {
		t.Fatalf("a trace without SetTrace: %+v", s.Trace)
	}
	p.SetTrace(true)
	p.Reset()
	io.Copy(io.Discard, do(t, "GET", front.URL+"/b/k", "").Body)
	io.Copy(io.Discard, do(t, "GET", front.URL+"/b/k", "", "Range", "bytes=2-5").Body)
	// An entry is added when the proxy's handler returns, which can be
	// after the client has read the whole body.
	if err := p.WaitIdle(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	tr := p.Stats().Trace
	if len(tr) != 2 {
		t.Fatalf("trace %+v, want 2 requests", tr)
	}
	if e := tr[0]; e.Op != OpGet || e.Key != "/b/k" || e.Bytes != 10 || e.Depth != 1 || e.EndMS < e.StartMS+5 {
		t.Fatalf("first entry %+v, want a get of /b/k, 10 bytes, depth 1, at least 5 ms", e)
	}
	if e := tr[1]; e.Op != OpGetRange || e.Range != "bytes=2-5" || e.Depth != 2 || e.StartMS < tr[0].EndMS {
		t.Fatalf("second entry %+v, want a get_range bytes=2-5 at depth 2 after the first", e)
	}
	p.Reset()
	if s := p.Stats(); len(s.Trace) != 0 {
		t.Fatalf("a trace after Reset: %+v", s.Trace)
	}
}
