#!/usr/bin/env bash
# Starts the distributed stack as plain processes: a real etcd, versitygw as
# the S3 store, one master and two workers (instance ids w1, w2) sharing one
# s3:// data dir, maintenance sweeps off. State (pids, logs, ports, env) goes
# to $LC_HARNESS_DIR (default .harness/). Stop it with native-down.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
state="${LC_HARNESS_DIR:-$root/.harness}"
mkdir -p "$state"
state="$(cd "$state" && pwd)"

if [ ! -x bin/etcd ] || [ ! -x bin/versitygw ]; then scripts/tools.sh; fi
go build -o bin/lance-context ./cmd/lance-context

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # url, name
	for _ in $(seq 1 100); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "native-up: $2 did not answer at $1; see $state/$2.log" >&2
	exit 1
}

etcd_port=$(free_port); etcd_peer=$(free_port)
bin/etcd --name harness --data-dir "$state/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
	--initial-cluster "harness=http://127.0.0.1:$etcd_peer" --log-level error >"$state/etcd.log" 2>&1 &
echo $! >"$state/etcd.pid"
wait_http "http://127.0.0.1:$etcd_port/health" etcd

LC_S3_PORT="${LC_S3_PORT:-$(free_port)}" scripts/versitygw.sh start "$state/s3" >/dev/null
eval "$(scripts/versitygw.sh env "$state/s3")"
data_dir="$LC_TEST_S3_URL"

common=(env ETCD_ENDPOINTS="http://127.0.0.1:$etcd_port" DATA_DIR="$data_dir" LC_MAINTENANCE=off
	ROLLOUT_FLUSH_INTERVAL_SECS=3600 ROLLOUT_MERGE_AFTER_GENERATIONS=0 ROLLOUT_CLEANUP_INTERVAL_SECS=0 LC_STATS_REFRESH_SECS=2)

master_port=$(free_port)
"${common[@]}" bin/lance-context master --listen "127.0.0.1:$master_port" >"$state/master.log" 2>&1 &
echo $! >"$state/master.pid"
wait_http "http://127.0.0.1:$master_port/api/v1/health" master

for w in w1 w2; do
	port=$(free_port)
	"${common[@]}" INSTANCE_ID=$w bin/lance-context worker --listen "127.0.0.1:$port" >"$state/$w.log" 2>&1 &
	echo $! >"$state/$w.pid"
	echo "$port" >"$state/$w.port"
	wait_http "http://127.0.0.1:$port/api/v1/health" "$w"
done

cat >"$state/env" <<ENV
export LC_MASTER_URL=http://127.0.0.1:$master_port
export LC_W1_URL=http://127.0.0.1:$(cat "$state/w1.port")
export LC_W2_URL=http://127.0.0.1:$(cat "$state/w2.port")
export LC_DATA_DIR=$data_dir
export ETCD_ENDPOINTS=http://127.0.0.1:$etcd_port
$(scripts/versitygw.sh env "$state/s3" | grep -v LC_TEST_S3_URL)
ENV
cat "$state/env"
