#!/usr/bin/env bash
# Runs a local fake-gcs-server (Google Cloud Storage emulator, in-memory
# backend) for tests.
#
#   scripts/fakegcs.sh start DIR   start it, create bucket lc-test
#   scripts/fakegcs.sh stop DIR    stop it
#   scripts/fakegcs.sh env DIR     print export lines for the tests:
#                                  eval "$(scripts/fakegcs.sh env DIR)"
#
# It listens on 127.0.0.1:${LC_GCS_PORT:-4443} (plain HTTP). DIR holds
# fakegcs.pid, fakegcs.port and fakegcs.log. bin/fake-gcs-server is built by
# scripts/tools.sh if missing. fake-gcs-server v1.56.1 checks
# ifGenerationMatch (0: the object must not exist) under its backend lock,
# which is what PutIfAbsent relies on; the conformance suite's race checks it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bucket=lc-test

usage() {
	echo "usage: $0 start|stop|env DIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
pidfile="$dir/fakegcs.pid"
portfile="$dir/fakegcs.port"
log="$dir/fakegcs.log"

running() {
	[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

port() {
	if [ -f "$portfile" ]; then cat "$portfile"; else echo "${LC_GCS_PORT:-4443}"; fi
}

print_env() {
	cat <<EOT
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$(port)
export LC_TEST_GCS_URL=gs://$bucket/run-$(date +%s)-$$
EOT
}

start() {
	if running; then
		echo "fakegcs.sh: already running (pid $(cat "$pidfile"), port $(port))"
		return 0
	fi
	[ -x "$root/bin/fake-gcs-server" ] || "$root/scripts/tools.sh" fake-gcs-server
	local p="${LC_GCS_PORT:-4443}"
	echo "$p" >"$portfile"
	: >"$log"
	"$root/bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$p" -backend memory \
		-external-url "http://127.0.0.1:$p" -log-level warn >>"$log" 2>&1 &
	echo $! >"$pidfile"
	if ! (cd "$root" && eval "$(print_env)" && go run ./objstore/internal/mkcontainer -wait 60s "gs://$bucket"); then
		echo "fakegcs.sh: server not ready; log:" >&2
		cat "$log" >&2
		stop
		return 1
	fi
	echo "fakegcs.sh: running on 127.0.0.1:$p (pid $(cat "$pidfile")), bucket $bucket"
}

stop() {
	[ -f "$pidfile" ] || return 0
	local pid
	pid="$(cat "$pidfile")"
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
	fi
	rm -f "$pidfile"
}

case "$cmd" in
start) start ;;
stop) stop ;;
env) print_env ;;
*) usage ;;
esac
