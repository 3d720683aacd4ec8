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
	if err := checkOSCache(mode); err != nil {
		return nil, err
	}
	return map[string]any{"mode": osCacheAsIs}, nil
}

// checkOSCache reports a --os-cache value this system cannot take.
func checkOSCache(mode string) error {
	if mode != osCacheWarm && mode != osCacheAsIs {
		return fmt.Errorf("--os-cache %q: only as-is outside Linux", mode)
	}
	return nil
}
