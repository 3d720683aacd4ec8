package interop

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// Environment of the index crash child.
const (
	envIxCrashDir  = "LC_IXCRASH_DIR"
	envIxCrashMode = "LC_IXCRASH_MODE"
	envIxCrashStep = "LC_IXCRASH_STEP"
)

// TestIndexCrashChild is the child of TestIndexMaintenanceKill9: it runs
// one index maintenance operation and SIGKILLs itself at the named step.
func TestIndexCrashChild(t *testing.T) {
	dir := os.Getenv(envIxCrashDir)
	if dir == "" {
		t.Skip("child of TestIndexMaintenanceKill9")
	}
	step := os.Getenv(envIxCrashStep)
	index.Failpoint = func(s string) {
		if s == step {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	ctx := context.Background()
	st, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	switch os.Getenv(envIxCrashMode) {
	case "delta":
		_, err = index.Update(ctx, st, "id", index.BuildOptions{Delta: true, BatchSize: 1024})
	case "merge":
		_, err = index.Update(ctx, st, "id", index.BuildOptions{BatchSize: 1024})
	case "compact":
		if _, err = table.Compact(ctx, st, table.CompactOptions{TargetRows: 1 << 20}); err == nil {
			_, err = index.Update(ctx, st, "id", index.BuildOptions{BatchSize: 1024})
		}
	default:
		t.Fatalf("mode %q", os.Getenv(envIxCrashMode))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestIndexMaintenanceKill9 kills index maintenance (a delta segment, a
// merge of the index with new fragments, a compaction followed by the
// rebuild) at each of its steps. After every kill both we and LanceDB 0.31
// answer every lookup correctly (an index never points at a wrong row);
// the next maintenance pass completes and LanceDB uses the index again.
func TestIndexMaintenanceKill9(t *testing.T) {
	requireNode(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"delta", "merge", "compact"} {
		for _, step := range []string{"scanned", "page", "pages-written", "files-written", "committed"} {
			t.Run(mode+"/"+step, func(t *testing.T) {
				ctx := context.Background()
				dir := t.TempDir()
				st := localStore(t, dir, "kx")
				createTable(t, st, ixSchema)
				ixAppend(t, st, 0, 3000)
				ixAppend(t, st, 3000, 6000)
				if _, err := index.Update(ctx, st, "id", index.BuildOptions{BatchSize: 1024}); err != nil {
					t.Fatal(err)
				}
				ixAppend(t, st, 6000, 6500) // not yet covered
				d := openTable(t, st)
				if _, err := table.DeleteRows(ctx, st, addrsOf(t, d, ixID(10), ixID(6010)), "n IN (10, 6010)"); err != nil {
					t.Fatal(err)
				}

				cmd := exec.Command(exe, "-test.run=^TestIndexCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), envIxCrashDir+"="+dir+"/kx.lance", envIxCrashMode+"="+mode, envIxCrashStep+"="+step)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the child was not killed at %s (err %v): %s", step, err, out)
				}
				checkKx(t, ctx, dir, st, "after the kill", false)
				// The next pass completes the maintenance.
				if _, err := index.Update(ctx, st, "id", index.BuildOptions{}); err != nil {
					t.Fatal(err)
				}
				checkKx(t, ctx, dir, st, "after recovery", true)
				d = openTable(t, st)
				if cov, _ := index.Covered(d, "id"); int(cov.GetCardinality()) != len(d.Fragments()) {
					t.Fatalf("after recovery the index covers %v of %d fragments", cov, len(d.Fragments()))
				}
			})
		}
	}
}

// checkKx checks lookups of the kx table through our index and through
// LanceDB: rows 10 and 6010 are deleted, every other row of [0, 6500) is
// found once. wantIndex also requires LanceDB's plan to use the index.
func checkKx(t *testing.T, ctx context.Context, dir string, st objstore.Store, what string, wantIndex bool) {
	t.Helper()
	d := openTable(t, st)
	f := index.NewFinder(0)
	for _, i := range []int{0, 10, 2999, 3000, 5999, 6000, 6010, 6499} {
		want := []int64{int64(i)}
		if i == 10 || i == 6010 {
			want = nil
		}
		if got := goLookup(t, d, "id", ixID(i), f); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Go lookup of %s: %v, want %v", what, ixID(i), got, want)
		}
	}
	for _, i := range []int{10, 2999, 6010, 6499} {
		want := []string{ixID(i)}
		if i == 10 || i == 6010 {
			want = nil
		}
		doc := runNode(t, "check_index.mjs", dir, "kx", "--id", ixID(i))
		got, _ := normalize(doc["found_ids"]).([]any)
		if len(got) != len(want) || num(t, doc, "count") != int64(len(want)) || (len(want) == 1 && got[0] != want[0]) {
			t.Fatalf("%s: LanceDB lookup of %s: %s, want %v", what, ixID(i), brief(doc["found_ids"]), want)
		}
		if wantIndex && normalize(doc["uses_index"]) != true {
			t.Fatalf("%s: LanceDB lookup of %s does not use the index", what, ixID(i))
		}
	}
}
