#!/usr/bin/env bash
# Accelerator utilization (AU), MLPerf Storage's measure, the way DLIO takes
# it: N emulated accelerators, each a DataLoader over its share of the data
# that sleeps a fixed compute time per batch; AU = compute time / wall time
# of the measured steps (scripts/au_accelerators.py). Passing is AU >= 90%.
#
#   sudo bash scripts/au_bench.sh [--counts "1 2 3 4 6 8 10 12"] [--rounds 1] [--out DIR]
#                                 [--workloads "resnet50 unet3d"] [--systems "local shardfs-warm ..."]
#
# Two workloads: resnet50 (tar shards of 100 KiB samples, streamed) and
# unet3d (8 MiB samples, one per file, read whole in shuffled order). The
# store is MinIO behind Toxiproxy (20 ms latency, 50 MB/s per connection).
# For every accelerator count, in one run and interleaved, five setups read
# the same data:
#   local         a local copy on disk
#   shardfs-warm  shardfs over a ring cache filled by `shardfs warm`
#   shardfs-cold  shardfs, fresh mount, no cache dir
#   s3fs, rclone  Debian's s3fs and `rclone mount --vfs-cache-mode off`
# Every run mounts afresh and drops the page cache first. Results:
# OUT/results.jsonl (one line per run, with the CPU seconds of the daemon,
# MinIO and Toxiproxy), shardfs's stats after each of its runs, OUT/table.md
# and OUT/au.png (python3-matplotlib).
# It holds /tmp/shardfs-bench.lock while it runs. Needs root.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

if [ -z "${AU_BENCH_LOCKED:-}" ]; then # one benchmark at a time on the box
	exec env AU_BENCH_LOCKED=1 flock /tmp/shardfs-bench.lock bash "$0" "$@"
fi

COUNTS="1 2 3 4 6 8 10 12" OUT=$WORK_DIR/au-bench ROUNDS=1 WORKLOADS="resnet50 unet3d"
SYSTEMS=(local shardfs-warm shardfs-cold s3fs rclone)
while [ $# -gt 0 ]; do
	case $1 in
	--systems) read -r -a SYSTEMS <<<"$2"; shift ;;
	--counts) COUNTS=$2; shift ;;
	--workloads) WORKLOADS=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache and mounts"
max_count=$(printf '%s\n' $COUNTS | sort -n | tail -1)

# The two workloads. Per accelerator: resnet50 needs 32 x 102.5 KB every
# 0.1 s (33 MB/s), unet3d 8 MiB every 0.25 s (34 MB/s); two DataLoader
# workers each. Measured steps take 3 s when the data keeps up.
declare -A BATCH=([resnet50]=32 [unet3d]=1)
declare -A COMPUTE=([resnet50]=0.1 [unet3d]=0.25)
declare -A STEPS=([resnet50]=30 [unet3d]=12)
SHARD_SAMPLES=256 SAMPLE_SIZE=100K UNET_FILE=8M
# Every accelerator reads data of its own: 4 shards (1024 samples >= 31
# batches of 32) and 13 files (>= 13 batches of 1) each.
RESNET_SHARDS=$((4 * max_count)) UNET_FILES=$((13 * max_count))
LATENCY_MS=20 RATE_KBPS=50000 # toxiproxy's bandwidth rate is in KB/s
BUCKET=au-bench
CACHE_SIZE=8GiB

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
MNT=$OUT/mnt CACHE=$OUT/cache
mkdir -p "$MNT"
SHARDFS=$SHARDFS_ROOT/bin/shardfs
go build -o "$SHARDFS" ./cmd/shardfs
shardfs_python_env "$SYS_PYTHON"

DAEMON_PID= TOXI_PID=
export SHARDFS_MINIO_STATE=$WORK_DIR/au-minio.env
cleanup() {
	set +e
	is_mounted "$MNT" && fusermount3 -uz "$MNT"
	[ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null
	[ -n "$TOXI_PID" ] && kill "$TOXI_PID" 2>/dev/null
	"$SHARDFS_ROOT/scripts/minio.sh" stop >/dev/null 2>&1
}
trap cleanup EXIT

# --- data, kept across runs in .work -------------------------------------
DATA=$WORK_DIR/au-data-$RESNET_SHARDS-$UNET_FILES
if [ ! -f "$DATA/.done" ]; then
	log "generating $RESNET_SHARDS shards of $SHARD_SAMPLES x $SAMPLE_SIZE samples and $UNET_FILES files of $UNET_FILE in $DATA"
	rm -rf "$DATA"
	"$SYS_PYTHON" scripts/gen_shards.py "$DATA/resnet50" "$RESNET_SHARDS" "$SHARD_SAMPLES" "$SAMPLE_SIZE" >/dev/null
	mkdir -p "$DATA/unet3d"
	for i in $(seq -f '%05g' 0 $((UNET_FILES - 1))); do
		head -c "$UNET_FILE" /dev/urandom >"$DATA/unet3d/sample-$i.npz"
	done
	touch "$DATA/.done"
fi

eval "$(scripts/minio.sh start)"
MINIO_URL=$SHARDFS_ENDPOINT_URL
# shellcheck disable=SC1090
MINIO_PID=$(source "$SHARDFS_MINIO_STATE" && echo "$MINIO_PID")
scripts/upload.sh "$DATA" "s3://$BUCKET" 2>&1 | tail -1 >&2

start_toxiproxy "$MINIO_URL" "$OUT/toxiproxy.log" "$LATENCY_MS" "$RATE_KBPS"
ENDPOINT=$TOXI_URL
export SHARDFS_ENDPOINT_URL=$ENDPOINT
log "toxiproxy at $ENDPOINT: $LATENCY_MS ms latency, $((RATE_KBPS / 1000)) MB/s per connection"

# The ring is keyed by SOURCE: each workload's prefix is warmed as it is mounted.
rm -rf "$CACHE"
for workload in $WORKLOADS; do
	[[ " ${SYSTEMS[*]} " == *" shardfs-warm "* ]] || break
	log "warming the ring cache: shardfs warm s3://$BUCKET/$workload"
	"$SHARDFS" warm "s3://$BUCKET/$workload" --cache-dir "$CACHE" --cache-size "$CACHE_SIZE" >>"$OUT/warm.log" 2>&1
done

PASSWD=$OUT/s3fs.passwd
printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$PASSWD"
chmod 600 "$PASSWD"

minus() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a - b}'; }
cpu_s() { # utime + stime of PID, in seconds
	awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# mount_fs SYSTEM WORKLOAD: mounts s3://au-bench/WORKLOAD at $MNT, daemon in the
# foreground as a child of this script; READ_DIR is the directory to read.
mount_fs() {
	local system=$1 workload=$2
	READ_DIR=$MNT DAEMON_PID=
	case $system in
	local)
		READ_DIR=$DATA/$workload
		return
		;;
	shardfs-warm)
		"$SHARDFS" mount "s3://$BUCKET/$workload" "$MNT" --foreground --log-level warn \
			--cache-dir "$CACHE" --cache-size "$CACHE_SIZE" >>"$OUT/shardfs.log" 2>&1 &
		;;
	shardfs-cold)
		"$SHARDFS" mount "s3://$BUCKET/$workload" "$MNT" --foreground --log-level warn >>"$OUT/shardfs.log" 2>&1 &
		;;
	s3fs | rclone) mount_peer "$system" "$BUCKET/$workload" "$MNT" "$ENDPOINT" "$PASSWD" "$OUT/$system.log" ;;
	esac
	case $system in shardfs-*) DAEMON_PID=$! ;; esac
	local deadline=$((SECONDS + 60))
	until is_mounted "$MNT" && [ -n "$(ls "$MNT" 2>/dev/null)" ]; do
		kill -0 "$DAEMON_PID" 2>/dev/null || die "$system exited during mount (see $OUT/${system%-*}.log)"
		[ $SECONDS -lt $deadline ] || die "$system not mounted after 60s"
		sleep 0.1
	done
}

unmount_fs() { [ -z "$DAEMON_PID" ] || stop_daemon "$MNT"; }

# run_one ROUND WORKLOAD SYSTEM COUNT: one measurement, one line of results.
run_one() {
	local round=$1 workload=$2 system=$3 n=$4
	mount_fs "$system" "$workload"
	drop_caches
	local minio0 toxi0 daemon0=0
	minio0=$(cpu_s "$MINIO_PID") toxi0=$(cpu_s "$TOXI_PID")
	[ -z "$DAEMON_PID" ] || daemon0=$(cpu_s "$DAEMON_PID")
	local line
	line=$("$SYS_PYTHON" scripts/au_accelerators.py "$READ_DIR" --workload "$workload" --accelerators "$n" \
		--batch "${BATCH[$workload]}" --compute-time "${COMPUTE[$workload]}" --steps "${STEPS[$workload]}" \
		--max-seconds 20 | sed -n 's/^RESULT //p') || true
	local daemon1=0
	[ -z "$DAEMON_PID" ] || daemon1=$(cpu_s "$DAEMON_PID")
	case $system in shardfs-*) "$SHARDFS" stats "$MNT" >"$OUT/stats-$round-$workload-$system-$n.txt" 2>&1 || true ;; esac
	local extra
	extra=$(printf '{"round": %d, "system": "%s", "daemon_cpu_s": %s, "minio_cpu_s": %s, "toxiproxy_cpu_s": %s, "load": "%s"}' \
		"$round" "$system" "$(minus "$daemon1" "$daemon0")" "$(minus "$(cpu_s "$MINIO_PID")" "$minio0")" \
		"$(minus "$(cpu_s "$TOXI_PID")" "$toxi0")" "$(cut -d' ' -f1 /proc/loadavg)")
	unmount_fs
	[ -n "$line" ] || line='{"errors": ["no RESULT line"]}'
	"$SYS_PYTHON" -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(json.loads(sys.argv[2])); print(json.dumps(r))' \
		"$line" "$extra" | tee -a "$RESULTS" | "$SYS_PYTHON" -c '
import json, sys
r = json.loads(sys.stdin.read())
au = "%.1f%%" % (100 * r["au"]) if "au" in r else "ERROR " + "; ".join(r["errors"])
print("%-9s %-13s %2d accelerators: AU %s" % (r.get("workload", "?"), r["system"], r.get("accelerators", 0), au), file=sys.stderr)'
}

started=$SECONDS
for round in $(seq "$ROUNDS"); do
	for workload in $WORKLOADS; do
		for n in $COUNTS; do
			for system in "${SYSTEMS[@]}"; do
				run_one "$round" "$workload" "$system" "$n"
			done
		done
	done
done
log "runs done in $((SECONDS - started)) s"
"$SYS_PYTHON" scripts/au_report.py "$RESULTS" --table "$OUT/table.md" --plot "$OUT/au.png"
