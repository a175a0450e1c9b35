#!/usr/bin/env bash
# DataLoader samples/s through a shardfs mount against the same loader over a
# local copy of the shards, in two settings:
#   warm:  `shardfs warm` fills a ring cache first; the mount serves from it
#   cold:  empty cache, the store behind Toxiproxy (20 ms latency and 50 MB/s
#          per connection, like a remote S3 region)
# The kernel page cache is dropped before every run (the local copy is read
# from disk too). Each setting runs BENCH_REPEAT times; the median is reported.
#   bash scripts/bench_loader.sh
# Knobs: BENCH_SHARDS (48) BENCH_SAMPLES (64 per shard) BENCH_SAMPLE_SIZE (96K)
#        BENCH_WORKERS (4) BENCH_DATASET (iterable|map) BENCH_REPEAT (3)
#        BENCH_INTERLEAVE (0; 1: the local and warm runs alternate, one of
#        each per round, which goes first alternating between rounds; the
#        ratio is given per round, and the cold setting is skipped)
#        BENCH_DIR (a fresh directory under $TMPDIR, removed at the end)
#        SHARDFS_BIN (the binary to measure; default: built from this tree)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"
shardfs_python_env "$SYS_PYTHON"

SHARDS=${BENCH_SHARDS:-48}
SAMPLES=${BENCH_SAMPLES:-64}
SAMPLE_SIZE=${BENCH_SAMPLE_SIZE:-96K}
WORKERS=${BENCH_WORKERS:-4}
DATASET=${BENCH_DATASET:-iterable}
REPEAT=${BENCH_REPEAT:-3}
LATENCY_MS=20
RATE_KBPS=50000 # Toxiproxy's bandwidth unit is KB/s: 50 MB/s per connection
BUCKET=bench
PREFIX=train

[ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null || die "dropping the page cache needs root or sudo"
BENCH=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/shardfs-bench.XXXXXX")}
mkdir -p "$BENCH"
BIN=${SHARDFS_BIN:-$SHARDFS_ROOT/bin/shardfs}
MNT=$BENCH/mnt
export SHARDFS_MINIO_STATE=$BENCH/minio.env
TOXI_PID=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	[ -z "$TOXI_PID" ] || { kill "$TOXI_PID" 2>/dev/null && wait "$TOXI_PID" 2>/dev/null; } || true
	scripts/minio.sh stop >/dev/null 2>&1 || true
	[ $rc -eq 0 ] || log "benchmark FAILED (exit $rc); logs in $BENCH"
	[ $rc -ne 0 ] || [ -n "${BENCH_DIR:-}" ] || rm -rf "$BENCH"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM


# loader DIR prints the samples/s of one epoch over DIR (and checks the count).
loader() {
	"$SYS_PYTHON" examples/check_epochs.py "$1" --dataset "$DATASET" --workers "$WORKERS" \
		--no-verify --expect-samples $((SHARDS * SAMPLES)) --index "$BENCH/index-$2.json" |
		sed -n 's/^RESULT //p' |
		"$SYS_PYTHON" -c 'import json, sys; print(round(json.load(sys.stdin)["epochs"][0]["samples_per_second"]))'
}

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

mount_s3() { # ENDPOINT CACHE_DIR
	mkdir -p "$MNT"
	"$BIN" mount "s3://$BUCKET/$PREFIX" "$MNT" --endpoint-url "$1" --cache-dir "$2" \
		--log-file "$BENCH/mount.log"
	is_mounted "$MNT" || die "shardfs mount returned but $MNT is not mounted"
}

toxiproxy() { # METHOD PATH [JSON]
	curl -fsS -X "$1" "http://127.0.0.1:$TOXI_API$2" ${3:+-H 'Content-Type: application/json' -d "$3"} >/dev/null
}

log "== build, data set ($SHARDS shards x $SAMPLES samples x $SAMPLE_SIZE), MinIO"
[ -n "${SHARDFS_BIN:-}" ] || go build -o "$BIN" ./cmd/shardfs
gen_bench_shards "$BENCH/local" "$SHARDS" "$SAMPLES" "$SAMPLE_SIZE"
BYTES=$(du -sb "$BENCH/local" | cut -f1)
eval "$(scripts/minio.sh start 2>/dev/null)"
scripts/upload.sh "$BENCH/local" "s3://$BUCKET/$PREFIX" 2>/dev/null
# The map-style index is built once per source, outside the timed epochs.
[ "$DATASET" != map ] || loader "$BENCH/local" local >/dev/null

runs() { # NAME SETUP TEARDOWN DIR [COUNT] -> median samples/s of COUNT (BENCH_REPEAT) runs
	local name=$1 setup=$2 teardown=$3 dir=$4 v all=()
	for i in $(seq "${5:-$REPEAT}"); do
		$setup
		drop_caches
		v=$(loader "$dir" "$name")
		$teardown
		log "$name run $i: $v samples/s"
		all+=("$v")
	done
	median "${all[@]}"
}

WARM_CACHE=$BENCH/cache-warm
warm_up() { mount_s3 "$SHARDFS_ENDPOINT_URL" "$WARM_CACHE"; }
warm_down() {
	"$BIN" stats "$MNT" >"$BENCH/stats-warm.txt"
	"$BIN" unmount "$MNT"
}
warm_cache() {
	"$BIN" warm "s3://$BUCKET/$PREFIX" --endpoint-url "$SHARDFS_ENDPOINT_URL" --cache-dir "$WARM_CACHE" >"$BENCH/warm.log" 2>&1
	[ "$DATASET" != map ] || { warm_up && loader "$MNT" warm >/dev/null && warm_down; }
}

if [ "${BENCH_INTERLEAVE:-0}" = 1 ]; then
	log "== local copy and warm cache (shardfs warm, then mount), interleaved; page cache dropped before each"
	warm_cache
	locals=() warms=()
	for i in $(seq "$REPEAT"); do
		# Odd rounds run the local copy first, even rounds the mount, so that
		# a drift in the box's load over a round weighs on both alike.
		if [ $((i % 2)) = 1 ]; then
			locals+=("$(runs local : : "$BENCH/local" 1)")
			warms+=("$(runs warm warm_up warm_down "$MNT" 1)")
		else
			warms+=("$(runs warm warm_up warm_down "$MNT" 1)")
			locals+=("$(runs local : : "$BENCH/local" 1)")
		fi
		log "round $i: local ${locals[-1]}, warm ${warms[-1]} samples/s, warm/local $("$SYS_PYTHON" -c "print(f'{${warms[-1]} / ${locals[-1]}:.3f}')")"
	done
	LOCAL=$(median "${locals[@]}") WARM=$(median "${warms[@]}")
	printf '\nDataLoader (%s dataset, %d workers, batch_size=None), %d shards, %d samples, %s MB, %d interleaved rounds\n' \
		"$DATASET" "$WORKERS" "$SHARDS" $((SHARDS * SAMPLES)) "$((BYTES / 1000000))" "$REPEAT"
	printf 'local copy samples/s: %s (median %s)\n' "${locals[*]}" "$LOCAL"
	printf 'shardfs warm samples/s: %s (median %s)\n' "${warms[*]}" "$WARM"
	RATIOS=$("$SYS_PYTHON" -c 'import sys; print(" ".join(f"{float(w) / float(l):.3f}" for l, w in zip(sys.argv[1].split(), sys.argv[2].split())))' "${locals[*]}" "${warms[*]}")
	# shellcheck disable=SC2086 # one argument per round
	printf 'warm / local per round: %s (median %s)\n' "$RATIOS" "$(median $RATIOS)"
	printf 'warm / local, ratio of the medians: %s\n' "$("$SYS_PYTHON" -c "print(f'{$WARM / $LOCAL:.3f}')")"
	exit 0
fi

log "== local copy"
LOCAL=$(runs local : : "$BENCH/local")

log "== warm cache (shardfs warm, then mount; page cache dropped)"
warm_cache
WARM=$(runs warm warm_up warm_down "$MNT")

log "== cold cache through Toxiproxy (${LATENCY_MS} ms, $((RATE_KBPS / 1000)) MB/s per connection)"
TOXI_API=$(free_port)
TOXI_PORT=$(free_port)
"$TOOLS_BIN/toxiproxy-server" -host 127.0.0.1 -port "$TOXI_API" >"$BENCH/toxiproxy.log" 2>&1 &
TOXI_PID=$!
until toxiproxy GET /version 2>/dev/null; do
	kill -0 "$TOXI_PID" 2>/dev/null || die "toxiproxy-server exited; see $BENCH/toxiproxy.log"
	sleep 0.1
done
toxiproxy POST /proxies "{\"name\":\"s3\",\"listen\":\"127.0.0.1:$TOXI_PORT\",\"upstream\":\"${SHARDFS_ENDPOINT_URL#http://}\"}"
toxiproxy POST /proxies/s3/toxics "{\"name\":\"latency\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$LATENCY_MS}}"
toxiproxy POST /proxies/s3/toxics "{\"name\":\"bandwidth\",\"type\":\"bandwidth\",\"stream\":\"downstream\",\"attributes\":{\"rate\":$RATE_KBPS}}"
cold_n=0
cold_up() {
	cold_n=$((cold_n + 1))
	mount_s3 "http://127.0.0.1:$TOXI_PORT" "$BENCH/cache-cold-$cold_n"
}
cold_down() {
	"$BIN" stats "$MNT" >"$BENCH/stats-cold.txt"
	"$BIN" unmount "$MNT"
	rm -rf "$BENCH/cache-cold-$cold_n"
}
if [ "$DATASET" = map ]; then # the index scan would warm the cache: build it on a throwaway mount
	cold_up && "$SYS_PYTHON" -c 'import sys, shardfs; shardfs.TarIndexDataset(sys.argv[1], sys.argv[2])' "$MNT" "$BENCH/index-cold.json" && cold_down
fi
COLD=$(runs cold cold_up cold_down "$MNT")

ratio() { "$SYS_PYTHON" -c "print(f'{$1 / $2:.2f}')"; }
mbps() { "$SYS_PYTHON" -c "print(f'{$1 * $BYTES / ($SHARDS * $SAMPLES) / 1e6:.0f}')"; }
printf '\nDataLoader (%s dataset, %d workers, batch_size=None), %d shards, %d samples, %s MB, median of %d\n' \
	"$DATASET" "$WORKERS" "$SHARDS" $((SHARDS * SAMPLES)) "$((BYTES / 1000000))" "$REPEAT"
printf '%-40s %10s %8s %8s\n' setting samples/s MB/s "x local"
printf '%-40s %10s %8s %8s\n' "local copy (page cache dropped)" "$LOCAL" "$(mbps "$LOCAL")" 1.00
printf '%-40s %10s %8s %8s\n' "shardfs, warm ring cache" "$WARM" "$(mbps "$WARM")" "$(ratio "$WARM" "$LOCAL")"
printf '%-40s %10s %8s %8s\n' "shardfs, cold, ${LATENCY_MS} ms + $((RATE_KBPS / 1000)) MB/s/conn" "$COLD" "$(mbps "$COLD")" "$(ratio "$COLD" "$LOCAL")"
