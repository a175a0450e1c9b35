#!/usr/bin/env bash
# Metadata at scale, against a loopback MinIO:
#   1. `ls -l` of one directory of 20,000 objects: cold (mount, which lists,
#      then the first ls -l) against a bare listing of the prefix (rclone lsf,
#      one ListObjectsV2 stream), and warm (second and third ls -l) against
#      ls -l of a local copy of the same files; strace -c of a warm ls -l.
#   2. Mounting a prefix of 100,000 objects in 100 directories with one LIST
#      stream (--list-streams 1) against the parallel default: mount time,
#      LIST requests and seconds, CPU-seconds of the daemon and of MinIO.
#   3. A remount on the same cache dir: LIST requests (want 0) and time.
#   4. A generated manifest of 1,000,000 keys: mount time and daemon RSS, per
#      key above a one-key manifest mount.
# Rounds are interleaved (one of each per round) and every round is printed.
#   BENCH_ROUNDS=3 bash scripts/bench_meta.sh
#   BENCH_PARTS="1 4" bash scripts/bench_meta.sh     (only some of the measurements)
# The objects are uploaded once (rclone, 48 transfers) and kept in the
# MinIO of $SHARDFS_MINIO_STATE for later runs; scripts/minio.sh stop drops them.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

ROUNDS=${BENCH_ROUNDS:-3}
PARTS=" ${BENCH_PARTS:-1 2 3 4} "
part() { [[ $PARTS == *" $1 "* ]]; }
BUCKET=${BENCH_BUCKET:-bench-meta}
BENCH=$WORK_DIR/bench-meta
BIN=$BENCH/shardfs
MNT=$BENCH/mnt
export SHARDFS_MINIO_STATE=${SHARDFS_MINIO_STATE:-$BENCH/minio.env}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	rm -rf "$BENCH/cache"
	[ $rc -eq 0 ] || log "bench_meta FAILED (exit $rc); mount log: $BENCH/shardfs.log"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ns() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }

# stat_value NAME prints one series of the mount's stats JSON.
stat_value() {
	"$SYS_PYTHON" -c 'import json, sys
print(round(sum(s["value"] for s in json.load(open(sys.argv[1])) if s["name"] == sys.argv[2]), 3))' "$MNT/.shardfs/stats" "$1"
}

# cpu_s PID prints the user+system CPU-seconds of a process so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

mkdir -p "$BENCH" "$MNT"
go build -o "$BIN" ./cmd/shardfs
eval "$(bash scripts/minio.sh start)"
# shellcheck disable=SC1090
minio_pid=$(source "$SHARDFS_MINIO_STATE" && echo "$MINIO_PID")

# upload PREFIX DIRS FILES: DIRS directories (0: flat) of FILES 100-byte objects.
upload() {
	local prefix=$1 dirs=$2 files=$3 want have
	want=$((files * (dirs > 0 ? dirs : 1)))
	have=$("$BIN" ls "s3://$BUCKET/$prefix" 2>/dev/null | wc -l || true)
	if [ "$have" -eq "$want" ]; then
		return
	fi
	"$SYS_PYTHON" - "$BENCH/data/$prefix" "$dirs" "$files" <<-'PY'
		import os, sys
		root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
		for d in range(max(dirs, 1)):
		    p = os.path.join(root, f"part-{d:03d}") if dirs else root
		    os.makedirs(p, exist_ok=True)
		    for f in range(files):
		        with open(os.path.join(p, f"obj-{f:06d}.bin"), "wb") as out:
		            out.write(b"x" * 100)
	PY
	rclone_s3 mkdir ":s3:$BUCKET"
	start=$(now_ns)
	rclone_s3 copy --transfers 48 --checkers 48 --no-check-dest --s3-no-head --s3-no-check-bucket \
		"$BENCH/data/$prefix" ":s3:$BUCKET/$prefix"
	log "uploaded $want objects to s3://$BUCKET/$prefix in $(ms "$start" "$(now_ns)") ms"
}
upload flat20k 0 20000
upload tree100k 100 1000
if [ ! -d "$BENCH/data/flat20k" ]; then
	# The local copy for ls -l, when the objects were uploaded by an earlier run.
	rclone_s3 copy --transfers 16 ":s3:$BUCKET/flat20k" "$BENCH/data/flat20k"
fi

mount_at() { # SOURCE FLAGS...: mount at $MNT, print the wall time in ms
	local src=$1 start
	shift
	start=$(now_ns)
	"$BIN" mount "$src" "$MNT" --log-file "$BENCH/shardfs.log" "$@"
	ms "$start" "$(now_ns)"
}

timed_ls() { # DIR: ls -l of DIR, print ms
	local start
	start=$(now_ns)
	ls -l "$1" >/dev/null
	ms "$start" "$(now_ns)"
}

part 1 && echo "== 1. ls -l of 20,000 objects in one directory"
part 1 && for round in $(seq 1 "$ROUNDS"); do
	start=$(now_ns)
	n=$(rclone_s3 lsf --fast-list ":s3:$BUCKET/flat20k" | wc -l)
	bare=$(ms "$start" "$(now_ns)")
	start=$(now_ns)
	"$BIN" ls "s3://$BUCKET/flat20k" --list-streams 1 >/dev/null
	own=$(ms "$start" "$(now_ns)")
	mount_ms=$(mount_at "s3://$BUCKET/flat20k")
	cold=$(timed_ls "$MNT")
	warm2=$(timed_ls "$MNT")
	local2=$(timed_ls "$BENCH/data/flat20k")
	warm3=$(timed_ls "$MNT")
	local3=$(timed_ls "$BENCH/data/flat20k")
	"$BIN" unmount "$MNT"
	echo "round $round: bare LIST (rclone lsf, $n keys) ${bare} ms; shardfs ls ${own} ms; mount ${mount_ms} ms + first ls -l ${cold} ms = $((mount_ms + cold)) ms;" \
		"warm ls -l ${warm2} / ${warm3} ms; local copy ${local2} / ${local3} ms"
done
if part 1; then
	mount_at "s3://$BUCKET/flat20k" >/dev/null
	ls -l "$MNT" >/dev/null
	echo "strace -c of a warm ls -l through the mount (top syscalls):"
	strace -c -o "$BENCH/strace.txt" ls -l "$MNT" >/dev/null
	sed -n '1,8p' "$BENCH/strace.txt"
	"$BIN" unmount "$MNT"
fi

part 2 && echo
part 2 && echo "== 2. mount of 100,000 objects in 100 directories: one LIST stream against parallel runs"
part 2 && for round in $(seq 1 "$ROUNDS"); do
	for streams in 1 8; do
		m0=$(cpu_s "$minio_pid")
		mount_ms=$(mount_at "s3://$BUCKET/tree100k" --list-streams "$streams")
		pid=$(stat_value shardfs_daemon_pid)
		echo "round $round, --list-streams $streams: mount ${mount_ms} ms; LIST requests $(stat_value shardfs_metadata_mount_list_requests)," \
			"listing $(stat_value shardfs_metadata_mount_list_seconds) s; objects $(stat_value shardfs_metadata_objects);" \
			"daemon CPU $(cpu_s "$pid") s, MinIO CPU $(sub "$(cpu_s "$minio_pid")" "$m0") s"
		"$BIN" unmount "$MNT"
	done
done

part 3 && echo
part 3 && echo "== 3. remount on the same cache dir"
rm -rf "$BENCH/cache"
part 3 && for round in $(seq 1 "$ROUNDS"); do
	mount_ms=$(mount_at "s3://$BUCKET/tree100k" --cache-dir "$BENCH/cache")
	echo "round $round: mount ${mount_ms} ms; LIST requests $(stat_value shardfs_store_list_requests_total); from the cache dir $(stat_value shardfs_metadata_from_cache)"
	"$BIN" unmount "$MNT"
done

part 4 && echo
part 4 && echo "== 4. a manifest of 1,000,000 keys"
part 4 || exit 0
if [ ! -s "$BENCH/manifest-1m.jsonl" ]; then
	"$SYS_PYTHON" - "$BENCH/manifest-1m.jsonl" <<-'PY'
		import json, sys
		with open(sys.argv[1], "w") as f:
		    for i in range(1_000_000):
		        f.write(json.dumps({"key": f"train/part-{i // 1000:04d}/shard-{i:07d}.tar", "size": 1 << 20,
		                            "etag": '"%032x"' % i, "mtime": "2026-01-02T03:04:05Z"}) + "\n")
	PY
fi
head -n 1 "$BENCH/manifest-1m.jsonl" >"$BENCH/manifest-1.jsonl"
for round in $(seq 1 "$ROUNDS"); do
	base_ms=$(mount_at "s3://$BUCKET/none" --manifest "$BENCH/manifest-1.jsonl")
	base_kib=$(awk '/VmRSS/ { print $2 }' "/proc/$(stat_value shardfs_daemon_pid)/status")
	"$BIN" unmount "$MNT"
	mount_ms=$(mount_at "s3://$BUCKET/none" --manifest "$BENCH/manifest-1m.jsonl")
	pid=$(stat_value shardfs_daemon_pid)
	kib=$(awk '/VmRSS/ { print $2 }' "/proc/$pid/status")
	dirs=$(find "$MNT/train" -maxdepth 1 -mindepth 1 | wc -l)
	echo "round $round: mount ${mount_ms} ms (one-key manifest ${base_ms} ms); RSS $((kib / 1024)) MiB, one-key $((base_kib / 1024)) MiB:" \
		"$(((kib - base_kib) * 1024 / 1000000)) bytes per key; daemon CPU $(cpu_s "$pid") s; $dirs directories listed"
	"$BIN" unmount "$MNT"
done
