package httpe2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func rec(id, rolloutID string) map[string]any {
	return map[string]any{"id": id, "rollout_id": rolloutID, "content": "content of " + id}
}

// TestFlushQueryParsing: ?flush, ?flush=true in any case and ?flush=1 seal
// before responding, as the reference does (Python's urlencode sends
// flush=True); every other spelling is ignored (no error, no seal).
func TestFlushQueryParsing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := startWorker(t, b.dataDir(t), nil)
		c := newClient(t, w)
		cases := []struct {
			query string
			seal  bool
		}{
			{"?flush=true", true},
			{"?flush=1", true},
			{"?flush", true},
			{"?a=b&flush", true},
			{"?flush=false", false},
			{"?flush=0", false},
			{"?flush=yes", false},
			{"?flush=True", true},
			{"?flush=TRUE", true},
			{"?Flush=true", false},
			{"?flush=", false},
			{"?flushh=1", false},
			{"", false},
		}
		for i, tc := range cases {
			// A store per case: a seal in one case must not reveal another's rows.
			store := fmt.Sprintf("flush-%02d", i)
			c.createStore(store)
			before := metricValue(t, c.metrics(), "rollout_appends_flushed_total")
			r := c.must(http.StatusCreated, c.appendJSON(store, tc.query, rec("x1", "r1"), rec("x2", "r1")), "append "+tc.query)
			if r["flushed"] != tc.seal {
				t.Errorf("%q: flushed=%v, want %v", tc.query, r["flushed"], tc.seal)
			}
			if got := fmt.Sprint(r["count"]); got != "2" {
				t.Errorf("%q: count=%s, want 2", tc.query, got)
			}
			want := 0
			if tc.seal {
				want = 2
			}
			if n := c.count(store, "wal", ""); n != want {
				t.Errorf("%q: %d records visible in source=wal right after the append, want %d", tc.query, n, want)
			}
			after := metricValue(t, c.metrics(), "rollout_appends_flushed_total")
			if d := after - before; (d == 1) != tc.seal || d > 1 {
				t.Errorf("%q: rollout_appends_flushed_total went up by %v (seal=%v)", tc.query, d, tc.seal)
			}
			// Either way the rows were stored: a flush shows them.
			c.flush(store)
			if n := c.count(store, "wal", ""); n != 2 {
				t.Errorf("%q: %d records in source=wal after POST flush, want 2", tc.query, n)
			}
		}
	})
}

// TestListSources: fragments, wal and all, before and after a merge; an
// absent or empty source means all on the worker (the reference's worker
// lists base and WAL), and the response echoes it.
func TestListSources(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := startWorker(t, b.dataDir(t), nil)
		c := newClient(t, w)
		c.createStore("src")
		for i := 0; i < 3; i++ {
			c.must(http.StatusCreated, c.appendJSON("src", "?flush=true", rec(fmt.Sprintf("s%d", i), "r")), "append")
		}
		check := func(stage string, frag, wal, all int) {
			t.Helper()
			for _, sc := range []struct {
				query, source string
				want          int
			}{
				{"?source=fragments", "fragments", frag},
				{"?source=wal", "wal", wal},
				{"?source=all", "all", all},
				{"", "all", all},
				{"?source=", "all", all},
			} {
				r := c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/src/records"+sc.query, "", nil), stage+" list"+sc.query)
				recs, _ := r["records"].([]any)
				if len(recs) != sc.want {
					t.Errorf("%s: list%s: %d records, want %d", stage, sc.query, len(recs), sc.want)
				}
				if r["source"] != sc.source {
					t.Errorf("%s: list%s: echoed source %v, want %q", stage, sc.query, r["source"], sc.source)
				}
			}
		}
		check("after 3 flushed appends", 0, 3, 3)
		m := c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/src/merge", "", nil), "merge")
		if fmt.Sprint(m["rows"]) != "3" || fmt.Sprint(m["remaining"]) != "0" {
			t.Errorf("merge: %v, want rows 3, remaining 0", m)
		}
		check("after merge", 3, 0, 3)
		for _, q := range []string{"?source=bogus", "?source=WAL", "?source=%20all"} {
			r := c.do("GET", "/api/v1/rollouts/src/records"+q, "", nil)
			if code := expectError(t, r, http.StatusBadRequest, "list"+q); code != "INVALID_REQUEST" {
				t.Errorf("list%s: code %q, want INVALID_REQUEST", q, code)
			}
		}
	})
}

// TestBadInputStoresNothing: every rejected request leaves the store empty.
func TestBadInputStoresNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const token = "s3cret-token"
		w := startWorker(t, b.dataDir(t), map[string]string{
			"LC_API_TOKEN":               token,
			"LC_MAX_BODY_BYTES":          "65536",
			"LC_MAX_RECORDS_PER_REQUEST": "5",
			"LC_MAX_PAYLOAD_BYTES":       "1024",
			// A larger multipart part streams to an object of its own,
			// up to this.
			"LC_MAX_BLOB_BYTES": "1536",
		})
		c := newClient(t, w)
		c.Token = token
		c.createStore("bad")
		c.createStore("good")
		// A record without a payload, for the blob 404.
		c.must(http.StatusCreated, c.appendJSON("good", "?flush=true", rec("nopayload", "r")), "append good")

		const recs = "/api/v1/rollouts/bad/records"
		big := strings.Repeat("x", 70000)
		sixRecs := `{"records":[` + strings.TrimSuffix(strings.Repeat(`{"rollout_id":"r"},`, 6), ",") + `]}`
		payload2k := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 2048))
		mp := func(payload []byte) (string, []byte) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			fw, _ := mw.CreateFormField("metadata")
			fw.Write([]byte(`{"records":[{"id":"mp","rollout_id":"r"}]}`))
			fw, _ = mw.CreateFormFile("0", "blob.bin")
			fw.Write(payload)
			mw.Close()
			return mw.FormDataContentType(), buf.Bytes()
		}
		mpCT, mpBody := mp(bytes.Repeat([]byte{1}, 2048))

		cases := []struct {
			name         string
			method, path string
			ctype, body  string
			hdr          []string
			noToken      bool
			status       int
			code         string
		}{
			{name: "text/plain", method: "POST", path: recs, ctype: "text/plain", body: `{"records":[{"rollout_id":"r"}]}`, status: 415, code: "UNSUPPORTED_MEDIA_TYPE"},
			{name: "no content type", method: "POST", path: recs, body: `{"records":[{"rollout_id":"r"}]}`, status: 415, code: "UNSUPPORTED_MEDIA_TYPE"},
			{name: "invalid JSON", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":`, status: 400, code: "INVALID_REQUEST"},
			{name: "two JSON values", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r"}]} {}`, status: 400, code: "INVALID_REQUEST"},
			{name: "unknown top-level field", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r"}],"extra":1}`, status: 400, code: "INVALID_REQUEST"},
			{name: "unknown record field", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r","bogus":1}]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "empty records", method: "POST", path: recs, ctype: "application/json", body: `{"records":[]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "no records key", method: "POST", path: recs, ctype: "application/json", body: `{}`, status: 400, code: "INVALID_REQUEST"},
			{name: "missing rollout_id (2nd record)", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r"},{"content":"c"}]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "bad base64", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r","binary_payload":"!!not base64!!"}]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "bad checksum", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r","binary_payload":"AAEC","payload_checksum":"sha256:00"}]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "multipart without metadata", method: "POST", path: recs, ctype: "multipart/form-data; boundary=xyz", body: "--xyz\r\nContent-Disposition: form-data; name=\"0\"\r\n\r\nabc\r\n--xyz--\r\n", status: 400, code: "INVALID_REQUEST"},
			{name: "multipart without boundary", method: "POST", path: recs, ctype: "multipart/form-data", body: "x", status: 400, code: "INVALID_REQUEST"},
			{name: "invalid arrow", method: "POST", path: recs, ctype: "application/vnd.apache.arrow.stream", body: "not arrow", status: 400, code: "INVALID_REQUEST"},
			{name: "multipart payload_size without a part", method: "POST", path: recs, ctype: "multipart/form-data; boundary=xyz", body: "--xyz\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"records\":[{\"rollout_id\":\"r\",\"payload_size\":3}]}\r\n--xyz--\r\n", status: 400, code: "INVALID_REQUEST"},
			{name: "multipart duplicate part", method: "POST", path: recs, ctype: "multipart/form-data; boundary=xyz", body: "--xyz\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"records\":[{\"rollout_id\":\"r\"}]}\r\n--xyz\r\nContent-Disposition: form-data; name=\"0\"\r\n\r\nabc\r\n--xyz\r\nContent-Disposition: form-data; name=\"0\"\r\n\r\nabc\r\n--xyz--\r\n", status: 400, code: "INVALID_REQUEST"},
			{name: "wrong JSON type", method: "POST", path: recs, ctype: "application/json", body: `{"records":[{"rollout_id":"r"},{"rollout_id":"r","sequence_order":"3"}]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "filters not JSON", method: "GET", path: recs + "?filters=%7Bnope", status: 400, code: "INVALID_REQUEST"},
			{name: "filters on an unknown column", method: "GET", path: recs + "?filters=%7B%22colour%22%3A%22red%22%7D", status: 400, code: "INVALID_REQUEST"},
			{name: "filters of the wrong type", method: "GET", path: recs + "?filters=%7B%22rollout_id%22%3A3%7D", status: 400, code: "INVALID_REQUEST"},
			{name: "garbled cursor", method: "GET", path: recs + "?cursor=%21%21", status: 400, code: "INVALID_REQUEST"},
			{name: "storage_options we cannot honour", method: "POST", path: "/api/v1/rollouts", ctype: "application/json", body: `{"name":"so","storage_options":{"aws_region":"x"}}`, status: 400, code: "INVALID_REQUEST"},
			{name: "checkout of a version that does not exist", method: "POST", path: "/api/v1/rollouts/good/checkout", ctype: "application/json", body: `{"version":999}`, status: 404, code: "NOT_FOUND"},
			{name: "append with flush and bad body", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: `{"records":[{"content":"no rollout"}]}`, status: 400, code: "INVALID_REQUEST"},
			{name: "bad filter column", method: "GET", path: recs + "?bogus=1", status: 400, code: "INVALID_REQUEST"},
			{name: "bad include_in_training", method: "GET", path: recs + "?include_in_training=maybe", status: 400, code: "INVALID_REQUEST"},
			{name: "repeated filter", method: "GET", path: recs + "?rollout_id=a&rollout_id=b", status: 400, code: "INVALID_REQUEST"},
			{name: "limit 0", method: "GET", path: recs + "?limit=0", status: 400, code: "INVALID_REQUEST"},
			{name: "limit abc", method: "GET", path: recs + "?limit=abc", status: 400, code: "INVALID_REQUEST"},
			{name: "limit 1001", method: "GET", path: recs + "?limit=1001", status: 400, code: "INVALID_REQUEST"},
			{name: "offset -1", method: "GET", path: recs + "?offset=-1", status: 400, code: "INVALID_REQUEST"},
			{name: "append to unknown store", method: "POST", path: "/api/v1/rollouts/nope/records?flush=true", ctype: "application/json", body: `{"records":[{"rollout_id":"r"}]}`, status: 404, code: "NOT_FOUND"},
			{name: "list unknown store", method: "GET", path: "/api/v1/rollouts/nope/records", status: 404, code: "NOT_FOUND"},
			{name: "stats unknown store", method: "GET", path: "/api/v1/rollouts/nope", status: 404, code: "NOT_FOUND"},
			{name: "blob of unknown record", method: "GET", path: recs + "/nope/blob", status: 404, code: "NOT_FOUND"},
			{name: "blob of record without payload", method: "GET", path: "/api/v1/rollouts/good/records/nopayload/blob", status: 404, code: "NOT_FOUND"},
			{name: "missing token", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: `{"records":[{"rollout_id":"r"}]}`, noToken: true, status: 401, code: "UNAUTHORIZED"},
			{name: "wrong token", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: `{"records":[{"rollout_id":"r"}]}`, noToken: true, hdr: []string{"Authorization", "Bearer nope"}, status: 401, code: "UNAUTHORIZED"},
			{name: "token without Bearer", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: `{"records":[{"rollout_id":"r"}]}`, noToken: true, hdr: []string{"Authorization", token}, status: 401, code: "UNAUTHORIZED"},
			{name: "list without token", method: "GET", path: recs, noToken: true, status: 401, code: "UNAUTHORIZED"},
			{name: "metrics without token", method: "GET", path: "/metrics", noToken: true, status: 401, code: "UNAUTHORIZED"},
			{name: "body over LC_MAX_BODY_BYTES", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: `{"records":[{"rollout_id":"r","content":"` + big + `"}]}`, status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "multipart body over LC_MAX_BODY_BYTES", method: "POST", path: recs + "?flush=true", ctype: "multipart/form-data; boundary=xyz", body: "--xyz\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"records\":[{\"rollout_id\":\"r\",\"content\":\"" + big + "\"}]}\r\n--xyz--\r\n", status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "more than LC_MAX_RECORDS_PER_REQUEST", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: sixRecs, status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "JSON payload over LC_MAX_PAYLOAD_BYTES", method: "POST", path: recs + "?flush=true", ctype: "application/json", body: `{"records":[{"rollout_id":"r","binary_payload":"` + payload2k + `"}]}`, status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "multipart payload over LC_MAX_BLOB_BYTES", method: "POST", path: recs + "?flush=true", ctype: mpCT, body: string(mpBody), status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "arrow over LC_MAX_RECORDS_PER_REQUEST", method: "POST", path: recs + "?flush=true", ctype: "application/vnd.apache.arrow.stream", body: string(arrowBody(t, 6, "ar")), status: 413, code: "PAYLOAD_TOO_LARGE"},
		}
		for _, tc := range cases {
			cl := *c
			if tc.noToken {
				cl.Token = ""
			}
			r := cl.do(tc.method, tc.path, tc.ctype, []byte(tc.body), tc.hdr...)
			code := expectError(t, r, tc.status, tc.name)
			if code != tc.code {
				t.Errorf("%s: code %q, want %q", tc.name, code, tc.code)
			}
			if tc.status == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
			}
			c.flush("bad")
			if got := c.listAll("bad", "all", ""); len(got) != 0 {
				t.Fatalf("after %q: the store holds %d records: %v", tc.name, len(got), ids(got))
			}
		}
		// Health stays open without a token.
		noTok := *c
		noTok.Token = ""
		noTok.must(http.StatusOK, noTok.do("GET", "/api/v1/health", "", nil), "health without token")
		// And the limits leave room for a valid request at the limit.
		c.must(http.StatusCreated, c.do("POST", recs+"?flush=true", "application/json",
			[]byte(`{"records":[`+strings.TrimSuffix(strings.Repeat(`{"rollout_id":"r"},`, 5), ",")+`]}`)), "5 records")
		if n := c.count("bad", "all", ""); n != 5 {
			t.Fatalf("after a valid append of 5: %d records", n)
		}
	})
}

// arrowBody encodes n records (columns id, rollout_id, content) as an Arrow
// IPC stream.
func arrowBody(t *testing.T, n int, prefix string) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String},
		{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d", prefix, i))
		b.Field(1).(*array.StringBuilder).Append(prefix + "-rollout")
		if i%2 == 1 {
			b.Field(2).(*array.LargeStringBuilder).AppendNull()
		} else {
			b.Field(2).(*array.LargeStringBuilder).Append(fmt.Sprintf("arrow content %d", i))
		}
	}
	batch := b.NewRecordBatch()
	defer batch.Release()
	var buf bytes.Buffer
	wr := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := wr.Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMultipartBlobAndArrow: a multipart append's payload downloads intact
// with its content type, before and after a merge; an Arrow IPC append with
// a subset of columns is readable.
func TestMultipartBlobAndArrow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		w := startWorker(t, b.dataDir(t), nil)
		c := newClient(t, w)
		c.createStore("mp")

		payload := make([]byte, 300_000)
		for i := range payload {
			payload[i] = byte(i*7 + i/251)
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormField("metadata")
		fw.Write([]byte(`{"records":[{"id":"img-1","rollout_id":"r","role":"artifact","content_type":"image/png","artifact_type":"image"},{"id":"txt-1","rollout_id":"r","content":"no payload"},{"id":"bin-1","rollout_id":"r"}]}`))
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="0"; filename="a.png"`)
		h.Set("Content-Type", "application/octet-stream")
		pw, _ := mw.CreatePart(h)
		pw.Write(payload)
		pw, _ = mw.CreateFormField("2")
		pw.Write([]byte("tiny"))
		mw.Close()
		r := c.must(http.StatusCreated, c.do("POST", "/api/v1/rollouts/mp/records?flush=true", mw.FormDataContentType(), buf.Bytes()), "multipart append")
		if fmt.Sprint(r["ids"]) != "[img-1 txt-1 bin-1]" {
			t.Fatalf("ids %v", r["ids"])
		}

		checkBlobs := func(stage string) {
			t.Helper()
			br := c.do("GET", "/api/v1/rollouts/mp/records/img-1/blob", "", nil)
			if br.Status != http.StatusOK {
				t.Fatalf("%s: blob: %d %s", stage, br.Status, br.Body)
			}
			if !bytes.Equal(br.Body, payload) {
				t.Fatalf("%s: blob: %d bytes differ from the %d uploaded", stage, len(br.Body), len(payload))
			}
			if ct := br.Header.Get("Content-Type"); ct != "image/png" {
				t.Errorf("%s: blob Content-Type %q, want image/png", stage, ct)
			}
			disp, params, err := mime.ParseMediaType(br.Header.Get("Content-Disposition"))
			if err != nil || disp != "attachment" || params["filename"] != "img-1.bin" {
				t.Errorf("%s: Content-Disposition %q (%v), want attachment; filename=img-1.bin", stage, br.Header.Get("Content-Disposition"), err)
			}
			if cl := br.Header.Get("Content-Length"); cl != fmt.Sprint(len(payload)) {
				t.Errorf("%s: Content-Length %q", stage, cl)
			}
			// The default content type (text/plain) downloads as octet-stream.
			br = c.do("GET", "/api/v1/rollouts/mp/records/bin-1/blob", "", nil)
			if br.Status != http.StatusOK || string(br.Body) != "tiny" || br.Header.Get("Content-Type") != "application/octet-stream" {
				t.Errorf("%s: bin-1 blob: %d %q %q", stage, br.Status, br.Header.Get("Content-Type"), br.Body)
			}
			expectError(t, c.do("GET", "/api/v1/rollouts/mp/records/txt-1/blob", "", nil), http.StatusNotFound, stage+": blob of txt-1")
			// Get describes the payload but never returns it.
			g, _ := c.must(http.StatusOK, c.do("GET", "/api/v1/rollouts/mp/records/img-1", "", nil), stage+": get img-1")["record"].(map[string]any)
			sum := sha256.Sum256(payload)
			if fmt.Sprint(g["payload_size"]) != fmt.Sprint(len(payload)) || g["payload_checksum"] != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: get img-1: payload_size %v checksum %v", stage, g["payload_size"], g["payload_checksum"])
			}
			if _, ok := g["binary_payload"]; ok {
				t.Errorf("%s: get returned binary_payload", stage)
			}
		}
		checkBlobs("pending")
		c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/mp/merge", "", nil), "merge")
		checkBlobs("merged")

		// Arrow IPC with a subset of columns.
		c.createStore("ar")
		r = c.must(http.StatusCreated, c.do("POST", "/api/v1/rollouts/ar/records?flush=1", "application/vnd.apache.arrow.stream", arrowBody(t, 50, "a")), "arrow append")
		if fmt.Sprint(r["count"]) != "50" || r["flushed"] != true {
			t.Fatalf("arrow append: %v", r)
		}
		got := c.listAll("ar", "wal", "&rollout_id=a-rollout")
		if len(got) != 50 {
			t.Fatalf("arrow: %d records readable, want 50", len(got))
		}
		byID := map[string]map[string]any{}
		for _, g := range got {
			byID[g["id"].(string)] = g
		}
		for _, i := range []int{0, 1, 48, 49} {
			g := byID[fmt.Sprintf("a-%d", i)]
			if g == nil {
				t.Fatalf("arrow: a-%d missing", i)
			}
			var want any = fmt.Sprintf("arrow content %d", i)
			if i%2 == 1 {
				want = nil
			}
			if g["content"] != want || g["problem_id"] != "a-rollout" || g["role"] != "assistant" || g["content_type"] != "text/plain" {
				t.Errorf("arrow: a-%d = %v", i, g)
			}
		}
		// Arrow with a column of the wrong type is a 400.
		schema := arrow.NewSchema([]arrow.Field{{Name: "rollout_id", Type: arrow.PrimitiveTypes.Int64}}, nil)
		bb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		bb.Field(0).(*array.Int64Builder).Append(1)
		batch := bb.NewRecordBatch()
		var ab bytes.Buffer
		wr := ipc.NewWriter(&ab, ipc.WithSchema(schema))
		_ = wr.Write(batch)
		_ = wr.Close()
		batch.Release()
		bb.Release()
		expectError(t, c.do("POST", "/api/v1/rollouts/ar/records?flush=1", "application/vnd.apache.arrow.stream", ab.Bytes()), http.StatusBadRequest, "arrow wrong type")
		if n := c.count("ar", "all", ""); n != 50 {
			t.Fatalf("after the bad arrow append: %d records, want 50", n)
		}
	})
}
