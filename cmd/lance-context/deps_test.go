package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServiceBinaryLinksNoBenchmarks: the benchmarks are their own binary
// (bench/cmd/lance-context-bench); the service binary must not pull them,
// nor the test harness, back in.
func TestServiceBinaryLinksNoBenchmarks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list (-short)")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/lance-context/lance-context/"
	for _, dep := range strings.Fields(string(out)) {
		if dep == mod+"bench" || strings.HasPrefix(dep, mod+"bench/") || strings.HasPrefix(dep, mod+"test/") {
			t.Errorf("lance-context depends on %s", dep)
		}
	}
}
