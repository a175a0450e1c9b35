#!/usr/bin/env bash
# A shuffled map-style epoch (examples/check_epochs.py --dataset map: one
# pread per member, DataLoader(shuffle=True), 4 workers) over a local copy
# and through a shardfs mount against MinIO on loopback, cold (empty cache)
# and ring warm (`shardfs warm` first; every mount starts with an empty RAM
# tier). Page cache dropped before every epoch. Rounds are interleaved: each
# round runs every setting once, for each binary named in BENCH_BINS
# ("name=path" pairs; default: this tree as "new"). Per epoch it records
# samples/s, store bytes (shardfs_store_bytes_total), the daemon's disk
# bytes read (/proc/PID/io read_bytes: the ring), bytes delivered
# (shardfs_read_bytes_total) and the daemon's CPU seconds.
#   flock /tmp/shardfs-bench.lock bash scripts/bench_mapstyle.sh
# Knobs: BENCH_SHARDS (16) BENCH_SAMPLES (384 per shard) BENCH_SAMPLE_SIZE (96K)
#        BENCH_WORKERS (4) BENCH_ROUNDS (3) BENCH_BINS BENCH_DIR
#        BENCH_CACHE_SIZE (2GiB: each ring is a file of that size, three at once)
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
BUCKET=bench
PREFIX=train
BENCH=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/shardfs-mapbench.XXXXXX")}
mkdir -p "$BENCH"
MNT=$BENCH/mnt
export SHARDFS_MINIO_STATE=$BENCH/minio.env
if [ -z "${BENCH_BINS:-}" ]; then
	go build -o "$BENCH/shardfs-new" ./cmd/shardfs
	BENCH_BINS="new=$BENCH/shardfs-new"
fi
BIN=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$BIN" ] || unmount_quietly "$BIN" "$MNT"
	scripts/minio.sh stop >/dev/null 2>&1 || true
	[ $rc -eq 0 ] || log "benchmark FAILED (exit $rc); logs in $BENCH"
	[ $rc -ne 0 ] || [ -n "${BENCH_DIR:-}" ] || rm -rf "$BENCH"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync && as_root sh -c 'echo 3 > /proc/sys/vm/drop_caches'; }

epoch() { # DIR -> samples/s
	"$SYS_PYTHON" examples/check_epochs.py "$1" --dataset map --workers "$WORKERS" \
		--no-verify --expect-samples $((SHARDS * SAMPLES)) --index "$BENCH/index.json" |
		sed -n 's/^RESULT //p' |
		"$SYS_PYTHON" -c 'import json, sys; print(round(json.load(sys.stdin)["epochs"][0]["samples_per_second"]))'
}

# figures MNT -> "store_bytes disk_read_bytes delivered_bytes cpu_seconds" of the mount's daemon
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

mount_at() { # BIN CACHE_DIR
	mkdir -p "$MNT"
	"$1" mount "s3://$BUCKET/$PREFIX" "$MNT" --endpoint-url "$SHARDFS_ENDPOINT_URL" --cache-dir "$2" \
		--cache-size "$CACHE_SIZE" --log-file "$BENCH/mount.log"
	is_mounted "$MNT" || die "shardfs mount returned but $MNT is not mounted"
}

log "== data set ($SHARDS shards x $SAMPLES samples x $SAMPLE_SIZE), MinIO"
"$SYS_PYTHON" scripts/gen_shards.py "$BENCH/local" "$SHARDS" "$SAMPLES" "$SAMPLE_SIZE" 2>/dev/null
BYTES=$(du -sb "$BENCH/local" | cut -f1)
eval "$(scripts/minio.sh start 2>/dev/null)"
scripts/upload.sh "$BENCH/local" "s3://$BUCKET/$PREFIX" 2>/dev/null
epoch "$BENCH/local" >/dev/null # builds the index, outside the timed epochs
for pair in $BENCH_BINS; do
	name=${pair%%=*} BIN=${pair#*=}
	"$BIN" warm "s3://$BUCKET/$PREFIX" --endpoint-url "$SHARDFS_ENDPOINT_URL" --cache-dir "$BENCH/warm-$name" --cache-size "$CACHE_SIZE" >"$BENCH/warm-$name.log" 2>&1
done

RESULTS=$BENCH/results.txt
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
	drop_caches
	v=$(epoch "$BENCH/local")
	log "round $round local: $v samples/s"
	echo "local $round $v - - - -" >>"$RESULTS"
	for pair in $BENCH_BINS; do
		name=${pair%%=*} BIN=${pair#*=}
		for mode in cold warm; do
			cache=$BENCH/warm-$name
			if [ $mode = cold ]; then
				cache=$BENCH/cold
				rm -rf "$cache"
			fi
			mount_at "$BIN" "$cache"
			drop_caches
			v=$(epoch "$MNT")
			f=$(figures "$MNT")
			"$BIN" unmount "$MNT"
			log "round $round $name $mode: $v samples/s; store, disk read, delivered bytes, cpu s: $f"
			echo "$name-$mode $round $v $f" >>"$RESULTS"
		done
	done
done

printf '\nShuffled map-style epoch: %d shards, %d samples of %s, %s MB, %d workers, %d interleaved rounds\n' \
	"$SHARDS" $((SHARDS * SAMPLES)) "$SAMPLE_SIZE" $((BYTES / 1000000)) "$WORKERS" "$ROUNDS"
"$SYS_PYTHON" - "$RESULTS" "$BYTES" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    name, _, sps, *f = line.split()
    rows.setdefault(name, []).append((int(sps), f))
data = int(sys.argv[2])
local = statistics.median(r[0] for r in rows["local"])
print(f"{'setting':<12} {'samples/s median (range)':>26} {'x local':>8} {'store B/data':>13} {'disk read/delivered':>20} {'daemon CPU s/GB':>16}")
for name, rs in rows.items():
    sps = [r[0] for r in rs]
    med = statistics.median(sps)
    cells = ["-", "-", "-"]
    if rs[0][1][0] != "-":
        st = statistics.median(int(r[1][0]) for r in rs) / data
        dr = statistics.median(int(r[1][1]) / max(int(r[1][2]), 1) for r in rs)
        cpu = statistics.median(float(r[1][3]) / (int(r[1][2]) / 1e9) for r in rs)
        cells = [f"{st:.2f}", f"{dr:.2f}", f"{cpu:.1f}"]
    print(f"{name:<12} {f'{med:.0f} ({min(sps)}-{max(sps)})':>26} {med / local:>8.2f} {cells[0]:>13} {cells[1]:>20} {cells[2]:>16}")
PY
