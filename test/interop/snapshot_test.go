//go:build cgo

package interop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/sqlquery"
)

// rowsDigest is snapshot.mjs's digest: count and the sha256 of the sorted
// "id|rollout_id" lines joined by newlines.
func rowsDigest(rows map[string]string) [2]string {
	lines := make([]string, 0, len(rows))
	for id, r := range rows {
		lines = append(lines, id+"|"+r)
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return [2]string{fmt.Sprint(len(lines)), hex.EncodeToString(sum[:])}
}

// walkAll follows the cursor of source all through the whole store.
func walkAll(t *testing.T, s *rollout.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	o := rollout.ListOptions{Source: rollout.SourceAll, Limit: 17}
	for {
		res, err := s.List(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			out[r.ID] = r.RolloutID
		}
		if res.NextCursor == "" {
			return out
		}
		if o.After, err = rollout.DecodeCursor(res.NextCursor); err != nil {
			t.Fatal(err)
		}
	}
}

func nodeDigest(t *testing.T, doc map[string]any, key string) [2]string {
	t.Helper()
	m, ok := doc[key].(map[string]any)
	if !ok {
		t.Fatalf("snapshot.mjs printed no %s: %v", key, doc)
	}
	return [2]string{fmt.Sprint(num(t, m, "count")), m["rows_sha256"].(string)}
}

// duckRows reads base version v of store name through our DuckDB (a
// reader process whose store is checked out at v).
func duckRows(t *testing.T, root objstore.Store, name string, ref string) map[string]string {
	t.Helper()
	ctx := context.Background()
	c := rollout.NewCatalog(root, rollout.ShardID("duck-reader"), rollout.Options{OwnerID: "duck-reader"})
	defer c.Close(ctx)
	st, err := c.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.ResolveVersion(ctx, ref)
	if err != nil {
		t.Fatalf("resolve %s: %v", ref, err)
	}
	if _, err := st.Checkout(ctx, v); err != nil {
		t.Fatal(err)
	}
	res, err := sqlquery.New(sqlquery.FromCatalog(c), sqlquery.Limits{}).Query(ctx, sqlquery.Request{Store: name, SQL: "SELECT id, rollout_id FROM records", Source: rollout.SourceFragments})
	if err != nil {
		t.Fatal(err)
	}
	// Unpin (a checkout's pin is a lease that would keep v from cleanup).
	if _, err := st.Checkout(ctx, st.Version()); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range res.Rows {
		out[r[0].(string)] = r[1].(string)
	}
	return out
}

// TestSnapshotReadByLanceDBAndDuckDB: a store with merged rows,
// LanceDB-made deletions, pending generations, unsealed rows and rewrites
// of base ids (some deleted ones written again): the snapshot's version,
// read by LanceDB 0.31 by tag and by number and by our DuckDB by tag and
// by number, holds exactly what a cursor walk of all sees right after a
// flush, and nothing appended after the call. LanceDB keeps reading it
// while we merge, compact and clean up; after release (and after expiry
// of another) the tag is gone and cleanup removes the version.
func TestSnapshotReadByLanceDBAndDuckDB(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := rollout.NewCatalog(root, rollout.ShardID("interop-snap"), rollout.Options{})
	defer c.Close(ctx)
	s, err := c.Create(ctx, "snap")
	if err != nil {
		t.Fatal(err)
	}
	add := func(prefix string, from, n int, rid string, flush bool) {
		t.Helper()
		var recs []rollout.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, rollout.Record{ID: fmt.Sprintf("%s-%03d", prefix, i), RolloutID: rid})
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if flush {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("base", 0, 200, "r-base", true)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	del := runNode(t, "maintain.mjs", dir, "snap.rollout", "--delete", "id >= 'base-150' AND id < 'base-160'")
	if n := num(t, del, "count"); n != 190 {
		t.Fatalf("LanceDB's delete left %d rows, want 190", n)
	}
	add("pend", 0, 30, "r-pending", true)
	add("base", 0, 5, "r-rewritten", true)     // rewrites of merged ids
	add("base", 150, 2, "r-resurrected", true) // ids LanceDB deleted, written again
	add("tail", 0, 7, "r-unsealed", false)
	add("base", 10, 1, "r-rewritten-unsealed", false)

	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := walkAll(t, s)
	if len(want) != 190+30+2+7 {
		t.Fatalf("the walk holds %d rows, want 229", len(want))
	}
	wantD := rowsDigest(want)
	snap, err := s.CreateSnapshot(ctx, time.Hour, "interop")
	if err != nil {
		t.Fatal(err)
	}
	expiring, err := s.CreateSnapshot(ctx, 2*time.Second, "short")
	if err != nil {
		t.Fatal(err)
	}
	// After the call: in neither snapshot.
	add("after", 0, 5, "r-after", true)
	add("base", 20, 1, "r-after", true)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}

	// LanceDB by tag and number, then a long read of the version while we
	// merge, compact and clean up underneath.
	type nodeOut struct {
		doc map[string]any
		err error
	}
	done := make(chan nodeOut, 1)
	go func() {
		doc, err := runNodeErr(t, "snapshot.mjs", dir, "snap.rollout", "--tag", snap.Tag, "--version", fmt.Sprint(snap.Version), "--repeat-ms", "4000")
		done <- nodeOut{doc, err}
	}()
	grace := 2 * time.Second // LanceDB's open of the latest version takes far less
	deadline := time.Now().Add(4 * time.Second)
	var passes int
	for i := 0; time.Now().Before(deadline); i++ {
		add("maint", i*3, 3, "r-maint", true)
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if _, err := s.Compact(ctx, rollout.CompactOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rollout.CleanupWith(ctx, s, rollout.CleanupOptions{ReadGrace: &grace}); err != nil {
			t.Fatal(err)
		}
		passes++
		time.Sleep(200 * time.Millisecond)
	}
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	if got := nodeDigest(t, out.doc, "by_tag"); got != wantD {
		t.Fatalf("LanceDB by tag %s reads %v, the walk %v", snap.Tag, got, wantD)
	}
	if got := nodeDigest(t, out.doc, "by_version"); got != wantD {
		t.Fatalf("LanceDB by version %d reads %v, the walk %v", snap.Version, got, wantD)
	}
	rep := out.doc["repeats"].(map[string]any)
	if errs := rep["errors"].([]any); len(errs) > 0 || fmt.Sprint(rep["digests"]) != fmt.Sprint([]any{wantD[1]}) {
		t.Fatalf("LanceDB's long read of version %d during %d maintenance passes: %v reads, digests %v, errors %v", snap.Version, passes, rep["reads"], rep["digests"], errs)
	}
	t.Logf("LanceDB read version %d %v times during %d merge/compaction/cleanup passes", snap.Version, rep["reads"], passes)

	// The cleanups did remove what no lease holds: the version before it.
	if _, err := table.Checkout(ctx, s.Root(), snap.Version-1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("version %d (no lease) after the cleanups: %v; the long read proved nothing", snap.Version-1, err)
	}

	// Our DuckDB, by tag and by number.
	for _, ref := range []string{snap.Tag, fmt.Sprint(snap.Version)} {
		if got := rowsDigest(duckRows(t, root, "snap", ref)); got != wantD {
			t.Fatalf("DuckDB at %s reads %v, the walk %v", ref, got, wantD)
		}
	}

	// Release one, let the other expire: tags gone, versions collectable.
	if err := s.ReleaseSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	zero := time.Duration(0)
	if _, err := rollout.CleanupWith(ctx, s, rollout.CleanupOptions{ReadGrace: &zero}); err != nil {
		t.Fatal(err)
	}
	versions, tags := lanceVersions(t, dir, "snap.rollout")
	for _, sn := range []*rollout.SnapshotInfo{snap, expiring} {
		if _, ok := tags[sn.Tag]; ok {
			t.Fatalf("LanceDB still lists tag %s after its snapshot ended", sn.Tag)
		}
		if _, ok := versions[sn.Version]; ok {
			t.Fatalf("LanceDB still lists version %d after its snapshot ended and a cleanup: %v", sn.Version, versions)
		}
	}
}
