//go:build !unix

package index

import "time"

// processCPU cannot be read here: -1, and the prewarm rests as long as
// each read took.
func processCPU() time.Duration { return -1 }
