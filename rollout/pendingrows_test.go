package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// TestLargeGenerationCachedNarrow: the generation cache keeps a large
// generation's narrow columns only, and every read of pending rows (get,
// list, trajectory, scan, export, feed, sample) still returns each row's
// wide columns (content, tokens, logprobs, metadata) as appended, newest
// write per id.
func TestLargeGenerationCachedNarrow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := mustStore(t, newCatalog(t, root, "w", quiet(Options{})), "narrow")
	pad := strings.Repeat("c", 3<<10)
	want := map[string]Record{}
	mk := func(i, round int) Record {
		id := fmt.Sprintf("r%04d", i)
		return Record{
			ID: id, RolloutID: fmt.Sprintf("ro%d", i%3), SequenceOrder: int32(i),
			Content:        ptr(fmt.Sprintf("%s/%d/%s", id, round, pad)),
			OutputTokens:   []int32{int32(i), int32(round), 7},
			OutputLogprobs: []float32{float32(i) / 2, -1},
			Metadata:       ptr(fmt.Sprintf(`{"round":%d}`, round)),
		}
	}
	// Round 0 writes 600 ids; round 1 rewrites every fifth, in the same
	// generation, so the cached rows skip superseded ones.
	var batch []Record
	for i := range 600 {
		batch = append(batch, mk(i, 0))
	}
	for i := 0; i < 600; i += 5 {
		batch = append(batch, mk(i, 1))
	}
	for _, r := range batch {
		want[r.ID] = r
	}
	for i := 0; i < len(batch); i += 60 {
		if _, err := s.Append(ctx, batch[i:min(i+60, len(batch))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The pending generations are large, and the cache holds them narrow.
	snap, err := s.snapshot(ctx, true, readPlan{latest: true})
	if err != nil {
		t.Fatal(err)
	}
	refs := snap.pendingRefs()
	if len(refs) == 0 {
		t.Fatal("no pending generation")
	}
	for _, ref := range refs {
		if ref.Gen.Bytes <= wal.SmallGeneration {
			t.Fatalf("generation %s is %d bytes: the test wants large ones", ref.Key(), ref.Gen.Bytes)
		}
		g, err := s.opts.Cache.get(ctx, s.root, ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, wide := range []string{"content", "output_tokens", "output_logprobs", ColMetadata} {
			if g.Rec.Schema().HasField(wide) {
				t.Fatalf("the cache keeps %s of a large generation", wide)
			}
		}
		if g.Bytes()*10 > ref.Gen.Bytes {
			t.Fatalf("the cache holds %d bytes of a %d-byte generation", g.Bytes(), ref.Gen.Bytes)
		}
	}

	check := func(what string, got Record) {
		t.Helper()
		w, ok := want[got.ID]
		if !ok {
			t.Fatalf("%s: unknown id %q", what, got.ID)
		}
		if got.Content == nil || *got.Content != *w.Content || !slices.Equal(got.OutputTokens, w.OutputTokens) ||
			!slices.Equal(got.OutputLogprobs, w.OutputLogprobs) || got.Metadata == nil || *got.Metadata != *w.Metadata ||
			got.RolloutID != w.RolloutID {
			t.Fatalf("%s: %s reads back as content %.20q tokens %v logprobs %v metadata %v", what, got.ID, deref(got.Content), got.OutputTokens, got.OutputLogprobs, deref(got.Metadata))
		}
	}
	checkBatch := func(what string, b arrow.RecordBatch) int {
		t.Helper()
		rs, err := recordsFromBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			check(what, r)
		}
		return len(rs)
	}

	for _, id := range []string{"r0000", "r0001", "r0595", "r0599"} {
		r, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		check("get", *r)
	}
	for _, src := range []Source{SourceWAL, SourceAll} {
		seen := 0
		after := ""
		for {
			page, err := s.List(ctx, ListOptions{Source: src, Limit: 97, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				check("list "+string(src), r)
			}
			seen += len(page.Records)
			if page.NextCursor == "" {
				break
			}
			after = page.Records[len(page.Records)-1].ID
		}
		if seen != 600 {
			t.Fatalf("list %s: %d records, want 600", src, seen)
		}
	}
	// The generations' open readers are kept beside their entries.
	s.opts.Cache.mu.Lock()
	kept := len(s.opts.Cache.readers)
	s.opts.Cache.mu.Unlock()
	if kept != len(refs) {
		t.Fatalf("%d generation readers kept, want %d", kept, len(refs))
	}
	traj, err := s.Trajectory(ctx, "ro1")
	if err != nil {
		t.Fatal(err)
	}
	if len(traj) != 200 {
		t.Fatalf("trajectory: %d records, want 200", len(traj))
	}
	for _, r := range traj {
		check("trajectory", r)
	}
	scanned := 0
	if err := s.Scan(ctx, ScanOptions{Source: SourceAll, Columns: listColumns}, func(b arrow.RecordBatch) error {
		scanned += checkBatch("scan", b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exported := 0
	if err := s.Export(ctx, ExportOptions{Source: SourceWAL, Filters: []Filter{{ColRolloutID, "ro2"}}, Columns: listColumns}, func(b arrow.RecordBatch) error {
		exported += checkBatch("export", b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if scanned != 600 || exported != 200 {
		t.Fatalf("scan read %d rows (want 600), export %d (want 200)", scanned, exported)
	}
	fed := 0
	for after := (Position{}); fed < 600; {
		res, err := s.Feed(ctx, FeedOptions{After: after, Limit: 250})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows == 0 {
			break
		}
		for _, b := range res.Batches {
			checkBatch("feed", b)
		}
		fed += res.Rows
		after = res.Position
		res.Release()
	}
	// A memtable keeps the newest write of an id: one row per id.
	if fed != 600 {
		t.Fatalf("the feed delivered %d rows, want 600", fed)
	}
	sample, err := s.Sample(ctx, SampleOptions{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sample.Batch.Release()
	if n := checkBatch("sample", sample.Batch); n != 400 {
		t.Fatalf("sample of 2 rollouts: %d rows, want 400", n)
	}
	ids := sample.Batch.Column(slices.Index(listColumns, ColID)).(*array.String)
	if ids.Len() == 0 {
		t.Fatal("empty sample")
	}
}

// TestPendingRowsFoundOncePerSetOfGenerations: reads that meet the same
// pending generations share one set of winning rows; a seal makes a new
// one, which holds the new rows.
func TestPendingRowsFoundOncePerSetOfGenerations(t *testing.T) {
	ctx := context.Background()
	root, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := mustStore(t, newCatalog(t, root, "w", quiet(Options{})), "memo")
	appendFlush := func(id, content string) {
		t.Helper()
		if _, err := s.Append(ctx, []Record{{ID: id, RolloutID: "r", Content: ptr(content)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendFlush("a", "a1")
	appendFlush("b", "b1")
	set := func() *pendingSet {
		t.Helper()
		snap, err := s.snapshot(ctx, true, readPlan{latest: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.walRows(ctx, snap)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := set()
	if again := set(); again != first {
		t.Fatal("two reads of the same generations found their rows twice")
	}
	if len(first.rows) != 2 {
		t.Fatalf("%d pending rows, want 2", len(first.rows))
	}
	appendFlush("a", "a2")
	next := set()
	if next == first {
		t.Fatal("a seal left the reads on the old set of rows")
	}
	if len(next.rows) != 2 {
		t.Fatalf("%d pending rows after a rewrite, want 2", len(next.rows))
	}
	r, err := s.Get(ctx, "a")
	if err != nil || r.Content == nil || *r.Content != "a2" {
		t.Fatalf("get a after its rewrite: %v", err)
	}
	page, err := s.List(ctx, ListOptions{Source: SourceWAL, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 2 || page.Records[0].ID != "a" || *page.Records[0].Content != "a2" {
		t.Fatalf("list after the rewrite: %+v", page.Records)
	}
}
