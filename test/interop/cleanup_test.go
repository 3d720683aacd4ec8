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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// idsDigest reads a version's ids with our reader: count and the sha256 of
// the sorted ids joined by newlines (what versions.mjs prints).
func idsDigest(t *testing.T, root objstore.Store, v uint64) (int, string) {
	t.Helper()
	d, err := table.Checkout(context.Background(), root, v)
	if err != nil {
		t.Fatalf("version %d: %v", v, err)
	}
	var ids []string
	err = d.Scan(context.Background(), table.ScanOptions{Columns: []string{"id"}}, func(rec arrow.RecordBatch) error {
		c := rec.Column(0).(*array.String)
		for i := range c.Len() {
			ids = append(ids, c.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("version %d: %v", v, err)
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	return len(ids), hex.EncodeToString(sum[:])
}

// lanceVersions runs versions.mjs and returns, by version, LanceDB's
// count and digest, or its error.
func lanceVersions(t *testing.T, dir, name string, args ...string) (map[uint64][2]string, map[string][2]int64) {
	t.Helper()
	out := runNode(t, "versions.mjs", append([]string{dir, name}, args...)...)
	vs := map[uint64][2]string{}
	for _, raw := range out["versions"].([]any) {
		m := raw.(map[string]any)
		v := uint64(num(t, m, "version"))
		if e, ok := m["error"]; ok {
			vs[v] = [2]string{"error", fmt.Sprint(e)}
			continue
		}
		vs[v] = [2]string{fmt.Sprint(num(t, m, "count")), m["ids_sha256"].(string)}
	}
	tags := map[string][2]int64{}
	for name, raw := range out["tags"].(map[string]any) {
		m := raw.(map[string]any)
		tags[name] = [2]int64{num(t, m, "version"), num(t, m, "count")}
	}
	return vs, tags
}

// TestLanceDBReadsWhatCleanupKeeps: after merges (with rewrites of ids), a
// compaction and our cleanup keeping nothing for age, LanceDB 0.31 lists
// exactly the latest, the tagged (by us and by LanceDB) and the leased
// versions, reads each value for value as we do, and checks out both tags
// by name; then a cleanup killed between its file and manifest steps
// leaves a latest version both read, and the next cleanup finishes.
func TestLanceDBReadsWhatCleanupKeeps(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := rollout.NewCatalog(root, rollout.ShardID("interop"), rollout.Options{})
	defer c.Close(ctx)
	s, err := c.Create(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	var versions []uint64
	round := func(i int) {
		recs := []rollout.Record{{ID: fmt.Sprintf("id-%02d", i), RolloutID: "r"}, {ID: "id-00", RolloutID: "rewritten"}}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := s.Merge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, err := table.Open(ctx, s.Root())
		if err != nil {
			t.Fatal(err)
		}
		_ = res
		versions = append(versions, d.Version())
	}
	for i := range 6 {
		round(i)
	}
	if _, err := s.Compact(ctx, rollout.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	round(6)
	latest := versions[len(versions)-1]
	want := map[uint64][2]string{}
	for v := uint64(1); v <= latest; v++ {
		n, sum := idsDigest(t, s.Root(), v)
		want[v] = [2]string{fmt.Sprint(n), sum}
	}
	goTag, lanceTag, leased := versions[1], versions[2], versions[3]
	if _, err := s.CreateTag(ctx, "go-tag", goTag); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeLease(ctx, leased, time.Hour, "interop"); err != nil {
		t.Fatal(err)
	}
	// LanceDB tags a version itself: our cleanup must honour its tags too.
	lanceVersions(t, dir, "life.rollout", "--create-tag", "lancedb-tag", "--version", fmt.Sprint(lanceTag))
	zero := time.Duration(0)
	if _, err := s.Cleanup(ctx, rollout.CleanupOptions{ReadGrace: &zero}); err != nil {
		t.Fatal(err)
	}
	got, tags := lanceVersions(t, dir, "life.rollout")
	keep := []uint64{goTag, lanceTag, leased, latest}
	if len(got) != len(keep) {
		t.Fatalf("LanceDB lists versions %v after cleanup, want %v", got, keep)
	}
	for _, v := range keep {
		if got[v] != want[v] {
			t.Fatalf("version %d: LanceDB reads %v, we read %v", v, got[v], want[v])
		}
	}
	if tags["go-tag"][0] != int64(goTag) || tags["lancedb-tag"][0] != int64(lanceTag) ||
		fmt.Sprint(tags["go-tag"][1]) != want[goTag][0] || fmt.Sprint(tags["lancedb-tag"][1]) != want[lanceTag][0] {
		t.Fatalf("tags through LanceDB: %v", tags)
	}

	// Let go of everything, then crash a cleanup after its file deletions.
	if err := s.DeleteTag(ctx, "go-tag"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTag(ctx, "lancedb-tag"); err != nil {
		t.Fatal(err)
	}
	ls, err := s.Leases(ctx)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leases %v %v", ls, err)
	}
	if err := s.ReleaseLease(ctx, ls[0].ID); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("killed")
	_, err = table.Cleanup(ctx, s.Root(), table.CleanupOptions{Hook: func(step string, _ []string) error {
		if step == "manifests" {
			return crash
		}
		return nil
	}})
	if !errors.Is(err, crash) {
		t.Fatalf("crashed cleanup: %v", err)
	}
	got, _ = lanceVersions(t, dir, "life.rollout")
	if got[latest] != want[latest] {
		t.Fatalf("after a crashed cleanup LanceDB reads the latest as %v, want %v", got[latest], want[latest])
	}
	if _, err := s.Cleanup(ctx, rollout.CleanupOptions{ReadGrace: &zero}); err != nil {
		t.Fatal(err)
	}
	got, _ = lanceVersions(t, dir, "life.rollout")
	if len(got) != 1 || got[latest] != want[latest] {
		t.Fatalf("after the next cleanup LanceDB lists %v, want only version %d as %v", got, latest, want[latest])
	}
}
