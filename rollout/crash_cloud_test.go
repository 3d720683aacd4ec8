package rollout

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
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
		t.Run(b.name, func(t *testing.T) { runCrash(t, b.url(t), cycles, seed) })
	}
}
