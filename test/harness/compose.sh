# Sourced by up.sh and down.sh: sets the array compose to the command that
# runs test/docker-compose.yml ($LC_COMPOSE, "docker compose" or
# "docker-compose", whichever is installed).
# shellcheck shell=bash

compose_cmd() {
	# root: the repository, set by the script that sources this file.
	local file="${root:?}/test/docker-compose.yml"
	if [ -n "${LC_COMPOSE:-}" ]; then
		# shellcheck disable=SC2206 # a command line, split on purpose
		compose=($LC_COMPOSE -f "$file")
	elif docker compose version >/dev/null 2>&1; then
		compose=(docker compose -f "$file")
	elif command -v docker-compose >/dev/null 2>&1; then
		compose=(docker-compose -f "$file")
	else
		echo "no container runtime: neither 'docker compose' nor 'docker-compose' works here." >&2
		echo "Run the same stack as plain processes instead: test/harness/native-up.sh" >&2
		exit 1
	fi
	if ! "${compose[@]}" ps >/dev/null 2>&1; then
		echo "${compose[*]} cannot reach a container daemon (docker info says why)." >&2
		echo "Run the same stack as plain processes instead: test/harness/native-up.sh" >&2
		exit 1
	fi
}
