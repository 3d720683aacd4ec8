package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// runsFromEnv returns how many seeded runs a suite makes: def, or
// LC_POWERCUT_RUNS for a longer run.
func runsFromEnv(t *testing.T, def int) int {
	if s := os.Getenv("LC_POWERCUT_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("LC_POWERCUT_RUNS=%q: want a positive count", s)
		}
		return n
	}
	if testing.Short() {
		return def / 10
	}
	return def
}

// cutWorkload appends from three goroutines into one shard, sealing every
// few appends, until each tried perAppender appends or the writer could
// not be replaced (stop says so). An append that fails replaces the
// writer (a new claim replays the log) and goes on. It returns the ids
// acknowledged.
type cutWorkload struct {
	opts        Options
	perAppender int
	stop        func() bool
	// pad lengthens every id by this many bytes past the default 100 to
	// 150 (ids of 256 bytes or more are referenced by a seal in place).
	pad int

	mu     sync.Mutex
	w      *Writer
	acked  []string
	claims int
}

func (c *cutWorkload) writer(old *Writer) (*Writer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w != old && c.w != nil {
		return c.w, nil
	}
	if old != nil {
		old.Abandon()
	}
	c.w = nil
	if c.stop() || c.claims > 50 {
		return nil, errors.New("stopped")
	}
	c.claims++
	w, err := Claim(context.Background(), c.opts)
	if err != nil {
		return nil, err
	}
	c.w = w
	return w, nil
}

// stopped reports whether appenders should give up (claims is guarded by
// mu: appenders read it while another claims).
func (c *cutWorkload) stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stop() || c.claims > 50
}

func (c *cutWorkload) run(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			var w *Writer
			for i := 0; i < c.perAppender; i++ {
				if w == nil {
					var err error
					if w, err = c.writer(nil); err != nil {
						if c.stopped() {
							return
						}
						continue // a faulty claim: try again
					}
				}
				id := fmt.Sprintf("g%d-%04d-%s", g, i, strings.Repeat("p", 100+i%50+c.pad))
				r := rows(id)
				err := w.Append(context.Background(), r)
				r.Release()
				if err == nil {
					c.mu.Lock()
					c.acked = append(c.acked, id)
					c.mu.Unlock()
				} else {
					nw, cerr := c.writer(w)
					if cerr != nil {
						return
					}
					w = nw
				}
				if i%7 == 6 {
					_ = w.Seal(context.Background())
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	if c.w != nil {
		c.w.Abandon()
	}
	c.mu.Unlock()
}

// checkRecovered claims the shard (the faults and the cut over), seals
// what it replays and checks that every acknowledged id is in the sealed
// generations exactly once, and nothing is there twice.
func checkRecovered(t *testing.T, o Options, acked []string) {
	t.Helper()
	w, err := Claim(context.Background(), o)
	if err != nil {
		t.Fatalf("claim after the cut: %v", err)
	}
	defer w.Abandon()
	if err := w.Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, id := range sealedIDs(t, o.Store, "s1") {
		count[id]++
	}
	for id, n := range count {
		if n > 1 {
			t.Fatalf("id %s read back %d times", id, n)
		}
	}
	for _, id := range acked {
		if count[id] != 1 {
			t.Fatalf("acknowledged id %s lost (%d acknowledged, %d read back)", id, len(acked), len(count))
		}
	}
}

// powerCutOpts are writer options with the segment log on fsys under
// /data, which is made durable first (the operator's data directory).
func powerCutOpts(store objstore.Store, fsys *vfs.MemFS) Options {
	if err := fsys.MkdirAll("/data"); err != nil {
		panic(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		panic(err)
	}
	o := opts(store)
	o.Log = Log{FS: fsys, Dir: "/data"}
	o.SegmentBytes = 4 << 10
	o.MaxMemtableRows = 11
	return o
}

// TestPowerCuts: appends, seals (by flush and by a full memtable) and
// segment reuse under load on a crash-simulating file system, the power
// cut at a seeded operation, hundreds of times; after each cut every
// acknowledged record is read back exactly once. A run is replayed by its
// seed (-run 'TestPowerCuts/seed=N'), up to the scheduling of the three
// appenders. LC_POWERCUT_RUNS sets the number of runs.
func TestPowerCuts(t *testing.T) {
	const perAppender = 25
	// One run uncut tells how many operations there are to cut at.
	fsys := vfs.NewMem()
	wl := &cutWorkload{opts: powerCutOpts(objstore.NewMemory(), fsys), perAppender: perAppender, stop: func() bool { return false }}
	wl.run(t)
	total := fsys.Ops()
	if total < 100 || len(wl.acked) != 3*perAppender {
		t.Fatalf("uncut run: %d operations, %d of %d appends acknowledged", total, len(wl.acked), 3*perAppender)
	}
	cutRuns(t, total, 1, func(fsys *vfs.MemFS) *cutWorkload {
		return &cutWorkload{opts: powerCutOpts(objstore.NewMemory(), fsys), perAppender: perAppender, stop: fsys.IsCut}
	})
}

// cutRuns runs the workload of each seeded run (LC_POWERCUT_RUNS, default
// 300) on a fresh file system cut at a seeded one of total operations (the
// seeds' stream tells suites apart), and checks every acknowledged record
// is read back exactly once after the restart.
func cutRuns(t *testing.T, total int64, stream uint64, workload func(*vfs.MemFS) *cutWorkload) {
	t.Helper()
	runs := runsFromEnv(t, 300)
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, stream))
			at := 1 + rng.Int64N(total)
			fsys := vfs.NewMem()
			wl := workload(fsys)
			// Half the runs write the log through the page cache, half by
			// direct IO (MemFS refuses misaligned direct writes).
			wl.opts.BufferedLog = seed%2 == 0
			fsys.CutAfter(at)
			wl.run(t)
			fsys.Restart()
			checkRecovered(t, wl.opts, wl.acked)
		})
	}
}

// inPlaceCutOpts are powerCutOpts whose generation files are on fsys too,
// beside the segment log, so that memtables are sealed in place (their
// segments linked as generations; thresholds lowered for the workload's
// rows of about 150 bytes).
func inPlaceCutOpts(fsys *vfs.MemFS) Options {
	o := powerCutOpts(genSplit{rest: objstore.NewMemory(), gens: &fsStore{fs: fsys, root: "/data"}}, fsys)
	o.Log.Objects = true
	o.placeMin, o.minInPlace = 256, 512
	o.SegmentBytes = 16 << 10
	return o
}

// inPlacePad: ids of 300 bytes and more, which entries reference rather
// than copy (encoded), so seals in place find them in the frames.
const inPlacePad = 200

// TestPowerCutsSealInPlace is TestPowerCuts with seals in place: a power
// cut anywhere in writing a generation after a segment's frames, linking
// it and committing it loses and duplicates nothing.
func TestPowerCutsSealInPlace(t *testing.T) {
	const perAppender = 25
	fsys := vfs.NewMem()
	wl := &cutWorkload{opts: inPlaceCutOpts(fsys), perAppender: perAppender, stop: func() bool { return false }, pad: inPlacePad}
	wl.run(t)
	total := fsys.Ops()
	gens, _ := fsys.List("/data/" + shardDir("s1") + "gen")
	inPlace := 0
	for _, g := range gens {
		f, err := fsys.Open("/data/" + shardDir("s1") + "gen/" + g)
		if err != nil {
			t.Fatal(err)
		}
		var head [20]byte
		if _, err := f.ReadAt(head[:], 0); err == nil && binary.LittleEndian.Uint32(head[16:]) == 0xffffffff {
			inPlace++ // starts with a frame (a header, then an IPC stream): a segment sealed in place
		}
		f.Close()
	}
	if total < 100 || len(wl.acked) != 3*perAppender || inPlace == 0 {
		t.Fatalf("uncut run: %d operations, %d of %d appends acknowledged, %d of %d generations sealed in place", total, len(wl.acked), 3*perAppender, inPlace, len(gens))
	}
	t.Logf("uncut run: %d operations, %d of %d generations sealed in place", total, inPlace, len(gens))
	cutRuns(t, total, 2, func(fsys *vfs.MemFS) *cutWorkload {
		return &cutWorkload{opts: inPlaceCutOpts(fsys), perAppender: perAppender, stop: fsys.IsCut, pad: inPlacePad}
	})
}

// TestLogFaults: seeded faults in the segment log's file operations (on
// the crash-simulating file system and on local disk) and, with the same
// seeds, in the object log's store operations (errors and lost
// acknowledgements); each failure replaces the writer. At the end the
// power is cut (where it can be) and every acknowledged record must be
// read back exactly once.
func TestLogFaults(t *testing.T) {
	runs := max(runsFromEnv(t, 300)/10, 1)
	diskFaults := 0
	defer func() {
		if !t.Failed() && diskFaults == 0 {
			t.Error("no fault was injected on local disk")
		}
	}()
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		t.Run(fmt.Sprintf("segments/seed=%d", seed), func(t *testing.T) {
			fsys := vfs.NewMem()
			o := powerCutOpts(objstore.NewMemory(), fsys)
			fsys.Faults(seed, 0.01)
			wl := &cutWorkload{opts: o, perAppender: 20, stop: func() bool { return false }}
			wl.run(t)
			fsys.Cut()
			fsys.Restart()
			checkRecovered(t, o, wl.acked)
		})
		t.Run(fmt.Sprintf("disk/seed=%d", seed), func(t *testing.T) {
			dir := t.TempDir()
			faulty := vfs.NewFaulty(vfs.Default, seed, 0.01)
			o := opts(objstore.NewMemory())
			o.Log = Log{FS: faulty, Dir: dir}
			o.SegmentBytes = 4 << 10
			o.MaxMemtableRows = 11
			wl := &cutWorkload{opts: o, perAppender: 20, stop: func() bool { return false }}
			wl.run(t)
			diskFaults += faulty.Injected()
			o.Log.FS = vfs.Default
			checkRecovered(t, o, wl.acked)
		})
		t.Run(fmt.Sprintf("objects/seed=%d", seed), func(t *testing.T) {
			inner := objstore.NewMemory()
			faulty := objstore.NewFaulty(inner, objstore.FaultConfig{Seed: seed, Default: objstore.Rates{Error: 0.01, LostAck: 0.01}})
			o := opts(faulty)
			o.MaxMemtableRows = 11
			wl := &cutWorkload{opts: o, perAppender: 20, stop: func() bool { return false }}
			wl.run(t)
			checkRecovered(t, opts(inner), wl.acked)
		})
	}
}

// TestRegression_SegmentDirectoriesMadeDurable: a claim whose directory
// flush failed left the log's directories made but not durable; the next
// claim found them and flushed only the log directory's parent, so after
// a power cut the whole log, acknowledged frames and all, was gone (found
// by TestLogFaults). Every directory from the root down is flushed now.
func TestRegression_SegmentDirectoriesMadeDurable(t *testing.T) {
	fsys := vfs.NewMem()
	o := powerCutOpts(objstore.NewMemory(), fsys)
	// What the failed claim left: directories, none of them flushed.
	if err := fsys.MkdirAll("/data/" + segmentDir("s1")); err != nil {
		t.Fatal(err)
	}
	w := claim(t, o)
	if err := appendIDs(t, w, "acked"); err != nil {
		t.Fatal(err)
	}
	w.Abandon()
	fsys.Cut()
	fsys.Restart()
	checkRecovered(t, o, []string{"acked"})
}
