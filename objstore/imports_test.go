package objstore_test

import (
	"os/exec"
	"strings"
	"testing"
)

// engine are the packages below cmd that must link no cloud SDK: the
// format, the WAL, the store and the services. A cloud driver reaches a
// program only through a blank import of objstore/s3, objstore/gcs,
// objstore/azure or objstore/drivers, made in cmd/lance-context and in the
// tests and benchmarks that open cloud stores.
var engine = []string{
	"./objstore", "./vfs", "./lance/...", "./wal/...", "./rollout/...", "./sqlquery/...",
	"./worker/...", "./master/...", "./coord/...", "./devmode/...",
}

// cloudSDKs are the module paths of the cloud SDKs the drivers use.
var cloudSDKs = []string{"github.com/aws/", "github.com/Azure/", "cloud.google.com/", "google.golang.org/api/"}

// TestEngineLinksNoCloudSDK: no engine package depends on a cloud SDK, so
// their test binaries and any program built on them without a driver link
// none (lance/table's dependencies went from 908 packages to 317 when the
// drivers moved out of objstore).
func TestEngineLinksNoCloudSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	args := append([]string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}, engine...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".." // the module root
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < len(engine) {
		t.Fatalf("go list named %d packages, want at least %d", len(lines), len(engine))
	}
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		for _, dep := range strings.Fields(deps) {
			for _, sdk := range cloudSDKs {
				if strings.HasPrefix(dep, sdk) {
					t.Errorf("%s depends on %s (a cloud SDK): import the driver from cmd or a test, not from the engine", pkg, dep)
					break
				}
			}
			// objstore/internal/sleep is the wait objstore shares with the
			// drivers: no driver code.
			if strings.HasPrefix(dep, "github.com/lance-context/lance-context/objstore/") &&
				!strings.HasSuffix(dep, "/objstoretest") && dep != "github.com/lance-context/lance-context/objstore/internal/sleep" {
				t.Errorf("%s depends on the driver package %s", pkg, dep)
			}
		}
	}
}
