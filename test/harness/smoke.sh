#!/usr/bin/env bash
# Real HTTP calls against the stack of native-up.sh or up.sh (both write
# $LC_HARNESS_DIR/env). Fails loudly on the first wrong answer.
# LC_API_TOKEN, when set, is sent as the bearer token. The last step opens
# the base table with LanceDB (test/interop, npm ci there first);
# LC_SMOKE_LANCEDB=off skips it, and says so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="${LC_HARNESS_DIR:-$root/.harness}"
[ -f "$state/env" ] || { echo "smoke: no $state/env: start a stack first (test/harness/native-up.sh or up.sh)" >&2; exit 1; }
# shellcheck disable=SC1091
source "$state/env"
store="smoke-$(date +%s)-$$"
M="$LC_MASTER_URL/api/v1"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT

fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# curl with the token, when there is one.
auth=()
[ -n "${LC_API_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $LC_API_TOKEN")
curl() { command curl "${auth[@]}" "$@"; }

code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "$LC_W1_URL/api/v1/rollouts" -H 'Content-Type: application/json' -d "{\"name\":\"$store\"}")
[ "$code" = 201 ] || fail "create store: HTTP $code"

append() { # worker url, id
	local out
	out=$(curl -s -w '\n%{http_code}' -XPOST "$1/api/v1/rollouts/$store/records?flush=true" -H 'Content-Type: application/json' \
		-d "{\"records\":[{\"id\":\"$2\",\"rollout_id\":\"smoke\",\"content\":\"hello $2\"}]}")
	[ "$(tail -n1 <<<"$out")" = 201 ] || fail "append $2 via $1: $out"
	[ "$(head -n1 <<<"$out" | json 'd["flushed"]')" = True ] || fail "append $2 not flushed: $out"
}
append "$LC_W1_URL" s1
append "$LC_W2_URL" s2
append "$LC_W1_URL" s3

count() { # source (may be empty: no parameter)
	local url="$M/experiments/$store/records?limit=100"
	[ -n "$1" ] && url="$url&source=$1"
	curl -fsS "$url" | json 'str(len(d["records"]))+" "+d["source"]'
}
check() { # source expected-count expected-echo
	local got
	got=$(count "$1")
	[ "$got" = "$2 $3" ] || fail "source=${1:-<none>}: got '$got', want '$2 $3'"
	echo "smoke: source=${1:-<none>} -> $got"
}
check fragments 0 fragments
check wal 3 wal
check all 3 all
check "" 0 fragments
code=$(curl -s -o "$tmp" -w '%{http_code}' "$M/experiments/$store/records?source=bogus")
[ "$code" = 400 ] || fail "unknown source: HTTP $code"
grep -q '"code":"INVALID_REQUEST"' "$tmp" || fail "unknown source: no error envelope: $(cat "$tmp")"
echo "smoke: source=bogus -> 400"

task=$(curl -fsS -XPOST "$M/experiments/$store/merge" | json 'd["task"]["id"]')
for _ in $(seq 1 300); do
	state_now=$(curl -fsS "$M/tasks/$task" | json 'd["state"]')
	case "$state_now" in done) break ;; failed) fail "merge task failed: $(curl -s "$M/tasks/$task")" ;; esac
	sleep 0.2
done
[ "$state_now" = "done" ] || fail "merge task still $state_now"
echo "smoke: merge task $task done"
check fragments 3 fragments
check wal 0 wal
check all 3 all

if [ "${LC_SMOKE_LANCEDB:-on}" = off ]; then
	echo "smoke: LanceDB step SKIPPED (LC_SMOKE_LANCEDB=off)"
else
	[ -d "$root/test/interop/node_modules" ] || fail "LanceDB step: run npm ci in test/interop first (or LC_SMOKE_LANCEDB=off)"
	n=$(cd "$root/test/interop" && node count.mjs "$LC_DATA_DIR" "$store.rollout" | json 'd["count"]')
	[ "$n" = 3 ] || fail "LanceDB counts $n rows in the base table, want 3"
	echo "smoke: LanceDB opens the base table on S3 and counts $n"
fi
echo "smoke: OK"
