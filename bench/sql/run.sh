#!/usr/bin/env bash
# SQL over a rollout store (DuckDB embedded, package sqlquery) side by side
# with LanceDB 0.31's own query of the same table, in one run: writes a
# store of ROWS rows (merged into fragments), then runs each query RUNS
# times in a fresh process per engine and query, printing JSON lines.
#
#   bench/sql/run.sh [ROWS] [RUNS]      (default 1000000 3)
#   LC_BENCH_DIR=DIR bench/sql/run.sh   reuse (or keep) the store in DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
rows="${1:-1000000}"
runs="${2:-3}"
dir="${LC_BENCH_DIR:-}"
if [ -z "$dir" ]; then
	dir="$(mktemp -d)"
	trap 'rm -rf "$dir"' EXIT
fi
mkdir -p bin
go build -o bin/sqlbench ./bench/sql
[ -d test/interop/node_modules ] || (cd test/interop && npm ci --no-audit --no-fund --loglevel=error)
if [ ! -d "$dir/bench.rollout.lance" ]; then
	bin/sqlbench make --dir "$dir" --rows "$rows"
fi
for q in groupby topk; do
	bin/sqlbench query --dir "$dir" --q "$q" --runs "$runs"
	node bench/sql/lancedb_query.mjs "$dir" --q "$q" --runs "$runs" 2>/dev/null
done
bin/sqlbench query --dir "$dir" --q charts --runs "$runs"
