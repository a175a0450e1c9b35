#!/usr/bin/env bash
# Installs what the demo and the tests need, and nothing when it is all there:
#   Debian packages: fuse3, python3-torch, python3-numpy, s3fs, rclone, fio (+ curl),
#   systemd (systemd-analyze verify checks the unit),
#   python3-venv, -pip, -setuptools, -wheel (to install the Python package offline),
#   python3-matplotlib (the accelerator-utilization plot)
#   Go-built tools, pinned, into .tools/bin: minio, toxiproxy-server, csi-sanity
# Idempotent; a stamp per tool records the version it was built at.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

APT_PACKAGES=(fuse3 python3-torch python3-numpy python3-venv python3-pip python3-setuptools python3-wheel python3-matplotlib s3fs rclone fio curl ca-certificates systemd)

install_apt_packages() {
	local missing=() pkg
	for pkg in "${APT_PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$pkg")
		fi
	done
	if [ ${#missing[@]} -eq 0 ]; then
		log "apt: all present (${APT_PACKAGES[*]})"
		return
	fi
	log "apt: installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# build_go_tool NAME PACKAGE VERSION: builds PACKAGE@VERSION into .tools/bin/NAME
# unless the stamp (or the module version embedded in the binary) says it is there.
build_go_tool() {
	local name=$1 pkg=$2 version=$3
	local bin=$TOOLS_BIN/$name stamp=$TOOLS_DIR/stamps/$name want="$pkg@$version"
	mkdir -p "$TOOLS_BIN" "$TOOLS_DIR/stamps"
	if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		log "$name: $version present"
		return
	fi
	if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | awk '$1 == "mod" {print $3}' | grep -qx -- "$version"; then
		printf '%s\n' "$want" >"$stamp"
		log "$name: $version present (stamp written)"
		return
	fi
	log "$name: building $want (minutes on a cold cache)"
	local tmp
	tmp=$(mktemp -d)
	# go install builds outside this module, at exactly the pinned version.
	(cd "$tmp" && GOBIN=$tmp GOFLAGS=-buildvcs=false go install "$want")
	mv -f "$tmp/$(basename "$pkg")" "$bin"
	rm -rf "$tmp"
	printf '%s\n' "$want" >"$stamp"
	log "$name: built $bin"
}

check_go() {
	command -v go >/dev/null || die "go is not on PATH; install Go >= $(awk '$1 == "go" {print $2}' "$SHARDFS_ROOT/go.mod") from https://go.dev/dl/"
}

check_fuse() {
	[ -c /dev/fuse ] || log "warning: /dev/fuse is missing: mounts (and the end-to-end tests) will fail; in a container, pass --device /dev/fuse --cap-add SYS_ADMIN"
}

install_apt_packages
check_go
build_go_tool minio "$MINIO_PKG" "$MINIO_VERSION"
build_go_tool toxiproxy-server "$TOXIPROXY_PKG" "$TOXIPROXY_VERSION"
build_go_tool csi-sanity "$CSI_SANITY_PKG" "$CSI_SANITY_VERSION"
check_fuse
log "dependencies ready"
