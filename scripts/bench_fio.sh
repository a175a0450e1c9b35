#!/usr/bin/env bash
# fio random reads of one object through shardfs, s3fs and rclone mount, in
# one run against one MinIO: `fio --rw=randread`, one pass over the object
# (the jobs split it: each reads its 1/numjobs slice, every block once), for
# each block size and job count, page cache dropped and every mount fresh
# and cold: shardfs with its RAM tier alone (shardfs) and with an empty ring
# in a fresh --cache-dir (shardfs-ring; s3fs keeps what it reads in
# temporary files on disk too), the same with --page-cache direct
# (shardfs-ring-direct: the kernel keeps no pages of the object, every read
# goes to the daemon, straight into the reader's buffer), s3fs and rclone
# (--vfs-cache-mode off). The systems take turns within each setting, in a different
# order each round. Per run: MiB/s (fio's aggregate), the bytes MinIO sent
# (its node minio_s3_traffic_sent_bytes counter, so every system is counted the
# same way), the daemon's CPU seconds (/proc/PID/stat) and its peak RSS
# (VmHWM). A run stops after --runtime seconds even if the pass is not
# done; fio's figure is then the rate over what it read.
#
#   scripts/bench_fio.sh [--size SIZE] [--bs LIST] [--jobs LIST] [--systems LIST] [--rounds N] [--runtime S] [--out DIR]
#
# Defaults: --size 2GiB --bs 4k,256k --jobs 1,4 --rounds 1 --runtime 60
# --systems shardfs,shardfs-ring,shardfs-ring-direct,s3fs,rclone.
# Needs root (page-cache drops, mounts), fio, s3fs and rclone
# (scripts/install-deps.sh). Results: RESULT lines in OUT/results.txt and a
# table in OUT/table.md (OUT defaults to .work/bench-fio). Wrap the run in
# `flock /tmp/shardfs-bench.lock` on a shared box. SHARDFS_BIN picks the
# shardfs binary (default: built from this tree), for A/B runs of two.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

SIZE=2GiB BS_LIST=4k,256k JOBS_LIST=1,4 ROUNDS=1 RUNTIME=60 OUT=$WORK_DIR/bench-fio
SYSTEMS_LIST=shardfs,shardfs-ring,shardfs-ring-direct,s3fs,rclone
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift ;;
	--bs) BS_LIST=$2; shift ;;
	--jobs) JOBS_LIST=$2; shift ;;
	--systems) SYSTEMS_LIST=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache and mounts"
for tool in fio s3fs rclone; do
	command -v "$tool" >/dev/null || die "$tool is missing; run scripts/install-deps.sh"
done
BYTES=$(size_bytes "$SIZE")
mkdir -p "$OUT/mnt" "$OUT/data"
MNT=$OUT/mnt RES=$OUT/results.txt BUCKET=bench-fio KEY=object.bin
: >"$RES"
export SHARDFS_MINIO_STATE=$OUT/minio.env
SHARDFS=${SHARDFS_BIN:-$OUT/shardfs}
if [ -z "${SHARDFS_BIN:-}" ]; then
	go build -o "$SHARDFS" ./cmd/shardfs
fi
[ -x "$SHARDFS" ] || die "SHARDFS_BIN $SHARDFS is not an executable"

DAEMON_PID=
cleanup() {
	set +e
	is_mounted "$MNT" && fusermount3 -uz "$MNT"
	[ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null
	"$SHARDFS_ROOT/scripts/minio.sh" stop
	rm -rf "$OUT/cache"
}
trap cleanup EXIT
eval "$("$SHARDFS_ROOT/scripts/minio.sh" start)"
ENDPOINT=$SHARDFS_ENDPOINT_URL
if [ "$(stat -c %s "$OUT/data/$KEY" 2>/dev/null || echo 0)" != "$BYTES" ]; then
	head -c "$BYTES" /dev/urandom >"$OUT/data/$KEY"
fi
"$SHARDFS_ROOT/scripts/upload.sh" "$OUT/data" "s3://$BUCKET" 2>&1 | tail -1 >&2
PASSWD=$OUT/s3fs.passwd
printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$PASSWD"
chmod 600 "$PASSWD"

# read_sent sets SENT to what MinIO has sent to S3 clients so far. MinIO
# answers a metrics request from a copy it keeps for about 10 s, so a
# reading waits until 11 s have passed since the one before.
LAST_READING=-11 SENT=
read_sent() {
	local wait=$((LAST_READING + 11 - SECONDS))
	[ "$wait" -le 0 ] || sleep "$wait"
	LAST_READING=$SECONDS
	SENT=$(curl -fsS "$ENDPOINT/minio/v2/metrics/node" |
		awk '/^minio_s3_traffic_sent_bytes/ {s += $2} END {printf "%.0f", s}')
}

mount_system() { # SYSTEM
	case $1 in
	shardfs)
		"$SHARDFS" mount "s3://$BUCKET" "$MNT" --foreground --log-level warn >>"$OUT/shardfs.log" 2>&1 &
		DAEMON_PID=$!
		;;
	shardfs-ring | shardfs-ring-direct)
		local page_cache=auto
		[ "$1" = shardfs-ring ] || page_cache=direct
		rm -rf "$OUT/cache"
		"$SHARDFS" mount "s3://$BUCKET" "$MNT" --foreground --log-level warn --cache-dir "$OUT/cache" \
			--cache-size "$((BYTES * 3))" --page-cache "$page_cache" >>"$OUT/shardfs.log" 2>&1 &
		DAEMON_PID=$!
		;;
	*) mount_peer "$1" "$BUCKET" "$MNT" "$ENDPOINT" "$PASSWD" "$OUT/$1.log" ;;
	esac
	local deadline=$((SECONDS + 60))
	until [ -e "$MNT/$KEY" ]; do
		kill -0 "$DAEMON_PID" 2>/dev/null || die "$1 exited during mount (see $OUT/$1.log)"
		[ $SECONDS -lt $deadline ] || die "$1: $MNT/$KEY not there after 60 s"
		sleep 0.1
	done
}

measure() { # SYSTEM BS JOBS
	local system=$1 bs=$2 jobs=$3 slice before after json
	slice=$((BYTES / jobs))
	# The ring, and s3fs's temporary files, take up to the object's size.
	need_free_space "$OUT" $((BYTES + (1 << 30))) "$system"
	need_free_space "${TMPDIR:-/tmp}" $((BYTES + (1 << 30))) "$system"
	mount_system "$system"
	drop_caches
	read_sent
	before=$SENT
	json=$OUT/fio-$system-$bs-$jobs.json
	fio --name=randread --filename="$MNT/$KEY" --rw=randread --bs="$bs" --numjobs="$jobs" \
		--size="$slice" --offset_increment="$slice" --ioengine=psync --invalidate=0 \
		--runtime="$RUNTIME" --group_reporting --output-format=json --output="$json" >/dev/null
	local cpu rss
	cpu=$(cpu_seconds "$DAEMON_PID")
	rss=$(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$DAEMON_PID/status")
	stop_daemon "$MNT"
	read_sent
	after=$SENT
	"$SYS_PYTHON" - "$json" "$system" "$bs" "$jobs" "$((after - before))" "$cpu" "$rss" "$(cut -d' ' -f1 /proc/loadavg)" <<-'PY' | tee -a "$RES" >&2
		import json, sys
		path, system, bs, jobs, store, cpu, rss, load = sys.argv[1:]
		read = json.load(open(path))["jobs"][0]["read"]
		print(f"RESULT system={system} bs={bs} jobs={jobs} mibps={read['bw_bytes'] / 2**20:.1f}"
		      f" iops={read['iops']:.0f} bytes={read['io_bytes']} seconds={read['runtime'] / 1000:.1f}"
		      f" store_bytes={store} cpu_s={cpu} peak_rss_mib={rss} load={load}")
	PY
}

read -r -a SYSTEMS <<<"${SYSTEMS_LIST//,/ }"
for round in $(seq "$ROUNDS"); do
	for bs in ${BS_LIST//,/ }; do
		for jobs in ${JOBS_LIST//,/ }; do
			# A different system goes first in each round.
			for i in "${!SYSTEMS[@]}"; do
				measure "${SYSTEMS[$(((i + round - 1) % ${#SYSTEMS[@]}))]}" "$bs" "$jobs"
			done
		done
	done
done

"$SYS_PYTHON" - "$RES" "$BYTES" >"$OUT/table.md" <<'PY'
import statistics, sys
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    rows[(f["bs"], int(f["jobs"]), f["system"])].append(f)
size = int(sys.argv[2])
shardfs_systems = ["shardfs", "shardfs-ring", "shardfs-ring-direct"]
systems = [s for s in shardfs_systems + ["s3fs", "rclone"] if any(k[2] == s for k in rows)]
def med(runs, key):
    return statistics.median(float(r[key]) for r in runs)
print("| bs | jobs | " + " | ".join(f"{s} MiB/s (every round)" for s in systems)
      + " | best shardfs/s3fs | best shardfs/rclone | " + " | ".join(f"{s} store bytes / object" for s in systems)
      + " | " + " | ".join(f"{s} CPU-s/GB" for s in systems) + " | " + " | ".join(f"{s} peak RSS MiB" for s in systems) + " |")
print("|" + "---|" * (2 + 4 * len(systems) + 2))
for bs, jobs in sorted({(k[0], k[1]) for k in rows}, key=lambda k: (len(k[0]), k[0], k[1])):
    cells = []
    for s in systems:
        runs = rows[(bs, jobs, s)]
        cells.append(f"{med(runs, 'mibps'):.1f} ({', '.join(r['mibps'] for r in runs)})")
    mb = {s: med(rows[(bs, jobs, s)], "mibps") for s in systems}
    ratio = lambda a, b: f"{a / b:.2f}x" if b else "-"
    store = [f"{med(rows[(bs, jobs, s)], 'store_bytes') / size:.2f}" for s in systems]
    cpu = []
    for s in systems:
        runs = rows[(bs, jobs, s)]
        gb = med(runs, "bytes") / 1e9
        cpu.append(f"{med(runs, 'cpu_s') / gb:.2f}" if gb else "-")
    rss = [f"{med(rows[(bs, jobs, s)], 'peak_rss_mib'):.0f}" if all("peak_rss_mib" in r for r in rows[(bs, jobs, s)]) else "-" for s in systems]
    best = max(mb.get(s, 0) for s in shardfs_systems)
    print(f"| {bs} | {jobs} | " + " | ".join(cells) + f" | {ratio(best, mb.get('s3fs', 0))} | {ratio(best, mb.get('rclone', 0))} | "
          + " | ".join(store) + " | " + " | ".join(cpu) + " | " + " | ".join(rss) + " |")
PY
cat "$OUT/table.md"
log "results in $RES"
