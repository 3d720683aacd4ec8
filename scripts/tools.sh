#!/usr/bin/env bash
# Builds the real servers the tests run against into ./bin/ from the pinned
# tools modules: versitygw (S3), etcd and etcdctl from tools/go.mod, and
# fake-gcs-server (GCS emulator) from tools/fakegcs/go.mod.
#
# Usage (from anywhere): scripts/tools.sh [versitygw|etcd|etcdctl|fake-gcs-server ...]
# With no arguments it builds all four. A binary that already exists and is
# newer than its module's go.sum is kept; set LC_TOOLS_REBUILD=1 to force a
# rebuild.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/bin"
mkdir -p "$bin"

# name -> package in the tools module
declare -A pkg=(
	[versitygw]=github.com/versity/versitygw/cmd/versitygw
	[etcd]=go.etcd.io/etcd/server/v3
	[etcdctl]=go.etcd.io/etcd/etcdctl/v3
	[fake-gcs-server]=github.com/fsouza/fake-gcs-server
)
# name -> module directory under tools/, when not tools/ itself
declare -A moddir=(
	[fake-gcs-server]=fakegcs
)

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	targets=(versitygw etcd etcdctl fake-gcs-server)
fi

for name in "${targets[@]}"; do
	p="${pkg[$name]:-}"
	if [ -z "$p" ]; then
		echo "tools.sh: unknown tool $name (want versitygw, etcd, etcdctl or fake-gcs-server)" >&2
		exit 2
	fi
	out="$bin/$name"
	mod="$root/tools/${moddir[$name]:-}"
	if [ -z "${LC_TOOLS_REBUILD:-}" ] && [ -x "$out" ] && [ "$out" -nt "$mod/go.sum" ]; then
		echo "tools.sh: $name is up to date"
		continue
	fi
	echo "tools.sh: building $name ($p)"
	(cd "$mod" && go build -trimpath -o "$out.tmp" "$p")
	mv -f "$out.tmp" "$out"
done
