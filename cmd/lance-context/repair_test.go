package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/wal"
)

func runRepair(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(append([]string{"wal", "repair"}, args...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("wal repair %v: %v", args, err)
	}
	return out.String()
}

// TestWALRepairCommand: on a local data directory whose segment log has a
// bit flipped in its second of three frames, `wal repair --dry-run` names
// the damage and the one entry lost and changes nothing; `wal repair`
// truncates, after which the shard is claimed with the first entry.
func TestWALRepairCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A worker appends three single-record entries and never seals them.
	a := rollout.NewCatalog(root, rollout.ShardID("w"), rollout.Options{})
	st, err := a.Create(ctx, "hurt")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := st.Append(ctx, []rollout.Record{{ID: id, RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
	}
	shard := rollout.ShardID("w")
	segs, _ := filepath.Glob(filepath.Join(dir, "hurt.rollout.lance", wal.Root, shard, "log", "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment file")
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 16)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	second := 16 + int64(binary.LittleEndian.Uint32(hdr[8:12]))
	if _, err := f.WriteAt([]byte{0x5a}, second+40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(segs[0])

	out := runRepair(t, "--data-dir", dir, "--store", "hurt", "--dry-run")
	t.Logf("wal repair --dry-run:\n%s", out)
	for _, want := range []string{"dry run", "damage: position 2", "lost: 1 entries, 1 rows (positions 3 to 3)", "position 3: 1 rows", "truncate segment"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if after, _ := os.ReadFile(segs[0]); !bytes.Equal(before, after) {
		t.Fatal("the dry run changed the segment")
	}
	out = runRepair(t, "--data-dir", dir, "--store", "hurt", "--instance-id", "w")
	if !strings.Contains(out, "repaired") || !strings.Contains(out, "lost: 1 entries, 1 rows") {
		t.Fatalf("repair output:\n%s", out)
	}
	if out := runRepair(t, "--data-dir", dir, "--store", "hurt", "--shard", shard); !strings.Contains(out, "sound") {
		t.Fatalf("second repair:\n%s", out)
	}
	// A new process with the same shard claims it and keeps "a".
	b := rollout.NewCatalog(root, shard, rollout.Options{})
	defer b.Close(ctx)
	st2, err := b.Open(ctx, "hurt")
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Get(ctx, "a"); err != nil {
		t.Fatalf("record before the damage: %v", err)
	}
	if _, err := st2.Get(ctx, "c"); err == nil {
		t.Fatal("record behind the damage came back")
	}
}
