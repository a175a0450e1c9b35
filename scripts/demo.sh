#!/usr/bin/env bash
# The main job, end to end on this machine: build shardfs, start a local
# MinIO, upload sample WebDataset shards, mount the bucket, read every shard
# with a PyTorch DataLoader, print throughput and cache figures, unmount.
# Everything it starts is stopped on exit, success or not.
#   DEMO_SHARDS=24 DEMO_SAMPLES=64 DEMO_SAMPLE_SIZE=96K bash scripts/demo.sh
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

SHARDS=${DEMO_SHARDS:-24}
SAMPLES=${DEMO_SAMPLES:-64}
SAMPLE_SIZE=${DEMO_SAMPLE_SIZE:-96K}
WORKERS=${DEMO_WORKERS:-4}
BUCKET=demo
PREFIX=train

DEMO=$WORK_DIR/demo
BIN=$SHARDFS_ROOT/bin/shardfs
MNT=$DEMO/mnt
export SHARDFS_MINIO_STATE=$DEMO/minio.env

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	bash scripts/minio.sh stop 2>/dev/null || true
	rm -rf "$DEMO/shards"
	[ $rc -eq 0 ] || log "demo FAILED (exit $rc); mount log: $DEMO/shardfs.log"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n== %s\n' "$*"; }

step "dependencies"
bash scripts/install-deps.sh

step "build"
mkdir -p "$(dirname "$BIN")" "$DEMO"
go build -o "$BIN" ./cmd/shardfs
"$BIN" version || true

step "start MinIO"
eval "$(bash scripts/minio.sh start)"

step "generate and upload $SHARDS shards x $SAMPLES samples x $SAMPLE_SIZE"
rm -rf "$DEMO/shards"
"$SYS_PYTHON" scripts/gen_shards.py "$DEMO/shards" "$SHARDS" "$SAMPLES" "$SAMPLE_SIZE" --summary "$DEMO/summary.json"
bash scripts/upload.sh "$DEMO/shards" "s3://$BUCKET/$PREFIX"
expect=$("$SYS_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$DEMO/summary.json")

step "mount s3://$BUCKET/$PREFIX at $MNT"
mkdir -p "$MNT"
"$BIN" mount "s3://$BUCKET/$PREFIX" "$MNT" --log-file "$DEMO/shardfs.log"
is_mounted "$MNT" || die "shardfs mount returned but $MNT is not mounted"
ls -l "$MNT" | head -5
echo "... $(find "$MNT" -type f | wc -l) files, $(du -sh --apparent-size "$MNT" | cut -f1)"

step "read every shard with a PyTorch DataLoader ($WORKERS workers)"
"$SYS_PYTHON" scripts/loader_read.py "$MNT" --workers "$WORKERS" --expect-samples "$expect"

step "second epoch (served from the kernel page cache and shardfs caches)"
"$SYS_PYTHON" scripts/loader_read.py "$MNT" --workers "$WORKERS" --expect-samples "$expect"

step "mount statistics"
if ! "$BIN" stats "$MNT" 2>"$DEMO/stats.err"; then
	echo "note: 'shardfs stats' is not available in this build ($(head -n1 "$DEMO/stats.err"))"
	if [ -r "$MNT/.shardfs/stats" ]; then cat "$MNT/.shardfs/stats"; fi
fi

step "unmount"
"$BIN" unmount "$MNT"
is_mounted "$MNT" && die "$MNT is still mounted after shardfs unmount"
echo "demo OK"
