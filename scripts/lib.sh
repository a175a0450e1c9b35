# shellcheck shell=bash
# Shared settings of the scripts in this directory and what sets up their
# servers and mounts: pinned tools, the throwaway MinIO's credentials, rclone
# against it, unmounting, the Python package. Sourced, never run. The
# benchmarks start and mount their own (shardfs bench run).

SHARDFS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR=$SHARDFS_ROOT/.tools
TOOLS_BIN=$TOOLS_DIR/bin
WORK_DIR=$SHARDFS_ROOT/.work

# Pinned versions of the Go-built test tools.
MINIO_PKG=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
TOXIPROXY_PKG=github.com/Shopify/toxiproxy/v2/cmd/server
TOXIPROXY_VERSION=v2.12.0
CSI_SANITY_PKG=github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity
CSI_SANITY_VERSION=v5.6.0

# Debian's interpreter: it is the one python3-torch and python3-numpy install into.
SYS_PYTHON=/usr/bin/python3
# The virtual environment scripts/test.sh installs the shardfs Python package
# into (made with --system-site-packages, so Debian's torch and numpy are seen).
VENV_DIR=$WORK_DIR/venv

# Fixed credentials of the throwaway test MinIO. Never used anywhere else.
TEST_ACCESS_KEY=shardfs-test
TEST_SECRET_KEY=shardfs-test-secret
TEST_REGION=us-east-1

log() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# as_root runs a command as root, through sudo only when needed.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	else
		sudo "$@"
	fi
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	"$SYS_PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# rclone_s3 runs rclone against the MinIO described by AWS_* and
# SHARDFS_ENDPOINT_URL, through an on-the-fly ":s3:" remote (no rclone.conf).
rclone_s3() {
	: "${SHARDFS_ENDPOINT_URL:?SHARDFS_ENDPOINT_URL is not set (run: eval \"\$(scripts/minio.sh env)\")}"
	# AWS_CA_BUNDLE is dropped: rclone's S3 client rejects it, and the
	# endpoint here is plain http on 127.0.0.1.
	env -u AWS_CA_BUNDLE \
		RCLONE_CONFIG=/dev/null \
		RCLONE_S3_PROVIDER=Minio \
		RCLONE_S3_ENDPOINT=$SHARDFS_ENDPOINT_URL \
		RCLONE_S3_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:?} \
		RCLONE_S3_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:?} \
		RCLONE_S3_REGION=${AWS_REGION:-$TEST_REGION} \
		rclone "$@"
}

# is_mounted DIR: whether DIR is a mount point in this namespace.
is_mounted() { grep -qF " $1 " /proc/self/mountinfo; }

# unmount_quietly BIN DIR: unmount a shardfs mount if it is there, lazily
# when a reader still holds it; for cleanup traps.
unmount_quietly() {
	is_mounted "$2" || return 0
	"$1" unmount "$2" 2>/dev/null || fusermount3 -u -z "$2" 2>/dev/null || true
}

# install_python_package makes $VENV_DIR (once) and installs python/ into it,
# offline: setuptools comes from Debian, nothing from a package index.
install_python_package() {
	[ -x "$VENV_DIR/bin/python" ] || "$SYS_PYTHON" -m venv --system-site-packages "$VENV_DIR"
	"$VENV_DIR/bin/pip" install --quiet --no-build-isolation --no-index --force-reinstall "$SHARDFS_ROOT/python"
}

# shardfs_python_env PY: scripts that import the shardfs package run PY with
# its installed copy, or with python/ of this checkout on PYTHONPATH when PY
# has none.
shardfs_python_env() {
	if ! "$1" -c 'import shardfs' 2>/dev/null; then
		export PYTHONPATH=$SHARDFS_ROOT/python${PYTHONPATH:+:$PYTHONPATH}
	fi
}
