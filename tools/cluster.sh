#!/usr/bin/env bash
# cluster.sh: a cluster of N daemons on this host, from the build tree, for
# trying MCCL before a real cluster has one (see README.md).
#
#   tools/cluster.sh start N DIR   write DIR/n0.conf .. n(N-1).conf (nodes
#                                  on 127.0.0.1, free ports below 32768,
#                                  sockets DIR/nI.sock), start the daemons
#                                  in the background, wait until they see
#                                  each other
#   tools/cluster.sh on DIR NODE CMD...
#                                  run CMD with MCCL_SOCKET at NODE's
#                                  socket and the build's programs first
#                                  on PATH: mcclrun's --ssh for these nodes
#   tools/cluster.sh stop DIR      stop them (their logs stay in DIR)
#
# DIR is made private (mode 0700) if it does not exist: a daemon refuses a
# socket directory that other users may write.  A leading ~/ in DIR is the
# home directory, also where a shell left it unexpanded (inside quotes).  BUILD (default: the tree's
# build/) holds mccld and mcclctl; CLUSTER_CONF adds members to every
# daemon's configuration (e.g. '"streams_per_peer": 1'); CLUSTER_WAIT_S is
# how long start waits for the daemons to see each other (default 10).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${BUILD:-$here/../build}
. "$here/ports.sh"

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

conf() {	# DIR N BASE I: node I's configuration
	local dir=$1 n=$2 base=$3 i=$4 k nodes="" sep=""
	for ((k = 0; k < n; k++)); do
		nodes="$nodes$sep{\"name\": \"n$k\", \"address\": \"127.0.0.1:$((base + k))\"}"
		sep=", "
	done
	cat <<EOC
{
  "node": "n$i",
  "socket": "$dir/n$i.sock",
  "nodes": [$nodes]${CLUSTER_CONF:+,
  $CLUSTER_CONF}
}
EOC
}

# up DIR N: every daemon sees the N - 1 others (CLUSTER_WAIT_S at most)
up() {
	local dir=$1 n=$2 i deadline=$((SECONDS + ${CLUSTER_WAIT_S:-10}))
	for ((i = 0; i < n; i++)); do
		until "$B/mcclctl" -s "$dir/n$i.sock" -j status 2>/dev/null |
		    grep -q "\"peers_up\": $((n - 1))"; do
			[ $SECONDS -lt $deadline ] ||
			    die "n$i did not see its peers: see $dir/n$i.log"
			sleep 0.1
		done
	done
}

start() {
	local n=$1 dir=$2 base i
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "start: N must be a number, not \"$n\""
	[ -x "$B/mccld" ] || die "no $B/mccld: run make first"
	mkdir -p -m 0700 "$dir" || die "cannot make $dir"
	dir=$(cd "$dir" && pwd)
	! ls "$dir"/n*.pid >/dev/null 2>&1 ||
	    die "$dir has daemons already: tools/cluster.sh stop $dir"
	base=$(free_ports "$n")
	for ((i = 0; i < n; i++)); do
		conf "$dir" "$n" "$base" "$i" >"$dir/n$i.conf"
		setsid "$B/mccld" -c "$dir/n$i.conf" >>"$dir/n$i.log" 2>&1 \
		    </dev/null &
		echo $! >"$dir/n$i.pid"
	done
	up "$dir" "$n"
	echo "$n daemons on 127.0.0.1:$base.. with sockets $dir/n*.sock"
}

# Every daemon is told at once, then waited for (10 s in all): one by
# one, hundreds of them took minutes.
stop() {
	local dir=$1 f p pids=() left=0 deadline
	for f in "$dir"/n*.pid; do
		[ -e "$f" ] || continue
		pids+=("$(cat "$f")")
		rm -f "$f"
	done
	[ ${#pids[@]} -gt 0 ] || return 0
	kill -TERM "${pids[@]}" 2>/dev/null
	deadline=$((SECONDS + 10))
	for p in "${pids[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
			sleep 0.1
		done
		kill -0 "$p" 2>/dev/null && { kill -KILL "$p"; left=1; }
	done
	[ $left = 0 ] || echo "cluster.sh: a daemon had to be killed" >&2
}

home() {	# DIR with a leading ~/ expanded
	case $1 in
	"~"|"~/"*) echo "$HOME${1#\~}" ;;
	*) echo "$1" ;;
	esac
}

case "${1:-}" in
start)	[ $# = 3 ] || die "usage: cluster.sh start N DIR"
	start "$2" "$(home "$3")" ;;
on)	[ $# -ge 4 ] || die "usage: cluster.sh on DIR NODE CMD..."
	dir=$(home "$2") node=$3
	shift 3
	[ -S "$dir/$node.sock" ] || die "no daemon $node in $dir ($dir/$node.sock)"
	PATH="$(cd "$B" && pwd):$PATH" MCCL_SOCKET="$dir/$node.sock" \
	    exec sh -c "$*" ;;
stop)	[ $# = 2 ] || die "usage: cluster.sh stop DIR"; stop "$(home "$2")" ;;
*)	die "usage: cluster.sh start N DIR | on DIR NODE CMD... | stop DIR" ;;
esac
