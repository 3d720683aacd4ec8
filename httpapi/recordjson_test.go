package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lance-context/lance-context/api"
)

// encodingJSON is what the read routes sent before they encoded records by
// hand: encoding/json's Encoder output.
func encodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return buf.Bytes()
}

// Strings that exercise every escape encoding/json makes.
var awkwardStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\ncr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "é ü 中文 🙂", "\u2028 line \u2029 para", "bad \xff utf8 \xe2\x80", "\xe2\x80\xa8",
}

var awkwardFloats = []float32{0, -0.0, 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 3.4e38, -1e-10, 1.0000001, 123456.78, float32(math.SmallestNonzeroFloat32)}

var awkwardMetadata = []string{`{"a": 1, "b" : [1, 2 ,3]}`, ` "json string" `, `{"html":"<b>&</b>","ls":"` + "\u2028" + `","esc":"\"\\<"}`, "not json {", `[ ]`, `null`, `12.5e3`}

func randomRecord(rng *rand.Rand) api.Record {
	str := func() string { return awkwardStrings[rng.IntN(len(awkwardStrings))] }
	sp := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	fp := func() *float32 {
		if rng.IntN(3) == 0 {
			return nil
		}
		f := awkwardFloats[rng.IntN(len(awkwardFloats))]
		return &f
	}
	ip := func() *int32 {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := rng.Int32() - 1<<30
		return &v
	}
	floats := func() []float32 {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []float32{}
		}
		out := make([]float32, rng.IntN(5))
		for i := range out {
			out[i] = awkwardFloats[rng.IntN(len(awkwardFloats))]
		}
		return out
	}
	r := api.Record{
		ID: str(), RolloutID: str(), ProblemID: str(), Dataset: sp(), SequenceOrder: rng.Int32() - 1<<30,
		Role: str(), Content: sp(), ContentType: str(), ModelInputString: sp(), ModelOutputString: sp(),
		Rationale: sp(), ProblemText: sp(), UserMetadata: sp(), NumInputTokens: ip(), NumOutputTokens: ip(),
		OutputLogprobs: floats(), InputLogprobs: floats(), RefLogprobs: floats(),
		Advantage: fp(), Reward: fp(), RawReward: fp(), Score: fp(), GraderID: sp(), ExcludeReason: sp(),
		PolicyVersion: sp(), PayloadChecksum: sp(), ArtifactType: sp(),
	}
	if rng.IntN(2) == 0 {
		ts := time.Date(2026, 1, 2, 3, 4, 5, rng.IntN(1e9), time.FixedZone("x", rng.IntN(20)*1800-18000))
		r.CreatedAt = &ts
	}
	if rng.IntN(3) > 0 {
		r.InputTokens = []int32{1, -2, math.MaxInt32}[:rng.IntN(4)]
		r.OutputTokens = []int32{}
		r.LossMask = []int8{1, 0, -128, 127}[:rng.IntN(5)]
	}
	if rng.IntN(2) == 0 {
		b := rng.IntN(2) == 0
		r.IncludeInTraining = &b
	}
	if rng.IntN(2) == 0 {
		n := rng.Int64()
		r.PayloadSize = &n
	}
	if rng.IntN(3) == 0 {
		r.BinaryPayload = []byte(str())
	}
	if rng.IntN(2) == 0 {
		r.Relationships = []api.Relationship{{TargetID: sp(), Relation: sp(), Weight: fp()}, {}}[:rng.IntN(3)]
	}
	if rng.IntN(4) > 0 {
		m := awkwardMetadata[rng.IntN(len(awkwardMetadata))]
		r.Metadata = &m
	}
	return r
}

// TestRecordJSONMatchesEncodingJSON: the hand-written encoding of the read
// routes' answers (get, trajectory, list) is byte for byte what
// encoding/json's Encoder wrote, over records with every kind of value
// and escape, and each answer carries its Content-Length.
func TestRecordJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for i := range 2000 {
		recs := make([]api.Record, rng.IntN(4))
		for j := range recs {
			recs[j] = randomRecord(rng)
		}
		check := func(what string, rr *httptest.ResponseRecorder, want []byte) {
			t.Helper()
			if got := rr.Body.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("case %d %s:\n got %s\nwant %s", i, what, got, want)
			}
			if cl := rr.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
				t.Fatalf("case %d %s: Content-Length %q, body %d bytes", i, what, cl, len(want))
			}
			if rr.Code != 200 || rr.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("case %d %s: %d %q", i, what, rr.Code, rr.Header().Get("Content-Type"))
			}
		}
		var rec *api.Record
		if len(recs) > 0 {
			rec = &recs[0]
		}
		rr := httptest.NewRecorder()
		writeGetRecord(rr, rec)
		check("get", rr, encodingJSON(t, api.GetRecordResponse{Record: rec}))

		ro := awkwardStrings[rng.IntN(len(awkwardStrings))]
		rr = httptest.NewRecorder()
		writeTrajectory(rr, ro, recs)
		check("trajectory", rr, encodingJSON(t, api.TrajectoryResponse{RolloutID: ro, Records: recs, Count: len(recs)}))

		lr := api.ListResponse{Records: recs, HasMore: rng.IntN(2) == 0, Limit: rng.IntN(1000), Offset: rng.IntN(5), Source: api.SourceAll}
		if rng.IntN(2) == 0 {
			lr.NextCursor = "c-" + strconv.Itoa(i)
		}
		rr = httptest.NewRecorder()
		writeList(rr, lr)
		check("list", rr, encodingJSON(t, lr))
	}
}

// TestRecordJSONRefusesWhatEncodingJSONRefuses: a NaN reward cannot be
// sent as JSON; the answer is what it was with encoding/json alone (its
// error, and no partial document).
func TestRecordJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	nan := float32(math.NaN())
	rec := api.Record{ID: "a", Reward: &nan}
	rr := httptest.NewRecorder()
	writeGetRecord(rr, &rec)
	old := httptest.NewRecorder()
	WriteJSON(old, 200, api.GetRecordResponse{Record: &rec})
	if !bytes.Equal(rr.Body.Bytes(), old.Body.Bytes()) || rr.Code != old.Code {
		t.Fatalf("NaN: got %d %q, encoding/json alone %d %q", rr.Code, rr.Body.Bytes(), old.Code, old.Body.Bytes())
	}
	rr = httptest.NewRecorder()
	writeTrajectory(rr, "r", []api.Record{{ID: "b"}, rec})
	if rr.Body.Len() != 0 {
		t.Fatalf("trajectory with a NaN: %q, want no document (as encoding/json)", rr.Body.Bytes())
	}
}

func BenchmarkTrajectoryJSON(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]api.Record, 8)
	content := string(bytes.Repeat([]byte("abcdefgh "), 113))
	for i := range recs {
		recs[i] = randomRecord(rng)
		recs[i].Content = &content
	}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			writeTrajectory(httptest.NewRecorder(), "ro-1", recs)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			WriteJSON(httptest.NewRecorder(), 200, api.TrajectoryResponse{RolloutID: "ro-1", Records: recs, Count: 8})
		}
	})
}
