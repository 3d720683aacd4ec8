package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/objstore"
)

// delivered is one row the feed gave.
type delivered struct {
	shard, seq int64
	id         string
}

// drainFeed reads s's feed from pos until a read returns no row.
func drainFeed(t *testing.T, s *Store, pos Position, limit int, fs ...Filter) ([]delivered, Position) {
	t.Helper()
	var out []delivered
	for {
		res, err := s.Feed(context.Background(), FeedOptions{After: pos, Limit: limit, Filters: fs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows > limit {
			t.Fatalf("%d rows for a limit of %d", res.Rows, limit)
		}
		for _, b := range res.Batches {
			ids := b.Column(slices.Index(feedColumns, ColID)).(*array.String)
			sh := b.Column(slices.Index(feedColumns, ColShard)).(*array.Int64)
			sq := b.Column(slices.Index(feedColumns, ColSeq)).(*array.Int64)
			for i := 0; i < ids.Len(); i++ {
				out = append(out, delivered{sh.Value(i), sq.Value(i), ids.Value(i)})
			}
		}
		res.Release()
		// Positions go through their text form, as a consumer's would.
		p, err := ParsePosition(res.Position.String())
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows == 0 {
			return out, p
		}
		pos = p
	}
}

// checkOnce fails unless got holds each of want's ids once, each shard's
// rows in ascending seq.
func checkOnce(t *testing.T, got []delivered, want []string) {
	t.Helper()
	last := map[int64]int64{}
	seen := map[[2]int64]bool{}
	var ids []string
	for _, d := range got {
		if d.seq <= last[d.shard] {
			t.Fatalf("shard %x: seq %d after %d", d.shard, d.seq, last[d.shard])
		}
		last[d.shard] = d.seq
		if seen[[2]int64{d.shard, d.seq}] {
			t.Fatalf("row %x/%d delivered twice", d.shard, d.seq)
		}
		seen[[2]int64{d.shard, d.seq}] = true
		ids = append(ids, d.id)
	}
	slices.Sort(ids)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("delivered %d rows %v\nwant %d %v", len(ids), clipIDs(ids), len(want), clipIDs(want))
	}
}

func clipIDs(ids []string) []string {
	if len(ids) > 12 {
		return append(slices.Clone(ids[:12]), "...")
	}
	return ids
}

// TestFeedDeliversEveryRowOnceAcrossSealMergeCompaction: a consumer that
// reads after every step of a store's life (unsealed rows, seals, merges
// by two shards, rewrites of merged ids, a compaction) gets every written
// row once, in per-shard order, and a rewrite as a new row.
func TestFeedDeliversEveryRowOnceAcrossSealMergeCompaction(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	a := mustStore(t, newCatalog(t, root, "wa", Options{IndexColumns: []string{}}), "feed")
	b := mustStore(t, newCatalog(t, root, "wb", Options{IndexColumns: []string{}}), "feed")
	var pos Position
	var got []delivered
	var want []string
	step := func(name string, fn func()) {
		t.Helper()
		fn()
		d, p := drainFeed(t, a, pos, 7)
		got, pos = append(got, d...), p
		checkOnce(t, got, want)
		if testing.Verbose() {
			t.Logf("%s: %d delivered", name, len(got))
		}
	}
	appendN := func(s *Store, prefix string, n int, flush bool) {
		ids, err := s.Append(ctx, recs(prefix, n, "r-"+prefix))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ids...)
		if flush {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("unsealed", func() { appendN(a, "a0", 10, false) })
	step("sealed", func() { appendN(a, "a1", 5, true) })
	step("other shard", func() { appendN(b, "b0", 9, true) })
	step("merge a", func() {
		if _, err := a.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	})
	step("more, unsealed and sealed", func() {
		appendN(a, "a2", 4, true)
		appendN(a, "a3", 3, false)
	})
	step("merge b", func() {
		if _, err := b.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	})
	step("rewrite merged ids", func() {
		appendN(a, "a0", 3, true) // a0-000..002 again: new rows
		appendN(b, "b0", 2, false)
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	})
	step("merge both, compact", func() {
		for _, s := range []*Store{a, b} {
			if _, err := s.Merge(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Compact(ctx, CompactOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	step("after compaction", func() { appendN(b, "b1", 6, true) })

	// A new consumer after all that reads what the store holds now: every
	// live row once (the rewritten ids' older rows were replaced before it
	// read them).
	fresh, _ := drainFeed(t, a, Position{}, 1000)
	all := listIDs(t, a, ListOptions{Source: SourceAll, Limit: 1000})
	checkOnce(t, fresh, all)
}

// TestFeedFiltersAndSmallLimits: a filtered feed gives exactly the rows a
// filtered listing does, at any limit, and its position moves past the
// rows it passed over.
func TestFeedFiltersAndSmallLimits(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{IndexColumns: []string{}}), "feedf")
	for i := range 6 {
		roll := "odd"
		if i%2 == 0 {
			roll = "even"
		}
		if _, err := s.Append(ctx, recs(fmt.Sprint("x", i), 5, roll)); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Merge(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if i == 4 {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := []Filter{{ColRolloutID, "even"}}
	want := listIDs(t, s, ListOptions{Source: SourceAll, Filters: f})
	if len(want) != 15 {
		t.Fatalf("listing: %d", len(want))
	}
	for _, limit := range []int{1, 3, 100} {
		got, end := drainFeed(t, s, Position{}, limit, f...)
		checkOnce(t, got, want)
		// The end position is past every row, matching or not.
		if more, _ := drainFeed(t, s, end, limit); len(more) != 0 {
			t.Fatalf("limit %d: %d rows after the filtered feed's end", limit, len(more))
		}
	}
}

// TestFeedWait: a waiting feed answers as soon as a row is appended, and
// with nothing once the wait is over.
func TestFeedWait(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{}), "feedw")
	start := time.Now()
	res, err := s.Feed(ctx, FeedOptions{Wait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 0 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("%d rows after %v", res.Rows, time.Since(start))
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = s.Append(ctx, recs("late", 2, "r"))
	}()
	start = time.Now()
	res, err = s.Feed(ctx, FeedOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if res.Rows != 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d rows after %v", res.Rows, time.Since(start))
	}
}

// TestPositionText: positions round-trip through their text, and text
// that is not one is refused.
func TestPositionText(t *testing.T) {
	var p Position
	p.advance(-5, 1<<40)
	p.advance(7, 3)
	q, err := ParsePosition(p.String())
	if err != nil || q.After(-5) != 1<<40 || q.After(7) != 3 || q.After(8) != 0 {
		t.Fatalf("%v %v", q, err)
	}
	for _, bad := range []string{"x", "f1.!!", "f1.AQ"} {
		if _, err := ParsePosition(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if z, err := ParsePosition(""); err != nil || len(z.seqs) != 0 {
		t.Fatal("empty position")
	}
}

// TestRegression_LateFeedCommitCannotUndoANewerOne: a commit whose write
// reaches storage after a newer commit (a stalled put, a worker killed
// with it on the wire) fails instead of moving the group back; a plain
// overwrite let it, and the fault suite's consumers got rows twice.
func TestRegression_LateFeedCommitCannotUndoANewerOne(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{}), "feedc")
	var p1, p2 Position
	p1.advance(1, 10)
	p2.advance(1, 20)
	if _, err := s.CommitFeed(ctx, "g", p1); err != nil {
		t.Fatal(err)
	}
	late, err := s.root.Get(ctx, feedKey("g", 1)) // commit 1's bytes, as a late duplicate of its put
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitFeed(ctx, "g", p2); err != nil {
		t.Fatal(err)
	}
	// The late put of an existing name fails; of a deleted old one, it
	// lands below the newest.
	if err := s.root.PutIfAbsent(ctx, feedKey("g", 2), late); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("late put over commit 2: %v", err)
	}
	for range feedKeep + 2 {
		if _, err := s.CommitFeed(ctx, "g", p2); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.root.PutIfAbsent(ctx, feedKey("g", 1), late); err != nil {
		t.Fatalf("late put of a collected name: %v", err)
	}
	got, err := s.FeedGroupPosition(ctx, "g")
	if err != nil || got.After(1) != 20 {
		t.Fatalf("position after the late puts: %v %v", got, err)
	}
	infos, _ := s.root.List(ctx, feedDir+"g/")
	if len(infos) > feedKeep+1 {
		t.Fatalf("%d commits kept", len(infos))
	}
	if gs, err := s.FeedGroups(ctx); err != nil || len(gs) != 1 || gs[0].Group != "g" {
		t.Fatalf("groups %v %v", gs, err)
	}
	if err := s.DeleteFeedGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FeedGroup(ctx, "g"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted group: %v", err)
	}
}

// TestRegression_FeedReadSurvivesAnotherReadersForget: a consumer group's
// read that finds a base fragment not yet indexed reads it, and another
// group's read of a newer version may forget it right after (its fragment
// key is gone there: a new deletion file, a compaction). The first read
// took the fragment's ranges from the index again and found none, so it
// passed over the fragment's rows, delivered the shard's newer rows from
// the pending generations, and its position moved past the base rows for
// good (73 rows never delivered to one group in a fault-suite run).
func TestRegression_FeedReadSurvivesAnotherReadersForget(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{IndexColumns: []string{}}), "feed")
	ids, more := mergedThenMore(t, s, recs("m", 20, "r"), recs("p", 5, "r"))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The other reader forgets every fragment each time this one reads one.
	s.feed.afterRead = func() { s.feed.forget(s.feed.newest, nil) }
	got, _ := drainFeed(t, s, Position{}, 100)
	checkOnce(t, got, append(ids, more...))
}

// TestRegression_FeedAfterRepeatedTailGapsAnswersWithoutTheTail: a feed
// read that found the tail ahead of its snapshot three times answered with
// no result and no error, and the caller dereferenced it. It now answers
// with the snapshot's rows alone, passing none of the tail's, which come
// at the next read.
func TestRegression_FeedAfterRepeatedTailGapsAnswersWithoutTheTail(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{IndexColumns: []string{}}), "gap")
	sealed, err := s.Append(ctx, recs("s", 4, "r"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	unsealed, err := s.Append(ctx, recs("u", 3, "r"))
	if err != nil {
		t.Fatal(err)
	}
	gaps := 0
	s.tailAhead = func(first, replayed uint64) bool { gaps++; return true }
	got, pos := drainFeed(t, s, Position{}, 100)
	if gaps < 3 {
		t.Fatalf("%d gaps seen, want the read to retry through 3", gaps)
	}
	checkOnce(t, got, sealed)
	s.tailAhead = nil
	more, _ := drainFeed(t, s, pos, 100)
	checkOnce(t, append(got, more...), append(slices.Clone(sealed), unsealed...))
}

// TestRegression_FeedWhenTheBaseMergedWhatTheManifestDoesNotKnow: the
// feed reads the base and the shard manifests at once; a base that has
// merged rows of the tail (sealed and merged between the two reads) with
// a manifest from before the seal delivered those rows twice, from the
// base and from the tail. The read now sees the manifest is older than
// the base and reads again.
func TestRegression_FeedWhenTheBaseMergedWhatTheManifestDoesNotKnow(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", Options{IndexColumns: []string{}}), "race")
	merged, unsealed := mergedThenMore(t, s, recs("m", 4, "r"), recs("u", 3, "r"))
	raced := 0
	s.feedRace = func(snap *snapshot) {
		if raced > 0 {
			return
		}
		raced++
		// The seal and the merge land after the manifest was read and
		// before the base was: the snapshot gets the base after them.
		if err := s.Flush(ctx); err != nil {
			t.Error(err)
		}
		if _, err := s.Merge(ctx); err != nil {
			t.Error(err)
		}
		later, err := s.snapshot(ctx, false, readPlan{latest: true, fresh: true})
		if err != nil {
			t.Error(err)
			return
		}
		snap.base = later.base
	}
	got, _ := drainFeed(t, s, Position{}, 100)
	if raced != 1 {
		t.Fatalf("the race ran %d times", raced)
	}
	checkOnce(t, got, append(slices.Clone(merged), unsealed...))
}

// mergedThenMore appends base, seals and merges it, then appends more
// (unsealed), and returns the ids of each.
func mergedThenMore(t *testing.T, s *Store, base, more []Record) ([]string, []string) {
	t.Helper()
	ctx := context.Background()
	merged, err := s.Append(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	unsealed, err := s.Append(ctx, more)
	if err != nil {
		t.Fatal(err)
	}
	return merged, unsealed
}
