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
source "$(dirname "${BASH_SOURCE[0]}")/lib/emulator.sh"
bucket=lc-test

print_env() {
	cat <<EOT
export STORAGE_EMULATOR_HOST=http://127.0.0.1:$(port)
export LC_TEST_GCS_URL=gs://$bucket/run-$(date +%s)-$$
EOT
}

launch() {
	[ -x "$root/bin/fake-gcs-server" ] || "$root/scripts/tools.sh" fake-gcs-server
	"$root/bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$1" -backend memory \
		-external-url "http://127.0.0.1:$1" -log-level warn >>"$log" 2>&1 &
	echo $! >"$pidfile"
}

ready() { go run ./objstore/internal/mkcontainer -wait 60s "gs://$bucket"; }

emulator_main fakegcs LC_GCS_PORT 4443 "$@"
