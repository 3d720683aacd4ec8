#!/usr/bin/env bash
# Stops what up.sh started. The services' stores are tmpfs (nothing
# outlives a container); anonymous volumes are removed unless
# --keep-volumes.
#
#   test/harness/down.sh [--keep-volumes]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
state="${LC_HARNESS_DIR:-$root/.harness}"

volumes=(--volumes)
for arg in "$@"; do
	case "$arg" in
	--keep-volumes) volumes=() ;;
	-h | --help)
		sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "down: unknown argument $arg (usage: down.sh [--keep-volumes])" >&2
		exit 2
		;;
	esac
done

# shellcheck source=test/harness/compose.sh
source "$root/test/harness/compose.sh"
compose_cmd

# Workers first, so they seal their memtables on SIGTERM while the store
# and etcd are still up; then the rest.
"${compose[@]}" stop --timeout 20 worker1 worker2
"${compose[@]}" down --timeout 20 "${volumes[@]}"
if [ -f "$state/stack" ] && [ "$(cat "$state/stack")" = containers ]; then
	rm -f "$state/env" "$state/stack"
fi
echo "down: stopped"
