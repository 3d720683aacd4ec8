// Package buildinfo reports the binary's version: the module version and
// the commit it was built from, as the Go toolchain stamped them.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// Version returns "<module version> (<commit>[, modified])", for example
// "v0.3.0 (4f2c1e9a7b3d)" or "(devel) (4f2c1e9a7b3d, modified)" for a build
// from a work tree; "unknown" when the binary carries no build information.
var Version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return v
	}
	return v + " (" + rev + modified + ")"
})
