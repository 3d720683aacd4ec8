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
source "$(dirname "${BASH_SOURCE[0]}")/lib/emulator.sh"
container=lc-test
account=devstoreaccount1
# Azurite's published development key (not a secret).
key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

print_env() {
	cat <<EOT
export AZURE_STORAGE_ACCOUNT=$account
export AZURE_STORAGE_KEY='$key'
export AZURE_STORAGE_ENDPOINT=http://127.0.0.1:$(port)/$account
export LC_TEST_AZURE_URL=az://$container/run-$(date +%s)-$$
EOT
}

launch() {
	local bin="$root/tools/azurite/node_modules/.bin/azurite-blob"
	[ -x "$bin" ] || (cd "$root/tools/azurite" && npm ci --no-audit --no-fund --loglevel=error)
	mkdir -p "$dir/data"
	# --skipApiVersionCheck: the Go SDK may speak a newer API version than
	# this Azurite knows; --loose ignores headers it does not implement.
	"$bin" --blobHost 127.0.0.1 --blobPort "$1" --location "$dir/data" \
		--skipApiVersionCheck --loose --disableTelemetry --silent >>"$log" 2>&1 &
	echo $! >"$pidfile"
}

ready() { go run ./objstore/internal/mkcontainer -wait 60s "az://$container"; }

emulator_main azurite LC_AZURE_PORT 10000 "$@"
