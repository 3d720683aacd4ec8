package sqlquery

import (
	"os"
	osexec "os/exec"
	"strings"
	"testing"
)

// TestEngineImportsNoLance: the engine reads stores through rollout
// (Table, baseStore: rollout.BaseTable describes the base table in
// rollout's terms), never through the Lance packages themselves, with or
// without cgo.
func TestEngineImportsNoLance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, cgo := range []string{"1", "0"} {
		cmd := osexec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*osexec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go list (CGO_ENABLED=%s): %v\n%s", cgo, err, stderr)
		}
		imports := strings.Fields(string(out))
		if len(imports) == 0 {
			t.Fatalf("go list (CGO_ENABLED=%s) named no import", cgo)
		}
		for _, imp := range imports {
			if strings.HasPrefix(imp, "github.com/lance-context/lance-context/lance/") {
				t.Errorf("sqlquery (CGO_ENABLED=%s) imports %s: read the base table through rollout.BaseTable", cgo, imp)
			}
		}
	}
}
