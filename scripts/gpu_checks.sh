#!/usr/bin/env bash
# The GPU side interface on a machine with CUDA, end to end: what go-nvml
# sees, the ctl capabilities, the interface's checks (test_client.py), the
# throughput of the staged and direct paths against memcpy and a plain torch
# pinned copy (gpu_bench.py), read_into in interleaved rounds against its
# ceiling (gpu_rounds.py: out of the shared RAM tier against a pinned copy,
# out of the ring against the client's own O_DIRECT read), and the example
# training loop.
#   bash scripts/gpu_checks.sh
# Shards are generated into a local directory and mounted with a ring cache,
# so no MinIO is needed. On a machine without CUDA every step still runs and
# the GPU sections say they were skipped.
#
# Environment:
#   SHARDFS_BIN        a built shardfs (default: build bin/shardfs with go)
#   PYTHON             interpreter with numpy, and torch for the GPU sections
#                      (default: the first of python3, /usr/bin/python3 that has torch);
#                      the shardfs package is its installed copy, else python/ here
#   GPU_CHECKS_LARGE   size of the large shard the benchmark reads (default 512M)
#   GPU_CHECKS_SECONDS seconds of each throughput row (default 3)
#   GPU_CHECKS_ROUNDS  interleaved rounds of each gpu_rounds.py comparison (default 3)
#   GPU_CHECKS_DIR     work directory, on a disk that takes O_DIRECT
#                      (default .work/gpu-checks; removed afterwards)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

LARGE=${GPU_CHECKS_LARGE:-512M}
SECONDS_PER_ROW=${GPU_CHECKS_SECONDS:-3}
ROUNDS=${GPU_CHECKS_ROUNDS:-3}
DIR=${GPU_CHECKS_DIR:-$WORK_DIR/gpu-checks}
SRC=$DIR/src
MNT=$DIR/mnt
CACHE_DIR=$DIR/cache

pick_python() {
	if [ -n "${PYTHON:-}" ]; then
		echo "$PYTHON"
		return
	fi
	local py
	for py in python3 "$SYS_PYTHON"; do
		if command -v "$py" >/dev/null && "$py" -c 'import numpy, torch' 2>/dev/null; then
			echo "$py"
			return
		fi
	done
	for py in python3 "$SYS_PYTHON"; do
		if command -v "$py" >/dev/null && "$py" -c 'import numpy' 2>/dev/null; then
			echo "$py"
			return
		fi
	done
	die "no python3 with numpy (set PYTHON)"
}

BIN=${SHARDFS_BIN:-}
if [ -z "$BIN" ]; then
	BIN=$SHARDFS_ROOT/bin/shardfs
	go build -o "$BIN" ./cmd/shardfs
fi
PY=$(pick_python)
shardfs_python_env "$PY"

FAILED=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	unmount_quietly "$BIN" "$MNT"
	rm -rf "$DIR"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# step NAME CMD...: run one check, note a failure, go on with the rest.
step() {
	local name=$1
	shift
	printf '\n== %s\n' "$name"
	if ! "$@"; then
		FAILED+=("$name")
		printf '!! %s FAILED\n' "$name"
	fi
}

rm -rf "$DIR"
mkdir -p "$SRC" "$MNT" "$CACHE_DIR"
log "generating shards in $SRC (large shard $LARGE)"
"$PY" scripts/gen_shards.py "$SRC" 8 16 1M --large "$LARGE" --nested val >/dev/null

printf '== machine\n'
"$PY" - <<'PY' || true
import platform
try:
    import torch
    cuda = torch.cuda.is_available()
    print("python %s, torch %s, CUDA %s" % (platform.python_version(), torch.__version__,
          torch.version.cuda if cuda else "not available"))
    if cuda:
        print("device 0:", torch.cuda.get_device_name(0))
except ImportError:
    print("python %s, no torch" % platform.python_version())
PY

step "shardfs gpus" "$BIN" gpus
# Warmed first, so that the cache holds them as whole-shard files too: the
# large shard (the benchmark's cuFile rows) and one small one, which the
# interface checks read whole and then delete under the client.
"$BIN" warm "$SRC" --cache-dir "$CACHE_DIR" --cache-size 4GiB --include 'large/*'
"$BIN" warm "$SRC" --cache-dir "$CACHE_DIR" --cache-size 4GiB --include shard-000001.tar
# First with a RAM tier that holds the large shard: READs copy from RAM, and
# read_into copies from it itself (shared: on, as auto is where the daemon
# sees a GPU, and here even without one).
"$BIN" mount "$SRC" "$MNT" --cache-dir "$CACHE_DIR" --cache-size 4GiB --memory-cache-size 1GiB --memory-cache-shared on \
	--log-file "$DIR/shardfs.log"
step "ctl capabilities" "$PY" -m json.tool "$MNT/.shardfs/ctl"
step "interface checks (test_client.py)" "$PY" python/tests/integration/test_client.py --mount "$MNT" --source "$SRC" \
	--whole shard-000001.tar --cold shard-000000.tar
step "throughput, bytes in the RAM tier (gpu_bench.py)" env PYTHONUNBUFFERED=1 \
	"$PY" gds/python/gpu_bench.py --mount "$MNT" --seconds "$SECONDS_PER_ROW"
step "read_into from the shared RAM tier against a pinned copy (gpu_rounds.py)" env PYTHONUNBUFFERED=1 \
	"$PY" gds/python/gpu_rounds.py --mount "$MNT" --file large/shard-large.tar --rounds "$ROUNDS"
step "example training loop" "$PY" examples/train_gpu.py --mount "$MNT" --steps 30
"$BIN" unmount "$MNT"

# Then with the ring alone (the ring kept from above): READs read the disk.
"$BIN" mount "$SRC" "$MNT" --cache-dir "$CACHE_DIR" --cache-size 4GiB --memory-cache-size 0 \
	--log-file "$DIR/shardfs.log"
step "throughput, bytes in the ring only (gpu_bench.py)" env PYTHONUNBUFFERED=1 \
	"$PY" gds/python/gpu_bench.py --mount "$MNT" --seconds "$SECONDS_PER_ROW"
step "read_into from the ring against the client's O_DIRECT read (gpu_rounds.py --ring)" env PYTHONUNBUFFERED=1 \
	"$PY" gds/python/gpu_rounds.py --mount "$MNT" --file large/shard-large.tar --rounds "$ROUNDS" --ring

printf '\n'
if [ ${#FAILED[@]} -gt 0 ]; then
	log "gpu_checks: FAILED: ${FAILED[*]} (mount log: $DIR/shardfs.log)"
	cp "$DIR/shardfs.log" "${TMPDIR:-/tmp}/shardfs-gpu-checks.log" 2>/dev/null || true
	exit 1
fi
log "gpu_checks: all steps passed"
