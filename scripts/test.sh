#!/usr/bin/env bash
# The test command of the README. Sets up everything the tests need on a
# fresh machine (tool binaries, Node packages, a real S3-compatible server),
# runs the whole suite, and stops what it started.
#
#   scripts/test.sh          full suite (what CI runs)
#   LC_TEST_QUICK=1 scripts/test.sh   skip the race detector and fuzzing
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export GOFLAGS="${GOFLAGS:--mod=readonly}"

step() { printf '\n=== %s\n' "$*"; }

step "tool binaries (versitygw, etcd) from tools/go.mod"
scripts/tools.sh

step "Node packages for the LanceDB interop suite (npm ci)"
(cd test/interop && npm ci --no-audit --no-fund --loglevel=error)

step "start versitygw (S3-compatible server)"
s3dir="$(mktemp -d)"
cleanup() { scripts/versitygw.sh stop "$s3dir" || true; rm -rf "$s3dir"; }
trap cleanup EXIT
scripts/versitygw.sh start "$s3dir"
eval "$(scripts/versitygw.sh env "$s3dir")"
export LC_REQUIRE_INTEROP=1 LC_REQUIRE_S3=1

step "gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))"
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...

step "go build"
go build -o bin/lance-context ./cmd/lance-context

if [ -z "${LC_TEST_QUICK:-}" ]; then
	step "go test -race"
	go test -race -count=1 -timeout 30m ./...
	step "fuzz (short)"
	go test -run='^$' -fuzz='^FuzzDecodeManifestFile$' -fuzztime=20s ./lance/table
	go test -run='^$' -fuzz='^FuzzOpen$' -fuzztime=20s ./lance/file
else
	step "go test"
	go test -count=1 -timeout 30m ./...
fi
step "all tests passed"
