package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// damageWAL cuts the WAL entry at pos of the store's shard short.
func damageWAL(t *testing.T, root objstore.Store, store, shard string, pos uint64) {
	t.Helper()
	ctx := context.Background()
	key := fmt.Sprintf("%s%s/wal/%020d.arrow", wal.Root, shard, pos)
	sr := StoreRoot(root, store)
	b, err := sr.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := sr.Put(ctx, key, b[:len(b)/2]); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedWALRefusesWrites: a store whose shard WAL is corrupt in the
// middle refuses writes with an error naming the damage (and does not
// claim again on every write), reports it through Damage, Damaged, a log
// line and a metric, and writes again once the log is repaired.
func TestDamagedWALRefusesWrites(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	s1 := mustStore(t, NewCatalog(root, ShardID("w"), Options{}), "hurt")
	for i := range 3 {
		if _, err := s1.Append(ctx, recs(fmt.Sprintf("e%d", i), 2, "r")); err != nil {
			t.Fatal(err)
		}
	}
	crash(s1)
	damageWAL(t, root, "hurt", ShardID("w"), 2)

	reg := prometheus.NewRegistry()
	c := newCatalog(t, root, "w", Options{Registerer: reg})
	s2 := mustStore(t, c, "hurt")
	_, err := s2.Append(ctx, recs("new", 1, "r"))
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) || ce.Position != 2 || ce.Next != 3 {
		t.Fatalf("append to a damaged store: %v, want the corruption at position 2", err)
	}
	if !strings.Contains(err.Error(), "wal repair") || !strings.Contains(err.Error(), "position 2") {
		t.Fatalf("error %q does not say where the damage is and how to repair it", err)
	}
	d := s2.Damage()
	if d == nil || d.Position != 2 || d.Store != "hurt" || d.Shard != ShardID("w") {
		t.Fatalf("Damage() = %+v", d)
	}
	if got := c.Damaged(); len(got) != 1 || got[0].Position != 2 {
		t.Fatalf("Damaged() = %+v", got)
	}
	// Refused from the known damage: no second claim (and no second count).
	if err := s2.Flush(ctx); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("flush of a damaged store: %v", err)
	}
	if _, err := s2.Append(ctx, recs("new", 1, "r")); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("second append: %v", err)
	}
	if got := value(t, c.opts.metrics.wal.ReplayCorrupt); got != 1 {
		t.Fatalf("replay corruptions counted %v, want 1 (one claim)", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, mf := range mfs {
		registered[mf.GetName()] = true
	}
	if !registered["lance_context_store_wal_damaged"] || !registered["lance_context_wal_replay_corruptions_total"] {
		t.Fatalf("registered metrics %v lack the damage ones", registered)
	}
	if got := value(t, c.opts.metrics.damaged.WithLabelValues("hurt")); got != 1 {
		t.Fatalf("damaged gauge %v", got)
	}

	rep, err := wal.Repair(ctx, StoreRoot(root, "hurt"), WALLog(root, "hurt"), ShardID("w"), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 1 || rep.Lost[0].Position != 3 || rep.LostRows != 2 {
		t.Fatalf("repair lost %+v (%d rows), want position 3 (2 rows)", rep.Lost, rep.LostRows)
	}
	old := damageRecheck
	damageRecheck = 0
	t.Cleanup(func() { damageRecheck = old })
	if _, err := s2.Append(ctx, recs("after", 1, "r")); err != nil {
		t.Fatalf("append after the repair: %v", err)
	}
	if s2.Damage() != nil || len(c.Damaged()) != 0 || value(t, c.opts.metrics.damaged.WithLabelValues("hurt")) != 0 {
		t.Fatal("damage still reported after the repair")
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := listIDs(t, s2, ListOptions{Source: SourceWAL})
	slices.Sort(got)
	want := []string{"after-000", "e0-000", "e0-001"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows after the repair: %v, want %v (the entry before the damage, and the new one)", got, want)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
