//go:build !linux

package main

import (
	"context"
	"fmt"
)

const (
	osCacheWarm = "warm"
	osCacheAsIs = "as-is"
)

// prepareOSCache: only Linux can read or set the page cache state
// (oscache.go); elsewhere the reads see what the run left.
func prepareOSCache(_ context.Context, dir, mode string) (map[string]any, error) {
	if mode != osCacheWarm && mode != osCacheAsIs {
		return nil, fmt.Errorf("--os-cache %q: only as-is outside Linux", mode)
	}
	return map[string]any{"mode": osCacheAsIs}, nil
}
