package objstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/objstoretest"
)

// emulatorURL returns the URL in env, or skips the test when it is unset;
// with require=1 in the environment an unset URL fails the test instead (CI
// sets LC_REQUIRE_GCS=1 and LC_REQUIRE_AZURE=1).
func emulatorURL(t *testing.T, env, require, how string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		msg := fmt.Sprintf("%s is not set (%s)", env, how)
		if os.Getenv(require) == "1" {
			t.Fatalf("%s, and %s=1", msg, require)
		}
		t.Skip(msg)
	}
	return u
}

// runCloud runs the conformance suite on fresh prefixes under url.
func runCloud(t *testing.T, url string) {
	root, err := objstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	run := "run-" + randomSuffix(t)
	var n atomic.Int64
	objstoretest.RunWith(t, func(t *testing.T) objstore.Store {
		s := objstore.Sub(root, fmt.Sprintf("%s/%d", run, n.Add(1)))
		t.Cleanup(func() { cleanup(t, s) })
		return s
	}, objstoretest.Options{})
}

// TestGCS runs the suite against a GCS server named by LC_TEST_GCS_URL
// (fake-gcs-server in CI: scripts/fakegcs.sh), with the endpoint in
// STORAGE_EMULATOR_HOST.
func TestGCS(t *testing.T) {
	runCloud(t, emulatorURL(t, "LC_TEST_GCS_URL", "LC_REQUIRE_GCS",
		`run scripts/fakegcs.sh start DIR and eval "$(scripts/fakegcs.sh env DIR)"`))
}

// TestAzure runs the suite against an Azure Blob service named by
// LC_TEST_AZURE_URL (Azurite in CI: scripts/azurite.sh), with the account
// in the AZURE_STORAGE_* variables.
func TestAzure(t *testing.T) {
	runCloud(t, emulatorURL(t, "LC_TEST_AZURE_URL", "LC_REQUIRE_AZURE",
		`run scripts/azurite.sh start DIR and eval "$(scripts/azurite.sh env DIR)"`))
}
