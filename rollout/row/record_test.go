package row

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func ptr[T any](v T) *T { return &v }

// TestBuildBatchColumns: BuildBatch's column table follows Schema: a record
// with every field set has a value in every column, one with none in no
// nullable column, and a batch of both keeps each row's values in place.
func TestBuildBatchColumns(t *testing.T) {
	if len(columns) != Schema.NumFields() {
		t.Fatalf("%d columns for %d schema fields", len(columns), Schema.NumFields())
	}
	at := time.Now()
	full := Record{ID: "f", RolloutID: "r", ProblemID: "p", Dataset: ptr("d"), SequenceOrder: 1, Role: "user", CreatedAt: &at,
		Content: ptr("c"), ContentType: "text/plain", ModelInputString: ptr("i"), ModelOutputString: ptr("o"), Rationale: ptr("why"),
		ProblemText: ptr("pt"), UserMetadata: ptr("um"), InputTokens: []int32{1}, OutputTokens: []int32{2}, NumInputTokens: ptr[int32](1),
		NumOutputTokens: ptr[int32](1), OutputLogprobs: []float32{-1}, InputLogprobs: []float32{-2}, RefLogprobs: []float32{-3},
		LossMask: []int8{1}, Advantage: ptr[float32](1), Reward: ptr[float32](2), RawReward: ptr[float32](3), Score: ptr[float32](4),
		GraderID: ptr("g"), IncludeInTraining: ptr(true), ExcludeReason: ptr("x"), PolicyVersion: ptr("v"),
		Relationships: []Relationship{{TargetID: ptr("t")}}, BinaryPayload: []byte{1}, PayloadSize: ptr[int64](1),
		PayloadChecksum: ptr("sum"), ArtifactType: ptr("a"), Metadata: ptr("{}"), PayloadRef: ptr("ref")}
	empty := Record{ID: "e", RolloutID: "r", Role: "user", CreatedAt: &at, ContentType: "text/plain"}
	for _, tc := range []struct {
		recs  []Record
		nulls func(f arrow.Field) int
	}{
		{[]Record{full}, func(arrow.Field) int { return 0 }},
		{[]Record{empty}, func(f arrow.Field) int { return map[bool]int{true: 1}[f.Nullable] }},
		{[]Record{empty, full, empty}, func(f arrow.Field) int { return map[bool]int{true: 2}[f.Nullable] }},
	} {
		b := BuildBatch(tc.recs)
		for i, f := range Schema.Fields() {
			want := tc.nulls(f)
			if _, sys := columns[i].field.(systemField); sys {
				want = len(tc.recs) // set by seal and merge, never by an append
			}
			if got := b.Column(i).NullN(); got != want {
				t.Errorf("%d records: column %s has %d nulls, want %d", len(tc.recs), f.Name, got, want)
			}
		}
		back, err := FromBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		for j := range back {
			// payload_ref goes into the store and is never read back.
			want := tc.recs[j]
			want.CreatedAt, want.PayloadRef, back[j].CreatedAt = nil, nil, nil
			if !reflect.DeepEqual(back[j], want) {
				t.Errorf("row %d: got %+v, want %+v", j, back[j], want)
			}
		}
		b.Release()
	}
}

// TestRegression_SharedNullColumnsAreReadOnly: BuildBatch shares all-null
// columns between batches, so goroutines read them at once. arrow-go
// computes an array's null count on first use and stores it: unless
// computed before sharing, that is a data race (seen under -race in the
// fault and crash tests as concurrent appends ran NullN on one column).
func TestRegression_SharedNullColumnsAreReadOnly(t *testing.T) {
	at := time.Now()
	const goroutines, rounds = 8, 32
	// Round n: every goroutine builds a batch of a size no one built
	// before (n + 900) and reads the null counts of its columns, all at
	// once, so the first reads of the new shared columns meet.
	gates := make([]chan struct{}, rounds)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	var ready, wg sync.WaitGroup
	ready.Add(goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range rounds {
				ready.Done()
				<-gates[n]
				recs := make([]Record, n+900)
				for j := range recs {
					recs[j] = Record{ID: fmt.Sprint(g, n, j), RolloutID: "r", Role: "user", ContentType: "text/plain", CreatedAt: &at}
				}
				b := BuildBatch(recs)
				for _, c := range b.Columns() {
					c.NullN()
					if l, ok := c.(array.ListLike); ok {
						l.ListValues().NullN()
					}
				}
				b.Release()
			}
		}()
	}
	for n := range rounds {
		ready.Wait()
		if n+1 < rounds {
			ready.Add(goroutines)
		}
		close(gates[n])
	}
	wg.Wait()
}
