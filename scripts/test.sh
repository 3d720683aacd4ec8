#!/usr/bin/env bash
# The test command of the README. On a fresh machine it installs and starts
# everything the tests need (etcd and versitygw built from tools/, the pinned
# Node packages, Chromium), runs every suite, and stops what it started.
#
#   scripts/test.sh                  everything (what CI runs)
#   LC_TEST_QUICK=1 scripts/test.sh  no race detector, no fuzzing
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export GOFLAGS="${GOFLAGS:--mod=readonly}"

step() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)"; }

work="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	LC_HARNESS_DIR="$work/harness" test/harness/native-down.sh >/dev/null 2>&1 || true
	scripts/versitygw.sh stop "$work/s3" >/dev/null 2>&1 || true
	scripts/fakegcs.sh stop "$work/gcs" >/dev/null 2>&1 || true
	scripts/azurite.sh stop "$work/azure" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

step "system packages (Chromium for the browser test)"
if ! command -v chromium >/dev/null 2>&1; then
	sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq && $sudo apt-get install -y -qq chromium >/dev/null
fi
chromium --version

step "tool binaries from tools/ (versitygw, etcd, fake-gcs-server)"
scripts/tools.sh

step "Node packages from the committed locks (npm ci)"
(cd test/interop && npm ci --no-audit --no-fund --loglevel=error)
(cd web && npm ci --no-audit --no-fund --loglevel=error)
(cd tools/azurite && npm ci --no-audit --no-fund --loglevel=error)

step "gofmt and go vet"
unformatted="$(gofmt -l $(git ls-files '*.go'))"
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
go vet ./...

step "build"
go build -o bin/lance-context ./cmd/lance-context

step "start versitygw (S3-compatible server)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
LC_S3_PORT="$(free_port)" scripts/versitygw.sh start "$work/s3"
eval "$(scripts/versitygw.sh env "$work/s3")"
step "start fake-gcs-server (GCS emulator) and Azurite (Azure Blob emulator)"
LC_GCS_PORT="$(free_port)" scripts/fakegcs.sh start "$work/gcs"
eval "$(scripts/fakegcs.sh env "$work/gcs")"
LC_AZURE_PORT="$(free_port)" scripts/azurite.sh start "$work/azure"
eval "$(scripts/azurite.sh env "$work/azure")"
export LC_REQUIRE_GCS=1 LC_REQUIRE_AZURE=1
export LC_REQUIRE_INTEROP=1 LANCE_FILE_LANCEDB=1 LC_REQUIRE_S3=1 LC_TEST_ETCD_BIN="$root/bin/etcd"

if [ -z "${LC_TEST_QUICK:-}" ]; then
	step "go test -race (all packages; S3 suites against versitygw)"
	go test -race -count=1 -timeout 40m ./...
	step "fuzz (short runs of every fuzz target)"
	# Budgets are counts of inputs (about 15 s each here), not durations: Go
	# 1.26's fuzz coordinator can fail a target with "context deadline
	# exceeded" and no crasher when a -fuzztime duration runs out
	# (golang/go#75804, fixed in Go 1.27).
	go test -run='^$' -fuzz='^FuzzDecodeManifestFile$' -fuzztime=50000x ./lance/table
	for f in $(go test -list '^Fuzz' ./lance/file | grep '^Fuzz'); do
		go test -run='^$' -fuzz="^$f\$" -fuzztime=150000x ./lance/file
	done
else
	step "go test"
	go test -count=1 -timeout 40m ./...
fi

step "web unit tests (vitest)"
(cd web && npm test --silent)

step "Python client against a live worker"
LC_SKIP_BUILD=1 python/run_tests.sh

step "distributed smoke test: etcd + versitygw + master + two workers"
LC_HARNESS_DIR="$work/harness" test/harness/native-up.sh >/dev/null
LC_HARNESS_DIR="$work/harness" test/harness/smoke.sh
LC_HARNESS_DIR="$work/harness" test/harness/native-down.sh

step "browser end-to-end test against lance-context dev (headless Chromium)"
port="$(free_port)"
bin/lance-context dev --data-dir "$work/dev" --listen "127.0.0.1:$port" >"$work/dev.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/api/v1/health" && break; sleep 0.2; done
mkdir -p test/artifacts
(cd web && BASE_URL="http://127.0.0.1:$port" SCREENSHOT="$root/test/artifacts/ui-e2e.png" npm run --silent e2e) || { tail -50 "$work/dev.log"; exit 1; }

step "browser end-to-end test with auth on (LC_API_TOKEN): sign-in, then the same views"
aport="$(free_port)"
LC_API_TOKEN=e2e-token-not-secret bin/lance-context dev --data-dir "$work/dev-auth" --listen "127.0.0.1:$aport" >"$work/dev-auth.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$aport/api/v1/health" && break; sleep 0.2; done
(cd web && LC_API_TOKEN=e2e-token-not-secret PREFIX=auth- BASE_URL="http://127.0.0.1:$aport" SCREENSHOT="$root/test/artifacts/ui-e2e-auth.png" npm run --silent e2e) || { tail -50 "$work/dev-auth.log"; exit 1; }

step "all tests passed"
