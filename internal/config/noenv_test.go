package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoEnvironmentBelowCmd: the format layer, the WAL, the store and
// SQL take options; none of their non-test files calls os.Getenv,
// os.LookupEnv or os.Environ (the process reads the environment here and
// in cmd, worker and master configuration).
func TestNoEnvironmentBelowCmd(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	for _, dir := range []string{"lance", "rollout", "wal", "sqlquery"} {
		root := filepath.Join("..", "..", dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			seen++
			osName := ""
			for _, im := range f.Imports {
				if im.Path.Value == `"os"` {
					osName = "os"
					if im.Name != nil {
						osName = im.Name.Name
					}
				}
			}
			if osName == "" {
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == osName {
					switch sel.Sel.Name {
					case "Getenv", "LookupEnv", "Environ":
						t.Errorf("%s: os.%s: below cmd, settings come in as options (internal/config reads them)", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen < 50 {
		t.Fatalf("read %d files: not the repository's packages", seen)
	}
}
