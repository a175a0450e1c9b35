#!/usr/bin/env bash
# CPU per gigabyte of the cold sequential read: the direct ranged-GET client
# (no FUSE) against shardfs with the ring on (--cache-dir) and off, one
# MinIO on loopback, interleaved rounds.
#
#   scripts/bench_cpu.sh [--rounds N] [--shards N] [--shard-size SIZE] [--out DIR] [--profile]
#                        [--compare BIN] [--compare-flags "FLAGS"] [-- MOUNT_FLAGS...]
#
# Every round drops the page cache and mounts afresh with an empty ring.
# Each row records MB/s, CPU-seconds per GB of the daemon, of MinIO and of
# the readers (the bench process), the daemon's peak RSS, and the share of
# the bytes read that the ring held after the pass and that skipped it
# because its disk lagged the store (--cache-lag). --profile
# writes the daemon's CPU and allocation profiles of the last ring-on round
# to OUT/cpu.pprof and OUT/allocs.pprof (go tool pprof). --compare adds a
# ring-on row of another shardfs binary (shardfs-ring-compare) to every
# round, interleaved with the others; --compare-flags gives that row its own
# mount flags (with the same binary when --compare is not given), in place
# of MOUNT_FLAGS. Needs root.
# Results: RESULT/ROW lines in OUT/results.txt and the table in OUT/table.md
# (OUT defaults to .work/bench-cpu). SHARDFS_BIN picks the binary.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3 SHARDS=40 SHARD_SIZE=48MiB OUT= PROFILE=0 READERS=4 COMPARE= COMPARE_FLAGS=
BUCKET=benchcpu
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--shards) SHARDS=$2; shift ;;
	--shard-size) SHARD_SIZE=$2; shift ;;
	--out) OUT=$2; shift ;;
	--profile) PROFILE=1 ;;
	--compare) COMPARE=$2; shift ;;
	--compare-flags) COMPARE_FLAGS=$2; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
EXTRA_FLAGS=("$@")
read -ra CMP_FLAGS <<<"$COMPARE_FLAGS"
[ -n "$COMPARE_FLAGS" ] || CMP_FLAGS=("${EXTRA_FLAGS[@]}")
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache and mounts"
bench_setup bench-cpu

DATA=$(bench_dataset "$SHARDS" "$SHARD_SIZE")
eval "$("$SHARDFS_ROOT/scripts/minio.sh" start)"
# shellcheck disable=SC1090
MINIO_PID=$(source "$SHARDFS_MINIO_STATE" && echo "$MINIO_PID")
"$SHARDFS_ROOT/scripts/upload.sh" "$DATA" "s3://$BUCKET" 2>&1 | tail -1 >&2


run_direct() {
	drop_caches
	local s0 line
	s0=$(cpu_seconds "$MINIO_PID")
	line=$("$SHARDFS" bench direct "s3://$BUCKET" --name direct-c16 --workload seq --concurrency 16 --include 'shard-*' | tee -a "$RESULTS")
	bench_row direct-c16 "$line" 0 0 "$(awk -v a="$s0" -v b="$(cpu_seconds "$MINIO_PID")" 'BEGIN{printf "%.3f", b-a}')"
}

# run_shardfs BIN LABEL PROFILE FLAGS... -- MORE_FLAGS...
run_shardfs() {
	local bin=$1 label=$2 prof=$3
	shift 3
	local flags=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	rm -rf "$CACHE"
	local envs=()
	[ "$prof" = 1 ] && envs=(SHARDFS_CPUPROFILE="$OUT/cpu.pprof" SHARDFS_MEMPROFILE="$OUT/allocs.pprof")
	env "${envs[@]}" "$bin" mount "s3://$BUCKET" "$MNT" --foreground --log-level warn "${flags[@]}" "$@" >>"$OUT/shardfs.log" 2>&1 &
	DAEMON_PID=$!
	wait_for_shards "$MNT" "$DAEMON_PID" shardfs "$OUT/shardfs.log"
	drop_caches
	local d0 s0 line daemon store rss cached
	d0=$(cpu_seconds "$DAEMON_PID") s0=$(cpu_seconds "$MINIO_PID")
	line=$("$SHARDFS" bench files "$MNT" --name "$label" --workload seq --readers "$READERS" --include 'shard-*' | tee -a "$RESULTS")
	daemon=$(awk -v a="$d0" -v b="$(cpu_seconds "$DAEMON_PID")" 'BEGIN{printf "%.3f", b-a}')
	store=$(awk -v a="$s0" -v b="$(cpu_seconds "$MINIO_PID")" 'BEGIN{printf "%.3f", b-a}')
	rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$DAEMON_PID/status")
	cached="ring_bytes=$(mount_stat "$MNT" cache_ring_bytes) skipped_bytes=$(mount_stat "$MNT" prefetch_cache_skipped_bytes_total)"
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	bench_row "$label" "$line" "$daemon" "$rss" "$store" "$cached"
}

load_before=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)
for round in $(seq "$ROUNDS"); do
	log "== round $round of $ROUNDS"
	run_direct
	last=0
	[ "$PROFILE" = 1 ] && [ "$round" = "$ROUNDS" ] && last=1
	run_shardfs "$SHARDFS" shardfs-ring "$last" --cache-dir "$CACHE" --cache-size 4GiB -- "${EXTRA_FLAGS[@]}"
	[ -z "$COMPARE$COMPARE_FLAGS" ] || run_shardfs "${COMPARE:-$SHARDFS}" shardfs-ring-compare 0 --cache-dir "$CACHE" --cache-size 4GiB -- "${CMP_FLAGS[@]}"
	run_shardfs "$SHARDFS" shardfs-noring 0 -- "${EXTRA_FLAGS[@]}"
done
bench_record "INFO rounds=$ROUNDS shards=$SHARDS shard_size=$SHARD_SIZE readers=$READERS load_before=$load_before load_after=$(cut -d" " -f1-3 /proc/loadavg | tr " " /) flags=$(IFS=,; echo "${EXTRA_FLAGS[*]:-none}") compare=${COMPARE:-same}:$(IFS=,; echo "${CMP_FLAGS[*]:-none}")"
{
	printf '%s interleaved rounds, %s x %s shards, %s readers of 1 MiB read()s; load average before/after %s / %s; extra flags: %s; compare row: %s\n\n' \
		"$ROUNDS" "$SHARDS" "$SHARD_SIZE" "$READERS" "$load_before" "$(cut -d" " -f1-3 /proc/loadavg | tr " " /)" \
		"$(IFS=,; echo "${EXTRA_FLAGS[*]:-none}")" "${COMPARE:-same}:$(IFS=,; echo "${CMP_FLAGS[*]:-none}")"
	"$SYS_PYTHON" "$SHARDFS_ROOT/scripts/bench_rows.py" "$RESULTS" "MB/s median (range)=mbps:value" "daemon CPU-s/GB=daemon_cpu_s:per_gb" \
		"store CPU-s/GB=store_cpu_s:per_gb" "reader CPU-s/GB=reader_cpu_s:per_gb" "peak daemon RSS MiB=vmhwm_kb:mib" \
		"share in the ring after=ring_bytes:share" "share not cached (disk lagged)=skipped_bytes:share"
} | tee "$OUT/table.md"
