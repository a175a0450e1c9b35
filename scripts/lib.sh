# shellcheck shell=bash
# Shared settings for the scripts in this directory. Sourced, never run.

SHARDFS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR=$SHARDFS_ROOT/.tools
TOOLS_BIN=$TOOLS_DIR/bin
WORK_DIR=$SHARDFS_ROOT/.work

# Pinned versions of the Go-built test tools.
MINIO_PKG=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
TOXIPROXY_PKG=github.com/Shopify/toxiproxy/v2/cmd/server
TOXIPROXY_VERSION=v2.12.0
CSI_SANITY_PKG=github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity
CSI_SANITY_VERSION=v5.6.0

# Debian's interpreter: it is the one python3-torch and python3-numpy install into.
SYS_PYTHON=/usr/bin/python3
# The virtual environment scripts/test.sh installs the shardfs Python package
# into (made with --system-site-packages, so Debian's torch and numpy are seen).
VENV_DIR=$WORK_DIR/venv

# Fixed credentials of the throwaway test MinIO. Never used anywhere else.
TEST_ACCESS_KEY=shardfs-test
TEST_SECRET_KEY=shardfs-test-secret
TEST_REGION=us-east-1

log() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# as_root runs a command as root, through sudo only when needed.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	else
		sudo "$@"
	fi
}

# drop_caches writes dirty pages out and drops the page cache, so that the
# next read of a file comes from where it lives, not from memory.
drop_caches() { sync && as_root sh -c 'echo 3 > /proc/sys/vm/drop_caches'; }

# need_free_space DIR BYTES WHAT: stops with one line unless the file
# system holding DIR has BYTES free. A benchmark that runs out of disk does
# not fail: it measures the full disk (s3fs's temporary files, a ring's
# writes) and reports it as the system's speed.
need_free_space() {
	local free
	free=$(df --output=avail -B1 "$1" | tail -1)
	[ "$free" -ge "$2" ] || die "$3 needs $(($2 >> 20)) MiB free in $1; $(df -h --output=avail "$1" | tail -1 | tr -d ' ') is left"
}

# size_bytes SIZE: SIZE (4k, 96K, 48MiB, 2GiB, or bytes) in bytes, as the
# shard generator reads it.
size_bytes() {
	"$SYS_PYTHON" -c "import sys; sys.path.insert(0, '$SHARDFS_ROOT/scripts'); import gen_shards; print(gen_shards.parse_size('$1'))"
}

# need_room_for_data DIR BYTES COPIES WHAT: stops with one line unless DIR
# has room for COPIES copies of a data set of BYTES (the generated files,
# a cache of them) and ${TMPDIR:-/tmp} room for MinIO's copy, each with
# 1 GiB to spare.
need_room_for_data() {
	mkdir -p "$1"
	need_free_space "$1" $(($3 * $2 + (1 << 30))) "$4"
	need_free_space "${TMPDIR:-/tmp}" $(($2 + (1 << 30))) "MinIO's copy of $4"
}

# gen_bench_shards DIR SHARDS SAMPLES SAMPLE_SIZE: generates SHARDS tar
# shards of SAMPLES samples of SAMPLE_SIZE into DIR (the generator's
# warnings dropped), once need_room_for_data has found room for them.
gen_bench_shards() {
	need_room_for_data "$(dirname "$1")" $(($2 * $3 * $(size_bytes "$4"))) 3 "a data set of $2 x $3 x $4"
	"$SYS_PYTHON" "$SHARDFS_ROOT/scripts/gen_shards.py" "$@" 2>/dev/null
}

# bench_record LINE: appends LINE to $RESULTS and shows it on stderr.
bench_record() { printf '%s\n' "$*" | tee -a "$RESULTS" >&2; }

# bench_row LABEL RESULT_LINE DAEMON_CPU RSS_KB [STORE_CPU [FIELDS]]: one ROW line of
# a `shardfs bench` RESULT line's bytes, MB/s and reader CPU, the daemon's CPU
# seconds and peak RSS and, when given, the store's CPU seconds and FIELDS
# (KEY=VALUE ...), as they are.
bench_row() {
	local label=$1 line=$2 daemon=$3 rss=$4 store=${5:+ store_cpu_s=$5} extra=${6:+ $6}
	local bytes mbps reader
	bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$line")
	mbps=$(sed -n 's/.* mbps=\([0-9.]*\).*/\1/p' <<<"$line")
	reader=$(sed -n 's/.* reader_cpu_s=\([0-9.]*\).*/\1/p' <<<"$line")
	bench_record "ROW name=$label bytes=$bytes mbps=$mbps daemon_cpu_s=$daemon$store reader_cpu_s=$reader vmhwm_kb=$rss$extra"
}

# mount_stat MNT NAME prints one series of MNT/.shardfs/stats (without the
# shardfs_ prefix), summed over its labels; 0 when the mount has none.
mount_stat() {
	"$SYS_PYTHON" -c 'import json, sys
print(int(sum(s["value"] for s in json.load(open(sys.argv[1])) if s["name"] == "shardfs_" + sys.argv[2])))' "$1/.shardfs/stats" "$2"
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	"$SYS_PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# rclone_s3 runs rclone against the MinIO described by AWS_* and
# SHARDFS_ENDPOINT_URL, through an on-the-fly ":s3:" remote (no rclone.conf).
rclone_s3() {
	: "${SHARDFS_ENDPOINT_URL:?SHARDFS_ENDPOINT_URL is not set (run: eval \"\$(scripts/minio.sh env)\")}"
	# AWS_CA_BUNDLE is dropped: rclone's S3 client rejects it, and the
	# endpoint here is plain http on 127.0.0.1.
	env -u AWS_CA_BUNDLE \
		RCLONE_CONFIG=/dev/null \
		RCLONE_S3_PROVIDER=Minio \
		RCLONE_S3_ENDPOINT=$SHARDFS_ENDPOINT_URL \
		RCLONE_S3_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:?} \
		RCLONE_S3_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:?} \
		RCLONE_S3_REGION=${AWS_REGION:-$TEST_REGION} \
		rclone "$@"
}

# wait_for_shards DIR PID NAME LOG: waits until the daemon PID has DIR
# mounted and shard-000000.tar shows; dies naming LOG if PID exits, or
# after 60 s.
wait_for_shards() {
	local deadline=$((SECONDS + 60))
	until mountpoint -q "$1" && [ -e "$1/shard-000000.tar" ]; do
		kill -0 "$2" 2>/dev/null || die "$3 exited during mount (see $4)"
		[ $SECONDS -lt $deadline ] || die "$3 not mounted after 60s"
		sleep 0.1
	done
}

# start_toxiproxy UPSTREAM_URL LOG LATENCY_MS RATE_KBPS: Toxiproxy between
# clients and UPSTREAM_URL, adding LATENCY_MS to every response and capping
# each connection at RATE_KBPS (KB/s). Sets TOXI_PID and TOXI_URL, the
# endpoint the clients use.
start_toxiproxy() {
	local api proxy
	api=$(free_port) proxy=$(free_port)
	"$TOOLS_BIN/toxiproxy-server" -host 127.0.0.1 -port "$api" >"$2" 2>&1 &
	TOXI_PID=$!
	for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$api/version" >/dev/null 2>&1 && break; sleep 0.1; done
	local post=(curl -fsS -X POST -H 'Content-Type: application/json' -o /dev/null)
	"${post[@]}" "http://127.0.0.1:$api/proxies" -d "{\"name\":\"s3\",\"listen\":\"127.0.0.1:$proxy\",\"upstream\":\"${1#http://}\"}"
	"${post[@]}" "http://127.0.0.1:$api/proxies/s3/toxics" -d "{\"name\":\"latency\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$3}}"
	"${post[@]}" "http://127.0.0.1:$api/proxies/s3/toxics" -d "{\"name\":\"bandwidth\",\"type\":\"bandwidth\",\"stream\":\"downstream\",\"attributes\":{\"rate\":$4}}"
	TOXI_URL=http://127.0.0.1:$proxy
}

# mount_peer s3fs|rclone BUCKET[/PREFIX] DIR ENDPOINT PASSWD_FILE LOG: one of
# the peers the benchmarks compare with, in the foreground as a background
# child (streaming, nothing cached on disk); sets DAEMON_PID.
mount_peer() {
	local system=$1 path=$2 dir=$3 endpoint=$4 passwd=$5 logfile=$6
	case $system in
	s3fs)
		local bucket=${path%%/*} prefix=
		[ "$bucket" = "$path" ] || prefix=:/${path#*/}
		env -u AWS_CA_BUNDLE s3fs "$bucket$prefix" "$dir" -f \
			-o ro,url="$endpoint",use_path_request_style,passwd_file="$passwd" >>"$logfile" 2>&1 &
		;;
	rclone)
		env -u AWS_CA_BUNDLE RCLONE_CONFIG=/dev/null rclone mount ":s3:$path" "$dir" \
			--s3-provider Minio --s3-endpoint "$endpoint" --s3-region "$AWS_REGION" \
			--s3-access-key-id "$AWS_ACCESS_KEY_ID" --s3-secret-access-key "$AWS_SECRET_ACCESS_KEY" \
			--read-only --vfs-cache-mode off >>"$logfile" 2>&1 &
		;;
	*) die "mount_peer: unknown peer $system" ;;
	esac
	DAEMON_PID=$!
}

# stop_daemon DIR: unmounts DIR and waits for DAEMON_PID, the daemon serving
# it, to exit (killed after 30 s).
stop_daemon() {
	fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1"
	local deadline=$((SECONDS + 30))
	while kill -0 "$DAEMON_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
	kill -0 "$DAEMON_PID" 2>/dev/null && kill "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
}

# is_mounted DIR: whether DIR is a mount point in this namespace.
is_mounted() { grep -qF " $1 " /proc/self/mountinfo; }

# unmount_quietly BIN DIR: unmount a shardfs mount if it is there, lazily
# when a reader still holds it; for cleanup traps.
unmount_quietly() {
	is_mounted "$2" || return 0
	"$1" unmount "$2" 2>/dev/null || fusermount3 -u -z "$2" 2>/dev/null || true
}

# install_python_package makes $VENV_DIR (once) and installs python/ into it,
# offline: setuptools comes from Debian, nothing from a package index.
install_python_package() {
	[ -x "$VENV_DIR/bin/python" ] || "$SYS_PYTHON" -m venv --system-site-packages "$VENV_DIR"
	"$VENV_DIR/bin/pip" install --quiet --no-build-isolation --no-index --force-reinstall "$SHARDFS_ROOT/python"
}

# shardfs_python_env PY: scripts that import the shardfs package run PY with
# its installed copy, or with python/ of this checkout on PYTHONPATH when PY
# has none.
shardfs_python_env() {
	if ! "$1" -c 'import shardfs' 2>/dev/null; then
		export PYTHONPATH=$SHARDFS_ROOT/python${PYTHONPATH:+:$PYTHONPATH}
	fi
}

# cpu_seconds PID: user+system CPU seconds the process has used so far.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz}' "/proc/$1/stat"; }

# bench_dataset SHARDS SIZE: the directory of SHARDS tar shards of SIZE
# (samples of 1020 KiB) under $WORK_DIR, generated on first use. Stops
# with one line unless there is room for the data set, MinIO's copy of it
# and a cache of it.
bench_dataset() {
	local dir=$WORK_DIR/bench-data-$1-$2 samples bytes copies=3
	bytes=$(size_bytes "$2")
	[ ! -f "$dir/.done" ] || copies=2
	need_room_for_data "$WORK_DIR" $(($1 * bytes)) "$copies" "a data set of $1 x $2 shards"
	if [ ! -f "$dir/.done" ]; then
		samples=$((bytes >> 20))
		log "generating $1 x $2 shards in $dir"
		rm -rf "$dir"
		"$SYS_PYTHON" "$SHARDFS_ROOT/scripts/gen_shards.py" "$dir" "$1" "$samples" 1020K >&2
		touch "$dir/.done"
	fi
	printf '%s\n' "$dir"
}

# bench_setup NAME: the frame of a benchmark that mounts shardfs over a
# MinIO: OUT (default $WORK_DIR/NAME) holding RESULTS (emptied), MNT and
# CACHE; SHARDFS, built into bin/ unless SHARDFS_BIN names a binary; a MinIO
# state file of its own; and a trap that, on exit, unmounts MNT, ends
# DAEMON_PID and stops MinIO.
bench_setup() {
	OUT=${OUT:-$WORK_DIR/$1}
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
	RESULTS=$OUT/results.txt
	: >"$RESULTS"
	MNT=$OUT/mnt CACHE=$OUT/cache
	mkdir -p "$MNT"
	SHARDFS=${SHARDFS_BIN:-$SHARDFS_ROOT/bin/shardfs}
	[ -n "${SHARDFS_BIN:-}" ] || (cd "$SHARDFS_ROOT" && go build -o bin/shardfs ./cmd/shardfs)
	DAEMON_PID=
	export SHARDFS_MINIO_STATE=$WORK_DIR/$1-minio.env
	trap bench_cleanup EXIT
}

bench_cleanup() {
	set +e
	mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
	[ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null
	"$SHARDFS_ROOT/scripts/minio.sh" stop 2>/dev/null
}
