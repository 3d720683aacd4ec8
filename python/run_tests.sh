#!/usr/bin/env bash
# Runs the Python client tests against a live worker: builds the binary,
# installs the package the way a user does (pip install --no-index ./python,
# into a temporary directory: it must work offline) when pip is there,
# starts a worker on a free port over a temporary data directory, waits for
# /api/v1/health, runs the unittest suite against the installed copy with
# LC_TEST_URL and LC_REQUIRE_PY=1 set (so nothing is skipped but the tests
# of routes the worker does not have yet, which are listed), and stops the
# worker. The SQL and README tests start one lance-context dev of their own.
#
#   python/run_tests.sh            (from anywhere; builds bin/lance-context)
#   LC_SKIP_BUILD=1 python/run_tests.sh   reuse an existing bin/lance-context
#   LC_BIN=path                            the binary to build or use instead
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bin="${LC_BIN:-bin/lance-context}"
if [ -z "${LC_SKIP_BUILD:-}" ]; then
	go build -o "$bin" ./cmd/lance-context
fi
export LC_BIN="$bin"

tmp="$(mktemp -d)"
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Install as a user would, offline. The package's build backend is in the
# tree (python/_build), so pip's isolated build fetches nothing.
pypath=""
if python3 -m pip --version >/dev/null 2>&1; then
	PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
		python3 -m pip install --quiet --no-index --no-deps --target "$tmp/site" ./python
	python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import lance_context_client as m; assert m.__file__.startswith(sys.argv[1]), m.__file__' "$tmp/site"
	pypath="$tmp/site"
	echo "installed lance-context-client with pip install --no-index into $tmp/site"
else
	echo "no pip for python3: testing python/ in place"
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
url="http://127.0.0.1:$port"

# No token: the suite talks to this worker only. The flush sweeper is off in
# practice so the tests decide when rows become readable.
env -u LC_API_TOKEN ROLLOUT_FLUSH_INTERVAL_SECS=3600 \
	"$bin" worker --data-dir "$tmp/data" --listen "127.0.0.1:$port" --instance-id py-test \
	>"$tmp/worker.log" 2>&1 &
pid=$!

ready=""
for _ in $(seq 1 150); do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "the worker exited before it was ready; its log:" >&2
		cat "$tmp/worker.log" >&2
		exit 1
	fi
	if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/api/v1/health", timeout=1).read()' "$url" 2>/dev/null; then
		ready=1
		break
	fi
	sleep 0.2
done
if [ -z "$ready" ]; then
	echo "the worker at $url did not answer /api/v1/health within 30s; its log:" >&2
	cat "$tmp/worker.log" >&2
	exit 1
fi

status=0
LC_TEST_URL="$url" LC_REQUIRE_PY=1 LC_PY_PATH="$pypath" PYTHONDONTWRITEBYTECODE=1 \
	python3 -m unittest discover -s python/tests -v || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- worker log" >&2
	tail -n 50 "$tmp/worker.log" >&2
fi
exit "$status"
