package rollout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

func ptr[T any](v T) *T { return &v }

func newCatalog(t *testing.T, root objstore.Store, instance string, opts Options) *Catalog {
	t.Helper()
	c := NewCatalog(root, ShardID(instance), opts)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func mustStore(t *testing.T, c *Catalog, name string) *Store {
	t.Helper()
	s, err := c.Open(context.Background(), name)
	if errors.Is(err, ErrNotFound) {
		s, err = c.Create(context.Background(), name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func recs(prefix string, n int, rollout string) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{ID: fmt.Sprintf("%s-%03d", prefix, i), RolloutID: rollout, SequenceOrder: int32(n - i), Content: ptr("text " + prefix)}
	}
	return out
}

func appendFlush(t *testing.T, s *Store, rs []Record) []string {
	t.Helper()
	ids, err := s.Append(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ids
}

func listIDs(t *testing.T, s *Store, o ListOptions) []string {
	t.Helper()
	var ids []string
	for {
		res, err := s.List(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			ids = append(ids, r.ID)
		}
		if !res.HasMore {
			return ids
		}
		if o.Limit == 0 {
			o.Limit = 25
		}
		o.Offset += o.Limit
	}
}

func counts(t *testing.T, s *Store) [3]int {
	return [3]int{len(listIDs(t, s, ListOptions{Source: SourceFragments})), len(listIDs(t, s, ListOptions{Source: SourceWAL})), len(listIDs(t, s, ListOptions{Source: SourceAll}))}
}

func TestSourcesBeforeAndAfterMerge(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	for i := 0; i < 3; i++ {
		if _, err := s.Append(ctx, []Record{{ID: fmt.Sprintf("r%d", i), RolloutID: "ro"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := counts(t, s); got != [3]int{0, 0, 0} {
		t.Fatalf("before flush (durable, not visible): %v", got)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, s); got != [3]int{0, 3, 3} {
		t.Fatalf("after flush: %v", got)
	}
	res, err := s.Merge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 || res.Generations != 1 {
		t.Fatalf("merge %+v", res)
	}
	if got := counts(t, s); got != [3]int{3, 0, 3} {
		t.Fatalf("after merge: %v", got)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.BaseRows != 3 || st.PendingGenerations != 0 || st.Fragments != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
	// Defaults.
	r, err := s.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r.ProblemID != "ro" || r.Role != "assistant" || r.ContentType != "text/plain" || r.CreatedAt == nil {
		t.Fatalf("defaults %+v", r)
	}
}

func TestPaginationAcrossShardsAndGenerations(t *testing.T) {
	root := objstore.NewMemory()
	a := mustStore(t, newCatalog(t, root, "wa", Options{}), "exp")
	b := mustStore(t, newCatalog(t, root, "wb", Options{}), "exp")
	var want []string
	for g := 0; g < 3; g++ {
		want = append(want, appendFlush(t, a, recs(fmt.Sprintf("a%d", g), 7, "ra"))...)
		want = append(want, appendFlush(t, b, recs(fmt.Sprintf("b%d", g), 5, "rb"))...)
	}
	if _, err := a.Merge(context.Background()); err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	for _, limit := range []int{1, 4, 25} {
		got := listIDs(t, a, ListOptions{Source: SourceAll, Limit: limit})
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: %d ids, want %d", limit, len(got), len(want))
		}
	}
	// Filters apply before pagination.
	got := listIDs(t, b, ListOptions{Source: SourceAll, Limit: 2, Filters: []Filter{{"rollout_id", "rb"}}})
	if len(got) != 15 {
		t.Fatalf("filtered: %d", len(got))
	}
	for _, id := range got {
		if id[0] != 'b' {
			t.Fatalf("filter leaked %s", id)
		}
	}
	if got := listIDs(t, b, ListOptions{Source: SourceFragments, Filters: []Filter{{"rollout_id", "ra"}}, Limit: 3}); len(got) != 21 {
		t.Fatalf("fragments filtered %d", len(got))
	}
	if got := listIDs(t, b, ListOptions{Source: SourceWAL, Filters: []Filter{{"rollout_id", "ra"}}}); len(got) != 0 {
		t.Fatalf("wal after a's merge holds a rows: %v", got)
	}
}

func TestNewestWinsAndRetriedAppendIsIdempotent(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	appendFlush(t, s, []Record{{ID: "x", RolloutID: "r", Content: ptr("v1")}})
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	// The same id again (a retry, or an update): newest wins everywhere.
	appendFlush(t, s, []Record{{ID: "x", RolloutID: "r", Content: ptr("v2")}})
	appendFlush(t, s, []Record{{ID: "x", RolloutID: "r", Content: ptr("v3")}})
	if got := listIDs(t, s, ListOptions{Source: SourceAll}); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("all: %v", got)
	}
	if r, _ := s.Get(ctx, "x"); r == nil || *r.Content != "v3" {
		t.Fatalf("get: %+v", r)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.List(ctx, ListOptions{Source: SourceFragments})
	if err != nil || len(res.Records) != 1 || *res.Records[0].Content != "v3" {
		t.Fatalf("fragments after merge: %+v %v", res, err)
	}
}

func TestGetBlobTrajectory(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	appendFlush(t, s, []Record{
		{ID: "s2", RolloutID: "traj", SequenceOrder: 2, BinaryPayload: []byte("png bytes"), ContentType: "image/png", Relationships: []Relationship{{TargetID: ptr("s1"), Relation: ptr("follows"), Weight: ptr[float32](0.5)}}},
		{ID: "s0", RolloutID: "traj", SequenceOrder: 0, InputTokens: []int32{1, 2, 3}, Reward: ptr[float32](1.5), IncludeInTraining: ptr(true), Metadata: ptr(`{"k":1}`)},
	})
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, []Record{{ID: "s1", RolloutID: "traj", SequenceOrder: 1}})
	tr, err := s.Trajectory(ctx, "traj")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range tr {
		order = append(order, r.ID)
	}
	if !slices.Equal(order, []string{"s0", "s1", "s2"}) {
		t.Fatalf("trajectory %v", order)
	}
	r, err := s.Get(ctx, "s2")
	if err != nil || *r.PayloadSize != 9 || r.BinaryPayload != nil || len(r.Relationships) != 1 || *r.Relationships[0].Relation != "follows" {
		t.Fatalf("get s2: %+v %v", r, err)
	}
	r0, _ := s.Get(ctx, "s0")
	if !slices.Equal(r0.InputTokens, []int32{1, 2, 3}) || *r0.Reward != 1.5 || !*r0.IncludeInTraining || *r0.Metadata != `{"k":1}` {
		t.Fatalf("get s0: %+v", r0)
	}
	data, ct, err := s.Blob(ctx, "s2")
	if err != nil || string(data) != "png bytes" || ct != "image/png" {
		t.Fatalf("blob: %q %q %v", data, ct, err)
	}
	if _, _, err := s.Blob(ctx, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("blob of a record without payload: %v", err)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing get: %v", err)
	}
	// Blob from a pending generation too.
	appendFlush(t, s, []Record{{ID: "p", RolloutID: "traj", BinaryPayload: []byte{0, 1, 2}}})
	if data, _, err := s.Blob(ctx, "p"); err != nil || len(data) != 3 {
		t.Fatalf("pending blob %v %v", data, err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	var ve *ValidationError
	for name, rs := range map[string][]Record{
		"empty":       nil,
		"no rollout":  {{ID: "a"}},
		"bad size":    {{RolloutID: "r", BinaryPayload: []byte("ab"), PayloadSize: ptr[int64](3)}},
		"bad meta":    {{RolloutID: "r", Metadata: ptr("{")}},
		"neg seq":     {{RolloutID: "r", SequenceOrder: -1}},
		"second only": {{RolloutID: "r"}, {ID: "b"}},
	} {
		if _, err := s.Append(ctx, rs); !errors.As(err, &ve) {
			t.Errorf("%s: %v", name, err)
		}
	}
	_ = s.Flush(ctx)
	if got := counts(t, s); got != [3]int{0, 0, 0} {
		t.Fatalf("bad input stored rows: %v", got)
	}
	// Roles are free-form, as in the reference: any role is stored.
	if _, err := s.Append(ctx, []Record{{ID: "w", RolloutID: "r", Role: "wizard"}}); err != nil {
		t.Fatalf("free-form role: %v", err)
	}
	if _, err := ParseSource("bogus"); !errors.As(err, &ve) {
		t.Fatal("bad source accepted")
	}
	if _, err := ParseFilters(map[string]string{"reward": "1"}); !errors.As(err, &ve) {
		t.Fatal("bad filter accepted")
	}
	if _, err := ParseFilters(map[string]string{"include_in_training": "yes"}); !errors.As(err, &ve) {
		t.Fatal("bad bool filter accepted")
	}
	for _, n := range []string{"", "_x", "a/b", "..", string(make([]byte, 129))} {
		if _, err := c.Create(ctx, n); !errors.As(err, &ve) {
			t.Errorf("name %q: %v", n, err)
		}
	}
	if _, err := c.Create(ctx, "exp"); !errors.Is(err, ErrExists) {
		t.Fatalf("dup create: %v", err)
	}
}

func TestMergeCapsAndOverload(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{MergeMaxGenerations: 2, PendingMax: 4})
	s := mustStore(t, c, "exp")
	for g := 0; g < 5; g++ {
		appendFlush(t, s, recs(fmt.Sprintf("g%d", g), 2, "r"))
	}
	if _, err := s.List(ctx, ListOptions{Source: SourceAll}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("5 pending > 4: %v", err)
	}
	if _, err := s.List(ctx, ListOptions{Source: SourceFragments}); err != nil {
		t.Fatalf("fragments must not read the WAL: %v", err)
	}
	res, err := s.Merge(ctx)
	if err != nil || res.Generations != 2 || res.Remaining != 3 {
		t.Fatalf("capped merge %+v %v", res, err)
	}
	if got := counts(t, s); got != [3]int{4, 6, 10} {
		t.Fatalf("after one pass %v", got)
	}
	for res.Remaining > 0 {
		if res, err = s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := counts(t, s); got != [3]int{10, 0, 10} {
		t.Fatalf("after all passes %v", got)
	}
	st, _ := s.Stats(ctx)
	if st.Fragments != 3 {
		t.Fatalf("fragments %d", st.Fragments)
	}
	cres, err := s.Compact(ctx, CompactOptions{})
	if err != nil || cres.Removed != 3 || cres.Added != 1 {
		t.Fatalf("compact %+v %v", cres, err)
	}
	st, _ = s.Stats(ctx)
	if st.Fragments != 1 || st.LastCompaction == nil || st.BaseRows != 10 {
		t.Fatalf("after compaction %+v", st)
	}
}

func TestOrphanMerge(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	dead := mustStore(t, NewCatalog(root, ShardID("dead"), Options{}), "exp")
	if _, err := dead.Append(ctx, recs("d", 4, "r")); err != nil {
		t.Fatal(err)
	}
	dead.writer.Load().Abandon() // crashes with acknowledged rows only in its WAL

	live := mustStore(t, newCatalog(t, root, "live", Options{}), "exp")
	res, err := live.MergeShard(ctx, ShardID("dead"))
	if err != nil || res.Rows != 4 {
		t.Fatalf("orphan merge %+v %v", res, err)
	}
	if got := counts(t, live); got != [3]int{4, 0, 4} {
		t.Fatalf("after orphan merge %v", got)
	}
	m, _ := wal.LoadManifest(ctx, live.root, ShardID("dead"))
	if m.Epoch != 2 || len(m.Generations) != 0 {
		t.Fatalf("orphan shard manifest %+v", m)
	}
}

// TestRegression_PendingRowListsAreTheirOwn: reading a row of a pending
// generation decoded list columns (tokens, logprobs, relationships) with
// the offsets of the first row of the batch, because the row is a slice
// and the offsets were indexed without the slice's offset.
func TestRegression_PendingRowListsAreTheirOwn(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, objstore.NewMemory(), "w1", Options{})
	s := mustStore(t, c, "exp")
	appendFlush(t, s, []Record{
		{ID: "a", RolloutID: "r", InputTokens: []int32{1, 2}, OutputLogprobs: []float32{-1}, Relationships: []Relationship{{TargetID: ptr("x")}}},
		{ID: "b", RolloutID: "r", InputTokens: []int32{7, 8, 9}, OutputLogprobs: []float32{-2, -3}, Relationships: []Relationship{{TargetID: ptr("y")}, {TargetID: ptr("z")}}},
	})
	check := func(when string) {
		t.Helper()
		b, err := s.Get(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.InputTokens, []int32{7, 8, 9}) || !slices.Equal(b.OutputLogprobs, []float32{-2, -3}) ||
			len(b.Relationships) != 2 || *b.Relationships[1].TargetID != "z" {
			t.Fatalf("%s: row b read back as tokens %v, logprobs %v, %d relationships", when, b.InputTokens, b.OutputLogprobs, len(b.Relationships))
		}
		res, err := s.List(ctx, ListOptions{Source: SourceAll})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			if r.ID == "b" && !slices.Equal(r.InputTokens, []int32{7, 8, 9}) {
				t.Fatalf("%s: list gives row b tokens %v", when, r.InputTokens)
			}
		}
	}
	check("pending")
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	check("merged")
}

// TestOpenOlderTableCommitsOnlyAtWrite: a store whose base table predates
// some of Schema's columns opens and reads (those columns as null) without
// committing a table version; its first merge adds the columns in its own
// commit and the rows written since carry them (regression: opening a
// store to read it committed AddColumns).
func TestOpenOlderTableCommitsOnlyAtWrite(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	var older []arrow.Field
	for _, f := range Schema.Fields() {
		if f.Name != "metadata" && f.Name != "artifact_type" {
			older = append(older, f)
		}
	}
	ls, err := schema.FromArrow(arrow.NewSchema(older, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Create(ctx, StoreRoot(root, "old"), ls, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := root.Put(ctx, registryDir+"old", nil); err != nil {
		t.Fatal(err)
	}
	s := mustStore(t, newCatalog(t, root, "w1", Options{}), "old")
	appendFlush(t, s, []Record{{ID: "a", RolloutID: "r", ArtifactType: ptr("img"), Metadata: ptr(`{"k":1}`)}})
	for _, src := range []Source{SourceFragments, SourceWAL, SourceAll} {
		if _, err := s.List(ctx, ListOptions{Source: src, Filters: []Filter{{"artifact_type", "img"}}}); err != nil {
			t.Fatalf("list %s filtered on a column the base lacks: %v", src, err)
		}
	}
	if _, err := s.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := table.Open(ctx, StoreRoot(root, "old")); err != nil || d.Version() != 1 {
		t.Fatalf("reads committed a table version: %v %v", d.Version(), err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := table.Open(ctx, StoreRoot(root, "old"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Schema().Field("metadata") == nil || d.Schema().Field("artifact_type") == nil {
		t.Fatal("the merge did not add the missing columns")
	}
	r, err := s.Get(ctx, "a")
	if err != nil || r.ArtifactType == nil || *r.ArtifactType != "img" || r.Metadata == nil {
		t.Fatalf("merged record %+v %v", r, err)
	}
	res, err := s.List(ctx, ListOptions{Source: SourceFragments, Filters: []Filter{{"artifact_type", "img"}}})
	if err != nil || len(res.Records) != 1 {
		t.Fatalf("filter after the merge: %+v %v", res, err)
	}
}

// TestDeleteLeavesNoDirectory: deleting a store on local disk removes its
// dataset directory, so LanceDB's table listing shows no ghost of it
// (regression: an empty {name}.rollout.lance/ stayed behind, and LanceDB
// listed it and then failed to open it).
func TestDeleteLeavesNoDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newCatalog(t, root, "w1", Options{})
	s := mustStore(t, c, "gone")
	appendFlush(t, s, recs("a", 3, "r"))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	mustStore(t, c, "kept")
	if err := c.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.rollout.lance")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted store's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kept.rollout.lance")); err != nil {
		t.Fatalf("another store's directory went too: %v", err)
	}
	if _, err := c.Open(ctx, "gone"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after delete: %v", err)
	}
}

// TestMergeByteCapBindsAndDefaultTakesABacklogInOnePass: by default a
// backlog of small generations merges in one pass (the generation count
// cap does not bind); a byte cap stops a pass at the generation that
// crosses it, included whole, and newest still wins across passes.
func TestMergeByteCapBindsAndDefaultTakesABacklogInOnePass(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w1", quiet(Options{})), "exp")
	for g := range 20 {
		appendFlush(t, s, recs(fmt.Sprintf("g%02d", g), 3, "r"))
	}
	if res, err := s.Merge(ctx); err != nil || res.Generations != 20 || res.Remaining != 0 || res.Rows != 60 {
		t.Fatalf("default merge of 20 generations: %+v %v", res, err)
	}

	capped := mustStore(t, newCatalog(t, objstore.NewMemory(), "w1", quiet(Options{})), "capped")
	// x is written in generations 3 and 5, merged by different passes:
	// the newer wins.
	for g := range 6 {
		rs := recs(fmt.Sprintf("g%d", g), 3, "r")
		switch g {
		case 3:
			rs = append(rs, Record{ID: "x", RolloutID: "r", Content: ptr("old")})
		case 5:
			rs = append(rs, Record{ID: "x", RolloutID: "r", Content: ptr("new")})
		}
		appendFlush(t, capped, rs)
	}
	gens := capped.writer.Load().Manifest().Generations
	capped.opts.MergeMaxBytes = gens[0].Bytes + gens[1].Bytes/2 // crossed by the second
	for _, want := range []int{2, 2, 2} {
		res, err := capped.Merge(ctx)
		if err != nil || res.Generations != want {
			t.Fatalf("capped pass: %+v %v, want %d generations", res, err, want)
		}
	}
	if got := mustCounts(t, capped); got != [3]int{19, 0, 19} {
		t.Fatalf("counts after the capped passes %v", got)
	}
	if r, err := capped.Get(ctx, "x"); err != nil || *r.Content != "new" {
		t.Fatalf("x: %+v %v", r, err)
	}
}
