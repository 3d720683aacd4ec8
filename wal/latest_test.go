package wal

import (
	"context"
	"fmt"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// TestLatestManifestInfoReadsNamesOnLocalDisk: on local disk the newest
// manifest is found from the directory's names and looked up alone (one
// listing and one head, not a stat per manifest); on a store whose
// listings carry the metadata, one listing. Both answer what a full
// listing does.
func TestLatestManifestInfoReadsNamesOnLocalDisk(t *testing.T) {
	ctx := context.Background()
	local, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]objstore.Store{"local": local, "memory": objstore.NewMemory()} {
		const shard = "s1"
		for v := uint64(3); v <= 40; v++ { // older versions collected
			if err := st.Put(ctx, manifestKey(shard, v), []byte(fmt.Sprintf(`{"v":%d,"pad":"%*s"}`, v, v, ""))); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Put(ctx, hintKey(shard), []byte(`{"version":31}`)); err != nil {
			t.Fatal(err)
		}
		c := objstore.NewCounting(st, 0)
		v, info, err := LatestManifestInfo(ctx, c, shard)
		if err != nil {
			t.Fatal(err)
		}
		wv, winfo, err := latestManifestListed(ctx, st, shard)
		if err != nil {
			t.Fatal(err)
		}
		if v != 40 || v != wv || info.Key != winfo.Key || info.Size != winfo.Size || !info.ModTime.Equal(winfo.ModTime) {
			t.Fatalf("%s: %d %+v, want %d %+v", name, v, info, wv, winfo)
		}
		got := c.Counts()
		want := map[string]int{"local": 1, "memory": 0}[name] // heads
		if got.Calls[objstore.OpList] != 1 || got.Calls[objstore.OpHead] != want || got.Calls[objstore.OpGet] != 0 {
			t.Fatalf("%s: %v; want one listing and %d heads", name, got, want)
		}
		if _, _, err := LatestManifestInfo(ctx, c, "none"); err != ErrNoShard {
			t.Fatalf("%s: a shard without manifests: %v, want ErrNoShard", name, err)
		}
	}
}
