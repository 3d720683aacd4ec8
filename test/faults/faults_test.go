package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/test/latencyproxy"
)

// requireS3 skips without an S3 server (scripts/versitygw.sh start DIR;
// eval "$(scripts/versitygw.sh env DIR)"), and fails with LC_REQUIRE_S3=1.
func requireS3(t *testing.T) (dataURL, endpoint string) {
	t.Helper()
	dataURL, endpoint = os.Getenv("LC_TEST_S3_URL"), os.Getenv("AWS_ENDPOINT_URL")
	if dataURL != "" && endpoint != "" {
		return dataURL, endpoint
	}
	const why = "LC_TEST_S3_URL and AWS_ENDPOINT_URL are not set (scripts/versitygw.sh start DIR; eval \"$(scripts/versitygw.sh env DIR)\")"
	if os.Getenv("LC_REQUIRE_S3") == "1" {
		t.Fatal(why + ", and LC_REQUIRE_S3=1")
	}
	t.Skip(why)
	return "", ""
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lance-context")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lance-context")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lance-context: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer is a worker log the test prints when it fails.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// TestFaultSuiteNoAckLost is the CI fault suite: the worker binary on
// versitygw behind the fault proxy (5% 503s, dropped connections, torn
// bodies, 2 s stalls), four appenders (JSON and Arrow, some flushed,
// failed appends sent again with the same ids, some acknowledged ones sent
// twice), readers, two feed consumer groups that die around one commit in
// ten, merges, compactions and cleanups for 40 s, and two SIGKILLs with
// restarts on the same INSTANCE_ID. Then, faults off, every acknowledged
// id is listed exactly once with its newest acknowledged write, in
// source=all and, after merging everything, in fragments; and each
// consumer group, drained to the end, got every row once, in shard order.
// bench/faultsoak runs the same campaign for minutes.
func TestFaultSuiteNoAckLost(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of load (-short)")
	}
	dataURL, endpoint := requireS3(t)
	began := time.Now()
	bin := buildBinary(t)
	t.Logf("built the binary in %v", time.Since(began).Round(time.Second))
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cfg := Config{
		Bin:           bin,
		DataDir:       strings.TrimRight(dataURL, "/") + "/faultsuite-" + hex.EncodeToString(b),
		Endpoint:      endpoint,
		Duration:      40 * time.Second,
		Appenders:     4,
		Batch:         25,
		Rewrite:       0.3,
		FlushRate:     0.5,
		Resend:        0.05,
		ContentBytes:  200,
		Readers:       2,
		Consumers:     2,
		ConsumerCrash: 0.1,
		MergeEvery:    2 * time.Second,
		CompactEvery:  11 * time.Second,
		CleanupEvery:  17 * time.Second,
		Kills:         2,
		Faults: latencyproxy.Faults{Seed: 1, Error503: 0.05, Reset: 0.005, Tear: 0.01,
			Stall: 0.003, StallFor: 2 * time.Second},
		Seed:        1,
		SampleEvery: 15 * time.Second,
		Logf:        t.Logf,
	}
	var wlog syncBuffer
	cfg.WorkerLog = &wlog
	cfg.OnSample = func(s Sample) { t.Logf("sample: %+v", s) }
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\nthe end of the worker's log:\n%s", err, wlog.tail(8<<10))
	}
	t.Log(s.JSON())
	if f := s.Failures(); len(f) > 0 {
		t.Errorf("invariants broken: %s\nexamples: %v\nthe end of the worker's log:\n%s", strings.Join(f, "; "), s.Examples, wlog.tail(8<<10))
	}
	// The run must have done what it claims, or a clean result means nothing.
	if s.Kills != 2 {
		t.Errorf("%d kills, want 2", s.Kills)
	}
	if s.Acknowledged < 200 || s.Merges < 3 {
		t.Errorf("only %d ids acknowledged and %d merges: the load did not run", s.Acknowledged, s.Merges)
	}
	if s.Proxy.Injected503 == 0 || s.Proxy.Torn+s.Proxy.Reset == 0 {
		t.Errorf("no faults injected: %+v", s.Proxy)
	}
	if s.Readable != s.Acknowledged {
		t.Errorf("%d of %d acknowledged ids readable", s.Readable, s.Acknowledged)
	}
}
