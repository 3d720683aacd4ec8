# Shared start/stop/env plumbing for the test emulators (versitygw.sh,
# fakegcs.sh, azurite.sh). Source it after defining:
#
#   launch PORT    start the server in the background, logging to $log, and
#                  write its pid to $pidfile (it may relaunch itself)
#   print_env      print the export lines the tests need (uses `port`)
#   ready          wait until the server answers and its bucket exists
#
# then call `emulator_main NAME PORT_VAR DEFAULT_PORT "$@"`. NAME names the
# files in DIR (NAME.pid, NAME.port, NAME.log) and the messages.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

running() {
	[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

port() {
	if [ -f "$portfile" ]; then cat "$portfile"; else echo "$default_port"; fi
}

stop() {
	[ -f "$pidfile" ] || return 0
	local pid
	pid="$(cat "$pidfile")"
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
	fi
	rm -f "$pidfile"
}

start() {
	if running; then
		echo "$name.sh: already running (pid $(cat "$pidfile"), port $(port))"
		return 0
	fi
	echo "$default_port" >"$portfile"
	: >"$log"
	launch "$default_port"
	if ! running; then
		echo "$name.sh: $name exited at startup:" >&2
		cat "$log" >&2
		rm -f "$pidfile"
		return 1
	fi
	if ! (cd "$root" && eval "$(print_env)" && ready); then
		echo "$name.sh: server not ready; log:" >&2
		cat "$log" >&2
		stop
		return 1
	fi
	echo "$name.sh: running on 127.0.0.1:$(port) (pid $(cat "$pidfile"))"
}

emulator_main() { # NAME PORT_VAR DEFAULT_PORT start|stop|env DIR
	name=$1
	default_port="${!2:-$3}"
	shift 3
	if [ $# -ne 2 ]; then
		echo "usage: $name.sh start|stop|env DIR" >&2
		exit 2
	fi
	mkdir -p "$2"
	dir="$(cd "$2" && pwd)"
	pidfile="$dir/$name.pid"
	portfile="$dir/$name.port"
	log="$dir/$name.log"
	case "$1" in
	start) start ;;
	stop) stop ;;
	env) print_env ;;
	*)
		echo "usage: $name.sh start|stop|env DIR" >&2
		exit 2
		;;
	esac
}
