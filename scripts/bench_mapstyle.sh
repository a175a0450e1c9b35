#!/usr/bin/env bash
# A shuffled map-style epoch (examples/check_epochs.py --dataset map: one
# pread per member, RandomSampler, 4 workers) through a shardfs mount, with
# the sample schedule (ScheduledSampler writes the epoch's order to
# /.shardfs/hints) and without (--no-hints), against the iterable epoch
# (--dataset iterable: each shard streamed once) through the mount on the
# same data, and the map-style epoch over a local copy:
#   local-map                 the local copy
#   lo-*, px-*                cold (empty cache dir), MinIO on loopback (lo) or
#                             through Toxiproxy (px: LATENCY_MS per response,
#                             RATE_KBPS per connection)
#   warm-*                    ring warm (`shardfs warm` first), loopback
# each of them -map-sched, -map-plain (no schedule) or -iter. Every mount
# starts with an empty RAM tier; the page cache is dropped before every
# epoch. Rounds are interleaved: each round runs every setting once. Per
# epoch: samples/s, store bytes (shardfs_store_bytes_total), the daemon's
# disk bytes read (/proc/PID/io read_bytes: the ring and whole-shard files;
# the table gives them per byte of the data set, as with passthrough the
# kernel reads whole-shard files itself and the daemon delivers nothing),
# bytes delivered (shardfs_read_bytes_total), and CPU seconds of the daemon, of the loader
# (the Python process and its workers: /usr/bin/time) and of MinIO and
# Toxiproxy (/proc/PID/stat before and after). Every counter of each epoch's
# mount is kept as BENCH_DIR/stats-SETTING-ROUND.json.
#   flock /tmp/shardfs-bench.lock bash scripts/bench_mapstyle.sh
# Knobs: BENCH_SHARDS (16) BENCH_SAMPLES (384 per shard) BENCH_SAMPLE_SIZE (96K)
#        BENCH_WORKERS (4) BENCH_ROUNDS (3) BENCH_DIR BENCH_SETTINGS (all)
#        BENCH_CACHE_SIZE (2GiB) BENCH_PREFETCH_MEMORY (the mount's default)
#        LATENCY_MS (20) RATE_KBPS (50000)
#        BENCH_PROFILE_DIR (unset: none; else a daemon CPU profile per epoch there,
#        SETTING-ROUND.pprof)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"
shardfs_python_env "$SYS_PYTHON"

SHARDS=${BENCH_SHARDS:-16}
SAMPLES=${BENCH_SAMPLES:-384}
SAMPLE_SIZE=${BENCH_SAMPLE_SIZE:-96K}
WORKERS=${BENCH_WORKERS:-4}
ROUNDS=${BENCH_ROUNDS:-3}
CACHE_SIZE=${BENCH_CACHE_SIZE:-2GiB}
LATENCY_MS=${LATENCY_MS:-20}
RATE_KBPS=${RATE_KBPS:-50000}
SETTINGS=${BENCH_SETTINGS:-local-map lo-map-sched lo-map-plain lo-iter px-map-sched px-map-plain px-iter warm-map-sched warm-map-plain warm-iter}
BUCKET=bench
PREFIX=train
BENCH=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/shardfs-mapbench.XXXXXX")}
mkdir -p "$BENCH"
MNT=$BENCH/mnt
export SHARDFS_MINIO_STATE=$BENCH/minio.env
BIN=$BENCH/shardfs
go build -o "$BIN" ./cmd/shardfs
MOUNTED=
TOXI_PID=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$MOUNTED" ] || unmount_quietly "$BIN" "$MNT"
	[ -z "$TOXI_PID" ] || { kill "$TOXI_PID" 2>/dev/null && wait "$TOXI_PID" 2>/dev/null; } || true
	scripts/minio.sh stop >/dev/null 2>&1 || true
	[ $rc -eq 0 ] || log "benchmark FAILED (exit $rc); logs in $BENCH"
	[ $rc -ne 0 ] || [ -n "${BENCH_DIR:-}" ] || rm -rf "$BENCH"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM


cpu_of() { # PID -> CPU seconds so far
	"$SYS_PYTHON" -c 'import os, sys; st = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split(); print((int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK"))' "$1"
}

epoch() { # DIR DATASET [ARGS...] -> "samples/s loader_cpu_seconds"
	local dir=$1 dataset=$2
	shift 2
	/usr/bin/time -f "TIME %U %S" -o "$BENCH/time.txt" "$SYS_PYTHON" examples/check_epochs.py "$dir" --dataset "$dataset" \
		--workers "$WORKERS" --no-verify --expect-samples $((SHARDS * SAMPLES)) --index "$BENCH/index.json" "$@" \
		>"$BENCH/epoch.txt" 2>&1 || { cat "$BENCH/epoch.txt" >&2; return 1; }
	local sps
	sps=$(sed -n 's/^RESULT //p' "$BENCH/epoch.txt" |
		"$SYS_PYTHON" -c 'import json, sys; print(round(json.load(sys.stdin)["epochs"][0]["samples_per_second"]))')
	echo "$sps $(awk '/^TIME/ {print $2 + $3}' "$BENCH/time.txt")"
}

# figures MNT -> "store_bytes disk_read_bytes delivered_bytes daemon_cpu_seconds"
figures() {
	"$SYS_PYTHON" - "$1" <<'PY'
import json, os, sys
s = json.load(open(os.path.join(sys.argv[1], ".shardfs/stats")))
v = lambda n: sum(x["value"] for x in s if x["name"] == n)
pid = int(v("shardfs_daemon_pid"))
io = dict(l.split(": ") for l in open(f"/proc/{pid}/io").read().split("\n") if l)
st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
print(int(v("shardfs_store_bytes_total")), int(io["read_bytes"]), int(v("shardfs_read_bytes_total")), f"{cpu:.2f}")
PY
}

mount_at() { # ENDPOINT CACHE_DIR PROFILE
	mkdir -p "$MNT"
	local extra=()
	[ -z "${BENCH_PREFETCH_MEMORY:-}" ] || extra=(--prefetch-memory "$BENCH_PREFETCH_MEMORY")
	SHARDFS_CPUPROFILE=$3 "$BIN" mount "s3://$BUCKET/$PREFIX" "$MNT" --endpoint-url "$1" --cache-dir "$2" \
		--cache-size "$CACHE_SIZE" --log-file "$BENCH/mount.log" "${extra[@]}"
	is_mounted "$MNT" || die "shardfs mount returned but $MNT is not mounted"
	MOUNTED=1
}

log "== data set ($SHARDS shards x $SAMPLES samples x $SAMPLE_SIZE), MinIO, Toxiproxy (${LATENCY_MS} ms, ${RATE_KBPS} KB/s per connection)"
gen_bench_shards "$BENCH/local" "$SHARDS" "$SAMPLES" "$SAMPLE_SIZE"
BYTES=$(du -sb "$BENCH/local" | cut -f1)
eval "$(scripts/minio.sh start 2>/dev/null)"
MINIO_PID=$(. "$SHARDFS_MINIO_STATE" && echo "$MINIO_PID")
scripts/upload.sh "$BENCH/local" "s3://$BUCKET/$PREFIX" 2>/dev/null
start_toxiproxy "$SHARDFS_ENDPOINT_URL" "$BENCH/toxiproxy.log" "$LATENCY_MS" "$RATE_KBPS"
epoch "$BENCH/local" map >/dev/null # builds the index, outside the timed epochs
"$BIN" warm "s3://$BUCKET/$PREFIX" --endpoint-url "$SHARDFS_ENDPOINT_URL" --cache-dir "$BENCH/warm" \
	--cache-size "$CACHE_SIZE" >"$BENCH/warm.log" 2>&1

RESULTS=$BENCH/results.txt
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
	for setting in $SETTINGS; do
		where=${setting%%-*} what=${setting#*-}
		dataset=${what%%-*} args=()
		[ "$dataset" != iter ] || dataset=iterable
		[ "$what" != map-plain ] || args=(--no-hints)
		if [ "$where" = local ]; then
			drop_caches
			read -r sps loader < <(epoch "$BENCH/local" "$dataset" "${args[@]}")
			[ -n "$sps" ] || die "the $setting epoch failed"
			log "round $round $setting: $sps samples/s"
			echo "$setting $round $sps - - - - $loader - -" >>"$RESULTS"
			continue
		fi
		endpoint=$SHARDFS_ENDPOINT_URL cache=$BENCH/cold
		[ "$where" != px ] || endpoint=$TOXI_URL
		[ "$where" != warm ] || cache=$BENCH/warm
		[ "$where" = warm ] || rm -rf "$cache"
		profile=
		[ -z "${BENCH_PROFILE_DIR:-}" ] || { mkdir -p "$BENCH_PROFILE_DIR" && profile=$BENCH_PROFILE_DIR/$setting-$round.pprof; }
		mount_at "$endpoint" "$cache" "$profile"
		drop_caches
		minio0=$(cpu_of "$MINIO_PID") toxi0=$(cpu_of "$TOXI_PID")
		read -r sps loader < <(epoch "$MNT" "$dataset" "${args[@]}")
		[ -n "$sps" ] || die "the $setting epoch failed"
		minio=$("$SYS_PYTHON" -c "print(round($(cpu_of "$MINIO_PID") - $minio0, 2))")
		toxi=$("$SYS_PYTHON" -c "print(round($(cpu_of "$TOXI_PID") - $toxi0, 2))")
		f=$(figures "$MNT")
		cp "$MNT/.shardfs/stats" "$BENCH/stats-$setting-$round.json" # every counter, for a closer look
		"$BIN" unmount "$MNT"
		MOUNTED=
		log "round $round $setting: $sps samples/s; store, disk read, delivered bytes, daemon cpu s: $f; loader $loader s, minio $minio s, toxiproxy $toxi s"
		echo "$setting $round $sps $f $loader $minio $toxi" >>"$RESULTS"
	done
done

printf '\nShuffled map-style epoch: %d shards, %d samples of %s, %s MB, %d workers, %d interleaved rounds\n' \
	"$SHARDS" $((SHARDS * SAMPLES)) "$SAMPLE_SIZE" $((BYTES / 1000000)) "$WORKERS" "$ROUNDS"
"$SYS_PYTHON" - "$RESULTS" "$BYTES" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    name, _, sps, store, disk, delivered, daemon, loader, minio, toxi = line.split()
    rows.setdefault(name, []).append(dict(sps=int(sps), store=store, disk=disk, delivered=delivered,
                                          daemon=daemon, loader=float(loader), minio=minio, toxi=toxi))
data = int(sys.argv[2])
med = lambda xs: statistics.median(xs)
local = med(r["sps"] for r in rows["local-map"]) if "local-map" in rows else None
print(f"{'setting':<15} {'samples/s median (range)':>25} {'x local':>8} {'x iter':>7} {'store B/data':>12} "
      f"{'disk read/data':>14} {'CPU-s/GB daemon':>15} {'loader':>7} {'minio+proxy':>11}")
for name, rs in rows.items():
    sps = [r["sps"] for r in rs]
    m = med(sps)
    iter_name = name.rsplit("-", 2)[0] + "-iter" if "-map-" in name else None
    xi = f"{m / med(r['sps'] for r in rows[iter_name]):.2f}" if iter_name in rows else "-"
    xl = f"{m / local:.2f}" if local else "-"
    gb = data / 1e9
    cells = ["-", "-", "-"]
    if rs[0]["store"] != "-":
        cells = [f"{med(int(r['store']) for r in rs) / data:.2f}",
                 f"{med(int(r['disk']) for r in rs) / data:.2f}",
                 f"{med(float(r['daemon']) for r in rs) / gb:.2f}"]
    loader = f"{med(r['loader'] for r in rs) / gb:.2f}"
    server = "-" if rs[0]["minio"] == "-" else f"{med(float(r['minio']) + float(r['toxi']) for r in rs) / gb:.2f}"
    print(f"{name:<15} {f'{m:.0f} ({min(sps)}-{max(sps)})':>25} {xl:>8} {xi:>7} {cells[0]:>12} {cells[1]:>14} "
          f"{cells[2]:>15} {loader:>7} {server:>11}")
PY
