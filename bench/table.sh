#!/usr/bin/env bash
# Writes and fully scans the same 1M-row rollout-shaped table with the Go
# Lance writer/reader and with LanceDB 0.31 (Node), one after the other in
# one run, and prints both results as JSON lines.
#
#   bench/table.sh [ROWS]      (default 1000000)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
rows="${1:-1000000}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o bin/lance-context-bench ./bench/cmd/lance-context-bench
[ -d test/interop/node_modules ] || (cd test/interop && npm ci --no-audit --no-fund --loglevel=error)
echo "# go (lance-context-bench table)"
bin/lance-context-bench table --dir "$tmp/go/bench.lance" --rows "$rows"
echo "# lancedb 0.31 (node test/interop/bench.mjs)"
(cd test/interop && node bench.mjs "$tmp/lancedb" --rows "$rows" 2>/dev/null)
