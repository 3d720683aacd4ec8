#!/usr/bin/env bash
# Starts the distributed stack as containers (test/docker-compose.yml):
# etcd, versitygw as the S3 store, one master (port 8090) and two workers
# (3001, 3002) sharing one s3:// data dir, maintenance sweeps off. Waits
# until every service answers its health check, then writes the same env
# file as native-up.sh ($LC_HARNESS_DIR/env, default .harness/env), so
# smoke.sh runs against either stack. Stop it with down.sh.
#
#   test/harness/up.sh [--no-build]
#
# --no-build starts the images built before instead of building them.
# LC_COMPOSE overrides the compose command (default: "docker compose",
# else "docker-compose").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
state="${LC_HARNESS_DIR:-$root/.harness}"
mkdir -p "$state"
state="$(cd "$state" && pwd)"

build=(--build)
for arg in "$@"; do
	case "$arg" in
	--no-build) build=() ;;
	-h | --help)
		sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "up: unknown argument $arg (usage: up.sh [--no-build])" >&2
		exit 2
		;;
	esac
done

# shellcheck source=test/harness/compose.sh
source "$root/test/harness/compose.sh"
compose_cmd

"${compose[@]}" up -d "${build[@]}"

wait_http() { # url, service
	for _ in $(seq 1 300); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.2
	done
	echo "up: $2 did not answer at $1; its log:" >&2
	"${compose[@]}" logs --tail 50 "$2" >&2 || true
	exit 1
}
wait_http http://127.0.0.1:8090/api/v1/health master
wait_http http://127.0.0.1:3001/api/v1/health worker1
wait_http http://127.0.0.1:3002/api/v1/health worker2

# The values test/docker-compose.yml gives the services; the S3 endpoint is
# the port it publishes, for clients on this machine (LanceDB in smoke.sh).
cat >"$state/env" <<ENV
export LC_MASTER_URL=http://127.0.0.1:8090
export LC_W1_URL=http://127.0.0.1:3001
export LC_W2_URL=http://127.0.0.1:3002
export LC_DATA_DIR=s3://lc-test/compose
export AWS_ENDPOINT_URL=http://127.0.0.1:7070
export AWS_ACCESS_KEY_ID=lcadmin
export AWS_SECRET_ACCESS_KEY=lcadminsecret
export AWS_REGION=us-east-1
export AWS_S3_FORCE_PATH_STYLE=true
ENV
echo containers >"$state/stack"
cat "$state/env"
