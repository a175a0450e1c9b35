#!/usr/bin/env bash
# The member index of a whole data set, cold and persisted: what indexing N
# shards fetches from the store against their size and their header bytes,
# and how long it takes. Per round (rounds interleaved):
#   cli-cold       shardfs index SOURCE --cache-dir EMPTY --out FILE
#   cli-persisted  the same again: every index from the cache dir
#   mount-cold     a mount with an empty cache dir; every /.shardfs/index/KEY read
#   mount-remount  a remount of that cache dir; every index read again
#   cli-sidecars   shardfs index of a copy of the shards with a wds2idx sidecar
#                  beside each, empty --cache-dir
# Each records wall seconds, store bytes and GETs (the command's summary line,
# or the mount's shardfs_store_* counters) and CPU seconds of the shardfs
# process (/proc/PID/stat). MinIO on loopback.
#   flock /tmp/shardfs-bench.lock bash scripts/bench_index.sh
# Knobs: BENCH_SHARDS (32) BENCH_SAMPLES (640 per shard) BENCH_SAMPLE_SIZE (100K)
#        BENCH_ROUNDS (3) BENCH_DIR
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

SHARDS=${BENCH_SHARDS:-32}
SAMPLES=${BENCH_SAMPLES:-640}
SAMPLE_SIZE=${BENCH_SAMPLE_SIZE:-100K}
ROUNDS=${BENCH_ROUNDS:-3}
SRC=s3://bench-index/train
SIDECARS=s3://bench-index/sidecars
BENCH=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/shardfs-indexbench.XXXXXX")}
mkdir -p "$BENCH"
MNT=$BENCH/mnt
export SHARDFS_MINIO_STATE=$BENCH/minio.env
BIN=$BENCH/shardfs
go build -o "$BIN" ./cmd/shardfs

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	scripts/minio.sh stop >/dev/null 2>&1 || true
	[ $rc -eq 0 ] || log "benchmark FAILED (exit $rc); logs in $BENCH"
	[ $rc -ne 0 ] || [ -n "${BENCH_DIR:-}" ] || rm -rf "$BENCH"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "== data set ($SHARDS shards x $SAMPLES samples x $SAMPLE_SIZE), MinIO"
gen_bench_shards "$BENCH/local" "$SHARDS" "$SAMPLES" "$SAMPLE_SIZE"
BYTES=$(du -sb "$BENCH/local" | cut -f1)
# Header bytes: what of each shard is not member data, as tarfile lists it.
HEADERS=$("$SYS_PYTHON" - "$BENCH/local" <<'PY'
import glob, sys, tarfile
total = 0
for path in glob.glob(sys.argv[1] + "/*.tar"):
    with tarfile.open(path) as t:
        ms = [m for m in t if m.isfile()]
    pad = lambda m: m.offset_data + (m.size + 511) // 512 * 512
    total += pad(ms[-1]) + 1024 - sum(pad(m) - m.offset_data for m in ms)
print(total)
PY
)
eval "$(scripts/minio.sh start 2>/dev/null)"
scripts/upload.sh "$BENCH/local" "$SRC" 2>/dev/null
mkdir -p "$BENCH/idx"
"$SYS_PYTHON" scripts/gen_index_shards.py --sidecars-for "$BENCH/local"
mv "$BENCH"/local/*.idx "$BENCH/idx/"
rclone_s3 copy ":s3:${SRC#s3://}" ":s3:${SIDECARS#s3://}" 2>/dev/null # server-side copies
scripts/upload.sh "$BENCH/idx" "$SIDECARS" 2>/dev/null

cli() { # CACHE_DIR [SOURCE] -> "seconds store_bytes gets cpu"
	/usr/bin/time -f '%e %U %S' -o "$BENCH/cli.time" \
		"$BIN" index "${2:-$SRC}" --endpoint-url "$SHARDFS_ENDPOINT_URL" --cache-dir "$1" --out "$BENCH/index.jsonl" 2>"$BENCH/cli.err"
	# the summary: "indexed N shards (SIZE) in T: B bytes fetched in G GETs; ..."
	local fetched
	fetched=$(sed -n 's/.*: \([0-9]*\) bytes fetched in \([0-9]*\) GETs.*/\1 \2/p' "$BENCH/cli.err")
	[ -n "$fetched" ] || die "no summary from shardfs index: $(cat "$BENCH/cli.err")"
	awk -v f="$fetched" '{ print $1, f, $2 + $3 }' "$BENCH/cli.time"
}

mount_read() { # CACHE_DIR -> "seconds store_bytes gets cpu" of reading every index
	mkdir -p "$MNT"
	"$BIN" mount "$SRC" "$MNT" --endpoint-url "$SHARDFS_ENDPOINT_URL" --cache-dir "$1" --cache-size 256MiB \
		--prefetch-next 0 --log-file "$BENCH/mount.log"
	is_mounted "$MNT" || die "shardfs mount returned but $MNT is not mounted"
	"$SYS_PYTHON" - "$MNT" <<'PY'
import json, os, sys, time
mnt = sys.argv[1]
def stats():
    s = json.load(open(os.path.join(mnt, ".shardfs/stats")))
    v = lambda n: sum(x["value"] for x in s if x["name"] == n)
    pid = int(v("shardfs_daemon_pid"))
    st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return v("shardfs_store_bytes_total"), v("shardfs_store_gets_total"), (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
keys = sorted(k for k in os.listdir(mnt) if k.endswith(".tar"))
b0, g0, c0 = stats()
start = time.monotonic()
for k in keys:
    with open(os.path.join(mnt, ".shardfs/index", k), "rb") as f:
        f.read()
took = time.monotonic() - start
b1, g1, c1 = stats()
print(f"{took:.3f} {int(b1 - b0)} {int(g1 - g0)} {c1 - c0:.2f}")
PY
	"$BIN" unmount "$MNT"
}

RESULTS=$BENCH/results.txt
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
	rm -rf "$BENCH/cli-cache" "$BENCH/mount-cache" "$BENCH/sidecar-cache"
	for setting in cli-cold cli-persisted mount-cold mount-remount cli-sidecars; do
		case $setting in
		cli-sidecars) v=$(cli "$BENCH/sidecar-cache" "$SIDECARS") ;;
		cli-*) v=$(cli "$BENCH/cli-cache") ;;
		mount-*) v=$(mount_read "$BENCH/mount-cache") ;;
		esac
		log "round $round $setting: seconds, store bytes, GETs, cpu s: $v"
		echo "$setting $round $v" >>"$RESULTS"
	done
done

printf '\nMember index of %d shards (%s MB, %s header bytes), %d interleaved rounds\n' \
	"$SHARDS" $((BYTES / 1000000)) "$HEADERS" "$ROUNDS"
"$SYS_PYTHON" - "$RESULTS" "$BYTES" "$HEADERS" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    name, _, secs, b, g, cpu = line.split()
    rows.setdefault(name, []).append((float(secs), int(b or 0), int(g or 0), float(cpu)))
data, headers = int(sys.argv[2]), int(sys.argv[3])
print(f"| setting | seconds median (range) | store bytes | GETs | bytes / data | bytes / header bytes | CPU s |")
print("|---|---|---|---|---|---|---|")
for name, rs in rows.items():
    s = [r[0] for r in rs]
    b = statistics.median(r[1] for r in rs)
    g = statistics.median(r[2] for r in rs)
    c = statistics.median(r[3] for r in rs)
    print(f"| {name} | {statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) | {b:,.0f} | {g:.0f} | {b / data:.5f} | {b / headers:.2f} | {c:.2f} |")
PY
