#!/usr/bin/env bash
# Runs a local Azurite (Azure Storage emulator, blob service only) for tests.
#
#   scripts/azurite.sh start DIR   start it (data in DIR/data), create container lc-test
#   scripts/azurite.sh stop DIR    stop it
#   scripts/azurite.sh env DIR     print export lines for the tests:
#                                  eval "$(scripts/azurite.sh env DIR)"
#
# It listens on 127.0.0.1:${LC_AZURE_PORT:-10000} with Azurite's well-known
# development account devstoreaccount1. DIR holds azurite.pid, azurite.port
# and azurite.log. Azurite is the npm package pinned in tools/azurite
# (installed with npm ci if missing).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
container=lc-test
account=devstoreaccount1
# Azurite's published development key (not a secret).
key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

usage() {
	echo "usage: $0 start|stop|env DIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
pidfile="$dir/azurite.pid"
portfile="$dir/azurite.port"
log="$dir/azurite.log"

running() {
	[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

port() {
	if [ -f "$portfile" ]; then cat "$portfile"; else echo "${LC_AZURE_PORT:-10000}"; fi
}

print_env() {
	cat <<EOT
export AZURE_STORAGE_ACCOUNT=$account
export AZURE_STORAGE_KEY='$key'
export AZURE_STORAGE_ENDPOINT=http://127.0.0.1:$(port)/$account
export LC_TEST_AZURE_URL=az://$container/run-$(date +%s)-$$
EOT
}

start() {
	if running; then
		echo "azurite.sh: already running (pid $(cat "$pidfile"), port $(port))"
		return 0
	fi
	local bin="$root/tools/azurite/node_modules/.bin/azurite-blob"
	[ -x "$bin" ] || (cd "$root/tools/azurite" && npm ci --no-audit --no-fund --loglevel=error)
	local p="${LC_AZURE_PORT:-10000}"
	echo "$p" >"$portfile"
	mkdir -p "$dir/data"
	: >"$log"
	# --skipApiVersionCheck: the Go SDK may speak a newer API version than
	# this Azurite knows; --loose ignores headers it does not implement.
	"$bin" --blobHost 127.0.0.1 --blobPort "$p" --location "$dir/data" \
		--skipApiVersionCheck --loose --disableTelemetry --silent >>"$log" 2>&1 &
	echo $! >"$pidfile"
	if ! (cd "$root" && eval "$(print_env)" && go run ./objstore/internal/mkcontainer -wait 60s "az://$container"); then
		echo "azurite.sh: server not ready; log:" >&2
		cat "$log" >&2
		stop
		return 1
	fi
	echo "azurite.sh: running on 127.0.0.1:$p (pid $(cat "$pidfile")), container $container"
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
