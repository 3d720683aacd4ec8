//go:build !unix

package table

import "os"

// unlinked cannot tell a deleted file here: held files close by eviction
// only.
func unlinked(*os.File) bool { return false }
