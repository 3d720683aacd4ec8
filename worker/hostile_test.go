package worker

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/internal/hostile"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// hostileServer is a worker over memory storage with one store, "s".
func hostileServer(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("t"), cfg.StoreOptions())
	srv := httptest.NewServer(NewServer(cfg, catalog, NewRegistry()).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = catalog.Close(context.Background())
	})
	if code, body := send(t, srv, "POST", "/api/v1/rollouts", "application/json", nil, []byte(`{"name":"s"}`)); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	return srv
}

func hostileConfig() Config {
	return Config{InstanceID: "t", MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20}
}

// send does one request and returns the status and the body.
func send(t *testing.T, srv *httptest.Server, method, path, ctype string, hdr http.Header, body []byte) (int, string) {
	t.Helper()
	code, b, _ := sendH(t, srv, method, path, ctype, hdr, body)
	return code, b
}

func sendH(t *testing.T, srv *httptest.Server, method, path, ctype string, hdr http.Header, body []byte) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (did the server die?)", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// wantError checks an error answer's status, code and message.
func wantError(t *testing.T, what string, code int, body string, status int, apiCode string, msgs ...string) {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != status || e.Error.Code != apiCode {
		t.Fatalf("%s: %d %.300s, want %d %s", what, code, body, status, apiCode)
	}
	for _, m := range msgs {
		if !strings.Contains(e.Error.Message, m) {
			t.Errorf("%s: message %q does not say %q", what, e.Error.Message, m)
		}
	}
}

// storedIDs flushes the store and lists every id it holds.
func storedIDs(t *testing.T, srv *httptest.Server) []string {
	t.Helper()
	if code, body := send(t, srv, "POST", "/api/v1/rollouts/s/flush", "", nil, nil); code != 200 {
		t.Fatalf("flush: %d %s", code, body)
	}
	code, body := send(t, srv, "GET", "/api/v1/rollouts/s/records?source=all&limit=1000", "", nil, nil)
	var page api.ListResponse
	if err := json.Unmarshal([]byte(body), &page); err != nil || code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
	ids := make([]string, len(page.Records))
	for i, r := range page.Records {
		ids[i] = r.ID
	}
	return ids
}

// wantNothingStoredAndAlive: the bad requests stored nothing, and the
// worker still appends.
func wantNothingStoredAndAlive(t *testing.T, srv *httptest.Server) {
	t.Helper()
	if ids := storedIDs(t, srv); len(ids) != 0 {
		t.Fatalf("bad input stored %v", ids)
	}
	if code, body := send(t, srv, "POST", "/api/v1/rollouts/s/records?flush=true", "application/json", nil,
		[]byte(`{"records":[{"id":"ok","rollout_id":"r"}]}`)); code != 201 {
		t.Fatalf("append after bad input: %d %s", code, body)
	}
}

func multipartBody(t *testing.T, metadata []byte) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	p, err := mw.CreateFormField("metadata")
	if err != nil {
		t.Fatal(err)
	}
	p.Write(metadata)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), mw.FormDataContentType()
}

// TestDeeplyNestedBodyAnswers400 is the regression test of a worker killed
// by one request: ~2.1 million nested '[' (a 6 MB body, well under the
// body limit) overflowed the JSON decoder's stack ("fatal error: stack
// overflow"), through metadata, an unknown field, records, an unclosed
// array or a bare top-level array, and every in-flight request died with
// the process. Each now answers 400 naming the limit and the field, and
// stores nothing.
func TestDeeplyNestedBodyAnswers400(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	const deep = 2_100_000
	closed := func(prefix string, n int, suffix string) []byte {
		return append(hostile.NestedJSON(prefix, n, ""), []byte(strings.Repeat("]", n)+suffix)...)
	}
	recs := "/api/v1/rollouts/s/records"
	for _, c := range []struct {
		name, path string
		body       []byte
		where      string
	}{
		{"metadata", recs, closed(`{"records":[{"rollout_id":"r","metadata":`, deep, `}]}`), `record 0, field "metadata`},
		{"metadata unclosed", recs, hostile.NestedJSON(`{"records":[{"rollout_id":"r","metadata":`, deep, ""), `record 0, field "metadata`},
		{"metadata of a later record", recs, closed(`{"records":[{"rollout_id":"r"},{"rollout_id":"r","metadata":{"a":`, deep, `}}]}`), `record 1, field "metadata.a`},
		{"unknown field", recs, closed(`{"records":[{"rollout_id":"r","bogus":`, deep, `}]}`), `record 0, field "bogus`},
		{"unknown top-level field", recs, closed(`{"records":[],"extra":`, deep, `}`), `field "extra`},
		{"records", recs, closed(`{"records":{"a":`, deep, `}}`), `field "records.a`},
		{"a record", recs, closed(`{"records":[`, deep, `]}`), `record 0`},
		{"bare top-level array", recs, hostile.NestedJSON("", deep, ""), "at byte 256:"},
		// The small routes take 1 MiB bodies.
		{"create", "/api/v1/rollouts", hostile.NestedJSON(`{"name":`, 1_000_000, ""), `field "name`},
		{"compact", "/api/v1/rollouts/s/compact", hostile.NestedJSON(`{"target_rows_per_fragment":`, 1_000_000, ""), `field "target_rows_per_fragment`},
		{"checkout", "/api/v1/rollouts/s/checkout", hostile.NestedJSON("", 1_000_000, ""), "at byte 256:"},
		// The body's own object and the records array are two levels.
		{"one past the limit", recs, closed(`{"records":[{"rollout_id":"r","metadata":`, 254, `}]}`), `record 0, field "metadata`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := send(t, srv, "POST", c.path, "application/json", nil, c.body)
			wantError(t, c.name, code, body, 400, api.CodeInvalidRequest, "JSON nesting deeper than 256 levels", c.where, "flatten it")
		})
	}
	t.Run("multipart metadata part", func(t *testing.T) {
		mp, ctype := multipartBody(t, closed(`{"records":[{"rollout_id":"r","metadata":`, deep, `}]}`))
		code, body := send(t, srv, "POST", recs, ctype, nil, mp)
		wantError(t, "multipart", code, body, 400, api.CodeInvalidRequest, "JSON nesting deeper than 256 levels", `record 0, field "metadata`)
	})
	t.Run("filters parameter", func(t *testing.T) {
		q := url.QueryEscape(string(closed(`{"rollout_id":`, 10_000, `}`)))
		code, body := send(t, srv, "GET", recs+"?filters="+q, "", nil, nil)
		wantError(t, "filters", code, body, 400, api.CodeInvalidRequest, "filters: JSON nesting deeper than 256 levels", `field "rollout_id`)
	})
	// Metadata nested to the limit is still accepted (and read back).
	nested := string(closed(`{"records":[{"id":"deep","rollout_id":"r","metadata":`, 253, `}]}`))
	if code, body := send(t, srv, "POST", recs, "application/json", nil, []byte(nested)); code != 201 {
		t.Fatalf("253 levels of metadata: %d %s", code, body)
	}
	if ids := storedIDs(t, srv); len(ids) != 1 || ids[0] != "deep" {
		t.Fatalf("stored %v, want only the valid record", ids)
	}
}

// TestTooManyRecordsRefusedBeforeDecoding: a body of more items than
// LC_MAX_RECORDS_PER_REQUEST is a 413 before any record is decoded. Each
// item, even a 3-byte {} or a null, was decoded into a 480-byte
// api.RecordJSON and converted to a 456-byte Record before the count was
// checked: a 64 MiB body of them asked for ~20 GB.
func TestTooManyRecordsRefusedBeforeDecoding(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	for _, c := range []struct {
		item string
		n    int
	}{{"{}", 10001}, {"null", 10001}, {`{"rollout_id":"r"}`, 10001}, {"{}", 500_000}} {
		body := []byte(`{"records":[` + strings.Repeat(c.item+",", c.n-1) + c.item + `]}`)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		code, resp := send(t, srv, "POST", "/api/v1/rollouts/s/records", "application/json", nil, body)
		runtime.ReadMemStats(&after)
		wantError(t, c.item, code, resp, 413, api.CodePayloadTooLarge, "more than 10000 records", "LC_MAX_RECORDS_PER_REQUEST")
		// The body is read once (and copied once by the client side of
		// this test); nothing is decoded.
		if got := after.TotalAlloc - before.TotalAlloc; got > uint64(8*len(body))+(16<<20) {
			t.Errorf("%d items of %s: allocated %d MB for a %d MB body", c.n, c.item, got>>20, len(body)>>20)
		}
	}
	wantNothingStoredAndAlive(t, srv)
}

// TestInvalidUTF8Answers400 is the regression test of text silently
// replaced by U+FFFD: two ids that differed only in invalid bytes became
// one id, and the newest replaced the other. Any text field that is not
// UTF-8 (raw bytes, or an escaped lone surrogate) is now a 400 naming the
// record and the field, on the JSON and the multipart paths.
func TestInvalidUTF8Answers400(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	recs := "/api/v1/rollouts/s/records"
	for _, c := range []struct {
		name, body, where string
	}{
		{"ids that would collide", "{\"records\":[{\"id\":\"x\xff\",\"rollout_id\":\"r\"},{\"id\":\"x\xfe\",\"rollout_id\":\"r\"}]}", `record 0, field "id"`},
		{"content", "{\"records\":[{\"rollout_id\":\"r\"},{\"rollout_id\":\"r\",\"content\":\"ok \xe2\x9c then cut\"}]}", `record 1, field "content"`},
		{"escaped lone surrogate", `{"records":[{"rollout_id":"r","problem_text":"a\ud800b"}]}`, `record 0, field "problem_text"`},
		{"escaped low surrogate", `{"records":[{"rollout_id":"r","rollout_id":"\udc00"}]}`, `record 0, field "rollout_id"`},
		{"inside metadata", "{\"records\":[{\"rollout_id\":\"r\",\"metadata\":{\"k\":[\"\xc0\"]}}]}", `record 0, field "metadata.k[0]"`},
		{"a metadata key", "{\"records\":[{\"rollout_id\":\"r\",\"metadata\":{\"k\xff\":1}}]}", `record 0, field "metadata.`},
		{"relationships", "{\"records\":[{\"rollout_id\":\"r\",\"relationships\":[{\"target_id\":\"\xff\"}]}]}", `record 0, field "relationships[0].target_id"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := send(t, srv, "POST", recs, "application/json", nil, []byte(c.body))
			wantError(t, c.name, code, body, 400, api.CodeInvalidRequest, c.where, "is not valid UTF-8")
			mp, ctype := multipartBody(t, []byte(c.body))
			code, body = send(t, srv, "POST", recs, ctype, nil, mp)
			wantError(t, c.name+" (multipart)", code, body, 400, api.CodeInvalidRequest, c.where, "is not valid UTF-8")
		})
	}
	// Valid multi-byte text and surrogate pairs are text.
	ok := `{"records":[{"id":"é✓😀","rollout_id":"r","content":"\ud83d\ude00 速い"}]}`
	if code, body := send(t, srv, "POST", recs, "application/json", nil, []byte(ok)); code != 201 {
		t.Fatalf("valid UTF-8: %d %s", code, body)
	}
	if ids := storedIDs(t, srv); len(ids) != 1 || ids[0] != "é✓😀" {
		t.Fatalf("stored %q, want only the valid record", ids)
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var w bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&w, gzip.BestCompression)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	t.Helper()
	var w bytes.Buffer
	zw, err := zstd.NewWriter(&w)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// zstdFrame is one zstd frame holding data in a raw block, whose header
// asks for a window of 2^(10+exp) bytes (the format allows up to 2^41).
func zstdFrame(exp byte, data []byte) []byte {
	b := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, exp << 3} // magic; no content size, checksum or dictionary; window
	h := uint32(1 | len(data)<<3)                       // the last block, raw, of len(data) bytes
	b = append(b, byte(h), byte(h>>8), byte(h>>16))
	return append(b, data...)
}

// arrowStream is an append body of records with ids, each with content.
func arrowStream(t *testing.T, content string, ids ...string) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String}, {Name: "content", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("r")
		b.Field(2).(*array.StringBuilder).Append(content)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var w bytes.Buffer
	iw := ipc.NewWriter(&w, ipc.WithSchema(schema))
	if err := iw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := iw.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// TestEncodedBodies: Content-Encoding gzip and zstd bodies are decoded
// (JSON, multipart and Arrow; Content-Encoding was ignored, so a gzip body
// was a JSON syntax error); a body that inflates past the body limit is a
// 413 however small it is on the wire; any other encoding is a 415 that
// says what is supported; bad compressed data is a 400. Only the good
// bodies are stored.
func TestEncodedBodies(t *testing.T) {
	cfg := hostileConfig()
	cfg.MaxBodyBytes = 1 << 20
	srv := hostileServer(t, cfg)
	recs := "/api/v1/rollouts/s/records"
	enc := func(e string) http.Header { return http.Header{"Content-Encoding": {e}} }
	jsonBody := func(id string) []byte { return []byte(`{"records":[{"id":"` + id + `","rollout_id":"r"}]}`) }

	for _, c := range []struct {
		name, ctype, encoding string
		body                  []byte
	}{
		{"gzip json", "application/json", "gzip", gzipped(t, jsonBody("g1"))},
		{"x-gzip json", "application/json", "x-gzip", gzipped(t, jsonBody("g2"))},
		{"zstd json", "application/json", "zstd", zstded(t, jsonBody("z1"))},
		{"identity", "application/json", "identity", jsonBody("i1")},
		{"gzip arrow", api.ArrowStream, "gzip", gzipped(t, arrowStream(t, "", "ga1", "ga2"))},
		{"zstd arrow", api.ArrowStream, "zstd", zstded(t, arrowStream(t, "", "za1"))},
	} {
		if code, body := send(t, srv, "POST", recs, c.ctype, enc(c.encoding), c.body); code != 201 {
			t.Fatalf("%s: %d %s", c.name, code, body)
		}
	}
	mp, ctype := multipartBody(t, jsonBody("gm1"))
	if code, body := send(t, srv, "POST", recs, ctype, enc("gzip"), gzipped(t, mp)); code != 201 {
		t.Fatalf("gzip multipart: %d %s", code, body)
	}
	if code, body := send(t, srv, "POST", "/api/v1/rollouts", "application/json", enc("zstd"), zstded(t, []byte(`{"name":"z"}`))); code != 201 {
		t.Fatalf("zstd create: %d %s", code, body)
	}

	// A bomb: 64 MiB of spaces inside a valid body, about 64 KB gzipped,
	// against a 1 MiB limit.
	bomb := append(append([]byte(`{"records":[{"id":"bomb","rollout_id":"r"}`), bytes.Repeat([]byte(" "), 64<<20)...), "]}"...)
	arrowBomb := arrowStream(t, strings.Repeat("a", 64<<20), "bomb")
	for _, c := range []struct {
		name, ctype, encoding string
		body                  []byte
	}{
		{"gzip bomb", "application/json", "gzip", gzipped(t, bomb)},
		{"zstd bomb", "application/json", "zstd", zstded(t, bomb)},
		{"gzip multipart bomb", "", "gzip", nil},
		{"gzip arrow bomb", api.ArrowStream, "gzip", gzipped(t, arrowBomb)},
		{"zstd arrow bomb", api.ArrowStream, "zstd", zstded(t, arrowBomb)},
	} {
		if c.ctype == "" {
			mp, ctype := multipartBody(t, bomb)
			c.ctype, c.body = ctype, gzipped(t, mp)
		}
		if len(c.body) > 1<<20 {
			t.Fatalf("%s is %d bytes on the wire: not a bomb", c.name, len(c.body))
		}
		code, body := send(t, srv, "POST", recs, c.ctype, enc(c.encoding), c.body)
		wantError(t, c.name, code, body, 413, api.CodePayloadTooLarge, "1048576 bytes")
	}

	code, body, hdr := sendH(t, srv, "POST", recs, "application/json", enc("br"), jsonBody("b1"))
	wantError(t, "br", code, body, 415, api.CodeUnsupportedMediaType, `Content-Encoding "br" is not supported`, "gzip, zstd")
	if got := hdr.Get("Accept-Encoding"); got != "gzip, zstd" {
		t.Errorf("415 Accept-Encoding %q, want the supported codings", got)
	}
	code, body = send(t, srv, "POST", recs, "application/json", enc("gzip, zstd"), jsonBody("b2"))
	wantError(t, "two codings", code, body, 415, api.CodeUnsupportedMediaType, "applies 2 codings")
	code, body = send(t, srv, "POST", recs, "application/json", enc("gzip"), jsonBody("b3"))
	wantError(t, "not gzip", code, body, 400, api.CodeInvalidRequest, "not valid gzip")
	code, body = send(t, srv, "POST", recs, "application/json", enc("zstd"), jsonBody("b4"))
	wantError(t, "not zstd", code, body, 400, api.CodeInvalidRequest, "not valid zstd")
	truncated := gzipped(t, jsonBody("b5"))
	code, body = send(t, srv, "POST", recs, "application/json", enc("gzip"), truncated[:len(truncated)-6])
	wantError(t, "truncated gzip", code, body, 400, api.CodeInvalidRequest, "not valid gzip")
	code, body = send(t, srv, "POST", recs, "application/json", enc("zstd"), zstdFrame(16, jsonBody("w1")))
	wantError(t, "zstd window", code, body, 400, api.CodeInvalidRequest, "window larger than 8 MiB")
	if code, body := send(t, srv, "POST", recs, "application/json", enc("zstd"), zstdFrame(13, jsonBody("w8"))); code != 201 {
		t.Fatalf("zstd frame of an 8 MiB window: %d %s", code, body)
	}

	want := "g1,g2,ga1,ga2,gm1,i1,w8,z1,za1"
	if got := strings.Join(storedIDs(t, srv), ","); got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}

// TestPathologicalArrowSchemasAnswer4xx: Arrow IPC bodies whose metadata
// crashed or flooded arrow-go's reader are refused through the real
// handler. A 300-byte schema that lists a field as its own child killed
// the worker (stack overflow); a record batch that states a 1 TB body
// killed it (out of memory, before a byte of the body arrived).
func TestPathologicalArrowSchemasAnswer4xx(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	for _, c := range []struct {
		name   string
		stream []byte
		status int
		msg    string
	}{
		{"cyclic schema", hostile.CyclicSchema(), 400, "nested deeper than 32 levels"},
		{"deep schema", hostile.DeepSchema(40_000), 400, "nested deeper than 32 levels"},
		{"deeper schema", hostile.DeepSchema(200_000), 413, "metadata of"},
		{"tens of thousands of fields", hostile.WideSchema(50_000), 400, "more than 1024 fields"},
		{"repeated metadata", hostile.RepeatedMetadata(2_000_000, 1000), 413, "metadata of"},
		{"repeated metadata under the size limit", hostile.RepeatedMetadata(10_000, 10_000), 400, "field names and custom metadata"},
		{"terabyte body stated", hostile.UnsentBody(1 << 40), 413, "decodes to more than 67108864 bytes"},
		{"compressed buffers", hostile.Compressed(), 400, "Content-Encoding"},
		{"dictionary deltas", hostile.DictionaryDeltas(1000, 256), 413, "deltas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := send(t, srv, "POST", "/api/v1/rollouts/s/records", api.ArrowStream, nil, c.stream)
			apiCode := api.CodeInvalidRequest
			if c.status == 413 {
				apiCode = api.CodePayloadTooLarge
			}
			wantError(t, c.name, code, body, c.status, apiCode, c.msg)
		})
	}
	wantNothingStoredAndAlive(t, srv)
}

// TestManyKeysRefusedWithoutAMap: a record of a million distinct unknown
// keys is a 400 whose explanation (decodeerr.go) reads the keys one at a
// time and names the first; it decoded them into a map of a million
// entries first, and named whichever key the map's order gave.
func TestManyKeysRefusedWithoutAMap(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	var sb strings.Builder
	sb.WriteString(`{"records":[{"rollout_id":"r"`)
	for i := range 1_000_000 {
		fmt.Fprintf(&sb, `,"k%d":0`, i)
	}
	sb.WriteString(`}]}`)
	body := []byte(sb.String())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, resp := send(t, srv, "POST", "/api/v1/rollouts/s/records", "application/json", nil, body)
	runtime.ReadMemStats(&after)
	wantError(t, "many keys", code, resp, 400, api.CodeInvalidRequest, `record 0: unknown field "k0"`)
	// The body and its copies by the readers of the error path: a few
	// times its size (256 MB before, with the map).
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(8*len(body)) {
		t.Errorf("allocated %d MB for a %d MB body", got>>20, len(body)>>20)
	}
	wantNothingStoredAndAlive(t, srv)
}

// TestStatedLengthIsNotAllocatedAhead: a request that states a 60 MB body
// and sends a few bytes does not make the worker allocate 60 MB (the read
// buffer was sized to Content-Length before any byte arrived: a few dozen
// such connections were gigabytes).
func TestStatedLengthIsNotAllocatedAhead(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 4)
	for i := range conns {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /api/v1/rollouts/s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n{\"records\":[")
		conns[i] = c
	}
	time.Sleep(300 * time.Millisecond) // the handlers are reading by now
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("4 connections stating 60 MB bodies and sending 12 bytes: %d MB allocated", got>>20)
	}
}
