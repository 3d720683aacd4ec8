package worker

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// The JSON record decoder must keep encoding/json's rules (the API's
// contract) while being fast: these cases pin the rules that matter.
func TestDecodeJSONRecords(t *testing.T) {
	s := &Server{}
	t.Run("fields, metadata as any JSON, base64 payload", func(t *testing.T) {
		body := `{"records":[
			{"id":"a","rollout_id":"r","sequence_order":2,"content":"line\n\"quoted\" é","metadata":{"k":[1,2]},"binary_payload":"aGVsbG8=","input_tokens":[1,2,3],"reward":0.5,"relationships":[{"target_id":"b","relation":"next","weight":1}]},
			{"rollout_id":"r","metadata":"plain text","ROLE":"user"}
		]}`
		recs, err := s.decodeJSONRecords(strings.NewReader(body), int64(len(body)))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 {
			t.Fatalf("got %d records", len(recs))
		}
		a, b := recs[0], recs[1]
		if a.ID != "a" || a.RolloutID != "r" || a.SequenceOrder != 2 || *a.Content != "line\n\"quoted\" é" {
			t.Errorf("record 0 fields: %+v", a)
		}
		if a.Metadata == nil || *a.Metadata != `{"k":[1,2]}` {
			t.Errorf("object metadata kept as JSON text: got %v", a.Metadata)
		}
		if string(a.BinaryPayload) != "hello" || len(a.InputTokens) != 3 || *a.Reward != 0.5 || *a.Relationships[0].TargetID != "b" {
			t.Errorf("record 0 payload/tokens/reward/relationships: %+v", a)
		}
		if b.Metadata == nil || *b.Metadata != "plain text" {
			t.Errorf("string metadata stored as given: got %v", b.Metadata)
		}
		if b.Role != "user" {
			t.Errorf("field names match case-insensitively, as encoding/json does: role %q", b.Role)
		}
	})
	bad := []struct{ name, body, want string }{
		{"unknown record field", `{"records":[{"rollout_id":"r","bogus":1}]}`, "bogus"},
		{"unknown top-level field", `{"records":[],"extra":1}`, "extra"},
		{"trailing value", `{"records":[]} {}`, "more than one value"},
		{"truncated", `{"records":[{"rollout_id":"r"`, "invalid JSON body"},
		{"wrong type", `{"records":[{"rollout_id":7}]}`, "invalid JSON body"},
		{"bad base64", `{"records":[{"rollout_id":"r","binary_payload":"%%%"}]}`, "invalid JSON body"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.decodeJSONRecords(strings.NewReader(c.body), -1)
			var he *httpapi.Error
			if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a 400 mentioning %q", err, c.want)
			}
		})
	}
}

// TestWriteAppended: the hand-built append response is the JSON that
// encoding/json makes of the same value, escapes included.
func TestWriteAppended(t *testing.T) {
	for _, ids := range [][]string{{"a"}, {"0193-abc", `q"uote`, `back\slash`, "tab\t", "é✓", "<html>&"}} {
		rec := httptest.NewRecorder()
		writeAppended(rec, 1<<40+7, ids, true)
		var got api.AppendResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%q: %v", rec.Body.String(), err)
		}
		if !slices.Equal(got.IDs, ids) || got.Count != len(ids) || !got.Flushed || got.Version != 1<<40+7 || rec.Code != 201 {
			t.Fatalf("got %+v (%d) for %q", got, rec.Code, ids)
		}
		if rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
			t.Fatalf("content-length %s for %d bytes", rec.Header().Get("Content-Length"), rec.Body.Len())
		}
	}
}

// BenchmarkDecodeJSONRecords measures the JSON append body's decode, the
// largest share of a single-record append's handler.
func BenchmarkDecodeJSONRecords(b *testing.B) {
	text := strings.Repeat(`{x: [1, 2]} y; `, 68) // braces as in code and JSON-ish text
	for _, n := range []int{1, 100} {
		var sb strings.Builder
		sb.WriteString(`{"records":[`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`{"id":"w-` + strconv.Itoa(i) + `","rollout_id":"w-r0","sequence_order":` + strconv.Itoa(i%16) + `,"content":"` + text + `"}`)
		}
		sb.WriteString(`]}`)
		body := sb.String()
		s := &Server{cfg: Config{MaxRecords: 10000}}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				recs, err := s.decodeJSONRecords(strings.NewReader(body), int64(len(body)))
				if err != nil || len(recs) != n {
					b.Fatal(len(recs), err)
				}
			}
		})
	}
}

// decodeJSONRecords reuses its decoding slice: a field one body sets must
// not appear in a record of a later body that omits it, whether the earlier
// body decoded or failed halfway through a record.
func TestDecodeJSONRecordsDoesNotLeakFieldsBetweenBodies(t *testing.T) {
	s := &Server{cfg: Config{MaxRecords: 100}}
	decode := func(body string) ([]rollout.Record, error) {
		return s.decodeJSONRecords(strings.NewReader(body), int64(len(body)))
	}
	for range 3 {
		if _, err := decode(`{"records":[{"rollout_id":"r","reward":1,"content":"a"},{"rollout_id":"r","dataset":"d","input_tokens":[1]}]}`); err != nil {
			t.Fatal(err)
		}
		if _, err := decode(`{"records":[{"rollout_id":"r","reward":2},{"rollout_id":"r","dataset":"e","problem_id":7}]}`); err == nil {
			t.Fatal("a number for problem_id decoded")
		}
		recs, err := decode(`{"records":[{"rollout_id":"x"},{"rollout_id":"y"},{"rollout_id":"z"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.Reward != nil || r.Content != nil || r.Dataset != nil || r.InputTokens != nil || r.ProblemID != "" {
				t.Fatalf("record %d carries fields of an earlier body: %+v", i, r)
			}
		}
	}
}
