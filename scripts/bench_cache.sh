#!/usr/bin/env bash
# Warm-cache read throughput: shards read through the mount with the page
# cache dropped (every byte from the NVMe ring) against dd of the ring file
# itself with O_DIRECT, the same byte count. Also shows that RAM does not
# hold the bytes twice: the daemon's RSS, and how much of the ring file sits
# in the page cache after the read.
#   BENCH_SHARDS=32 BENCH_SAMPLES=32 BENCH_SAMPLE_SIZE=1M BENCH_ROUNDS=5 bash scripts/bench_cache.sh
# Each round mounts, reads everything, unmounts, then runs dd; the figures
# printed at the end are the medians.
# Needs root (drop_caches). Everything it starts is stopped on exit.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

SHARDS=${BENCH_SHARDS:-32}
SAMPLES=${BENCH_SAMPLES:-32}
SAMPLE_SIZE=${BENCH_SAMPLE_SIZE:-1M}
CACHE_SIZE=${BENCH_CACHE_SIZE:-4GiB}
READERS=${BENCH_READERS:-4}
ROUNDS=${BENCH_ROUNDS:-5}
# Extra mount flags, e.g. BENCH_MOUNT_FLAGS="--memory-cache-size 0 --prefetch-memory 256MiB".
read -r -a MOUNT_FLAGS <<<"${BENCH_MOUNT_FLAGS:-}"
BUCKET=bench-cache
PREFIX=train

BENCH=$WORK_DIR/bench-cache
BIN=$SHARDFS_ROOT/bin/shardfs
MNT=$BENCH/mnt
CACHE_DIR=$BENCH/cache
export SHARDFS_MINIO_STATE=$BENCH/minio.env

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	bash scripts/minio.sh stop 2>/dev/null || true
	rm -rf "$BENCH/shards" "$CACHE_DIR"
	[ $rc -eq 0 ] || log "bench_cache FAILED (exit $rc); mount log: $BENCH/shardfs.log"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache"


# now_ns prints a monotonic-enough wall clock in nanoseconds.
now_ns() { date +%s%N; }

# mbps BYTES NANOSECONDS prints MB/s (10^6 bytes per second).
mbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.1f", b / (ns / 1e9) / 1e6 }'; }

# stat_value NAME prints one series of the mount's stats JSON.
stat_value() {
	"$SYS_PYTHON" -c 'import json, sys
print(int(sum(s["value"] for s in json.load(open(sys.argv[1])) if s["name"] == sys.argv[2])))' "$MNT/.shardfs/stats" "$1"
}

kib_of() { awk -v k="$2" '$1 == k":" { print $2 }' "$1"; }

mkdir -p "$BENCH"
go build -o "$BIN" ./cmd/shardfs
eval "$(bash scripts/minio.sh start)"

rm -rf "$BENCH/shards" "$CACHE_DIR"
gen_bench_shards "$BENCH/shards" "$SHARDS" "$SAMPLES" "$SAMPLE_SIZE" >/dev/null
bash scripts/upload.sh "$BENCH/shards" "s3://$BUCKET/$PREFIX" 2>/dev/null
total=$(du -sb --apparent-size "$BENCH/shards" | cut -f1)
echo "data: $SHARDS shards, $total bytes"

cache_flags=(--cache-dir "$CACHE_DIR" --cache-size "$CACHE_SIZE")
"$BIN" warm "s3://$BUCKET/$PREFIX" "${cache_flags[@]}" | tail -n 1

mkdir -p "$MNT"
# The same byte count straight off the ring file, in the same 8 MiB units,
# with $READERS readers over disjoint ranges as the mount has.
blocks=$(((total + (8 << 20) - 1) / (8 << 20)))
per=$(((blocks + READERS - 1) / READERS))
dd_bytes=$((per * READERS * (8 << 20)))
mount_rates=() dd_rates=()
for round in $(seq 1 "$ROUNDS"); do
	"$BIN" mount "s3://$BUCKET/$PREFIX" "$MNT" "${cache_flags[@]}" "${MOUNT_FLAGS[@]}" --log-file "$BENCH/shardfs.log"
	is_mounted "$MNT" || die "shardfs mount returned but $MNT is not mounted"
	pid=$(stat_value shardfs_daemon_pid)
	drop_caches
	cached_before=$(kib_of /proc/meminfo Cached)
	start=$(now_ns)
	find "$MNT" -type f -print0 | xargs -0 -P "$READERS" -n 4 cat >/dev/null
	mount_ns=$(($(now_ns) - start))
	cached_after=$(kib_of /proc/meminfo Cached)
	gets=$(stat_value shardfs_store_gets_total)
	ring_bytes=$(stat_value shardfs_cache_ring_served_bytes_total)
	rss_kib=$(kib_of "/proc/$pid/status" VmRSS)
	hwm_kib=$(kib_of "/proc/$pid/status" VmHWM)
	ring_resident=$(fincore --bytes --noheadings --output RES "$CACHE_DIR/ring.dat" | tr -d ' ')
	"$BIN" unmount "$MNT"

	drop_caches
	start=$(now_ns)
	for r in $(seq 0 $((READERS - 1))); do
		dd if="$CACHE_DIR/ring.dat" of=/dev/null iflag=direct bs=8M skip=$((r * per)) count=$per status=none &
	done
	wait
	dd_ns=$(($(now_ns) - start))

	mount_rates+=("$(mbps "$total" "$mount_ns")")
	dd_rates+=("$(mbps "$dd_bytes" "$dd_ns")")
	echo "round $round: mount $total bytes in $((mount_ns / 1000000)) ms = ${mount_rates[-1]} MB/s (store GETs $gets, ring served $ring_bytes bytes);" \
		"dd $dd_bytes bytes in $((dd_ns / 1000000)) ms = ${dd_rates[-1]} MB/s;" \
		"daemon RSS $((rss_kib / 1024)) MiB (peak $((hwm_kib / 1024)) MiB); ring.dat in page cache $ring_resident bytes;" \
		"page cache +$(((cached_after - cached_before) / 1024)) MiB"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mount_mbps=$(median "${mount_rates[@]}")
dd_mbps=$(median "${dd_rates[@]}")
echo
echo "mount flags: ${cache_flags[*]} ${MOUNT_FLAGS[*]}; $READERS readers; median of $ROUNDS rounds"
echo "read through the mount, page cache dropped, warm ring: $mount_mbps MB/s"
echo "dd if=ring.dat iflag=direct bs=8M, same byte count:    $dd_mbps MB/s"
awk -v a="$mount_mbps" -v b="$dd_mbps" 'BEGIN { printf "ratio mount / dd: %.2f\n", a / b }'
echo "daemon RSS after the last read: $((rss_kib / 1024)) MiB for $((total >> 20)) MiB read; ring.dat in page cache: $ring_resident bytes"
