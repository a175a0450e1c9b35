#!/usr/bin/env bash
# read_into a host buffer from a shard the cache holds whole: the
# whole-shard file (WHOLE_FILE, O_DIRECT preads by the client), the leased
# ring extents (LEASE, O_DIRECT preads by the client) and the batch path
# (SUBMIT/WAIT, the daemon reads the ring), interleaved rounds in one run,
# with MB/s and CPU-seconds per GB of the client and of the daemon.
#
#   flock /tmp/shardfs-bench.lock bash scripts/bench_whole.sh [--size 512MiB] [--rounds 5] [--readers 4,1] [--out DIR]
#
# A local source (no MinIO): one file of random bytes, warmed into a cache
# dir (ring and whole-shard file), then mounted with no RAM tier so that
# every path reads the disk; --readers gives the whole-file rows (preads in
# flight each; R@SIZE: preads of at most SIZE, 16 MiB by default). Needs root (mounts). SHARDFS_BIN picks the
# binary; OUT (default .work/bench-whole) holds results.txt and is removed
# but for it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

SIZE=512MiB ROUNDS=5 READERS=4,1 OUT=
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--readers) READERS=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark mounts"
OUT=${OUT:-$WORK_DIR/bench-whole}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$OUT/src MNT=$OUT/mnt CACHE=$OUT/cache
BIN=${SHARDFS_BIN:-}
if [ -z "$BIN" ]; then
	BIN=$SHARDFS_ROOT/bin/shardfs
	go build -o "$BIN" ./cmd/shardfs
fi
shardfs_python_env "$SYS_PYTHON"

DAEMON_PID=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	rm -rf "$SRC" "$MNT" "$CACHE"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$SRC" "$MNT" "$CACHE"
mkdir -p "$SRC" "$MNT"
bytes=$("$SYS_PYTHON" -c 'import sys; s=sys.argv[1]; u={"KiB":1<<10,"MiB":1<<20,"GiB":1<<30}; print(int(s[:-3])*u[s[-3:]] if s[-3:] in u else int(s))' "$SIZE")
head -c "$bytes" /dev/urandom >"$SRC/shard.tar"
CACHE_FLAGS=(--cache-dir "$CACHE" --cache-size "$((bytes * 4 / 1048576 + 64))MiB")
"$BIN" warm "$SRC" "${CACHE_FLAGS[@]}" | tee "$OUT/warm.txt"
grep -q "1 held as whole files" "$OUT/warm.txt" || die "warm did not make the shard whole"
"$BIN" mount --foreground "${CACHE_FLAGS[@]}" --memory-cache-size 0 --log-file "$OUT/shardfs.log" "$SRC" "$MNT" &
DAEMON_PID=$!
for _ in $(seq 100); do [ -e "$MNT/.shardfs/ctl" ] && break; sleep 0.1; done
[ -e "$MNT/.shardfs/ctl" ] || die "the mount did not come up (log: $OUT/shardfs.log)"
{
	printf 'tree %s, %s, load average %s\n' "$(git rev-parse --short HEAD)" "$(nproc) cores" "$(cut -d' ' -f1-3 /proc/loadavg)"
	"$SYS_PYTHON" gds/python/whole_bench.py --mount "$MNT" --file shard.tar --source "$SRC/shard.tar" \
		--daemon-pid "$DAEMON_PID" --rounds "$ROUNDS" --readers "$READERS"
	printf 'load average after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/results.txt"
stop_daemon "$MNT"
