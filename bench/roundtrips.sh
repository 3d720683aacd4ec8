#!/usr/bin/env bash
# Object-store requests and p50 latency per worker operation, through
# test/latencyproxy in front of versitygw, at +0 ms and +20 ms per request
# (see bench/README.md). Builds bin/lance-context, starts a versitygw of its
# own on a free port, runs bench/roundtrips, stops versitygw.
#
#   bench/roundtrips.sh [flags of bench/roundtrips, e.g. -records 20000 -delays 0,20ms]
#
# The tables go to stderr, one JSON document per operation and latency to
# stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
go build -o bin/lance-context ./cmd/lance-context
go build -o bin/roundtrips ./bench/roundtrips
work="$(mktemp -d)"
trap 'scripts/versitygw.sh stop "$work/s3" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
LC_S3_PORT="$port" scripts/versitygw.sh start "$work/s3" >&2
eval "$(scripts/versitygw.sh env "$work/s3")"
bin/roundtrips -bin bin/lance-context -url "$LC_TEST_S3_URL" "$@"
