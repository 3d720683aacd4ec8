package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchBody is an append body of n records like the ones bench/ sends:
// ~1 KB of text per record with some escapes, token ids and logprobs, and
// object metadata. nonASCII puts multi-byte text in the content.
func benchBody(n int, nonASCII bool) []byte {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) + "line\n\"quoted\"\t"
	if nonASCII {
		text = strings.Repeat("速い茶色の狐が怠け者の犬を飛び越える。é✓ ", 12)
	}
	type rec struct {
		ID        string         `json:"id"`
		RolloutID string         `json:"rollout_id"`
		Seq       int            `json:"sequence_order"`
		Role      string         `json:"role"`
		Content   string         `json:"content"`
		Tokens    []int          `json:"output_tokens"`
		Logprobs  []float32      `json:"output_logprobs"`
		Reward    float32        `json:"reward"`
		Metadata  map[string]any `json:"metadata"`
	}
	recs := make([]rec, n)
	for i := range recs {
		toks := make([]int, 32)
		lps := make([]float32, 32)
		for j := range toks {
			toks[j] = 1000 + i*j%50000
			lps[j] = -float32(j) / 7
		}
		recs[i] = rec{ID: fmt.Sprintf("rec-%08d", i), RolloutID: fmt.Sprintf("rollout-%d", i/8), Seq: i % 8, Role: "assistant",
			Content: text, Tokens: toks, Logprobs: lps, Reward: 0.5,
			Metadata: map[string]any{"env": "math", "step": i, "tags": []string{"a", "b"}, "nested": map[string]any{"k": []int{1, 2}}}}
	}
	b, err := json.Marshal(map[string]any{"records": recs})
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkScan measures the pre-scan per byte of an append body (go test
// -bench Scan ./internal/jsonscan/; ns/byte = 1000 / MB/s).
func BenchmarkScan(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"records-ascii", benchBody(1000, false)},
		{"records-multibyte", benchBody(1000, true)},
		{"records-text", textBody(100)},
		{"tokens-only", []byte(`{"records":[{"rollout_id":"r","input_tokens":[` + strings.Repeat("123456,", 100000) + `1]}]}`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			l := Limits{MaxDepth: 256, MaxValues: 1 << 24, ItemsDepth: 2}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Scan(c.body, l); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(c.body)), "ns/byte")
		})
	}
}

// textBody is worker's BenchmarkDecodeJSONRecords body: n records of ~1 KB
// of code-like text.
func textBody(n int) []byte {
	text := strings.Repeat(`{x: [1, 2]} y; `, 68)
	var sb strings.Builder
	sb.WriteString(`{"records":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"w-%d","rollout_id":"w-r0","sequence_order":%d,"content":"%s"}`, i, i%16, text)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}
