#!/usr/bin/env bash
# Stops what native-up.sh started (workers first, so they seal on SIGTERM).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="${LC_HARNESS_DIR:-$root/.harness}"
[ -d "$state" ] || exit 0
for p in w1 w2 master etcd; do
	f="$state/$p.pid"
	[ -f "$f" ] || continue
	pid=$(cat "$f")
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
	rm -f "$f"
done
"$root/scripts/versitygw.sh" stop "$state/s3" >/dev/null 2>&1
if [ -z "${LC_HARNESS_KEEP:-}" ]; then rm -rf "$state"; fi
echo "native-down: stopped"
