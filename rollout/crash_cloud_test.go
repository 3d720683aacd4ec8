package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// cloudTestURL returns a fresh prefix under the URL in env, or skips (fails
// when require=1) when it is not set.
func cloudTestURL(t *testing.T, env, require, script, what string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		msg := env + " is not set (run " + script + " start DIR and eval \"$(" + script + " env DIR)\")"
		if os.Getenv(require) == "1" {
			t.Fatal(msg + ", and " + require + "=1")
		}
		t.Skip(msg)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return strings.TrimSuffix(u, "/") + "/" + what + "-" + hex.EncodeToString(b)
}

// TestCrashKill9Cloud is TestCrashKill9 on the GCS and Azure Blob
// emulators (fake-gcs-server, Azurite): the writer is SIGKILLed at random
// moments and every acknowledged id must be read back exactly once.
// LC_CRASH_CYCLES and LC_CRASH_SEED apply as there.
func TestCrashKill9Cloud(t *testing.T) {
	cycles, seed := crashParams(t)
	backends := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"gcs", func(t *testing.T) string {
			return cloudTestURL(t, "LC_TEST_GCS_URL", "LC_REQUIRE_GCS", "scripts/fakegcs.sh", "crash")
		}},
		{"azure", func(t *testing.T) string {
			return cloudTestURL(t, "LC_TEST_AZURE_URL", "LC_REQUIRE_AZURE", "scripts/azurite.sh", "crash")
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { runCrash(t, b.url(t), cycles, seed, false) })
	}
}

// TestFaultsCloud is TestFaults (injected errors, lost acknowledgements and
// latency under concurrent appends, flushes, merges and reads) over the GCS
// and Azure Blob emulators, with the first of the fault seeds.
func TestFaultsCloud(t *testing.T) {
	seed := faultSeeds(t)[0]
	backends := []struct{ name, env, require, script string }{
		{"gcs", "LC_TEST_GCS_URL", "LC_REQUIRE_GCS", "scripts/fakegcs.sh"},
		{"azure", "LC_TEST_AZURE_URL", "LC_REQUIRE_AZURE", "scripts/azurite.sh"},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			u := cloudTestURL(t, b.env, b.require, b.script, "faults")
			inner, err := objstore.Open(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d on %s (replay: LC_FAULT_SEEDS=%d)", seed, u, seed)
			runFaults(t, seed, inner)
		})
	}
}
