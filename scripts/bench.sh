#!/usr/bin/env bash
# Side-by-side read benchmark: the direct ranged-GET ceiling (no FUSE),
# shardfs, s3fs and rclone mount, in one run against one MinIO.
#
#   scripts/bench.sh [--remote] [--rounds N] [--shards N] [--shard-size SIZE] [--large SIZE] [--out DIR]
#
# --remote puts Toxiproxy between the clients and MinIO: 20 ms latency and a
# 50 MB/s cap per connection, the shape of a remote S3. Needs root (page-cache
# drops, mounts) and scripts/install-deps.sh. Every workload starts cold: the
# page cache is dropped and the daemon is mounted afresh before each one;
# shardfs runs without --cache-dir, except the shardfs-ring rounds (an empty
# ring each time). Results: RESULT/RSS/STAT lines in OUT/results.txt and the
# table in OUT/table.md (OUT defaults to .work/bench-loopback or
# .work/bench-remote), with the CPU seconds of the daemon, MinIO and the
# readers and the daemon's peak RSS for every run (CPU lines, and a table of
# CPU-seconds per GB). SHARDFS_BIN picks the binary.
# The cold sequential read of the direct client and of shardfs, whose ratio
# is the headline, runs --rounds times (default 3), interleaved; the table
# shows medians and every round.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REMOTE=0 ROUNDS=3 SHARDS=20 SHARD_SIZE=48MiB LARGE=1GiB OUT=
LATENCY_MS=20 RATE_KBPS=50000 # toxiproxy's bandwidth rate is in KB/s
DIRECT_CONCURRENCY=(16 64)
BUCKET=bench
while [ $# -gt 0 ]; do
	case $1 in
	--remote) REMOTE=1 ;;
	--rounds) ROUNDS=$2; shift ;;
	--shards) SHARDS=$2; shift ;;
	--shard-size) SHARD_SIZE=$2; shift ;;
	--large) LARGE=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache and mounts"
MODE=loopback
[ $REMOTE -eq 1 ] && MODE=remote
OUT=${OUT:-$WORK_DIR/bench-$MODE}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.txt
: >"$RESULTS"
MNT=$OUT/mnt
mkdir -p "$MNT"
SHARDFS=${SHARDFS_BIN:-$SHARDFS_ROOT/bin/shardfs}
if [ -z "${SHARDFS_BIN:-}" ]; then
	(cd "$SHARDFS_ROOT" && go build -o bin/shardfs ./cmd/shardfs)
fi
"$SHARDFS" bench --help >/dev/null 2>&1 || die "$SHARDFS has no bench command"

# --- cleanup: everything started here is stopped by its pid ---------------
DAEMON_PID= TOXI_PID=
export SHARDFS_MINIO_STATE=$WORK_DIR/bench-minio.env
cleanup() {
	set +e
	mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
	[ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null
	[ -n "$TOXI_PID" ] && kill "$TOXI_PID" 2>/dev/null
	"$SHARDFS_ROOT/scripts/minio.sh" stop 2>/dev/null
}
trap cleanup EXIT

# --- data -----------------------------------------------------------------
samples_per_shard=$(( $(size_bytes "$SHARD_SIZE") >> 20 ))
DATA=$WORK_DIR/bench-data-$SHARDS-$SHARD_SIZE-$LARGE
need_room_for_data "$WORK_DIR" $((SHARDS * (samples_per_shard << 20) + $(size_bytes "$LARGE"))) 3 "a data set of $SHARDS x $SHARD_SIZE and a $LARGE shard"
if [ ! -f "$DATA/.done" ]; then
	log "generating $SHARDS x $SHARD_SIZE shards and a $LARGE shard in $DATA"
	rm -rf "$DATA"
	"$SYS_PYTHON" "$SHARDFS_ROOT/scripts/gen_shards.py" "$DATA" "$SHARDS" "$samples_per_shard" 1020K --large "$LARGE"
	touch "$DATA/.done"
fi

eval "$("$SHARDFS_ROOT/scripts/minio.sh" start)"
MINIO_URL=$SHARDFS_ENDPOINT_URL
# shellcheck disable=SC1090
MINIO_PID=$(source "$SHARDFS_MINIO_STATE" && echo "$MINIO_PID")
"$SHARDFS_ROOT/scripts/upload.sh" "$DATA" "s3://$BUCKET" 2>&1 | tail -1 >&2

ENDPOINT=$MINIO_URL
if [ $REMOTE -eq 1 ]; then
	start_toxiproxy "$MINIO_URL" "$OUT/toxiproxy.log" "$LATENCY_MS" "$RATE_KBPS"
	ENDPOINT=$TOXI_URL
	log "toxiproxy at $ENDPOINT: ${LATENCY_MS} ms latency, ${RATE_KBPS} KB/s per connection"
fi
export SHARDFS_ENDPOINT_URL=$ENDPOINT


# --- mounts: each daemon in the foreground, as a child of this script -----
PASSWD=$OUT/s3fs.passwd
printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$PASSWD"
chmod 600 "$PASSWD"

mount_fs() { # mount_fs SYSTEM [shardfs flags...]
	local system=$1
	shift
	case $system in
	shardfs)
		"$SHARDFS" mount "s3://$BUCKET" "$MNT" --foreground --log-level warn "$@" >>"$OUT/shardfs.log" 2>&1 &
		DAEMON_PID=$!
		;;
	s3fs | rclone) mount_peer "$system" "$BUCKET" "$MNT" "$ENDPOINT" "$PASSWD" "$OUT/$system.log" ;;
	esac
	wait_for_shards "$MNT" "$DAEMON_PID" "$system" "$OUT/$system.log"
}

peak_rss_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$DAEMON_PID/status"; }

# cpu_seconds PID: user+system CPU the process has used so far.
CLK_TCK=$(getconf CLK_TCK)
cpu_seconds() { awk -v hz="$CLK_TCK" '{sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz}' "/proc/$1/stat"; }
since() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

# workload LABEL WORKLOAD CMD...: runs one bench command (its RESULT lines
# to the results, with reader_cpu_s, its own CPU) and records a CPU line:
# the CPU seconds the daemon (when one is mounted) and MinIO spent during it,
# and the daemon's peak RSS.
workload() {
	local label=$1 wl=$2
	shift 2
	local d0=0 s0
	[ -n "$DAEMON_PID" ] && d0=$(cpu_seconds "$DAEMON_PID")
	s0=$(cpu_seconds "$MINIO_PID")
	"$@" | tee -a "$RESULTS" >&2
	local daemon=0 rss=0
	if [ -n "$DAEMON_PID" ]; then
		daemon=$(since "$d0" "$(cpu_seconds "$DAEMON_PID")")
		rss=$(peak_rss_kb)
	fi
	bench_record "CPU name=$label workload=$wl daemon_cpu_s=$daemon store_cpu_s=$(since "$s0" "$(cpu_seconds "$MINIO_PID")") vmhwm_kb=$rss"
}

unmount_fs() { stop_daemon "$MNT"; }

# stat NAME: one counter of the shardfs mount's /.shardfs/stats.
stat_value() {
	"$SHARDFS" stats "$MNT" --json | "$SYS_PYTHON" -c '
import json, sys
name = "shardfs_" + sys.argv[1]
print("%.0f" % sum(s["value"] for s in json.load(sys.stdin) if s["name"] == name))' "$1"
}

# measure LABEL SYSTEM WORKLOAD BENCH_ARGS... [-- MOUNT_FLAGS...]: a fresh
# mount, a cold page cache, one workload, the daemon's peak RSS.
measure() {
	local label=$1 system=$2 workload=$3
	shift 3
	local bench=() flags=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do bench+=("$1"); shift; done
	[ $# -gt 0 ] && shift && flags=("$@")
	mount_fs "$system" "${flags[@]}"
	drop_caches
	workload "$label" "$workload" "$SHARDFS" bench files "$MNT" --name "$label" --workload "$workload" --include 'shard-*' "${bench[@]}"
	bench_record "RSS name=$label workload=$workload vmhwm_kb=$(peak_rss_kb)"
	if [ "$system" = shardfs ]; then
		bench_record "STAT name=$label workload=$workload gets=$(stat_value store_gets_total) store_bytes=$(stat_value store_bytes_total) prefetch_waits=$(stat_value prefetch_waits_total) budget_waits=$(stat_value prefetch_budget_waits_total) budget_peak=$(stat_value prefetch_budget_peak_bytes) network_wait_s=$(stat_value read_network_wait_seconds_total)"
	fi
	unmount_fs
}

started=$SECONDS
load_before=$(cut -d" " -f1-3 /proc/loadavg | tr " " /)
for round in $(seq "$ROUNDS"); do
	log "== $MODE: cold sequential, direct GET ceiling and shardfs, round $round of $ROUNDS"
	for c in "${DIRECT_CONCURRENCY[@]}"; do
		drop_caches
		workload "direct-c$c" seq "$SHARDFS" bench direct "s3://$BUCKET" --name "direct-c$c" --workload seq --concurrency "$c" --include 'shard-*'
	done
	measure shardfs shardfs seq
	rm -rf "$OUT/ring"
	measure shardfs-ring shardfs seq -- --cache-dir "$OUT/ring"
done
rm -rf "$OUT/ring"
log "== $MODE: direct GET, first byte and random reads"
drop_caches
workload direct ttfb,random "$SHARDFS" bench direct "s3://$BUCKET" --name direct --workload ttfb,random --include 'shard-*'
drop_caches
workload direct-1mib ttfb "$SHARDFS" bench direct "s3://$BUCKET" --name direct-1mib --workload ttfb --ttfb-size 1MiB --include 'shard-*'

for system in shardfs s3fs rclone; do
	log "== $MODE: $system"
	for wl in seq ttfb random; do
		[ "$system/$wl" != shardfs/seq ] || continue # measured in the rounds above
		measure "$system" "$system" "$wl"
	done
done

log "== $MODE: shardfs kernel knobs (cold sequential)"
measure shardfs-ra0 shardfs seq -- --read-ahead-kb 0
measure shardfs-ra1024 shardfs seq -- --read-ahead-kb 1024
measure shardfs-ra16384 shardfs seq -- --read-ahead-kb 16384
measure shardfs-mb16 shardfs seq -- --max-background 16
measure shardfs-mb64 shardfs seq -- --max-background 64

log "== $MODE: shardfs random 4 KiB reads over the $LARGE shard"
mount_fs shardfs
drop_caches
workload shardfs-4k random "$SHARDFS" bench files "$MNT" --name shardfs-4k --workload random --random-size 4KiB --random-reads 200 --include 'large/*'
bench_record "STAT name=shardfs-4k workload=random reads=200 gets=$(stat_value store_gets_total) store_bytes=$(stat_value store_bytes_total)"
unmount_fs

log "== $MODE: shardfs RSS with 32 readers, --prefetch-memory 256MiB"
mount_fs shardfs --prefetch-memory 256MiB
drop_caches
workload shardfs-32r seq "$SHARDFS" bench files "$MNT" --name shardfs-32r --workload seq --readers 32 --range-size 32MiB
bench_record "RSS name=shardfs-32r workload=seq vmhwm_kb=$(peak_rss_kb) prefetch_memory_kb=262144"
bench_record "STAT name=shardfs-32r workload=seq budget_peak=$(stat_value prefetch_budget_peak_bytes) budget_waits=$(stat_value prefetch_budget_waits_total)"
unmount_fs

log "== $MODE: next-shard prefetch"
mount_fs shardfs
drop_caches
cat "$MNT/shard-000000.tar" >/dev/null
counters() { echo "gets=$(stat_value store_gets_total) ram_hits=$(stat_value cache_ram_hits_total) found=$(stat_value prefetch_next_found_total)"; }
bench_record "STAT name=shardfs-next workload=after-shard0 $(counters) next_parts=$(stat_value prefetch_next_parts_total)"
head -c 4096 "$MNT/shard-000001.tar" >/dev/null
bench_record "STAT name=shardfs-next workload=open-shard1 $(counters)"
cat "$MNT/shard-000001.tar" >/dev/null
bench_record "STAT name=shardfs-next workload=read-shard1 $(counters)"
unmount_fs

bench_record "INFO mode=$MODE seconds=$((SECONDS - started)) load_before=$load_before load_after=$(cut -d" " -f1-3 /proc/loadavg | tr " " /) shards=$SHARDS shard_size=$SHARD_SIZE large=$LARGE latency_ms=$([ $REMOTE -eq 1 ] && echo $LATENCY_MS || echo 0) rate_kbps=$([ $REMOTE -eq 1 ] && echo $RATE_KBPS || echo 0)"
"$SYS_PYTHON" - "$RESULTS" <<'PY' | tee "$OUT/table.md"
import sys

rows = []
for line in open(sys.argv[1]):
    kind, *fields = line.split()
    if kind in ("RESULT", "RSS", "STAT", "INFO", "CPU"):
        rows.append((kind, dict(f.split("=", 1) for f in fields)))

def get(kind, name, workload, key):
    for k, r in rows:
        if k == kind and r.get("name") == name and r.get("workload", workload) == workload and key in r:
            return float(r[key])
    return None

def rounds(name):
    return [float(r["mbps"]) for k, r in rows if k == "RESULT" and r["name"] == name and r["workload"] == "seq"]

def median(vs):
    vs = sorted(vs)
    return vs[len(vs) // 2] if len(vs) % 2 else (vs[len(vs) // 2 - 1] + vs[len(vs) // 2]) / 2

info = next(r for k, r in rows if k == "INFO")
direct_names = sorted({r["name"] for k, r in rows
                       if k == "RESULT" and r["name"].startswith("direct-c") and r["workload"] == "seq"})
direct_seq = {n: median(rounds(n)) for n in direct_names}
best = max(direct_seq, key=direct_seq.get)

def fmt(v, unit=""):
    return "-" if v is None else f"{v:,.1f}{unit}"

def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

def diff(a, b):
    return "-" if a is None or b is None else f"{a - b:+.1f} ms"

systems = ["shardfs", "s3fs", "rclone"]
print(f"mode: {info['mode']} (latency {info['latency_ms']} ms, {info['rate_kbps']} KB/s per connection); "
      f"{info['shards']} x {info['shard_size']} shards; run took {info['seconds']} s; "
      f"load average before/after {info['load_before']} / {info['load_after']}\n")
print("| workload | direct | shardfs | s3fs | rclone | shardfs/direct | shardfs/s3fs | shardfs/rclone |")
print("|---|---|---|---|---|---|---|---|")
seq = {s: get("RESULT", s, "seq", "mbps") for s in systems}
seq["shardfs"] = median(rounds("shardfs"))
seq["direct"] = direct_seq[best]
print(f"| cold seq, 4 readers (MB/s) | {fmt(seq['direct'])} ({best}) | " + " | ".join(fmt(seq[s]) for s in systems)
      + f" | {ratio(seq['shardfs'], seq['direct'])} | {ratio(seq['shardfs'], seq['s3fs'])} | {ratio(seq['shardfs'], seq['rclone'])} |")
tt = {s: get("RESULT", s, "ttfb", "ttfb_ms") for s in systems}
tt["direct"] = get("RESULT", "direct", "ttfb", "ttfb_ms")
print(f"| median TTFB, 4 KiB, 20 opens (ms) | {fmt(tt['direct'])} | " + " | ".join(fmt(tt[s]) for s in systems)
      + f" | {diff(tt['shardfs'], tt['direct'])} | {ratio(tt['s3fs'], tt['shardfs'])} faster | {ratio(tt['rclone'], tt['shardfs'])} faster |")
rnd = {s: get("RESULT", s, "random", "reads_per_s") for s in systems}
rnd["direct"] = get("RESULT", "direct", "random", "reads_per_s")
print(f"| random 1 MiB reads/s, 4 readers | {fmt(rnd['direct'])} | " + " | ".join(fmt(rnd[s]) for s in systems)
      + f" | {ratio(rnd['shardfs'], rnd['direct'])} | {ratio(rnd['shardfs'], rnd['s3fs'])} | {ratio(rnd['shardfs'], rnd['rclone'])} |")
rss = {s: max((float(r["vmhwm_kb"]) / 1024 for k, r in rows if k == "RSS" and r["name"] == s), default=None) for s in systems}
print(f"| peak daemon RSS (MiB) | - | " + " | ".join(fmt(rss[s]) for s in systems)
      + f" | - | {ratio(rss['shardfs'], rss['s3fs'])} | {ratio(rss['shardfs'], rss['rclone'])} |")

print(f"\ncold seq, direct and shardfs rows: medians of {len(rounds('shardfs'))} interleaved rounds (MB/s): " + "; ".join(
    f"{n}: " + ", ".join(f"{v:,.1f}" for v in rounds(n)) for n in direct_names + ["shardfs", "shardfs-ring"]))
print(f"direct TTFB of a 1 MiB GET: {fmt(get('RESULT', 'direct-1mib', 'ttfb', 'ttfb_ms'))} ms")
print("\nshardfs kernel knobs, cold seq (MB/s; the defaults, read-ahead-kb 4096 and max-background 64, are the main row): " + ", ".join(
    f"{n.removeprefix('shardfs-')}: {fmt(get('RESULT', n, 'seq', 'mbps'))}"
    for n in ("shardfs-ra0", "shardfs-ra1024", "shardfs-ra16384", "shardfs-mb16", "shardfs-mb64")))
gb = get("STAT", "shardfs-4k", "random", "store_bytes")
gets = get("STAT", "shardfs-4k", "random", "gets")
reads = get("STAT", "shardfs-4k", "random", "reads")
print(f"random 4 KiB reads over the large shard: {fmt(get('RESULT', 'shardfs-4k', 'random', 'reads_per_s'))} reads/s, "
      f"{gb / reads / 1024:,.0f} KiB fetched per read, {gets / reads:.2f} GETs per read" if gb is not None else "")
r32 = get("RSS", "shardfs-32r", "seq", "vmhwm_kb")
print(f"32 readers, --prefetch-memory 256 MiB: peak RSS {r32 / 1024:,.0f} MiB (limit 384 MiB), "
      f"budget peak {get('STAT', 'shardfs-32r', 'seq', 'budget_peak') / 2**20:,.0f} MiB, "
      f"{fmt(get('RESULT', 'shardfs-32r', 'seq', 'mbps'))} MB/s")
nx = {w: get("STAT", "shardfs-next", w, "gets") for w in ("after-shard0", "open-shard1", "read-shard1")}
fd = {w: get("STAT", "shardfs-next", w, "found") for w in ("after-shard0", "open-shard1", "read-shard1")}
print(f"next shard: after reading shard 0 to the end ({get('STAT', 'shardfs-next', 'after-shard0', 'next_parts'):.0f} next parts), "
      f"opening shard 1 and reading 4 KiB cost {nx['open-shard1'] - nx['after-shard0']:.0f} GETs; "
      f"prefetch_next_found_total {fd['after-shard0']:.0f} -> {fd['open-shard1']:.0f} on open -> {fd['read-shard1']:.0f} after reading shard 1; "
      f"reading all of shard 1 cost {nx['read-shard1'] - nx['open-shard1']:.0f} more GETs")
print("\nCPU-seconds per GB read of the daemon, the store (MinIO) and the readers (the bench process), and the daemon's peak RSS, every run:\n")
print("| run | workload | GB read | MB/s | daemon CPU-s/GB | store CPU-s/GB | reader CPU-s/GB | peak daemon RSS (MiB) |")
print("|---|---|---|---|---|---|---|---|")
pending = []  # RESULT lines of the bench command whose CPU line comes next
for k, r in rows:
    if k == "RESULT":
        pending.append(r)
        continue
    if k != "CPU":
        continue
    rs = [x for x in pending if x["name"] == r["name"]]
    pending = []
    if not rs:
        continue
    nbytes = sum(float(x["reads"]) * float(x["size"]) if "reads" in x
                 else float(x["bytes"]) * float(x.get("opens", 1)) for x in rs)
    gb = nbytes / 1e9
    reader = sum(float(x.get("reader_cpu_s", 0)) for x in rs)
    def pg(v):
        # a workload of a few MB (first-byte times) is all opens: its CPU seconds, not per GB
        return f"{v / gb:.2f}" if gb >= 0.05 else f"({v:.2f} s)"
    mbps = "/".join(x["mbps"] for x in rs if "mbps" in x) or "-"
    daemon = float(r["daemon_cpu_s"])
    rss = float(r["vmhwm_kb"]) / 1024
    print(f"| {r['name']} | {r['workload']} | {gb:.3f} | {mbps} | {pg(daemon) if daemon else '-'} | {pg(float(r['store_cpu_s']))} | "
          f"{pg(reader)} | {f'{rss:,.0f}' if rss else '-'} |")
print("\nshardfs read-path counters per workload:")
for k, r in rows:
    if k == "STAT" and r["name"] in ("shardfs",):
        print("  " + " ".join(f"{a}={b}" for a, b in r.items()))
PY
