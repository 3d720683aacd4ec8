#!/usr/bin/env bash
# Flatness of the reads from a small store to a large one, measured in
# turns. On a shared machine the speed drifts by tens of percent over
# minutes (LanceDB's own figures move with ours), so a ratio of two sizes
# read minutes apart, as bench/scale's sizes in one run are, moves with
# it. Here each round reads both stores back to back, in alternating
# order, and the ratio is taken of the medians over the rounds.
#
#   bench/flat.sh [-rounds 5] [-calls 1000] [-warmup 2000] [-small 100000] [-large 10000000] WORKDIR
#
# WORKDIR/small and WORKDIR/large are bench/scale stores, made on first
# use with the history bench/scale gives them (the large one through the
# sizes 100k, 1M, 10M with their merges and compaction), reused after.
# Each read is one `bench/scale --reuse` process (its untimed calls, the
# wait for the prewarm, the OS page cache warmed: see bench/README.md).
# Prints each run's JSON line, then the medians per size and large/small.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
rounds=5 calls=1000 warmup=2000 small=100000 large=10000000
while [ $# -gt 1 ]; do
	case "$1" in
	-rounds) rounds="$2"; shift 2 ;;
	-calls) calls="$2"; shift 2 ;;
	-warmup) warmup="$2"; shift 2 ;;
	-small) small="$2"; shift 2 ;;
	-large) large="$2"; shift 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: $0 [-rounds N] [-calls N] [-warmup N] [-small ROWS] [-large ROWS] WORKDIR" >&2; exit 2; }
work="$1"
mkdir -p "$work"
bin="$work/scale"
go build -o "$bin" ./bench/scale

# The large store's sizes: the standard ones up to -large.
sizes=""
for s in 100000 1000000 10000000; do
	[ "$s" -le "$large" ] && sizes="$sizes,$s"
done
case ",$sizes," in *",$large,"*) ;; *) sizes="$sizes,$large" ;; esac
sizes="${sizes#,}"
for kind in small large; do
	[ -e "$work/$kind/scale-state.json" ] && continue
	want="$small"
	[ "$kind" = large ] && want="$sizes"
	echo "making $work/$kind ($want rows)" >&2
	rm -rf "${work:?}/$kind"
	"$bin" --dir "$work/$kind" --sizes "$want" --measure build,merge --lancedb=false >/dev/null
done

out="$work/flat.jsonl"
: >"$out"
for r in $(seq 1 "$rounds"); do
	order="small large"
	[ $((r % 2)) -eq 0 ] && order="large small"
	for kind in $order; do
		rows="$small"
		[ "$kind" = large ] && rows="$large"
		"$bin" --dir "$work/$kind" --reuse --sizes "$rows" --measure get,trajectory,rollout,filtered,page \
			--calls "$calls" --warmup "$warmup" --lancedb=false 2>/dev/null | tee -a "$out"
	done
done

python3 - "$out" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
keys = ["get_p50_ms", "get_p99_ms", "trajectory_p50_ms", "rollout_page_p50_ms",
        "filtered_page_p50_ms", "fragments_page_p50_ms", "all_page_p50_ms"]
cpu = ["get", "trajectory", "rollout", "filtered", "page"]
by = {}
for d in runs:
    by.setdefault(d["rows"], []).append(d["lance_context"])
sizes = sorted(by)
med = {n: {k: statistics.median(x[k] for x in by[n]) for k in keys} for n in sizes}
cmed = {n: {k: statistics.median(x["cpu_ms_per_call"][k] for x in by[n]) for k in cpu} for n in sizes}
for n in sizes:
    print(json.dumps({"rows": n, "runs": len(by[n]), "median": med[n], "cpu_ms_per_call_median": cmed[n],
                      "per_run": {k: [x[k] for x in by[n]] for k in keys}}))
if not sizes:
    sys.exit(0)  # -rounds 0: the stores made, nothing read
lo, hi = sizes[0], sizes[-1]
print(json.dumps({"ratio": f"{hi}/{lo}",
                  "median": {k: round(med[hi][k] / med[lo][k], 2) for k in keys if med[lo][k]},
                  "cpu_ms_per_call_median": {k: round(cmed[hi][k] / cmed[lo][k], 2) for k in cpu if cmed[lo][k]}}))
EOF
