#!/usr/bin/env bash
# Warm sequential reads through FUSE passthrough against the cached shard
# files themselves: one MinIO on loopback fills the cache once (shardfs warm,
# which keeps every shard as a whole file), then interleaved rounds, each
# with the page cache dropped, read every shard with the same readers:
#
#   shardfs-passthrough  through the mount (--passthrough auto): the kernel
#                        reads the whole-shard files, the daemon nothing
#   local-files          CACHE_DIR/shards itself, no FUSE
#   shardfs-ring         through the mount with --passthrough off: the
#                        daemon serves the same shards from the ring
#
#   scripts/bench_passthrough.sh [--rounds N] [--shards N] [--shard-size SIZE] [--readers N] [--out DIR]
#
# Each row records MB/s, CPU-seconds per GB of the daemon and of the
# readers (the bench process), and the daemon's peak RSS. Needs root
# (drops the page cache, mounts, registers backing files).
# Results: RESULT/ROW lines in OUT/results.txt and the table in OUT/table.md
# (OUT defaults to .work/bench-passthrough). SHARDFS_BIN picks the binary.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3 SHARDS=40 SHARD_SIZE=48MiB OUT= READERS=4
BUCKET=benchpt
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--shards) SHARDS=$2; shift ;;
	--shard-size) SHARD_SIZE=$2; shift ;;
	--readers) READERS=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache, mounts and registers backing files"
bench_setup bench-passthrough

DATA=$(bench_dataset "$SHARDS" "$SHARD_SIZE")
eval "$("$SHARDFS_ROOT/scripts/minio.sh" start)"
"$SHARDFS_ROOT/scripts/upload.sh" "$DATA" "s3://$BUCKET" 2>&1 | tail -1 >&2

# The cache holds the data set twice (ring and whole files), with room: a
# shard is made whole from the ring, which must still hold all of it.
data_bytes=$(du -sb --exclude=.done "$DATA" | cut -f1)
CACHE_FLAGS=(--cache-dir "$CACHE" --cache-size "$(( data_bytes * 3 ))")
rm -rf "$CACHE"
"$SHARDFS" warm "s3://$BUCKET" "${CACHE_FLAGS[@]}" --include 'shard-*' 2>&1 | tail -1 | tee -a "$RESULTS" >&2


run_local() {
	drop_caches
	local line
	line=$("$SHARDFS" bench files "$CACHE/shards" --name local-files --workload seq --readers "$READERS" --include '[0-9a-f]*' | tee -a "$RESULTS")
	bench_row local-files "$line" 0 0
}

# run_mount LABEL FLAGS...: a fresh mount of the warmed cache, read whole.
run_mount() {
	local label=$1
	shift
	"$SHARDFS" mount "s3://$BUCKET" "$MNT" --foreground "${CACHE_FLAGS[@]}" "$@" >>"$OUT/shardfs.log" 2>&1 &
	DAEMON_PID=$!
	wait_for_shards "$MNT" "$DAEMON_PID" shardfs "$OUT/shardfs.log"
	drop_caches
	local d0 line daemon rss passed
	d0=$(cpu_seconds "$DAEMON_PID")
	line=$("$SHARDFS" bench files "$MNT" --name "$label" --workload seq --readers "$READERS" --include 'shard-*' | tee -a "$RESULTS")
	daemon=$(awk -v a="$d0" -v b="$(cpu_seconds "$DAEMON_PID")" 'BEGIN{printf "%.3f", b-a}')
	rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$DAEMON_PID/status")
	passed=$("$SYS_PYTHON" -c 'import json,sys; print(sum(s["value"] for s in json.load(open(sys.argv[1])) if s["name"] == "shardfs_passthrough_opens_total"))' "$MNT/.shardfs/stats")
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	bench_record "OPENS name=$label passthrough_opens=$passed"
	bench_row "$label" "$line" "$daemon" "$rss"
}

load_before=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)
for round in $(seq "$ROUNDS"); do
	log "== round $round of $ROUNDS"
	run_mount shardfs-passthrough --passthrough auto
	run_local
	run_mount shardfs-ring --passthrough off
done
bench_record "INFO rounds=$ROUNDS shards=$SHARDS shard_size=$SHARD_SIZE readers=$READERS load_before=$load_before load_after=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)"
{
	printf '%s interleaved rounds, %s x %s shards, %s readers of 1 MiB read()s, page cache dropped before each; load average before/after %s / %s\n\n' \
		"$ROUNDS" "$SHARDS" "$SHARD_SIZE" "$READERS" "$load_before" "$(cut -d" " -f1-3 /proc/loadavg | tr " " /)"
	"$SYS_PYTHON" "$SHARDFS_ROOT/scripts/bench_rows.py" "$RESULTS" "MB/s median (range)=mbps:value" "daemon CPU-s/GB=daemon_cpu_s:per_gb" \
		"reader CPU-s/GB=reader_cpu_s:per_gb" "peak daemon RSS MiB=vmhwm_kb:mib" --ratio shardfs-passthrough/local-files
} | tee "$OUT/table.md"
