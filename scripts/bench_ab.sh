#!/usr/bin/env bash
# Two shardfs binaries against each other on one MinIO and one data set,
# interleaved (A B, then B A, ...): cold sequential reads of the shards,
# random 1 MiB reads and time to first byte, each through a fresh mount with
# the page cache dropped. Per measurement: the RESULT line of `shardfs bench
# files`, the bytes and GETs the daemon sent to the store, its CPU seconds
# (/proc/PID/stat) and the load average. Loopback, or with --remote through
# Toxiproxy (20 ms latency, 50 MB/s per connection, as scripts/bench.sh
# --remote); needs root.
#
#   scripts/bench_ab.sh BIN_A BIN_B [--remote] [--rounds N] [--shards N] [--shard-size SIZE] [--out DIR]
#
# Results in OUT/results.txt (OUT defaults to .work/bench-ab); wrap the run
# in `flock /tmp/shardfs-bench.lock` on a shared box.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -ge 2 ] || die "usage: scripts/bench_ab.sh BIN_A BIN_B [--remote] [--rounds N] [--shards N] [--shard-size SIZE] [--out DIR]"
A=$(realpath "$1") B=$(realpath "$2")
shift 2
ROUNDS=5 SHARDS=10 SHARD_SIZE=48MiB OUT=$WORK_DIR/bench-ab REMOTE=0
LATENCY_MS=20 RATE_KBPS=50000 # toxiproxy's bandwidth rate is in KB/s
while [ $# -gt 0 ]; do
	case $1 in
	--remote) REMOTE=1 ;;
	--rounds) ROUNDS=$2; shift ;;
	--shards) SHARDS=$2; shift ;;
	--shard-size) SHARD_SIZE=$2; shift ;;
	--out) OUT=$2; shift ;;
	*) die "unknown argument $1" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache and mounts"
mkdir -p "$OUT/mnt"
MNT=$OUT/mnt RES=$OUT/results.txt BUCKET=bench-ab
: >"$RES"
DATA=$WORK_DIR/bench-ab-data-$SHARDS-$SHARD_SIZE
if [ ! -f "$DATA/.done" ]; then
	rm -rf "$DATA"
	samples=$(( $(size_bytes "$SHARD_SIZE") >> 20 ))
	"$SYS_PYTHON" "$SHARDFS_ROOT/scripts/gen_shards.py" "$DATA" "$SHARDS" "$samples" 1020K
	touch "$DATA/.done"
fi

export SHARDFS_MINIO_STATE=$OUT/minio.env
PID= TOXI_PID=
cleanup() {
	set +e
	[ -n "$TOXI_PID" ] && kill "$TOXI_PID" 2>/dev/null
	mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
	[ -n "$PID" ] && kill "$PID" 2>/dev/null
	"$SHARDFS_ROOT/scripts/minio.sh" stop
}
trap cleanup EXIT
eval "$("$SHARDFS_ROOT/scripts/minio.sh" start)"
"$SHARDFS_ROOT/scripts/upload.sh" "$DATA" "s3://$BUCKET" 2>&1 | tail -1 >&2
if [ $REMOTE -eq 1 ]; then
	start_toxiproxy "$SHARDFS_ENDPOINT_URL" "$OUT/toxiproxy.log" "$LATENCY_MS" "$RATE_KBPS"
	export SHARDFS_ENDPOINT_URL=$TOXI_URL
	log "toxiproxy at $TOXI_URL: ${LATENCY_MS} ms latency, ${RATE_KBPS} KB/s per connection"
fi

HZ=$(getconf CLK_TCK)
cpu_seconds() { awk -v hz="$HZ" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz}' "/proc/$1/stat"; }
stat_value() {
	"$1" stats "$MNT" --json | "$SYS_PYTHON" -c 'import json, sys; print("%.0f" % sum(s["value"] for s in json.load(sys.stdin) if s["name"] == "shardfs_" + sys.argv[1]))' "$2"
}

measure() { # BIN LABEL WORKLOAD
	"$1" mount "s3://$BUCKET" "$MNT" --foreground --log-level warn >>"$OUT/daemon.log" 2>&1 &
	PID=$!
	until mountpoint -q "$MNT" && [ -e "$MNT/shard-000000.tar" ]; do
		kill -0 "$PID" 2>/dev/null || die "$1 exited during mount (see $OUT/daemon.log)"
		sleep 0.1
	done
	drop_caches
	local result
	result=$("$1" bench files "$MNT" --name "$2" --workload "$3" --include 'shard-*')
	printf '%s store_bytes=%s gets=%s cpu_s=%s load=%s\n' "$result" "$(stat_value "$1" store_bytes_total)" \
		"$(stat_value "$1" store_gets_total)" "$(cpu_seconds "$PID")" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$RES" >&2
	fusermount3 -u "$MNT"
	wait "$PID" 2>/dev/null || true
	PID=
}

for round in $(seq "$ROUNDS"); do
	for wl in seq random ttfb; do
		if [ $((round % 2)) -eq 1 ]; then
			measure "$A" A "$wl"
			measure "$B" B "$wl"
		else
			measure "$B" B "$wl"
			measure "$A" A "$wl"
		fi
	done
done
log "results in $RES"
