package rollout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// TestCursorPagingUnderMaintenance follows cursors through sources all and
// fragments while merges, compactions, new writes and rewrites of existing
// ids run between pages, over seeded schedules: every id that existed when
// the listing began is returned exactly once, and no id twice.
func TestCursorPagingUnderMaintenance(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		for _, src := range []Source{SourceAll, SourceFragments} {
			t.Run(fmt.Sprintf("seed%d/%s", seed, src), func(t *testing.T) {
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(seed, 7))
				s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w1", Options{MergeMaxGenerations: 2, CompactTargetRows: 8}), "exp")
				next := 0
				write := func(n int) {
					rs := make([]Record, n)
					for i := range rs {
						rs[i] = Record{ID: fmt.Sprintf("id-%04d", rng.IntN(10_000)), RolloutID: fmt.Sprintf("r%d", next%5)}
						next++
					}
					appendFlush(t, s, rs)
				}
				for range 6 {
					write(1 + rng.IntN(8))
					if rng.IntN(2) == 0 {
						if _, err := s.Merge(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				before := ids(t, s, src)
				seen := map[string]int{}
				o := ListOptions{Source: src}
				for pages := 0; ; pages++ {
					if pages > 500 {
						t.Fatal("the listing does not end")
					}
					o.Limit = 1 + rng.IntN(5)
					res, err := s.List(ctx, o)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range res.Records {
						seen[r.ID]++
					}
					if res.NextCursor == "" {
						if res.HasMore {
							t.Fatal("has_more without a next_cursor")
						}
						break
					}
					if o.After, err = DecodeCursor(res.NextCursor); err != nil {
						t.Fatal(err)
					}
					switch rng.IntN(5) {
					case 0:
						if _, err := s.Merge(ctx); err != nil {
							t.Fatal(err)
						}
					case 1:
						if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
							t.Fatal(err)
						}
					case 2:
						write(1 + rng.IntN(4)) // new ids, and rewrites of old ones
					case 3:
						// Rewrite ids already listed and ids still ahead.
						var rs []Record
						for id := range before {
							if rng.IntN(4) == 0 {
								rs = append(rs, Record{ID: id, RolloutID: "rewritten"})
							}
						}
						if len(rs) > 0 {
							appendFlush(t, s, rs)
						}
					}
				}
				for id := range before {
					if seen[id] != 1 {
						t.Errorf("id %s listed %d times, want once", id, seen[id])
					}
				}
				for id, n := range seen {
					if n > 1 {
						t.Errorf("id %s listed %d times", id, n)
					}
				}
			})
		}
	}
}

// ids lists every id of a source (one page).
func ids(t *testing.T, s *Store, src Source) map[string]bool {
	t.Helper()
	res, err := s.List(context.Background(), ListOptions{Source: src, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range res.Records {
		out[r.ID] = true
	}
	return out
}

// TestCursorRoundTrip: a cursor decodes to the id it was made from; a
// cursor this service did not make is a ValidationError.
func TestCursorRoundTrip(t *testing.T) {
	for _, id := range []string{"a", "id with spaces/and:colons", "é✓"} {
		if got, err := DecodeCursor(EncodeCursor(id)); err != nil || got != id {
			t.Fatalf("%q: %q %v", id, got, err)
		}
	}
	for _, c := range []string{"!!", "djE", "bm9wZQ"} {
		var ve *ValidationError
		if _, err := DecodeCursor(c); !errors.As(err, &ve) {
			t.Fatalf("%q: %v", c, err)
		}
	}
}

// TestListByIDIndexWalkMatchesScan: the unfiltered listing walks the id
// index (deleted and superseded rows skipped, fragments it does not cover
// scanned) and returns, page by page, exactly what a scan of the id column
// returns.
func TestListByIDIndexWalkMatchesScan(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	s := mustStore(t, newCatalog(t, root, "w1", Options{}), "exp")
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 5 {
		rs := make([]Record, 40)
		for i := range rs {
			rs[i] = Record{ID: fmt.Sprintf("id-%03d", rng.IntN(150)), RolloutID: fmt.Sprintf("r%d", round)}
		}
		appendFlush(t, s, rs)
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendFlush(t, s, []Record{{ID: "id-007", RolloutID: "pending"}, {ID: "zz-new", RolloutID: "pending"}})
	snap, err := s.snapshot(ctx, true, planList(ListOptions{Source: SourceAll}))
	if err != nil {
		t.Fatal(err)
	}
	if covered, err := s.opts.Indexes.Ascend(ctx, snap.base, ColID, "", func(string, uint64) bool { return false }); err != nil || covered == nil || covered.IsEmpty() {
		t.Fatalf("the id index covers nothing (%v): the walk is not exercised", err)
	}
	scan := mustStore(t, newCatalog(t, root, "w2", Options{IndexColumns: []string{}}), "exp")
	for _, src := range []Source{SourceFragments, SourceAll} {
		for _, limit := range []int{1, 7, 50} {
			a, b := walk(t, s, src, limit), walk(t, scan, src, limit)
			if !slices.Equal(a, b) || len(a) == 0 {
				t.Fatalf("%s limit %d: index walk %v\nscan %v", src, limit, a, b)
			}
		}
	}
}

// walk follows cursors to the end and returns "id/rollout_id" per row.
func walk(t *testing.T, s *Store, src Source, limit int) []string {
	t.Helper()
	var out []string
	o := ListOptions{Source: src, Limit: limit}
	for {
		res, err := s.List(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			out = append(out, r.ID+"/"+r.RolloutID)
		}
		if res.NextCursor == "" {
			return out
		}
		o.After, _ = DecodeCursor(res.NextCursor)
	}
}

// TestDeepOffsetSkipMatchesScan: a page at an offset, which the listing
// reaches by ranking index pages (skipOffset) instead of counting rows, is
// the page a scan of the id column gives, with superseded (deleted) base
// rows, several index segments, fragments no index covers, and rows
// pending in the WAL that hide their base rows.
func TestDeepOffsetSkipMatchesScan(t *testing.T) {
	defer func(b, m int) { indexBatchSize, skipMinOffset = b, m }(indexBatchSize, skipMinOffset)
	indexBatchSize, skipMinOffset = 8, 1
	ctx := context.Background()
	root := objstore.NewMemory()
	s := mustStore(t, newCatalog(t, root, "w1", Options{}), "exp")
	scan := mustStore(t, newCatalog(t, root, "w2", Options{IndexColumns: []string{}}), "exp")
	rng := rand.New(rand.NewPCG(5, 6))
	rec := func(round int) Record {
		return Record{ID: fmt.Sprintf("id-%04d", rng.IntN(600)), RolloutID: fmt.Sprintf("r%d", round)}
	}
	check := func(what string) {
		t.Helper()
		before := offsetSkips.Load()
		for _, src := range []Source{SourceFragments, SourceAll} {
			all := walk(t, scan, src, 1000)
			for _, after := range []int{-1, 0, 17, len(all) / 2} {
				o := ListOptions{Source: src, Limit: 7}
				rest := all
				if after >= 0 && after < len(all) {
					o.After = strings.SplitN(all[after], "/", 2)[0]
					rest = all[after+1:]
				}
				for off := 0; off <= len(rest)+3; off += 1 + rng.IntN(23) {
					o.Offset = off
					res, err := s.List(ctx, o)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, r := range res.Records {
						got = append(got, r.ID+"/"+r.RolloutID)
					}
					want := rest[min(off, len(rest)):min(off+7, len(rest))]
					if !slices.Equal(got, want) || res.HasMore != (off+7 < len(rest)) {
						t.Fatalf("%s: %s after %q offset %d: got %v (more %v)\nwant %v", what, src, o.After, off, got, res.HasMore, want)
					}
				}
			}
		}
		if offsetSkips.Load() == before {
			t.Fatalf("%s: no listing skipped through the index", what)
		}
	}
	for round := range 4 { // merged: delta segments, superseded rows deleted
		rs := make([]Record, 120)
		for i := range rs {
			rs[i] = rec(round)
		}
		appendFlush(t, s, rs)
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("delta segments with deletions")
	// A fragment merged without index upkeep (scanned), and pending rows
	// that rewrite base ids.
	rs := make([]Record, 60)
	for i := range rs {
		rs[i] = rec(10)
	}
	appendFlush(t, scan, rs)
	if _, err := scan.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		rs[i] = rec(11)
	}
	appendFlush(t, s, rs)
	check("uncovered fragment and pending rewrites")
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}

// TestFilteredWalkMatchesScan: a page filtered on an indexed column, chosen
// by walking the id index and keeping the rows the filter's index names
// (walkFiltered), is the page a scan gives, through deletions, pending
// rewrites, an uncovered fragment and compaction, with cursors and offsets.
func TestFilteredWalkMatchesScan(t *testing.T) {
	defer func(b int, w int64) { indexBatchSize, walkEntriesPerRun = b, w }(indexBatchSize, walkEntriesPerRun)
	indexBatchSize, walkEntriesPerRun = 8, 1<<40 // always walk
	ctx := context.Background()
	root := objstore.NewMemory()
	s := mustStore(t, newCatalog(t, root, "w1", Options{}), "exp")
	scan := mustStore(t, newCatalog(t, root, "w2", Options{IndexColumns: []string{}}), "exp")
	rng := rand.New(rand.NewPCG(8, 9))
	rec := func(round int) Record {
		return Record{ID: fmt.Sprintf("id-%04d", rng.IntN(500)), RolloutID: fmt.Sprintf("r%d", rng.IntN(6)), ProblemID: fmt.Sprintf("p%d-%d", rng.IntN(3), round%2)}
	}
	check := func(what string) {
		t.Helper()
		before := filteredWalks.Load()
		for _, src := range []Source{SourceFragments, SourceAll} {
			for _, f := range []Filter{{ColRolloutID, "r1"}, {ColRolloutID, "r4"}, {ColProblemID, "p2-0"}, {ColRolloutID, "none"}} {
				for _, lim := range []int{1, 5} {
					var a, b []string
					for _, st := range []*Store{s, scan} {
						o := ListOptions{Source: src, Limit: lim, Filters: []Filter{f}}
						var out []string
						for pages := 0; ; pages++ {
							res, err := st.List(ctx, o)
							if err != nil {
								t.Fatal(err)
							}
							for _, r := range res.Records {
								out = append(out, r.ID+"/"+r.RolloutID+"/"+r.ProblemID)
							}
							if res.NextCursor == "" {
								break
							}
							o.After, _ = DecodeCursor(res.NextCursor)
						}
						if st == s {
							a = out
						} else {
							b = out
						}
					}
					if !slices.Equal(a, b) {
						t.Fatalf("%s: %s %v limit %d: walk %v\nscan %v", what, src, f, lim, a, b)
					}
				}
				res, err := s.List(ctx, ListOptions{Source: src, Limit: 3, Offset: 4, Filters: []Filter{f}})
				want, err2 := scan.List(ctx, ListOptions{Source: src, Limit: 3, Offset: 4, Filters: []Filter{f}})
				if err != nil || err2 != nil || len(res.Records) != len(want.Records) || res.HasMore != want.HasMore {
					t.Fatalf("%s: offset page: %v %v", what, err, err2)
				}
				for i := range res.Records {
					if res.Records[i].ID != want.Records[i].ID {
						t.Fatalf("%s: offset page row %d: %s, want %s", what, i, res.Records[i].ID, want.Records[i].ID)
					}
				}
			}
		}
		if filteredWalks.Load() == before {
			t.Fatalf("%s: no filtered listing walked the id index", what)
		}
	}
	for round := range 4 {
		rs := make([]Record, 100)
		for i := range rs {
			rs[i] = rec(round)
		}
		appendFlush(t, s, rs)
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("delta segments with deletions")
	rs := make([]Record, 50)
	for i := range rs {
		rs[i] = rec(10)
	}
	appendFlush(t, scan, rs)
	if _, err := scan.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		rs[i] = rec(11)
	}
	appendFlush(t, s, rs)
	check("uncovered fragment and pending rewrites")
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}

// TestPageAllEarlyWalkRewalks: a page of source all whose pending
// generations are not cached walks the base before it knows the pending
// ids (listByID's early walk). When pending writes of base ids that no
// longer match the filter take every row of that walk, the page must come
// from a second walk that excludes them, not be short.
func TestPageAllEarlyWalkRewalks(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	w := mustStore(t, newCatalog(t, mem, "w", quiet(Options{})), "early")
	appendFlush(t, w, recs("a", 100, "r"))
	for {
		res, err := w.Merge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Remaining == 0 {
			break
		}
	}
	// Newer writes of a-000..a-039, in another rollout.
	appendFlush(t, w, recs("a", 40, "other"))
	for _, limit := range []int{25, 10} {
		// A new process: nothing pending is cached.
		r := mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "r", quiet(Options{})), "early")
		res, err := r.List(ctx, ListOptions{Source: SourceAll, Limit: limit, Filters: []Filter{{ColRolloutID, "r"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != limit || !res.HasMore {
			t.Fatalf("limit %d: %d records (has_more %v), want %d and more", limit, len(res.Records), res.HasMore, limit)
		}
		for i, rec := range res.Records {
			if want := fmt.Sprintf("a-%03d", 40+i); rec.ID != want || rec.RolloutID != "r" {
				t.Fatalf("limit %d: record %d is %s (%s), want %s of rollout r", limit, i, rec.ID, rec.RolloutID, want)
			}
		}
	}
}
