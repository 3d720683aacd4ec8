#!/usr/bin/env bash
# Append latency and group commit, in process (lance-context-bench engine,
# append phase): single-record appends by 1 and 64 concurrent appenders, on
# local disk and on S3 (versitygw) through test/latencyproxy at each added
# latency. Prints one JSON line per (backend, latency, appenders) on stdout.
#
#   bench/append.sh [-bin bin/lance-context-bench] [-delays 0,20ms] [-duration 5s] [-appenders 1,64]
#
# -bin lets an A/B pair of builds run back to back on the same servers.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin=bin/lance-context-bench delays=0,20ms duration=5s appenders=1,64
while [ $# -gt 0 ]; do
	case "$1" in
	-bin) bin="$2"; shift 2 ;;
	-delays) delays="$2"; shift 2 ;;
	-duration) duration="$2"; shift 2 ;;
	-appenders) appenders="$2"; shift 2 ;;
	*) echo "usage: $0 [-bin B] [-delays D,D] [-duration D] [-appenders N,N]" >&2; exit 2 ;;
	esac
done
[ -x "$bin" ] || go build -o "$bin" ./bench/cmd/lance-context-bench
[ -x bin/latencyproxy ] || go build -o bin/latencyproxy ./test/latencyproxy/cmd/latencyproxy
work="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	scripts/versitygw.sh stop "$work/s3" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # backend delay dir
	"$bin" engine --dir "$3" --phases append --appenders "$appenders" --duration "$duration" 2>/dev/null |
		python3 -c '
import json, sys
doc = json.load(sys.stdin)
for r in doc["append"]:
    print(json.dumps({"backend": sys.argv[1], "delay": sys.argv[2], **r}))' "$1" "$2"
}

mkdir -p "$work/local"
run local 0 "$work/local"

s3port="$(freeport)"
LC_S3_PORT="$s3port" scripts/versitygw.sh start "$work/s3" >&2
eval "$(scripts/versitygw.sh env "$work/s3")"
IFS=, read -ra ds <<<"$delays"
for d in "${ds[@]}"; do
	lport="$(freeport)" aport="$(freeport)"
	bin/latencyproxy -target "http://127.0.0.1:$s3port" -listen "127.0.0.1:$lport" -admin "127.0.0.1:$aport" -delay "$d" 2>/dev/null &
	pids+=($!)
	sleep 0.3
	AWS_ENDPOINT_URL="http://127.0.0.1:$lport" run s3 "$d" "$LC_TEST_S3_URL/$d"
	kill "${pids[-1]}" 2>/dev/null || true
done
