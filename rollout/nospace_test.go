package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
	"github.com/lance-context/lance-context/wal"
)

// fullDisk returns a store whose WAL segment log lives on a file system
// with free bytes left (the objects, in memory, have room).
func fullDisk(t *testing.T, fsys vfs.FS) (*Store, objstore.Store) {
	t.Helper()
	root := objstore.NewMemory()
	o := quiet(Options{LogFS: fsys})
	o.metrics = newMetrics(prometheus.NewRegistry(), NewGenCache(1<<20))
	return mustStore(t, newCatalog(t, root, "w", o), "exp"), root
}

func shardEpoch(t *testing.T, root objstore.Store) uint64 {
	t.Helper()
	m, err := wal.LoadManifest(context.Background(), StoreRoot(root, "exp"), ShardID("w"))
	if err != nil {
		t.Fatal(err)
	}
	return m.Epoch
}

// TestFullDiskNoReclaimStorm (regression): on a full disk every failed
// log write stopped the shard writer (ErrLogFailed), so every append
// claimed the shard anew: the epoch reached 93. Now a segment that cannot
// be allocated fails the append with ErrNoSpace and the writer goes on;
// and a writer stopped by a write that failed for lack of space is not
// replaced while the disk has no room for a segment.
func TestFullDiskNoReclaimStorm(t *testing.T) {
	ctx := context.Background()
	t.Run("no room for a segment", func(t *testing.T) {
		q := vfs.NewQuota(vfs.NewMem(), 100<<10) // below the smallest segment
		s, root := fullDisk(t, q)
		for i := range 20 {
			_, err := s.Append(ctx, []Record{{ID: fmt.Sprint("x", i), RolloutID: "r"}})
			if !errors.Is(err, ErrNoSpace) || !IsNoSpace(err) || errors.Is(err, wal.ErrLogFailed) {
				t.Fatalf("append %d on a full disk: %v, want ErrNoSpace", i, err)
			}
			if i == 0 && !strings.Contains(err.Error(), "free space") {
				t.Errorf("the error does not say what to do: %v", err)
			}
		}
		if e := shardEpoch(t, root); e != 1 {
			t.Fatalf("epoch %d after 20 appends on a full disk, want 1", e)
		}
		if f := s.Full(); f == nil || f.Store != "exp" {
			t.Fatalf("Full() = %+v", f)
		}
		if g := gaugeOf(t, s.opts.metrics.storageFull, "exp"); g != 1 {
			t.Fatalf("storage_full gauge %v", g)
		}
	})
	t.Run("flush fails for lack of space", func(t *testing.T) {
		f := &syncFull{FS: vfs.NewQuota(vfs.NewMem(), 64<<20)}
		s, root := fullDisk(t, f)
		if _, err := s.Append(ctx, []Record{{ID: "a", RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
		f.full.Store(true) // the frame's data flush fails: the writer stops
		_, err := s.Append(ctx, []Record{{ID: "b", RolloutID: "r"}})
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, wal.ErrLogFailed) {
			t.Fatalf("append whose flush found the disk full: %v", err)
		}
		for i := range 20 { // no room for a segment: not claimed again
			if _, err := s.Append(ctx, []Record{{ID: "c", RolloutID: "r"}}); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("append %d: %v", i, err)
			}
		}
		if e := shardEpoch(t, root); e != 1 {
			t.Fatalf("epoch %d after 20 appends on a full disk, want 1", e)
		}
		f.full.Store(false)
		if _, err := s.Append(ctx, []Record{{ID: "d", RolloutID: "r"}}); err != nil {
			t.Fatalf("append once space is back: %v", err)
		}
		if e := shardEpoch(t, root); e != 2 || s.Full() != nil {
			t.Fatalf("epoch %d (want 2: claimed once again), full %+v", e, s.Full())
		}
		settle(t, s)
		seen, err := idCounts(ctx, s, SourceAll, 100)
		if err != nil || seen["a"] != 1 || seen["d"] != 1 || seen["c"] != 0 {
			t.Fatalf("ids %v %v", seen, err)
		}
	})
}

// syncFull fails data flushes and new files for lack of space while full
// is set (a file system whose writes were accepted into the page cache and
// whose writeback then found no room).
type syncFull struct {
	vfs.FS
	full atomic.Bool
}

func (s *syncFull) Create(name string) (vfs.File, error) {
	if s.full.Load() {
		return nil, vfs.NoSpace(syscall.ENOSPC)
	}
	f, err := s.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &syncFullFile{File: f, fs: s}, nil
}

func (s *syncFull) OpenReadWrite(name string) (vfs.File, error) {
	f, err := s.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &syncFullFile{File: f, fs: s}, nil
}

type syncFullFile struct {
	vfs.File
	fs *syncFull
}

func (f *syncFullFile) Datasync() error {
	if f.fs.full.Load() {
		return vfs.NoSpace(syscall.ENOSPC)
	}
	return f.File.Datasync()
}

func (f *syncFullFile) Allocate(from, size int64) error {
	if f.fs.full.Load() {
		return vfs.NoSpace(syscall.ENOSPC)
	}
	return f.File.Allocate(from, size)
}

// TestRecoversWhenSpaceFreed (regression): once space was freed, flush
// and merge went on failing until there was room for a whole 64 MiB
// segment. Now the first append after space is freed (2 MiB here)
// succeeds, without a restart, and flush and merge follow.
func TestRecoversWhenSpaceFreed(t *testing.T) {
	ctx := context.Background()
	q := vfs.NewQuota(vfs.NewMem(), 64<<20)
	s, root := fullDisk(t, q)
	if _, err := s.Append(ctx, []Record{{ID: "before", RolloutID: "r"}}); err != nil {
		t.Fatal(err)
	}
	// Fill the disk: the first 1 MiB segment fills up, and there is no
	// room for the next.
	big := strings.Repeat("p", 100<<10)
	var acked []string
	var err error
	for i := 0; i < 100; i++ {
		if i == 3 {
			q.SetFree(0)
		}
		id := fmt.Sprint("fill-", i)
		if _, err = s.Append(ctx, []Record{{ID: id, RolloutID: "r", Content: &big}}); err != nil {
			break
		}
		acked = append(acked, id)
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("the disk never filled: %v", err)
	}
	if s.Full() == nil {
		t.Fatal("the store does not say its disk is full")
	}
	q.SetFree(2 << 20) // less than the segment it wanted (4 MiB)
	if _, err := s.Append(ctx, []Record{{ID: "after", RolloutID: "r"}}); err != nil {
		t.Fatalf("the first append after space was freed: %v", err)
	}
	if s.Full() != nil || gaugeOf(t, s.opts.metrics.storageFull, "exp") != 0 {
		t.Fatalf("still reported full: %+v", s.Full())
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush after space was freed: %v", err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatalf("merge after space was freed: %v", err)
	}
	if e := shardEpoch(t, root); e != 1 {
		t.Fatalf("epoch %d, want 1: the writer was replaced", e)
	}
	want := map[string]bool{"before": true, "after": true}
	for _, id := range acked {
		want[id] = true
	}
	verifyExactlyOnce(t, s, want)
}
