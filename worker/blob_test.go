package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// blobServer is a worker over memory storage with one store, "s", whose
// parts above 1 MiB stream to payload objects; root is its storage.
func blobServer(t *testing.T, cfg Config) (*httptest.Server, objstore.Store) {
	t.Helper()
	srv, root, _ := blobServerOf(t, cfg)
	return srv, root
}

// blobServerOf is blobServer with the worker behind it.
func blobServerOf(t *testing.T, cfg Config) (*httptest.Server, objstore.Store, *Server) {
	t.Helper()
	root := objstore.NewMemory()
	catalog := rollout.NewCatalog(root, rollout.ShardID("t"), cfg.StoreOptions())
	s := NewServer(cfg, catalog, NewRegistry())
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = catalog.Close(context.Background())
	})
	if code, body := send(t, srv, "POST", "/api/v1/rollouts", "application/json", nil, []byte(`{"name":"s"}`)); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	return srv, root, s
}

func blobConfig() Config {
	c := hostileConfig()
	c.BlobInlineBytes, c.MaxBlobBytes = 1<<20, 16<<20
	return c
}

// payloadBody is a multipart append of one record per payload.
func payloadBody(t *testing.T, meta string, payloads ...[]byte) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	p, _ := mw.CreateFormField("metadata")
	p.Write([]byte(meta))
	for i, data := range payloads {
		p, _ := mw.CreateFormFile(fmt.Sprint(i), "x")
		p.Write(data)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), mw.FormDataContentType()
}

func noise(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func blobObjects(t *testing.T, root objstore.Store) int {
	t.Helper()
	objs, err := root.List(context.Background(), "s.rollout.lance/_lc_blobs/")
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

// TestLargePartsStreamToObjects: a part above the inline size is stored as
// an object and reads back whole and by range, with its checksum as the
// ETag; a small part stays inline.
func TestLargePartsStreamToObjects(t *testing.T) {
	srv, root := blobServer(t, blobConfig())
	big, small := noise(5<<20+7, 1), noise(1000, 2)
	body, ctype := payloadBody(t, `{"records":[{"id":"big","rollout_id":"r","content_type":"application/x-tar"},{"id":"small","rollout_id":"r"}]}`, big, small)
	if code, out := send(t, srv, "POST", "/api/v1/rollouts/s/records?flush=true", ctype, nil, body); code != 201 {
		t.Fatalf("append: %d %s", code, out)
	}
	if n := blobObjects(t, root); n != 1 {
		t.Fatalf("%d payload objects, want 1 (the small part stays inline)", n)
	}
	sum := sha256.Sum256(big)
	code, got, hdr := sendH(t, srv, "GET", "/api/v1/rollouts/s/records/big/blob", "", nil, nil)
	if code != 200 || got != string(big) || hdr.Get("Content-Type") != "application/x-tar" || hdr.Get("ETag") != `"sha256-`+hex.EncodeToString(sum[:])+`"` {
		t.Fatalf("download: %d, %d bytes, headers %v", code, len(got), hdr)
	}
	code, got, _ = sendH(t, srv, "GET", "/api/v1/rollouts/s/records/big/blob", "", http.Header{"Range": {"bytes=4194300-4194310"}}, nil)
	if code != http.StatusPartialContent || got != string(big[4194300:4194311]) {
		t.Fatalf("range: %d %q", code, got)
	}
	if code, got := send(t, srv, "GET", "/api/v1/rollouts/s/records/small/blob", "", nil, nil); code != 200 || got != string(small) {
		t.Fatalf("small: %d, %d bytes", code, len(got))
	}
	code, rec := send(t, srv, "GET", "/api/v1/rollouts/s/records/big", "", nil, nil)
	if code != 200 || !strings.Contains(rec, fmt.Sprintf(`"payload_size":%d`, len(big))) || !strings.Contains(rec, hex.EncodeToString(sum[:])) || strings.Contains(rec, "_lc_blobs") {
		t.Fatalf("record: %d %s", code, rec)
	}
}

// TestRefusedLargePartsLeaveNoObject: a part over the limit (413), a size
// or checksum that does not match (400) and a record refused by
// validation (400) each store nothing, payload object included.
func TestRefusedLargePartsLeaveNoObject(t *testing.T) {
	srv, root := blobServer(t, blobConfig())
	big := noise(3<<20, 3)
	for _, tc := range []struct {
		name, meta string
		data       []byte
		status     int
		msg        string
	}{
		{"too large", `{"records":[{"id":"a","rollout_id":"r"}]}`, noise(17<<20, 4), 413, "LC_MAX_BLOB_BYTES"},
		{"size", `{"records":[{"id":"a","rollout_id":"r","payload_size":5}]}`, big, 400, "payload_size 5 does not match"},
		{"checksum", `{"records":[{"id":"a","rollout_id":"r","payload_checksum":"sha256:00"}]}`, big, 400, "payload_checksum does not match"},
		{"invalid record", `{"records":[{"id":"a","rollout_id":"r","sequence_order":-1}]}`, big, 400, "sequence_order"},
	} {
		body, ctype := payloadBody(t, tc.meta, tc.data)
		code, out := send(t, srv, "POST", "/api/v1/rollouts/s/records", ctype, nil, body)
		if code != tc.status || !strings.Contains(out, tc.msg) {
			t.Fatalf("%s: %d %s", tc.name, code, out)
		}
		if n := blobObjects(t, root); n != 0 {
			t.Fatalf("%s: %d payload objects left", tc.name, n)
		}
	}
	if ids := storedIDs(t, srv); len(ids) != 0 {
		t.Fatalf("stored %v", ids)
	}
}

// TestPayloadUploadBudgetAnswers503: past LC_INFLIGHT_BLOB_BYTES a
// multipart append answers 503 with Retry-After; JSON appends are not
// held by it.
func TestPayloadUploadBudgetAnswers503(t *testing.T) {
	cfg := blobConfig()
	cfg.InflightBlobBytes = 1
	srv, _ := blobServer(t, cfg)
	// One upload in flight: a body that has not finished arriving.
	hold := stalledUpload(t, srv)
	var code int
	var hdr http.Header
	// Until the held request holds the budget (it may take a while to be
	// read on a loaded machine; uploads before that are stored). If a probe
	// held the budget when the held request arrived, that one was refused
	// (CI saw it): hold again.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		body, ctype := payloadBody(t, `{"records":[{"id":"b","rollout_id":"r"}]}`, []byte("x"))
		code, _, hdr = sendH(t, srv, "POST", "/api/v1/rollouts/s/records", ctype, nil, body)
		if code == 503 {
			break
		}
		if _, refused := answer(hold, 20*time.Millisecond); refused {
			hold.Close()
			hold = stalledUpload(t, srv)
		}
	}
	if code != 503 || hdr.Get("Retry-After") == "" {
		t.Fatalf("second upload: %d, Retry-After %q", code, hdr.Get("Retry-After"))
	}
	if code, out := send(t, srv, "POST", "/api/v1/rollouts/s/records", "application/json", nil, []byte(`{"records":[{"id":"j","rollout_id":"r"}]}`)); code != 201 {
		t.Fatalf("a JSON append during an upload: %d %s", code, out)
	}
	// The held upload, cut, is refused as a bad body.
	fmt.Fprint(hold, "0\r\n\r\n")
	if c, ok := answer(hold, 10*time.Second); !ok || c != 400 {
		t.Fatalf("the cut upload: %d (answered %v)", c, ok)
	}
	hold.Close()
}

// TestMultipartMemoryStaysWithinTheBodyLimit: only streamed parts may take
// a multipart body past LC_MAX_BODY_BYTES; the metadata and the inline
// parts, which are held in memory, may not.
func TestMultipartMemoryStaysWithinTheBodyLimit(t *testing.T) {
	cfg := blobConfig()
	cfg.MaxBodyBytes = 4 << 20
	srv, root := blobServer(t, cfg)
	meta := `{"records":[{"id":"a","rollout_id":"r"},{"id":"b","rollout_id":"r"},{"id":"c","rollout_id":"r"},{"id":"d","rollout_id":"r"},{"id":"e","rollout_id":"r"}]}`
	mib := noise(1<<20, 9)
	body, ctype := payloadBody(t, meta, mib, mib, mib, mib, mib)
	code, out := send(t, srv, "POST", "/api/v1/rollouts/s/records", ctype, nil, body)
	wantError(t, "five inline parts", code, out, 413, "PAYLOAD_TOO_LARGE", "4194304 bytes")
	// One part streamed: a body past the limit is fine.
	body, ctype = payloadBody(t, `{"records":[{"id":"big","rollout_id":"r"}]}`, noise(6<<20, 10))
	if code, out := send(t, srv, "POST", "/api/v1/rollouts/s/records?flush=true", ctype, nil, body); code != 201 {
		t.Fatalf("a 6 MiB streamed part under a 4 MiB body limit: %d %s", code, out)
	}
	if ids := storedIDs(t, srv); len(ids) != 1 || ids[0] != "big" || blobObjects(t, root) != 1 {
		t.Fatalf("stored %v, %d objects", ids, blobObjects(t, root))
	}
}

// TestRegression_RefusedUploadAnswersBeforeItsBodyArrives: an upload refused
// by LC_INFLIGHT_BLOB_BYTES used to get no answer until its body had
// arrived (net/http drains a handler's unread body before it answers), so
// a stalled uploader held a connection and never saw its 503 (CI: the
// budget test hung 30 s on it).
func TestRegression_RefusedUploadAnswersBeforeItsBodyArrives(t *testing.T) {
	cfg := blobConfig()
	cfg.InflightBlobBytes = 1
	srv, _, s := blobServerOf(t, cfg)
	// The budget is held, as by an upload still arriving.
	release, err := s.blobs.admit(httptest.NewRequest("POST", "/", strings.NewReader("x")), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// A stalled upload must be answered 503 while its body is still open.
	conn := stalledUpload(t, srv)
	defer conn.Close()
	code, ok := answer(conn, 10*time.Second)
	if !ok || code != 503 {
		t.Fatalf("a refused stalled upload: answered %v, %d; want 503 while its body is still open", ok, code)
	}
}

// stalledUpload starts a multipart upload whose chunked body stops after
// its first bytes. It is written by hand on its own connection so that no
// client waits on the body.
func stalledUpload(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /api/v1/rollouts/s/records HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: multipart/form-data; boundary=x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n--x\r\n\r\n")
	return conn
}

// answer reads the status of the answer on conn, if one comes within wait.
// A 503 must carry Retry-After: it reports 0 if not.
func answer(conn net.Conn, wait time.Duration) (status int, ok bool) {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, false
	}
	resp.Body.Close()
	if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
		return 0, true
	}
	return resp.StatusCode, true
}
