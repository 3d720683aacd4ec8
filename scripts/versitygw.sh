#!/usr/bin/env bash
# Runs a local versitygw (S3-compatible server, posix backend) for tests.
#
#   scripts/versitygw.sh start DIR   start it (data in DIR/data), create bucket lc-test
#   scripts/versitygw.sh stop DIR    stop it
#   scripts/versitygw.sh env DIR     print export lines for the tests:
#                                    eval "$(scripts/versitygw.sh env DIR)"
#
# It listens on 127.0.0.1:${LC_S3_PORT:-7070} with the test credentials
# lcadmin / lcadminsecret. DIR also holds versitygw.pid, versitygw.port and
# versitygw.log. bin/versitygw is built by scripts/tools.sh if missing.
#
# versitygw keeps object metadata in user xattrs; on a filesystem without
# them (its startup "xattr check" fails) the script restarts it with
# --sidecar DIR/meta, which keeps the metadata in plain files instead.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
access=lcadmin
secret=lcadminsecret
bucket=lc-test

usage() {
	echo "usage: $0 start|stop|env DIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
pidfile="$dir/versitygw.pid"
portfile="$dir/versitygw.port"
log="$dir/versitygw.log"

running() {
	[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

port() {
	if [ -f "$portfile" ]; then cat "$portfile"; else echo "${LC_S3_PORT:-7070}"; fi
}

print_env() {
	local p
	p="$(port)"
	cat <<EOT
export AWS_ENDPOINT_URL=http://127.0.0.1:$p
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_REGION=us-east-1
export AWS_S3_FORCE_PATH_STYLE=true
export LC_TEST_S3_URL=s3://$bucket/run-$(date +%s)-$$
EOT
}

launch() { # extra posix options...
	"$root/bin/versitygw" --port "127.0.0.1:$p" --access "$access" --secret "$secret" \
		--region us-east-1 --quiet posix "$@" "$dir/data" >>"$log" 2>&1 &
	echo $! >"$pidfile"
}

start() {
	if running; then
		echo "versitygw.sh: already running (pid $(cat "$pidfile"), port $(port))"
		return 0
	fi
	[ -x "$root/bin/versitygw" ] || "$root/scripts/tools.sh" versitygw
	p="${LC_S3_PORT:-7070}"
	echo "$p" >"$portfile"
	mkdir -p "$dir/data"
	: >"$log"
	launch
	sleep 0.5
	if ! running && grep -q "xattr check failed" "$log"; then
		echo "versitygw.sh: no user xattrs on $dir, using sidecar metadata in $dir/meta"
		mkdir -p "$dir/meta"
		launch --sidecar "$dir/meta"
		sleep 0.5
	fi
	if ! running; then
		echo "versitygw.sh: versitygw exited at startup:" >&2
		cat "$log" >&2
		rm -f "$pidfile"
		return 1
	fi
	# Wait until it answers, then create the bucket (idempotent).
	if ! (cd "$root" && eval "$(print_env)" && go run ./objstore/internal/mkbucket -wait 60s "$bucket"); then
		echo "versitygw.sh: server not ready; log:" >&2
		cat "$log" >&2
		stop
		return 1
	fi
	echo "versitygw.sh: running on 127.0.0.1:$p (pid $(cat "$pidfile")), bucket $bucket"
}

stop() {
	if ! [ -f "$pidfile" ]; then
		return 0
	fi
	local pid
	pid="$(cat "$pidfile")"
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -9 "$pid"
		fi
	fi
	rm -f "$pidfile"
}

case "$cmd" in
start) start ;;
stop) stop ;;
env) print_env ;;
*) usage ;;
esac
