#!/usr/bin/env bash
# Starts and stops a throwaway MinIO on a free 127.0.0.1 port.
#   scripts/minio.sh start   start (or reuse) it, wait until ready, print the client env
#   scripts/minio.sh env     print the client env of the running one
#   scripts/minio.sh stop    stop it and delete its data
# Use it as:  eval "$(scripts/minio.sh start)"
# State lives in $SHARDFS_MINIO_STATE (default .work/minio.env), so several
# instances can run side by side with different state files.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE=${SHARDFS_MINIO_STATE:-$WORK_DIR/minio.env}
MINIO_BIN=$TOOLS_BIN/minio

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() {
	kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

running() {
	[ -f "$STATE" ] || return 1
	# shellcheck disable=SC1090
	(source "$STATE" && alive "$MINIO_PID")
}

print_env() {
	grep -E '^export (AWS_|SHARDFS_ENDPOINT_URL)' "$STATE"
}

start() {
	if running; then
		print_env
		return
	fi
	if [ -f "$STATE" ]; then
		# A stale state file from a MinIO that died: drop its data.
		(
			# shellcheck disable=SC1090
			source "$STATE"
			rm -rf "$MINIO_DATA_DIR"
		)
		rm -f "$STATE"
	fi
	[ -x "$MINIO_BIN" ] || die "$MINIO_BIN is missing; run scripts/install-deps.sh"
	command -v curl >/dev/null || die "curl is missing; run scripts/install-deps.sh"
	mkdir -p "$(dirname "$STATE")"
	local data port console url pid
	data=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-minio.XXXXXX")
	port=$(free_port)
	console=$(free_port)
	url=http://127.0.0.1:$port
	MINIO_ROOT_USER=$TEST_ACCESS_KEY MINIO_ROOT_PASSWORD=$TEST_SECRET_KEY \
		MINIO_BROWSER=off MINIO_UPDATE=off MINIO_PROMETHEUS_AUTH_TYPE=public \
		setsid "$MINIO_BIN" server --quiet \
		--address "127.0.0.1:$port" --console-address "127.0.0.1:$console" \
		--certs-dir "$data/.certs" "$data/drive" \
		</dev/null >"$data/minio.log" 2>&1 &
	pid=$!
	cat >"$STATE" <<-STATE
		export AWS_ACCESS_KEY_ID=$TEST_ACCESS_KEY
		export AWS_SECRET_ACCESS_KEY=$TEST_SECRET_KEY
		export AWS_REGION=$TEST_REGION
		export SHARDFS_ENDPOINT_URL=$url
		MINIO_PID=$pid
		MINIO_DATA_DIR=$data
	STATE
	local deadline=$((SECONDS + 60))
	until curl -fsS -o /dev/null "$url/minio/health/ready" 2>/dev/null; do
		if ! alive "$pid"; then
			cat "$data/minio.log" >&2 || true
			rm -rf "$data" "$STATE"
			die "minio exited during start"
		fi
		[ $SECONDS -lt $deadline ] || { stop; die "minio not ready after 60s"; }
		sleep 0.2
	done
	log "minio ready at $url (pid $pid, data $data)"
	print_env
}

stop() {
	[ -f "$STATE" ] || { log "minio: not running"; return; }
	local MINIO_PID MINIO_DATA_DIR
	# shellcheck disable=SC1090
	source "$STATE"
	if alive "$MINIO_PID"; then
		kill "$MINIO_PID"
		local deadline=$((SECONDS + 20))
		while alive "$MINIO_PID" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
		if alive "$MINIO_PID"; then kill -9 "$MINIO_PID"; fi
	fi
	rm -rf "$MINIO_DATA_DIR" "$STATE"
	log "minio stopped"
}

case ${1:-} in
start) start ;;
stop) stop ;;
env) running || die "minio is not running (state: $STATE)"; print_env ;;
*) die "usage: $0 start|stop|env" ;;
esac
