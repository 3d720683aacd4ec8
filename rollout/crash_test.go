package rollout

// The kill -9 test: a child process (this test binary, re-executed) appends
// concurrently, flushes and merges, and prints every acknowledged id; the
// parent SIGKILLs it at a random moment, starts it again (same instance id:
// it claims the same shard and replays the WAL), and after N cycles checks
// that every acknowledged id is read exactly once.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	// The crash suites open s3://, gs:// and az:// stores (the child
	// process of TestCrashKill9 too): the drivers register here.
	_ "github.com/lance-context/lance-context/objstore/drivers"
)

// Environment of the child process.
const (
	envCrashChild    = "LC_CRASH_CHILD"
	envCrashURL      = "LC_CRASH_URL"
	envCrashStore    = "LC_CRASH_STORE"
	envCrashInstance = "LC_CRASH_INSTANCE"
	envCrashPrefix   = "LC_CRASH_PREFIX"
	envCrashSeed     = "LC_CRASH_SEED"
	// envCrashInPlace: 4 KiB texts and no merges, so that memtables are
	// sealed in place (their segments become generations) and stay.
	envCrashInPlace = "LC_CRASH_INPLACE"
)

// ackLine prefixes each acknowledged id on the child's stdout.
const ackLine = "ACK "

// crashHeartbeat shortens the shard heartbeat of the children and the
// survivor: each is another process with the instance id of one just
// killed, and waits for its heartbeat to lapse (the TTL) before it claims;
// with the default 8 s the kills that land at a random moment from the
// start would all hit that wait, never the claim, replay or seal.
func crashHeartbeat(o Options) Options {
	o.HeartbeatInterval, o.HeartbeatTTL = 40*time.Millisecond, 150*time.Millisecond
	return o
}

// s3TestURL returns a fresh prefix under LC_TEST_S3_URL, or skips (fails when
// LC_REQUIRE_S3=1) when it is not set.
func s3TestURL(t *testing.T, what string) string {
	t.Helper()
	u := os.Getenv("LC_TEST_S3_URL")
	if u == "" {
		msg := "LC_TEST_S3_URL is not set (run scripts/versitygw.sh start DIR and eval \"$(scripts/versitygw.sh env DIR)\")"
		if os.Getenv("LC_REQUIRE_S3") == "1" {
			t.Fatal(msg + ", and LC_REQUIRE_S3=1")
		}
		t.Skip(msg)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return strings.TrimSuffix(u, "/") + "/" + what + "-" + hex.EncodeToString(b)
}

// TestCrashKill9 kills a writing process at random moments. LC_CRASH_CYCLES
// sets the number of kills (default 5; 50 for the long run), LC_CRASH_SEED
// replays a run's kill schedule and workload.
func TestCrashKill9(t *testing.T) {
	cycles, seed := crashParams(t)
	backends := []struct {
		name    string
		url     func(t *testing.T) string
		inPlace bool
	}{
		{"local", func(t *testing.T) string { return t.TempDir() }, false},
		{"local-inplace", func(t *testing.T) string { return t.TempDir() }, true},
		{"s3", func(t *testing.T) string { return s3TestURL(t, "crash") }, false},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			runCrash(t, b.url(t), cycles, seed, b.inPlace)
		})
	}
}

// inPlaceGenerations counts the generation files under a local store that
// are segments sealed in place: they start with a WAL frame (a position,
// then after the 16-byte header an IPC stream's continuation marker).
func inPlaceGenerations(t *testing.T, dir string) int {
	t.Helper()
	gens, err := filepath.Glob(filepath.Join(dir, "*", "_lc_wal", "*", "gen", "*.lance"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range gens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 20 && binary.LittleEndian.Uint64(b) > 0 && binary.LittleEndian.Uint32(b[16:]) == 0xffffffff && string(b[len(b)-4:]) == "LANC" {
			n++
		}
	}
	return n
}

// crashParams reads LC_CRASH_CYCLES and LC_CRASH_SEED.
func crashParams(t *testing.T) (cycles int, seed uint64) {
	t.Helper()
	cycles = 5
	if v := os.Getenv("LC_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LC_CRASH_CYCLES=%q", v)
		}
		cycles = n
	}
	seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("LC_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LC_CRASH_SEED=%q", v)
		}
		seed = n
	}
	t.Logf("seed %d, %d cycles (replay the schedule: LC_CRASH_SEED=%d LC_CRASH_CYCLES=%d)", seed, cycles, seed, cycles)
	return cycles, seed
}

func runCrash(t *testing.T, url string, cycles int, seed uint64, inPlace bool) {
	ctx := context.Background()
	const name, instance = "crash", "crash-worker"
	root, err := objstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	setup := NewCatalog(root, ShardID("setup"), quiet(Options{}))
	if _, err := setup.Create(ctx, name); err != nil {
		t.Fatal(err)
	}
	rng := mrand.New(mrand.NewPCG(seed, 0))
	acked := map[string]bool{}
	for cycle := 0; cycle < cycles; cycle++ {
		n, how := crashCycle(t, url, name, instance, cycle, rng.Uint64(), rng, acked, inPlace)
		t.Logf("cycle %d: %s; %d ids acknowledged (%d in all)", cycle, how, n, len(acked))
	}
	if len(acked) == 0 {
		t.Fatal("no append was ever acknowledged: the test proved nothing")
	}
	if inPlace {
		// Counted before the survivor merges them away.
		if n := inPlaceGenerations(t, url); n == 0 {
			t.Fatal("no generation was sealed in place: the run did not test that path")
		} else {
			t.Logf("%d generations sealed in place", n)
		}
	}
	// The survivor: same instance id, so it claims the shard and replays.
	s := mustStore(t, newCatalog(t, root, instance, quiet(crashHeartbeat(Options{}))), name)
	settle(t, s)
	verifyExactlyOnce(t, s, acked)
}

// crashCycle runs one child and kills it. It adds the ids the child
// acknowledged to acked and returns how many there were.
func crashCycle(t *testing.T, url, name, instance string, cycle int, childSeed uint64, rng *mrand.Rand, acked map[string]bool, inPlace bool) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envCrashChild+"=1", envCrashURL+"="+url, envCrashStore+"="+name, envCrashInstance+"="+instance,
		envCrashPrefix+"="+fmt.Sprintf("c%03d", cycle), envCrashSeed+"="+strconv.FormatUint(childSeed, 10),
		envCrashInPlace+"="+strconv.FormatBool(inPlace))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		ids      []string
		other    []string // the child's other output (test failures), for diagnostics
		firstAck = make(chan struct{})
		once     sync.Once
		readDone = make(chan struct{})
	)
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() { // a line cut by the kill has no newline: Scan still returns it, so check the prefix and length
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, ackLine); ok && strings.HasSuffix(id, ";") {
				mu.Lock()
				ids = append(ids, strings.TrimSuffix(id, ";"))
				mu.Unlock()
				once.Do(func() { close(firstAck) })
			} else if len(other) < 50 {
				mu.Lock()
				other = append(other, line)
				mu.Unlock()
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { <-readDone; exited <- cmd.Wait() }()

	// One kill in four lands at a random moment from the start (it may hit
	// the claim, the replay or the seal); the others after the first ack.
	var how string
	if rng.IntN(4) == 0 {
		d := time.Duration(rng.IntN(800)) * time.Millisecond
		how = fmt.Sprintf("killed %v after start", d)
		select {
		case err := <-exited:
			t.Fatalf("cycle %d: the child exited by itself: %v\n%s\n%s", cycle, err, strings.Join(other, "\n"), tail(stderr.String()))
		case <-time.After(d):
		}
	} else {
		select {
		case <-firstAck:
		case err := <-exited:
			t.Fatalf("cycle %d: the child exited by itself: %v\n%s\n%s", cycle, err, strings.Join(other, "\n"), tail(stderr.String()))
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("cycle %d: no acknowledgement in 2 minutes\n%s%s", cycle, strings.Join(other, "\n"), tail(stderr.String()))
		}
		d := time.Duration(50+rng.IntN(1450)) * time.Millisecond
		how = fmt.Sprintf("killed %v after the first ack", d)
		select {
		case err := <-exited:
			t.Fatalf("cycle %d: the child exited by itself: %v\n%s\n%s", cycle, err, strings.Join(other, "\n"), tail(stderr.String()))
		case <-time.After(d):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("cycle %d: kill: %v", cycle, err)
	}
	err = <-exited
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("cycle %d: the child was not killed by SIGKILL: %v\n%s", cycle, err, tail(stderr.String()))
	}
	if out := stderr.String(); strings.Contains(out, "DATA RACE") || strings.Contains(out, "panic:") {
		t.Fatalf("cycle %d: the child failed:\n%s", cycle, tail(out))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if acked[id] {
			t.Fatalf("cycle %d: id %s acknowledged twice", cycle, id)
		}
		acked[id] = true
	}
	return len(ids), how
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// TestCrashChild is the writing process of TestCrashKill9; it does nothing
// unless started by it. It runs until killed (at most a minute).
func TestCrashChild(t *testing.T) {
	if os.Getenv(envCrashChild) != "1" {
		t.Skip("helper process of TestCrashKill9")
	}
	ctx := context.Background()
	seed, _ := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	prefix := os.Getenv(envCrashPrefix)
	root, err := objstore.Open(ctx, os.Getenv(envCrashURL))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCatalog(root, ShardID(os.Getenv(envCrashInstance)), quiet(crashHeartbeat(Options{MergeMaxGenerations: 4, MaxMemtableRows: 500})))
	s, err := c.Open(ctx, os.Getenv(envCrashStore))
	if err != nil {
		t.Fatal(err)
	}
	inPlace := os.Getenv(envCrashInPlace) == "true"
	text, flushEvery := strings.Repeat("x", 200), 12
	if inPlace {
		// Memtables of 500 rows (2 MB), most of them full before a flush.
		text, flushEvery = strings.Repeat("y", 4<<10), 400
	}
	var outMu sync.Mutex
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(seed, uint64(g)))
			for n := 0; time.Now().Before(deadline); n++ {
				batch := make([]Record, 1+rng.IntN(4))
				for i := range batch {
					batch[i] = Record{
						ID: fmt.Sprintf("%s-g%d-%05d-%d", prefix, g, n, i), RolloutID: fmt.Sprintf("%s-g%d", prefix, g),
						SequenceOrder: int32(i), Content: ptr(text),
					}
				}
				if _, err := s.Append(ctx, batch); err == nil {
					// One write per batch: a pipe write this small is atomic,
					// and every id line ends in ';' so a torn line is detectable.
					var b strings.Builder
					for _, r := range batch {
						b.WriteString(ackLine + r.ID + ";\n")
					}
					outMu.Lock()
					_, _ = os.Stdout.WriteString(b.String())
					outMu.Unlock()
				}
				switch {
				case rng.IntN(flushEvery) == 0:
					_ = s.Flush(ctx) // ?flush=true
				case g == 0 && rng.IntN(25) == 0 && !inPlace:
					_, _ = s.Merge(ctx)
				}
			}
		}()
	}
	wg.Wait()
}
