#!/usr/bin/env bash
# A four-node distributed MinIO, each node in a network namespace of its own
# on its own address, joined by veth pairs to a bridge in a fifth namespace
# (the client's), where a test runs the mount and its readers. MinIO refuses
# a distributed set whose nodes all resolve to loopback, so the nodes get
# 10.77.0.11-14; the client is 10.77.0.1. Each node has its own data
# directory (bind-mounted in its own mount namespace at the path every node
# names). Needs root, iproute2 and .tools/bin/minio.
#
#   minio_cluster.sh up DIR      create the namespaces, start the nodes, wait for quorum
#   minio_cluster.sh kill DIR N  SIGKILL node N (1-4)
#   minio_cluster.sh start DIR N start node N again, wait until it answers
#   minio_cluster.sh down DIR    stop every node, delete the namespaces
#
# The client namespace is $SHARDFS_NETNS (default shardfs-client); nodes are
# $SHARDFS_NETNS-m1..m4. Credentials: MINIO_ROOT_USER / MINIO_ROOT_PASSWORD.
set -euo pipefail

cmd=${1:?usage: minio_cluster.sh up|kill|start|down DIR [N]}
dir=${2:?cache directory missing}
client=${SHARDFS_NETNS:-shardfs-client}
net=10.77.0
minio=${MINIO:-$(cd "$(dirname "$0")/.." && pwd)/.tools/bin/minio}
: "${MINIO_ROOT_USER:=shardfs-test}" "${MINIO_ROOT_PASSWORD:=shardfs-test-secret}"

node_ns() { echo "$client-m$1"; }
node_addr() { echo "$net.1$1"; }

start_node() {
	local i=$1 ns
	ns=$(node_ns "$i")
	mkdir -p "$dir/node$i/data" "$dir/mnt"
	# ip netns exec gives the node a mount namespace of its own, a copy of
	# the caller's: its data directory is bound there at the path all four
	# nodes name, and the copies of FUSE mounts are dropped (a node
	# restarted from the client namespace would otherwise hold the client's
	# mount, which then could never go away).
	ip netns exec "$ns" env MINIO_ROOT_USER="$MINIO_ROOT_USER" MINIO_ROOT_PASSWORD="$MINIO_ROOT_PASSWORD" \
		MINIO_CI_CD=1 MINIO_BROWSER=off MINIO_UPDATE=off \
		sh -c "awk '\$3 ~ /^fuse/ {print \$2}' /proc/self/mounts | xargs -r -n1 umount -l; mount --bind '$dir/node$i' '$dir/mnt' && exec '$minio' server --quiet --address $(node_addr "$i"):9000 http://$net.1{1...4}:9000$dir/mnt/data" \
		>>"$dir/node$i.log" 2>&1 &
	echo $! >"$dir/node$i.pid"
}

# wait_ok URL SECONDS: until the client namespace gets 200 from URL.
wait_ok() {
	local deadline=$((SECONDS + $2))
	until ip netns exec "$client" curl -sf -o /dev/null "$1"; do
		if ((SECONDS > deadline)); then
			echo "minio_cluster: $1 not ready after $2 s" >&2
			tail -n 5 "$dir"/node*.log >&2 || true
			return 1
		fi
		sleep 0.5
	done
}

case $cmd in
up)
	mkdir -p "$dir"
	ip netns add "$client"
	ip -n "$client" link set lo up
	ip -n "$client" link add br0 type bridge
	ip -n "$client" addr add "$net.1/24" dev br0
	ip -n "$client" link set br0 up
	for i in 1 2 3 4; do
		ns=$(node_ns "$i")
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		ip link add "sfsv$i" netns "$client" type veth peer name eth0 netns "$ns"
		ip -n "$client" link set "sfsv$i" master br0 up
		ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
		ip -n "$ns" link set eth0 up
	done
	for i in 1 2 3 4; do start_node "$i"; done
	wait_ok "http://$(node_addr 1):9000/minio/health/cluster" 120
	;;
kill)
	kill -KILL "$(cat "$dir/node$3.pid")" 2>/dev/null || true
	;;
start)
	start_node "$3"
	wait_ok "http://$(node_addr "$3"):9000/minio/health/live" 60
	wait_ok "http://$(node_addr "$3"):9000/minio/health/cluster" 60
	;;
down)
	for i in 1 2 3 4; do
		[ -f "$dir/node$i.pid" ] && kill -KILL "$(cat "$dir/node$i.pid")" 2>/dev/null || true
	done
	sleep 0.5
	for i in 1 2 3 4; do ip netns del "$(node_ns "$i")" 2>/dev/null || true; done
	ip netns del "$client" 2>/dev/null || true
	;;
*)
	echo "minio_cluster: unknown command $cmd" >&2
	exit 2
	;;
esac
