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
source "$(dirname "${BASH_SOURCE[0]}")/lib/emulator.sh"
access=lcadmin
secret=lcadminsecret
bucket=lc-test

print_env() {
	cat <<EOT
export AWS_ENDPOINT_URL=http://127.0.0.1:$(port)
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_REGION=us-east-1
export AWS_S3_FORCE_PATH_STYLE=true
export LC_TEST_S3_URL=s3://$bucket/run-$(date +%s)-$$
EOT
}

posix() { # PORT extra posix options...
	local p=$1
	shift
	"$root/bin/versitygw" --port "127.0.0.1:$p" --access "$access" --secret "$secret" \
		--region us-east-1 --quiet posix "$@" "$dir/data" >>"$log" 2>&1 &
	echo $! >"$pidfile"
}

launch() {
	[ -x "$root/bin/versitygw" ] || "$root/scripts/tools.sh" versitygw
	mkdir -p "$dir/data"
	posix "$1"
	sleep 0.5
	if ! running && grep -q "xattr check failed" "$log"; then
		echo "versitygw.sh: no user xattrs on $dir, using sidecar metadata in $dir/meta"
		mkdir -p "$dir/meta"
		posix "$1" --sidecar "$dir/meta"
		sleep 0.5
	fi
}

ready() { go run ./objstore/internal/mkbucket -wait 60s "$bucket"; }

emulator_main versitygw LC_S3_PORT 7070 "$@"
