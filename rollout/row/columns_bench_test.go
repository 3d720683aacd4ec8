package row

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkDefaults: the validation and defaults of a JSON append, for 1
// and 100 records of ~1 KB of text (sparse) and with tokens, scores and
// metadata (dense).
func BenchmarkDefaults(b *testing.B) {
	text := strings.Repeat("t", 1024)
	meta := `{"k":"v","n":[1,2,3]}`
	now := time.Now()
	for _, tc := range benchRecordKinds(&meta) {
		for _, n := range []int{1, 100} {
			src := make([]Record, n)
			for i := range src {
				src[i] = Record{RolloutID: "r", SequenceOrder: int32(i), Content: &text}
				tc.fill(&src[i])
			}
			recs := make([]Record, n)
			b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					copy(recs, src)
					for i := range recs {
						if err := applyDefaults(&recs[i], i, now); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkRecordsFromBatch: a page of 25 and a batch of 1000 records read
// back from Arrow (what a list or get returns), records of ~1 KB of text
// with tokens, scores and metadata.
func BenchmarkRecordsFromBatch(b *testing.B) {
	text := strings.Repeat("t", 1024)
	now := time.Now()
	for _, n := range []int{25, 1000} {
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{RolloutID: "r", SequenceOrder: int32(i), Content: &text, Metadata: ptr(`{"k":1}`),
				InputTokens: make([]int32, 64), OutputLogprobs: make([]float32, 64), Reward: ptr[float32](1), PolicyVersion: ptr("v1")}
			if err := applyDefaults(&recs[i], i, now); err != nil {
				b.Fatal(err)
			}
		}
		batch := BuildBatch(recs)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := FromBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		batch.Release()
	}
}

// BenchmarkBuildBatch: Records to an Arrow batch, as a JSON append does,
// for sparse records (ids, rollout, order and ~1 KB of text) and for
// records that fill the token, logprob and score columns too.
func BenchmarkBuildBatch(b *testing.B) {
	text := strings.Repeat("t", 1024)
	now := time.Now()
	for _, tc := range benchRecordKinds(nil) {
		for _, n := range []int{1, 100} {
			recs := make([]Record, n)
			for i := range recs {
				recs[i] = Record{ID: fmt.Sprintf("bench-%d", i), RolloutID: "r", SequenceOrder: int32(i), Content: &text}
				tc.fill(&recs[i])
				if err := applyDefaults(&recs[i], i, now); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					BuildBatch(recs).Release()
				}
			})
		}
	}
}

// benchRecordKind is a record shape of the append benchmarks.
type benchRecordKind struct {
	name string
	fill func(r *Record)
}

// benchRecordKinds are sparse records (ids, rollout, order and text) and
// dense ones, which fill the token, logprob and score columns too, and
// metadata when meta is not nil.
func benchRecordKinds(meta *string) []benchRecordKind {
	return []benchRecordKind{
		{"sparse", func(*Record) {}},
		{"dense", func(r *Record) {
			r.InputTokens, r.OutputTokens = make([]int32, 64), make([]int32, 64)
			r.OutputLogprobs = make([]float32, 64)
			r.Reward, r.Advantage = ptr[float32](1), ptr[float32](0.5)
			r.PolicyVersion = ptr("v1")
			if meta != nil {
				r.Metadata = meta
			}
		}},
	}
}
