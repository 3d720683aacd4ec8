package master_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/internal/hostile"
)

// post sends a body with headers and returns the status and error body.
func (f *fixture) post(path string, hdr http.Header, body []byte) (int, errorBody, string) {
	f.t.Helper()
	req, err := http.NewRequest("POST", f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e errorBody
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e, string(b)
}

// TestDeeplyNestedBodyAnswers400 (master): the query and task bodies are
// scanned before encoding/json reads them, like the worker's: nesting past
// 256 levels and text that is not UTF-8 are a 400 that names the limit and
// the field; gzip and zstd bodies are decoded, other encodings are a 415.
// No task is created by a bad body.
func TestDeeplyNestedBodyAnswers400(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.create(f.catalog("w1"), "exp")
	query, tasks := "/api/v1/experiments/exp/query", "/api/v1/tasks"
	for _, c := range []struct {
		name, path string
		body       []byte
		status     int
		code, msg  string
	}{
		{"query sql nested", query, hostile.NestedJSON(`{"sql":`, 1_000_000, ""), 400, "INVALID_REQUEST", `JSON nesting deeper than 256 levels at byte 262 (in field "sql[0]`},
		{"query bare array", query, hostile.NestedJSON("", 1_000_000, ""), 400, "INVALID_REQUEST", "JSON nesting deeper than 256 levels at byte 256:"},
		{"query body past its limit", query, hostile.NestedJSON("", 2_100_000, ""), 413, "PAYLOAD_TOO_LARGE", "larger than 1048576 bytes"},
		{"query sql not UTF-8", query, []byte("{\"sql\":\"SELECT '\xff' FROM records\"}"), 400, "INVALID_REQUEST", `field "sql" is not valid UTF-8`},
		{"task nested", tasks, hostile.NestedJSON(`{"kind":"merge","store":`, 60_000, ""), 400, "INVALID_REQUEST", `(in field "store[0]`},
		{"task unknown field nested", tasks, hostile.NestedJSON(`{"kind":"merge","x":`, 60_000, ""), 400, "INVALID_REQUEST", `(in field "x[0]`},
		{"task store not UTF-8", tasks, []byte("{\"kind\":\"merge\",\"store\":\"exp\xff\"}"), 400, "INVALID_REQUEST", `field "store" is not valid UTF-8`},
		{"task trailing data", tasks, []byte(`{"kind":"merge","store":"exp"} {}`), 400, "INVALID_REQUEST", "more than one value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, e, raw := f.post(c.path, nil, c.body)
			if status != c.status || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("%d %.300s, want %d %s saying %q", status, raw, c.status, c.code, c.msg)
			}
		})
	}
	if ts := call[struct {
		Tasks []coord.Task `json:"tasks"`
	}](f, "GET", tasks, "", 200); len(ts.Tasks) != 0 {
		t.Fatalf("bad bodies created tasks: %+v", ts.Tasks)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(queryBody("SELECT count(*) AS n FROM records", "all")))
	zw.Close()
	if status, _, raw := f.post(query, http.Header{"Content-Encoding": {"gzip"}}, gz.Bytes()); status != 200 {
		t.Fatalf("gzip query: %d %s", status, raw)
	}
	if status, e, raw := f.post(tasks, http.Header{"Content-Encoding": {"br"}}, []byte(`{"kind":"merge","store":"exp"}`)); status != 415 || e.Error.Code != "UNSUPPORTED_MEDIA_TYPE" {
		t.Fatalf("br task: %d %s", status, raw)
	}
}
