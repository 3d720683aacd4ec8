package row

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lance-context/lance-context/"

// goList runs go list -f format on this package, one word per import.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, append(args, ".")...)...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	imports := strings.Fields(string(out))
	if len(imports) == 0 {
		t.Fatalf("go list %v named no import", args)
	}
	return imports
}

// TestRowImportsNoIO: the row model does no I/O. It imports neither the
// process's files and network (os, net) nor, directly or through anything
// it imports, a package of this module but the wire types (api): no
// objstore, wal, lance/table or lance/file; and nothing links net/http.
// (os and net themselves come in through fmt and uuid.)
func TestRowImportsNoIO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`) {
		if imp == "os" || strings.HasPrefix(imp, "os/") || imp == "net" || strings.HasPrefix(imp, "net/") {
			t.Errorf("row imports %s: the row model reads and writes no files or network", imp)
		}
	}
	deps := goList(t, "-deps", "-f", "{{.ImportPath}}")
	for _, dep := range deps {
		if own, ok := strings.CutPrefix(dep, module); ok && own != "api" && own != "rollout/row" {
			t.Errorf("row depends on %s: of this module, only the wire types (api)", dep)
		}
		if dep == "net/http" {
			t.Errorf("row links net/http")
		}
	}
	if len(deps) < 20 {
		t.Fatalf("go list -deps named %d packages: not this package's", len(deps))
	}
}
