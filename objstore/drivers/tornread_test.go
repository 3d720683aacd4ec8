package drivers_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/azure"
	"github.com/lance-context/lance-context/objstore/gcs"
	"github.com/lance-context/lance-context/objstore/s3"
	"github.com/lance-context/lance-context/test/latencyproxy"
)

// The cloud drivers' reads under faults of the wire: each driver talks to
// an in-process server (gofakes3 for S3; for GCS and Azure, readFake, the
// read half of their protocols) through the latency proxy, which cuts
// chosen bodies mid-way or answers 503, and a recorder of the Range
// header of every GET.

// readFake serves reads of the objects in objs as GCS's JSON API (gcs) or
// Azure Blob Storage answers them: ranged GETs, honouring If-Match on the
// ETag and GCS's generation, and metadata (GCS: the object resource;
// Azure: HEAD). The emulators are separate processes that CI starts;
// this is the part a read needs, so that these tests always run.
type readFake struct {
	gcs  bool
	objs map[string][]byte // by object or blob name
}

func (f *readFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var name string
	if f.gcs {
		_, name, _ = strings.Cut(r.URL.Path, "/o/") // /storage/v1/b/BUCKET/o/NAME
	} else {
		name = strings.SplitN(r.URL.Path, "/", 4)[3] // /ACCOUNT/CONTAINER/NAME
	}
	data, ok := f.objs[name]
	q := r.URL.Query()
	if !ok || (f.gcs && q.Has("generation") && q.Get("generation") != "1") {
		if !f.gcs {
			w.Header().Set("x-ms-error-code", "BlobNotFound")
		}
		http.Error(w, `{"error":{"code":404,"message":"No such object"}}`, http.StatusNotFound)
		return
	}
	mod := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w.Header().Set("ETag", `"v1"`)
	if f.gcs {
		w.Header().Set("X-Goog-Generation", "1")
		w.Header().Set("X-Goog-Metageneration", "1")
		if q.Get("alt") != "media" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"kind":"storage#object","bucket":"lc-test","name":%q,"generation":"1","metageneration":"1","size":"%d","updated":%q}`,
				name, len(data), mod.Format(time.RFC3339))
			return
		}
	} else {
		w.Header().Set("x-ms-blob-type", "BlockBlob")
		r.Header.Set("Range", rangeOf(r))
	}
	http.ServeContent(w, r, "", mod, bytes.NewReader(data))
}

// rangeOf is r's Range header, or Azure's x-ms-range.
func rangeOf(r *http.Request) string {
	if v := r.Header.Get("X-Ms-Range"); v != "" {
		return v
	}
	return r.Header.Get("Range")
}

// rangeRecorder notes the range of every GET before the proxy sees it
// ("" for none).
type rangeRecorder struct {
	next http.Handler
	mu   sync.Mutex
	gets []string
}

func (rr *rangeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		rr.mu.Lock()
		rr.gets = append(rr.gets, rangeOf(r))
		rr.mu.Unlock()
	}
	rr.next.ServeHTTP(w, r)
}

// take returns the Range headers of the GETs since the last take.
func (rr *rangeRecorder) take() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	g := rr.gets
	rr.gets = nil
	return g
}

// faultRig is a store of one driver, the proxy in front of its server,
// and the recorder in front of the proxy.
type faultRig struct {
	s   objstore.Store
	p   *latencyproxy.Proxy
	rec *rangeRecorder
}

// newFaultRig starts the driver's server holding key with data, and
// returns the driver's store pointed at it through the proxy.
func newFaultRig(t *testing.T, driver, key string, data []byte) faultRig {
	t.Helper()
	ctx := context.Background()
	var target http.Handler
	if driver == "s3" {
		be := s3mem.New()
		if err := be.CreateBucket("lc-test"); err != nil {
			t.Fatal(err)
		}
		target = gofakes3.New(be).Server()
	} else {
		target = &readFake{gcs: driver == "gcs", objs: map[string][]byte{"p/" + key: data}}
	}
	up := httptest.NewServer(target)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	p := latencyproxy.New(u, 0)
	rec := &rangeRecorder{next: p}
	front := httptest.NewServer(rec)
	t.Cleanup(front.Close)
	var (
		s   objstore.Store
		err error
	)
	switch driver {
	case "s3":
		s, err = s3.New(ctx, s3.Config{Bucket: "lc-test", Prefix: "p", Endpoint: front.URL, AccessKeyID: "test", SecretAccessKey: "test"})
		if err == nil {
			err = s.Put(ctx, key, data)
		}
	case "gcs":
		s, err = gcs.New(ctx, gcs.Config{Bucket: "lc-test", Prefix: "p", Endpoint: front.URL})
	case "azure":
		s, err = azure.New(ctx, azure.Config{Container: "lc-test", Prefix: "p",
			Account: "devstoreaccount1", Key: base64.StdEncoding.EncodeToString([]byte("test key")), Endpoint: front.URL + "/devstoreaccount1"})
	}
	if err != nil {
		t.Fatal(err)
	}
	rec.take()
	return faultRig{s: s, p: p, rec: rec}
}

// byteSpan returns the bytes [start, end) of an object of size bytes that
// a Range header asks for: "bytes=a-b", "bytes=a-" or "bytes=-n"; "" is
// the whole object.
func byteSpan(t *testing.T, rng string, size int64) [2]int64 {
	t.Helper()
	if rng == "" {
		return [2]int64{0, size}
	}
	a, b, ok := strings.Cut(strings.TrimPrefix(rng, "bytes="), "-")
	if !ok {
		t.Fatalf("Range %q", rng)
	}
	if a == "" {
		n, _ := strconv.ParseInt(b, 10, 64)
		return [2]int64{max(size-n, 0), size}
	}
	start, _ := strconv.ParseInt(a, 10, 64)
	if b == "" {
		return [2]int64{start, size}
	}
	last, _ := strconv.ParseInt(b, 10, 64)
	return [2]int64{start, min(last+1, size)}
}

// readCase is one kind of read: what it returns, and the bytes of the
// object its first request asks for.
type readCase struct {
	name  string
	op    latencyproxy.Op // of the first request
	read  func(context.Context, objstore.Store) ([]byte, error)
	start int64 // of the bytes the read returns, in the object
	end   int64
}

func readCases(key string, size int64) []readCase {
	return []readCase{
		{"GetRange", latencyproxy.OpGetRange, func(ctx context.Context, s objstore.Store) ([]byte, error) {
			return s.GetRange(ctx, key, 1000, 50_000)
		}, 1000, 51_000},
		{"GetTail", latencyproxy.OpGetRange, func(ctx context.Context, s objstore.Store) ([]byte, error) {
			b, info, err := objstore.GetTail(ctx, s, key, 30_000)
			if err == nil && info.Size != size {
				err = fmt.Errorf("size %d, want %d", info.Size, size)
			}
			return b, err
		}, size - 30_000, size},
		{"Get", latencyproxy.OpGet, func(ctx context.Context, s objstore.Store) ([]byte, error) {
			return s.Get(ctx, key)
		}, 0, size},
	}
}

func tornTestObject() []byte {
	data := make([]byte, 100_000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return data
}

// TestRangeReadResumesAfterTornBody: a body that the connection cuts
// mid-way is resumed with a request for the bytes still missing, not
// restarted, and the read returns the right bytes. Under a fault proxy
// injecting mid-body resets, reads failed (listings answered 503) where a
// retry of the range would have answered.
func TestRangeReadResumesAfterTornBody(t *testing.T) {
	const key, cut = "data/x.lance", 7000
	data := tornTestObject()
	size := int64(len(data))
	for _, driver := range []string{"s3", "gcs", "azure"} {
		t.Run(driver, func(t *testing.T) {
			rig := newFaultRig(t, driver, key, data)
			for _, c := range readCases(key, size) {
				t.Run(c.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					rig.p.Tear(c.op, 1, cut)
					got, err := c.read(ctx, rig.s)
					if err != nil {
						t.Fatalf("read with its body cut after %d bytes: %v", cut, err)
					}
					if !bytes.Equal(got, data[c.start:c.end]) {
						t.Fatalf("read %d bytes, want bytes [%d, %d) of the object", len(got), c.start, c.end)
					}
					if torn := rig.p.Stats().Torn; torn != 1 {
						t.Fatalf("%d bodies cut, want 1", torn)
					}
					rig.p.Reset()
					gets := rig.rec.take()
					if len(gets) != 2 {
						t.Fatalf("GETs with Range %q, want 2: the cut one and its rest", gets)
					}
					want := [2]int64{c.start + cut, c.end}
					if span := byteSpan(t, gets[1], size); span != want {
						t.Fatalf("the retry asked for %q, bytes %v; want only the rest, %v", gets[1], span, want)
					}
				})
			}
		})
	}
}

// TestRangeReadRetriesTransientStatus: a read answered 503 is retried, and
// a read answered 503 every time gives up after readAttempts (5) requests
// (the SDKs' own retries are off, not multiplying them), promptly, with
// the status in its error.
func TestRangeReadRetriesTransientStatus(t *testing.T) {
	const key = "data/x.lance"
	data := tornTestObject()
	size := int64(len(data))
	for _, driver := range []string{"s3", "gcs", "azure"} {
		t.Run(driver, func(t *testing.T) {
			rig := newFaultRig(t, driver, key, data)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, c := range readCases(key, size) {
				rig.p.Lose(c.op, 1)
				got, err := c.read(ctx, rig.s)
				if err != nil || !bytes.Equal(got, data[c.start:c.end]) {
					t.Fatalf("%s after one 503: %d bytes, %v", c.name, len(got), err)
				}
				if gets := rig.rec.take(); len(gets) != 2 {
					t.Fatalf("%s: GETs with Range %q, want 2", c.name, gets)
				}
			}
			c := readCases(key, size)[0]
			rig.p.Lose(c.op, 1000)
			start := time.Now()
			_, err := c.read(ctx, rig.s)
			if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "gave up after 5 attempts") {
				t.Fatalf("read answered 503 every time: %v, want it to give up after 5 attempts, naming the status", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("gave up after %v, want within seconds", d)
			}
			if gets := rig.rec.take(); len(gets) != 5 {
				t.Fatalf("%d GETs, want 5", len(gets))
			}
		})
	}
}

// TestRangeReadTornEveryTimeGivesUp: a read whose every body is cut
// gives up after a bounded number of requests, each asking for the rest.
// (Not GCS: its client resumes a cut body by itself for as long as each
// resume brings bytes, so a read cut every 7000 bytes completes there.)
func TestRangeReadTornEveryTimeGivesUp(t *testing.T) {
	const key, cut = "data/x.lance", 7000
	data := tornTestObject()
	size := int64(len(data))
	for _, driver := range []string{"s3", "azure"} {
		t.Run(driver, func(t *testing.T) {
			rig := newFaultRig(t, driver, key, data)
			c := readCases(key, size)[0]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rig.p.Tear(latencyproxy.OpGetRange, 1000, cut)
			if _, err := c.read(ctx, rig.s); err == nil || !strings.Contains(err.Error(), "gave up after 5 attempts") {
				t.Fatalf("read cut every %d bytes: %v, want it to give up after 5 attempts", cut, err)
			}
			gets := rig.rec.take()
			if len(gets) != 5 {
				t.Fatalf("GETs with Range %q, want 5", gets)
			}
			for i, g := range gets {
				want := [2]int64{c.start + int64(i)*cut, c.end}
				if span := byteSpan(t, g, size); span != want {
					t.Fatalf("request %d asked for %q, bytes %v; want %v", i+1, g, span, want)
				}
			}
		})
	}
}

// TestTearingTransportReadsResume: under TearingTransport tearing a third
// of the bodies at random (seeded), every read of an S3 store returns the
// right bytes, each torn body resumed; a hook tears one body exactly.
func TestTearingTransportReadsResume(t *testing.T) {
	ctx := context.Background()
	be := s3mem.New()
	if err := be.CreateBucket("lc-test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	tr := objstore.NewTearingTransport(nil, objstore.TearConfig{Seed: 7, Rate: 0.3})
	s, err := s3.New(ctx, s3.Config{Bucket: "lc-test", Endpoint: srv.URL,
		AccessKeyID: "test", SecretAccessKey: "test", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	data := tornTestObject()
	size := int64(len(data))
	if err := s.Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 60 {
		off := r.Int64N(size)
		n := 1 + r.Int64N(size-off)
		got, err := s.GetRange(ctx, "x", off, n)
		if err != nil || !bytes.Equal(got, data[off:off+n]) {
			t.Fatalf("read %d, [%d, +%d): %d bytes, %v", i, off, n, len(got), err)
		}
	}
	if n := tr.Torn(); n < 10 {
		t.Fatalf("%d bodies torn in 60 reads at rate 0.3, want more", n)
	}

	hooked := objstore.NewTearingTransport(nil, objstore.TearConfig{Hook: func(_ *http.Request, call int, _ int64) int64 {
		if call == 1 {
			return 10
		}
		return -1
	}})
	s, err = s3.New(ctx, s3.Config{Bucket: "lc-test", Endpoint: srv.URL,
		AccessKeyID: "test", SecretAccessKey: "test", Transport: hooked})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "x"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get with its body torn after 10 bytes: %d bytes, %v", len(got), err)
	}
	if n := hooked.Torn(); n != 1 {
		t.Fatalf("%d bodies torn, want 1", n)
	}
}
