#!/usr/bin/env bash
# bench.sh: MCCL against Open MPI and Gloo on a simulated cluster.
#
# Builds hosts out of network namespaces joined by veth pairs to a bridge,
# shapes each host's link with tc tbf, runs one mccld per host and mccl-perf
# on top of them, then the same workload with Open MPI and torch.distributed
# (gloo) when they are installed, and writes one table per case, a markdown
# summary with pass/fail against the targets, and gnuplot plots.  Namespaces
# need root; without it only the loopback cases (4 and 5) run.  Everything
# started here is stopped and everything created is removed on exit, also on
# INT and TERM; `bench.sh clean` removes what a killed run left behind.
# Only addresses in 198.18.0.0/15 and 127.0.0.0/8 are ever used.
# See tools/bench/README.md.

set -u

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
B=$TOP/build
OUT=
PY=${MCCL_BENCH_PYTHON:-/usr/bin/python3}
RATE=1gbit
QUICK=0
ONLY_MCCL=0
POLL_NS=		# -H: the guest's halt polling during the run
PERF_MEM=		# -M: mccl-perf's -M, shared (its default) or host
HOST_CC=		# -C: the hosts' TCP congestion control (else the machine's)
FLOW_ORDER=1		# -U: 0, the links may reorder a flow's packets
HALTPOLL=/sys/module/haltpoll/parameters/guest_halt_poll_ns
ALL_CASES="1 2 3 4 5 6 7 8"	# 9, the scale case, when asked for
SCALE_N="16 64 128"		# -N: the scale case's host counts

NS_PREFIX=mccl-bench-h		# namespace (and Open MPI host) names
LO_NS=mccl-bench-lo		# loopback only, for cases 4 and 5 as root
OUR_NS="^mccl-bench-(h[0-9]+|lo)\$"	# every namespace made here
BR=mccl-bench-br0
VETH=mcclb-v			# bridge side of host i's veth: mcclb-vI
NET_HOSTS=4
MCCLD_PORT=7470
HOSTS_MARK="# mccl-bench: tools/bench/bench.sh"

RUN=			# runtime directory: configs, sockets, pid list
RAW=
NET_UP=0
HOSTS_EDITED=0
PIDS=()			# every background process started here
DAEMONS=()		# the mccld of the current cluster
CL_NS=()		# per daemon of the current cluster: namespace or ""
CL_SOCK=()		# per daemon: its socket
LAST=			# pid of the last bg_run
LO=			# where cases 4 and 5 run: $LO_NS, or "" (here)
GLOO_PORT=29500
HAVE_MCCL=0
HAVE_OMPI=0
HAVE_GLOO=0
HAVE_TORCH=0		# case 6: torch.distributed in $PY
WHY_TORCH="no torch.distributed in $PY (apt-get install -y python3-torch)"
HAVE_PLOT=0
WHY_MCCL="not built"	# why a system is skipped
WHY_OMPI="not installed"
WHY_GLOO="not installed"
OMPI_SHM=vader

usage() {
	cat >&2 <<EOF
usage: bench.sh [-mq] [-o dir] [-B build] [-r rate] [-C cc] [-H ns]
                [-M mem] [-N counts] [-U]
                [case ...]
       bench.sh clean
cases: 1 (4 hosts, bandwidth)  2 (2 hosts x 2 ranks)  3 (latency)
       4 (1 host, shared memory)  5 (loopback, every size)
       6 (DDP training, 2 hosts x 2 ranks)  7 (1 host x 8 ranks, latency)
       8 (GPU tensors: case 2's sizes and case 6 on CUDA, 2 hosts x 2 ranks)
       9 (scale: N hosts x 1 rank for each N of -N; only when asked for)
       default: 1 to 8
  -o dir      tables, summary.md, plots and raw logs (default BUILD/bench)
  -B build    MCCL build directory (default $TOP/build); its python/,
              where it has one, is the Python package the ranks import
  -r rate     link rate for tc tbf (default $RATE); none: unshaped (the
              link is then TCP's with as many connections as MCCL's
              lanes); A,B,...: one run per rate, in DIR/RATE, and a
              summary of them all
  -q          quick: small sizes and few iterations, to check the harness
              (case 9: AUTO and Open MPI to 64 KiB, and the job starts)
  -m          MCCL only: no Open MPI, no Gloo (to compare MCCL's settings)
  -C cc       every simulated host's TCP congestion control, for every
              system (default: the machine's); MCCL's data links take
              what their daemons' "tcp_congestion" makes of it (auto:
              cubic where the hosts' is bbr; MCCL_BENCH_CONF may set it)
  -H ns       the guest kernel's halt polling (KVM, cpuidle-haltpoll) in ns
              during the run, put back after it: what waking a thread on
              an idle virtual CPU costs every system
  -M mem      mccl-perf's buffers: shared (mccl_alloc's, the default) or
              host (the process's own, as torch's CPU tensors are)
  -N counts   case 9's host counts, e.g. "16 64 128" (the default)
  -U          links that may reorder a flow's packets, as the bench's
              were before 2026-11-27 (default: in order, as a NIC keeps
              them: RPS on the veths; see flow_order)
EOF
	exit 2
}

note() {
	echo "bench: $*" >&2
	[ -n "$RAW" ] && echo "$*" >>"$RAW/notes.txt"
	return 0
}

# status CASE SYSTEM ok|failed|skipped [WHY]: read by report.py.  Skips
# were noted once already, when the system was found missing.
status() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$RAW/status.tsv"
	[ "$3" = failed ] && note "case $1: $2 $3${4:+: $4}"
	return 0
}

is_root() { [ "$(id -u)" = 0 ]; }
ns_name() { echo "$NS_PREFIX$1"; }
ns_addr() { echo "198.18.0.$((10 + $1))"; }

# ---- processes ----

# In a host's namespace, and in a UTS namespace with the host's name: Open
# MPI names shared-memory segments after the host name, and ranks of two
# hosts called alike would share them.
# shellcheck disable=SC2016
HOST_SH='echo "$0" >/proc/sys/kernel/hostname && exec "$@"'

# bg_run LOG NS CMD...: CMD in the background, in host NS unless NS is
# empty.  The environment tags it (and its children) for cleanup.
bg_run() {
	local log=$1 ns=$2
	shift 2
	if [ -n "$ns" ]; then
		ip netns exec "$ns" unshare --uts sh -c "$HOST_SH" "$ns" \
		    env MCCL_BENCH_RUN="$RUN" "$@" \
		    </dev/null >"$log" 2>&1 9<&- &
	else
		env MCCL_BENCH_RUN="$RUN" "$@" </dev/null >"$log" 2>&1 9<&- &
	fi
	LAST=$!
	PIDS+=("$LAST")
	echo "$LAST" >>"$RUN/pids"
}

kill_tree() {
	local sig=$1 p=$2 c
	for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do
		kill_tree "$sig" "$c"
	done
	kill -"$sig" "$p" 2>/dev/null
}

# Every process whose environment names run directory $1 (all of them with
# $1 empty): what bg_run started and all their descendants, wherever they
# are (orted under mpirun, ranks forked by mccl-perf).
tagged_pids() {
	local f
	if [ -n "$1" ]; then
		f=$(grep -lzxF "MCCL_BENCH_RUN=$1" /proc/[0-9]*/environ 2>/dev/null)
	else
		f=$(grep -lz '^MCCL_BENCH_RUN=/tmp/mccl-bench\.' \
		    /proc/[0-9]*/environ 2>/dev/null)
	fi
	for f in $f; do
		f=${f#/proc/}
		f=${f%/environ}
		[ "$f" != $$ ] && echo "$f"
	done
}

# wait_all TIMEOUT PID...: wait for all; once one failed, give the others
# GRACE seconds (they are ranks of the same job), and kill what is left at
# the deadline.  Returns the first nonzero status, 124 on timeout.
GRACE=15
wait_all() {
	local tmo=$1 p s rc=0 alive deadline
	local -A st=()
	shift
	deadline=$((SECONDS + tmo))
	while :; do
		alive=0
		for p in "$@"; do
			[ -n "${st[$p]:-}" ] && continue
			if kill -0 "$p" 2>/dev/null; then
				alive=1
				continue
			fi
			wait "$p" 2>/dev/null
			s=$?
			st[$p]=$s
			[ $s = 0 ] && continue
			[ $rc = 0 ] && rc=$s
			[ $deadline -gt $((SECONDS + GRACE)) ] &&
			    deadline=$((SECONDS + GRACE))
		done
		[ $alive = 0 ] && return $rc
		[ $SECONDS -ge $deadline ] && break
		sleep 0.2
	done
	[ $rc = 0 ] && note "timed out after ${tmo}s: stopping pids $*"
	for p in "$@"; do kill_tree TERM "$p"; done
	sleep 2
	for p in "$@"; do kill_tree KILL "$p"; done
	for p in "$@"; do wait "$p" 2>/dev/null; done
	[ $rc = 0 ] && rc=124
	return $rc
}

stop_all() {
	local p n=0
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null && kill_tree TERM "$p"
	done
	while [ $n -lt 30 ]; do
		[ -z "$(tagged_pids "$RUN")" ] && break
		sleep 0.1
		n=$((n + 1))
	done
	for p in $(tagged_pids "$RUN"); do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	PIDS=()
}

# ---- the simulated network ----

v6_off() {	# NS IFNAME: no IPv6 (no link-local address) on IFNAME
	local f=/proc/sys/net/ipv6/conf/$2/disable_ipv6
	if [ -n "$1" ]; then
		ip netns exec "$1" sh -c "[ ! -e $f ] || echo 1 >$f"
	else
		[ ! -e "$f" ] || echo 1 >"$f"
	fi
}

# cc_set NS: the namespace's default TCP congestion control is -C's.
cc_set() {
	[ -z "$HOST_CC" ] ||
	    ip netns exec "$1" sysctl -qw \
	    net.ipv4.tcp_congestion_control="$HOST_CC"
}

# hosts_cc: the congestion control the simulated hosts run.
hosts_cc() {
	echo "${HOST_CC:-$(cat /proc/sys/net/ipv4/tcp_congestion_control)}"
}

# flow_order NS VETH: the host's link keeps each TCP flow's packets in
# order, as a NIC's receive queues do (RSS).  A veth hands each packet to
# the backlog of the CPU that sends it, and tbf's queue is emptied by
# whichever CPU runs it, so without this one flow's packets cross several
# CPUs' backlogs and arrive reordered: on the 16-core machine thousands of
# fast retransmissions a second, each a cut of the window, all spurious
# (the receiver's DSACKs), nothing dropped.  RPS on both ends of the veth
# steers each flow to one CPU by its hash.
flow_order() {
	local mask n w
	# every CPU, as sysfs writes a CPU mask: 32-bit words, high first
	for ((n = $(nproc); n > 0; n -= 32)); do
		w=ffffffff
		[ $n -lt 32 ] && w=$(printf "%x" $(((1 << n) - 1)))
		mask=$w${mask:+,$mask}
	done
	[ -w "/sys/class/net/$2/queues/rx-0/rps_cpus" ] || {
		echo "bench: this kernel has no RPS (CONFIG_RPS) to keep a" \
		    "flow's packets in order: run with -U" >&2
		return 1
	}
	echo "$mask" >"/sys/class/net/$2/queues/rx-0/rps_cpus" &&
	    ip netns exec "$1" sh -c \
	    "echo $mask >/sys/class/net/eth0/queues/rx-0/rps_cpus"
}

# net_up N RATE: hosts h0..h(N-1) on bridge $BR, each link shaped to RATE
# in both directions: egress of eth0 in the host and egress of the bridge
# side of its veth (the host's ingress).
net_up() {
	local n=$1 rate=$2 i ns v
	NET_UP=1
	ip link add "$BR" type bridge || return 1
	v6_off "" "$BR"
	ip link set "$BR" up || return 1
	for ((i = 0; i < n; i++)); do
		ns=$(ns_name $i)
		v=$VETH$i
		ip netns add "$ns" && cc_set "$ns" || return 1
		v6_off "$ns" all
		v6_off "$ns" default
		ip link add "$v" type veth peer name eth0 netns "$ns" ||
		    return 1
		v6_off "" "$v"
		v6_off "$ns" eth0
		ip link set "$v" master "$BR" up &&
		ip -n "$ns" addr add "$(ns_addr $i)/24" dev eth0 &&
		ip -n "$ns" link set lo up &&
		ip -n "$ns" link set eth0 up || return 1
		if [ -n "$rate" ]; then
			tc qdisc add dev "$v" root tbf rate "$rate" \
			    burst 256kb latency 50ms &&
			tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" \
			    burst 256kb latency 50ms || return 1
		fi
		[ "$FLOW_ORDER" = 0 ] || flow_order "$ns" "$v" || return 1
	done
	neigh_static "$n" && net_check "$n"
}

# neigh_static N: every host knows every other's MAC address.  Daemons
# that start together all ask at once otherwise: N x (N - 1) broadcasts,
# each copied to N ports, overflow the kernel's backlog from a few dozen
# hosts up, and the lost requests (and the SYNs behind them) cost seconds.
neigh_static() {
	local n=$1 i k macs=()
	for ((i = 0; i < n; i++)); do
		macs+=("$(ip -n "$(ns_name $i)" -o link show eth0 |
		    sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')")
	done
	for ((i = 0; i < n; i++)); do
		for ((k = 0; k < n; k++)); do
			[ $k = $i ] || echo "neigh replace $(ns_addr $k) lladdr" \
			    "${macs[$k]} dev eth0 nud permanent"
		done | ip -n "$(ns_name $i)" -batch - || return 1
	done
}

# lo_up: a namespace with nothing but lo (127.0.0.1, no IPv6) for the
# loopback cases: Open MPI and torch listen on wildcard addresses, which
# there reach 127.0.0.1 only.  No veth, no shaping: plain loopback.
lo_up() {
	NET_UP=1
	ip netns add "$LO_NS" && cc_set "$LO_NS" || return 1
	v6_off "$LO_NS" all
	v6_off "$LO_NS" default
	v6_off "$LO_NS" lo
	ip -n "$LO_NS" link set lo up
}

# Every host reaches h0 (a few TCP round trips).
net_check() {
	local i s c
	for ((i = 1; i < $1; i++)); do
		bg_run "$RAW/net-check.h$i.srv.log" "$(ns_name 0)" \
		    "$RUN/bin/tcpperf" serve "$(ns_addr 0)" 5201
		s=$LAST
		bg_run "$RAW/net-check.h$i.log" "$(ns_name $i)" \
		    "$RUN/bin/tcpperf" pingpong "$(ns_addr 0)" 5201 10
		c=$LAST
		if ! wait_all 20 "$s" "$c"; then
			note "host h$i cannot reach h0 over the bridge" \
			    "(bridge netfilter? see $RAW/net-check.h$i.log)"
			return 1
		fi
	done
}

net_down() {
	local i ns p v
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' |
	    grep -E "$OUR_NS"); do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
	done
	for v in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' |
	    sed 's/@.*//' | grep "^${VETH}[0-9]*\$"); do
		ip link del "$v" 2>/dev/null
	done
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' |
	    grep -E "$OUR_NS"); do
		ip netns del "$ns" 2>/dev/null
	done
	ip link del "$BR" 2>/dev/null
	# Namespaces go away asynchronously; wait until their veths are gone.
	for ((i = 0; i < 50; i++)); do
		ip -o link show 2>/dev/null | grep -q ": ${VETH}[0-9]" || break
		sleep 0.1
	done
	NET_UP=0
}

# Open MPI resolves its host names: the namespaces' names, marked lines.
hosts_add() {
	local i
	cp /etc/hosts "$RUN/hosts.backup" || return 1
	HOSTS_EDITED=1
	# Never glue a line to a last line without its newline.
	[ -z "$(tail -c 1 /etc/hosts)" ] || echo >>/etc/hosts
	for ((i = 0; i < NET_HOSTS; i++)); do
		printf '%s\t%s\t%s\n' "$(ns_addr $i)" "$(ns_name $i)" \
		    "$HOSTS_MARK" >>/etc/hosts
	done
}

# Rewrite in place (not a rename): /etc/hosts is often a bind mount.
hosts_remove() {
	local tmp
	grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null || return 0
	tmp=$(grep -vF "$HOSTS_MARK" /etc/hosts)
	printf '%s\n' "$tmp" >/etc/hosts
	HOSTS_EDITED=0
	if [ -f "$RUN/hosts.backup" ] && [ -n "$RAW" ] &&
	    ! cmp -s /etc/hosts "$RUN/hosts.backup"; then
		cp "$RUN/hosts.backup" "$RAW/hosts.backup"
		note "/etc/hosts differs from its copy taken before the run" \
		    "(changed meanwhile?): the copy is $RAW/hosts.backup"
	fi
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "$RUN" ] && stop_all
	[ "$NET_UP" = 1 ] && net_down
	[ "$HOSTS_EDITED" = 1 ] && hosts_remove
	[ -n "$RUN" ] && haltpoll_restore "$RUN" && rm -rf "$RUN"
	exit $rc
}

# haltpoll_set NS: how long an idle virtual CPU polls before it halts (and
# a wake-up needs the hypervisor) for this run; the value it had is kept in
# $RUN, for cleanup or `bench.sh clean` to put back.
haltpoll_set() {
	if ! is_root || [ ! -w "$HALTPOLL" ]; then
		note "-H needs root and $HALTPOLL (a KVM guest with" \
		    "cpuidle-haltpoll)"
		return 1
	fi
	cat "$HALTPOLL" >"$RUN/haltpoll.old" && echo "$1" >"$HALTPOLL"
}

haltpoll_restore() {	# RUNDIR
	[ -f "$1/haltpoll.old" ] || return 0
	cat "$1/haltpoll.old" >"$HALTPOLL" && rm -f "$1/haltpoll.old"
}

# bench.sh clean: whatever a killed run left.
do_clean() {
	local p d
	if ! flock -n 9; then
		echo "bench: a benchmark is running; not cleaning" >&2
		exit 1
	fi
	for p in $(tagged_pids ""); do
		kill -KILL "$p" 2>/dev/null && echo "killed pid $p"
	done
	if is_root; then
		net_down
		hosts_remove
	fi
	for d in /tmp/mccl-bench.*; do
		{ [ -d "$d" ] && [ -f "$d/pids" ]; } || continue
		haltpoll_restore "$d" && rm -rf "$d" && echo "removed $d"
	done
	echo "clean"
}

# ---- MCCL clusters ----

# mccld_conf FILE NAME SOCKET NODES_JSON: the bench's settings, where
# $MCCL_BENCH_CONF names a key it replaces the bench's.
mccld_conf() {
	local kv key defaults=""
	for kv in '"log_level": "warning"' '"init_timeout_ms": 60000' \
	    '"op_timeout_ms": 300000' '"connect_timeout_ms": 10000' \
	    '"heartbeat_interval_ms": 1000' '"heartbeat_timeout_ms": 15000'; do
		key=${kv%%:*}
		[[ ${MCCL_BENCH_CONF:-} == *"$key"* ]] ||
		    defaults="$defaults,
  $kv"
	done
	cat >"$1" <<EOF
{
  "node": "$2",
  "socket": "$3",
  "nodes": [$4],
  "key_file": "$RUN/cluster.key"$defaults${MCCL_BENCH_CONF:+,
  $MCCL_BENCH_CONF}
}
EOF
}

# cluster_up TAG N ns|lo: one mccld per host: in namespaces h0..h(N-1), or
# on 127.0.0.1 with consecutive free ports.
cluster_up() {
	local tag=$1 n=$2 mode=$3 i base nodes="" sep="" addr name
	base=$(free_ports "$n")
	for ((i = 0; i < n; i++)); do
		if [ "$mode" = ns ]; then
			addr=$(ns_addr $i):$MCCLD_PORT
		else
			addr=127.0.0.1:$((base + i))
		fi
		nodes="$nodes$sep{\"name\": \"h$i\", \"address\": \"$addr\"}"
		sep=", "
	done
	# Daemons listen beyond loopback only with a shared key (0600).
	[ -f "$RUN/cluster.key" ] ||
	    (umask 077 && head -c 64 /dev/urandom >"$RUN/cluster.key") ||
	    return 1
	DAEMONS=() CL_NS=() CL_SOCK=()
	for ((i = 0; i < n; i++)); do
		name=$tag-h$i
		mccld_conf "$RUN/$name.conf" "h$i" "$RUN/$name.sock" "$nodes"
		CL_SOCK+=("$RUN/$name.sock")
		if [ "$mode" = ns ]; then
			CL_NS+=("$(ns_name $i)")
		else
			CL_NS+=("$LO")
		fi
		[ -s "$RAW/mccl.cc" ] || mccl_cc "${CL_NS[$i]}" "$RUN/$name.conf"
		bg_run "$RAW/$tag.mccld-h$i.log" "${CL_NS[$i]}" "$B/mccld" \
		    -c "$RUN/$name.conf"
		DAEMONS+=("$LAST")
	done
	cluster_wait "$tag" "$n"
}

# mccl_cc NS CONF: the congestion control a daemon with CONF in host NS
# gives its data links, as mccld -n shows it, in raw/mccl.cc.
mccl_cc() {
	if [ -n "$1" ]; then
		ip netns exec "$1" "$B/mccld" -n -c "$2"
	else
		"$B/mccld" -n -c "$2"
	fi 2>/dev/null | awk '$1 == "tcp_congestion" { $1 = ""
	    sub(/^ +/, ""); print }' >"$RAW/mccl.cc"
}

# Until every daemon sees all the others (mcclctl status), at most 30 s;
# without mcclctl, until every socket exists, and 3 s more for the peers.
cluster_wait() {
	local tag=$1 n=$2 i deadline=$((SECONDS + 30))
	for ((i = 0; i < n; i++)); do
		until cluster_ready "${CL_SOCK[$i]}" "$n"; do
			if ! kill -0 "${DAEMONS[$i]}" 2>/dev/null ||
			    [ $SECONDS -ge $deadline ]; then
				note "$tag: cluster of $n daemons did not come up:"
				tail -n 5 "$RAW/$tag".mccld-h*.log >&2
				return 1
			fi
			sleep 0.1
		done
	done
	[ -x "$B/mcclctl" ] || sleep 3
}

cluster_ready() {	# SOCKET N
	if [ -x "$B/mcclctl" ]; then
		timeout 5 "$B/mcclctl" -s "$1" -j status 2>/dev/null |
		    grep -Eq "\"peers_up\": *$(($2 - 1))([^0-9]|\$)"
	else
		[ -S "$1" ]
	fi
}

cluster_down() {
	local p
	for p in "${DAEMONS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	wait_all 10 "${DAEMONS[@]}" >/dev/null 2>&1
	DAEMONS=() CL_NS=() CL_SOCK=()
}

# free_ports N: a base port with N free consecutive ports on 127.0.0.1.
. "$HERE/../ports.sh"
. "$HERE/procstat.sh"

# mccl_perf TAG TIMEOUT NPER ARGS...: mccl-perf with NPER ranks at every
# daemon of the cluster; rank 0 writes $RAW/TAG.json.
mccl_perf() {
	local tag=$1 tmo=$2 nper=$3 i n=${#CL_SOCK[@]} pids=()
	shift 3
	for ((i = 0; i < n; i++)); do
		bg_run "$RAW/$tag.h$i.log" "${CL_NS[$i]}" \
		    env MCCL_SOCKET="${CL_SOCK[$i]}" "$B/mccl-perf" \
		    --nprocs "$nper" --total $((n * nper)) \
		    --first $((i * nper)) --job "bench-$tag-$$" \
		    -j "$RAW/$tag.json" ${PERF_MEM:+--memory "$PERF_MEM"} "$@"
		pids+=("$LAST")
	done
	wait_all "$tmo" "${pids[@]}"
}

# mccl_lat TAG TIMEOUT NPER ARGS...: lat, NPER ranks at every daemon; rank
# 0's report in raw/TAG.log.
mccl_lat() {
	local tag=$1 tmo=$2 nper=$3 i n=${#CL_SOCK[@]} r pids=()
	shift 3
	for ((r = 0; r < n * nper; r++)); do
		i=$((r / nper))
		bg_run "$RAW/$tag.r$r.log" "${CL_NS[$i]}" \
		    env MCCL_SOCKET="${CL_SOCK[$i]}" MCCL_JOB="bench-$tag-$$" \
		    MCCL_RANK=$r MCCL_NRANKS=$((n * nper)) "$RUN/bin/lat" "$@"
		pids+=("$LAST")
	done
	wait_all "$tmo" "${pids[@]}"
	local rc=$?
	cp "$RAW/$tag.r0.log" "$RAW/$tag.log" 2>/dev/null
	return $rc
}

# record CASE SYSTEM TAG FUNC ARGS...: FUNC ARGS, recorded in status.tsv as
# SYSTEM of CASE; TAG names its logs.
record() {
	local c=$1 sys=$2 tag=$3 t0=$SECONDS rc
	shift 3
	printf '   %-10s %-22s ' "$sys" "${2:-}" >&2
	"$@"
	rc=$?
	echo "$([ $rc = 0 ] && echo ok || echo "failed ($rc)")," \
	    "$((SECONDS - t0)) s" >&2
	if [ $rc = 0 ]; then
		status "$c" "$sys" ok
	elif [ -s "$RAW/$tag.refused" ]; then
		status "$c" "$sys" failed "$(cat "$RAW/$tag.refused")"
		return 1
	else
		status "$c" "$sys" failed "exit $rc (logs: raw/$tag.*)"
		return 1
	fi
}

# ---- baselines ----

MPI_BASE=(--mca pml ob1)

# placement_check TAG HOST...: the baseline's ranks (its "# placement" line
# in raw/TAG.log) ran on these hosts, as many on each, in any order.  A
# result from ranks placed otherwise measures something else: refused,
# with the reason in raw/TAG.refused.
placement_check() {
	local tag=$1 got want
	shift
	got=$(awk '$1 == "#" && $2 == "placement" { $1 = $2 = ""; print; exit }' \
	    "$RAW/$tag.log" 2>/dev/null | tr ' ' '\n' | sed '/^$/d' | sort |
	    tr '\n' ' ')
	want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
	[ "$got" = "$want" ] && return 0
	echo "refused: its ranks ran on ${got:-unknown hosts}, not on $want" \
	    >"$RAW/$tag.refused"
	note "$tag: $(cat "$RAW/$tag.refused")"
	return 3
}

# hosts_of NHOSTS NPER: each host's name NPER times.
hosts_of() {
	local i k
	for ((i = 0; i < $1; i++)); do
		for ((k = 0; k < $2; k++)); do
			ns_name "$i"
		done
	done
}

# mpi_ns TAG TIMEOUT NHOSTS NPER [MPIRUN ARGS...] PROGRAM ARGS...: mpirun
# from h0 into the namespaces through the rsh agent, NPER ranks on each of
# the first NHOSTS hosts, checked.  The launcher's parameters go by
# environment, under both names: Open MPI 4's (OMPI_MCA_plm_rsh_*) and
# Open MPI 5's runtime's (PRTE_MCA_plm_ssh_*); each ignores the other's.
mpi_ns() {
	local tag=$1 tmo=$2 nh=$3 nper=$4 i hosts=""
	shift 4
	# Addresses, not names: mpirun then needs no name service, and the
	# agent maps each address back to its host.
	for ((i = 0; i < nh; i++)); do
		hosts="$hosts${hosts:+,}$(ns_addr "$i"):$nper"
	done
	# A resource manager's variables (a batch job's) would make mpirun
	# take that allocation instead of --host; and the launcher must be
	# rsh (the 16-core machine sets OMPI_MCA_plm=isolated, which starts
	# every rank on h0, or finds too few slots).
	local rm_vars
	rm_vars=$(compgen -e | grep -E '^(SLURM|PBS|LSB|LSF|FLUX|SGE|PE)_' |
	    sed 's/^/-u /')
	# shellcheck disable=SC2086
	bg_run "$RAW/$tag.log" "$(ns_name 0)" env $rm_vars \
	    OMPI_MCA_plm=rsh PRTE_MCA_plm=ssh \
	    OMPI_MCA_plm_rsh_agent="$RUN/rsh-agent" \
	    OMPI_MCA_plm_rsh_no_tree_spawn=1 \
	    OMPI_MCA_oob_tcp_if_include=198.18.0.0/24 \
	    PRTE_MCA_plm_ssh_agent="$RUN/rsh-agent" \
	    PRTE_MCA_plm_ssh_no_tree_spawn=1 \
	    PRTE_MCA_oob_tcp_if_include=198.18.0.0/24 \
	    mpirun "${MPI_BASE[@]}" \
	    --mca btl_tcp_if_include 198.18.0.0/24 \
	    --mca btl "tcp,$OMPI_SHM,self" --bind-to none \
	    --display-allocation --host "$hosts" -np $((nh * nper)) "$@"
	wait_all "$tmo" "$LAST" || return
	# shellcheck disable=SC2046
	placement_check "$tag" $(hosts_of "$nh" "$nper")
}

# mpi_lo TAG TIMEOUT NP [MPIRUN ARGS...] PROGRAM ARGS...: on this host, its
# out-of-band traffic on loopback only (it still listens on every address:
# hence $LO_NS when root).
mpi_lo() {
	local tag=$1 tmo=$2 np=$3
	shift 3
	bg_run "$RAW/$tag.log" "$LO" mpirun "${MPI_BASE[@]}" \
	    --mca oob_tcp_if_include lo -np "$np" "$@"
	wait_all "$tmo" "$LAST"
}

# The Python package the ranks import: the build's own python/ where it
# has one (a variant kept beside the tree's, to compare), else the tree's.
py_package() {
	if [ -d "$B/python/mccl" ]; then
		echo "$B/python"
	else
		echo "$TOP/libclient/python"
	fi
}

# gloo_ns TAG TIMEOUT NHOSTS NPER SCRIPT ARGS...: one python process per
# rank, NPER in each host, rank 0's master on h0; with a cluster up, each
# rank on its host's daemon (for backend mccl, from this tree).
gloo_ns() {
	local tag=$1 tmo=$2 nh=$3 nper=$4 r h pids=()
	shift 4
	GLOO_PORT=$((GLOO_PORT + 1))
	for ((r = 0; r < nh * nper; r++)); do
		h=$((r / nper))
		bg_run "$RAW/$tag.r$r.log" "$(ns_name $h)" \
		    env RANK=$r WORLD_SIZE=$((nh * nper)) \
		    MASTER_ADDR="$(ns_addr 0)" MASTER_PORT=$GLOO_PORT \
		    GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
		    MCCL_SOCKET="${CL_SOCK[$h]:-}" MCCL_LIBRARY="$B/libmccl.so.0" \
		    PYTHONPATH="$(py_package)" "$PY" "$@"
		pids+=("$LAST")
	done
	wait_all "$tmo" "${pids[@]}"
	local rc=$?
	cp "$RAW/$tag.r0.log" "$RAW/$tag.log" 2>/dev/null
	[ $rc = 0 ] || return $rc
	grep -q '^# placement' "$RAW/$tag.log" || return 0	# DDP: by launch
	# shellcheck disable=SC2046
	placement_check "$tag" $(hosts_of "$nh" "$nper")
}

# start_ns TAG NHOSTS BACKEND: start_time.py's job start over NHOSTS x 1
# rank on BACKEND, the ranks meeting in a store that is up before they
# start, as under torchrun (its agent's store).
start_ns() {
	local tag=$1 nh=$2 backend=$3 store deadline=$((SECONDS + 60)) rc
	# on the port gloo_ns takes next
	bg_run "$RAW/$tag.store.log" "$(ns_name 0)" env \
	    MASTER_ADDR="$(ns_addr 0)" MASTER_PORT=$((GLOO_PORT + 1)) "$PY" \
	    "$HERE/start_time.py" store "$nh"
	store=$LAST
	until grep -q '^# store up' "$RAW/$tag.store.log" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ] || ! kill -0 "$store" 2>/dev/null
		then
			kill_tree KILL "$store"
			return 1
		fi
		sleep 0.2
	done
	TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=0 \
	    gloo_ns "$tag" 300 "$nh" 1 "$HERE/start_time.py" "$backend"
	rc=$?
	kill_tree KILL "$store"
	wait "$store" 2>/dev/null
	return $rc
}

# torch_ns TAG TIMEOUT NHOSTS NPER BACKEND ARGS...: tools/bench/ddp_bench.py
# as a torch.distributed job (gloo_ns), on BACKEND.
torch_ns() {
	local tag=$1 tmo=$2 nh=$3 nper=$4 backend=$5
	shift 5
	gloo_ns "$tag" "$tmo" "$nh" "$nper" "$HERE/ddp_bench.py" "$backend" "$@"
}

# ---- helpers and detection ----

WARN="-Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
-Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla -Wcast-qual \
-Wundef"

build_helpers() {
	local cc=${CC:-cc} log=$RAW/build.log
	mkdir -p "$RUN/bin"
	# shellcheck disable=SC2086
	if ! $cc -std=c11 -D_GNU_SOURCE -O2 $WARN -pthread -o "$RUN/bin/tcpperf" \
	    "$HERE/tcpperf.c" >>"$log" 2>&1 ||
	    ! $cc -std=c11 -D_GNU_SOURCE -O2 $WARN -pthread \
	    -o "$RUN/bin/membw" "$HERE/membw.c" >>"$log" 2>&1; then
		note "cannot build the helpers (see $log)"
		return 1
	fi
	if [ -x "$B/mccld" ] && [ -x "$B/mccl-perf" ] && [ -f "$B/libmccl.a" ]; then
		# shellcheck disable=SC2086
		if $cc -std=c11 -D_GNU_SOURCE -O2 $WARN -I"$TOP/libclient" \
		    -o "$RUN/bin/lat" "$HERE/lat.c" "$B/libmccl.a" -lpthread \
		    >>"$log" 2>&1; then
			HAVE_MCCL=1
		else
			WHY_MCCL="lat.c does not build against $B/libmccl.a"
			note "cannot build lat.c against $B/libmccl.a (see $log)"
		fi
	else
		WHY_MCCL="not built in $B (run make)"
		note "MCCL is not built in $B (run make): MCCL skipped"
	fi
}

detect_ompi() {
	local log=$RAW/build.log
	if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
		WHY_OMPI="not installed (apt-get install -y openmpi-bin libopenmpi-dev)"
		note "Open MPI skipped: $WHY_OMPI"
		return
	fi
	mkdir -p "$OUT/bin"
	# shellcheck disable=SC2086
	if mpicc -std=c11 -D_GNU_SOURCE -O2 $WARN \
	    -o "$OUT/bin/mpi_allreduce" "$HERE/mpi_allreduce.c" >>"$log" 2>&1 &&
	    mpicc -std=c11 -D_GNU_SOURCE -O2 $WARN -o "$OUT/bin/mpi_lat" \
	    "$HERE/mpi_lat.c" >>"$log" 2>&1 &&
	    mpicc -std=c11 -D_GNU_SOURCE -O2 $WARN -o "$OUT/bin/mpi_start" \
	    "$HERE/mpi_start.c" >>"$log" 2>&1; then
		HAVE_OMPI=1
	else
		WHY_OMPI="the MPI programs do not build (see raw/build.log)"
		note "Open MPI skipped: $WHY_OMPI"
		return
	fi
	# Open MPI 5 renamed vader to sm.
	ompi_info --parsable 2>/dev/null | grep -q "mca:btl:vader:" ||
	    OMPI_SHM=sm
	is_root && MPI_BASE+=(--allow-run-as-root)
	mpirun --version 2>&1 | head -n 1 >"$RAW/ompi.version"
	# Its session directories in ours, removed with it (Open MPI < 5).
	grep -q "Open MPI) [1-4]\." "$RAW/ompi.version" &&
	    MPI_BASE+=(--mca orte_tmpdir_base "$RUN")
}

detect_gloo() {
	if "$PY" -c 'import torch.distributed as d; assert d.is_available();
import torch; print(torch.__version__)' >"$RAW/gloo.version" 2>/dev/null; then
		HAVE_GLOO=1
	else
		WHY_GLOO="no torch.distributed in $PY (apt-get install -y python3-torch)"
		note "Gloo skipped: $WHY_GLOO"
	fi
}

# ---- the cases ----

# Sizes and iterations; -q shrinks them to check the harness quickly.
set_params() {
	if [ "$QUICK" = 1 ]; then
		BIG=4M BIGB=$((4 << 20)) C5MAX=4M C5MAXB=$((4 << 20))
		C5SMALL=1M C5BIG=2M
		SMALL_N="-n 5 -w 1" BIG_N="-n 2 -w 1" BIG_IT=2 SMALL_IT=5
		LAT_N=200 PING_N=2000 LINK_S=1 DDP_STEPS=2
	else
		BIG=64M BIGB=$((64 << 20)) C5MAX=256M C5MAXB=$((256 << 20))
		C5SMALL=4M C5BIG=8M
		SMALL_N="-n 20 -w 5" BIG_N="-n 5 -w 2" BIG_IT=5 SMALL_IT=20
		LAT_N=1000 PING_N=10000 LINK_S=3 DDP_STEPS=8
	fi
	WIRE_IT=$(wire_iters)
}

# wire_iters: case 1's wire run, iterations (an out-of-place and an
# in-place op each) of BIG that keep the links busy about 2 s at $RATE
# (BIG_IT at least; unshaped, 50), so that it reads the steady state and
# not the first op's start.
wire_iters() {
	local bits n
	case $RATE in
	*gbit) bits=$((${RATE%gbit} * 1000000000)) ;;
	*mbit) bits=$((${RATE%mbit} * 1000000)) ;;
	*kbit) bits=$((${RATE%kbit} * 1000)) ;;
	*) bits=0 ;;
	esac
	# an op sends BIGB x 1.5 bytes (a ring on 4 hosts): 12 BIGB bits
	n=$(((bits + 12 * BIGB - 1) / (12 * BIGB)))
	[ "$bits" = 0 ] && n=50
	[ "$QUICK" = 1 ] || [ "$n" -lt "$BIG_IT" ] && n=$BIG_IT
	echo "$n"
}

# wire_count FILE HOST...: what tbf let out of each host's eth0 so far,
# one line per host appended to FILE: "wire host=I bytes=N pkts=M drops=D",
# and cpu_count's line.
# Read before and after a run, it gives the bytes a run put on each link,
# headers and ACKs included, to set against the payload it carried.
wire_count() {
	local f=$1 i
	shift
	for i; do
		tc -n "$(ns_name "$i")" -s qdisc show dev eth0 | awk -v h="$i" '
		    $1 == "Sent" { sub(",", "", $7)
			print "wire host=" h " bytes=" $2 " pkts=" $4 \
			    " drops=" $7; exit }'
	done >>"$f"
	cpu_count "$f"
}

# cpu_count FILE: the machine's CPU time so far in clock ticks, steal (time
# the hypervisor gave our virtual CPUs to someone else) included, appended
# as one "cpu" line: read around a run, whether it was short of CPU.
cpu_count() {
	awk '$1 == "cpu" { print "cpu user=" $2 + $3 " system=" $4 \
	    " idle=" $5 + $6 " irq=" $7 + $8 " steal=" $9; exit }' \
	    /proc/stat >>"$1"
}

# measure_link NAME [STREAMS [zerocopy]]: the link's own bandwidth, one
# TCP stream h1 -> h0 (or STREAMS; sent with MSG_ZEROCOPY if asked), in
# raw/NAME.log, with what tbf sent meanwhile in raw/NAME.wire.*.
measure_link() {
	local name=$1 streams=${2:-1} zc=${3:-} s c rc
	bg_run "$RAW/$name.srv.log" "$(ns_name 0)" "$RUN/bin/tcpperf" \
	    serve "$(ns_addr 0)" 5202 "$streams"
	s=$LAST
	wire_count "$RAW/$name.wire.before" 1
	bg_run "$RAW/$name.log" "$(ns_name 1)" "$RUN/bin/tcpperf" \
	    bw "$(ns_addr 0)" 5202 "$LINK_S" "$streams" ${zc:+"$zc"}
	c=$LAST
	wait_all 60 "$c"
	rc=$?
	wire_count "$RAW/$name.wire.after" 1
	if wait_all 60 "$s" && [ $rc = 0 ]; then
		status "$name" tcp ok
	else
		status "$name" tcp failed "see raw/$name.log"
	fi
}

# measure_ring NAME N LANES: raw TCP in case 1's pattern, every link busy
# at once: each of hosts 0..N-1 sends for LINK_S seconds to its right
# neighbour on ceil(LANES/2) connections and to its left one on the rest,
# as MCCL's lanes alternate their direction, and serves what its two
# neighbours send it.  One stream between two otherwise idle hosts
# (measure_link) has the machine's cores and softirqs to itself; this is
# what TCP gets when every host sends and receives, in raw/NAME.*.log,
# with what tbf sent meanwhile in raw/NAME.wire.*.
measure_ring() {
	local name=$1 n=$2 lanes=$3 right left i srv=() cli=() rc=0 hosts=()
	right=$(((lanes + 1) / 2)) left=$((lanes / 2))
	for ((i = 0; i < n; i++)); do
		hosts+=("$i")
		bg_run "$RAW/$name.srv$i.log" "$(ns_name "$i")" \
		    "$RUN/bin/tcpperf" serve "$(ns_addr "$i")" 5204 "$lanes"
		srv+=("$LAST")
	done
	sleep 0.3	# listening, so that no client starts late on a retry
	wire_count "$RAW/$name.wire.before" "${hosts[@]}"
	for ((i = 0; i < n; i++)); do
		bg_run "$RAW/$name.h$i.right.log" "$(ns_name "$i")" \
		    "$RUN/bin/tcpperf" bw "$(ns_addr $(((i + 1) % n)))" 5204 \
		    "$LINK_S" "$right"
		cli+=("$LAST")
		[ "$left" = 0 ] && continue
		bg_run "$RAW/$name.h$i.left.log" "$(ns_name "$i")" \
		    "$RUN/bin/tcpperf" bw "$(ns_addr $(((i + n - 1) % n)))" \
		    5204 "$LINK_S" "$left"
		cli+=("$LAST")
	done
	wait_all 60 "${cli[@]}" || rc=1
	wire_count "$RAW/$name.wire.after" "${hosts[@]}"
	wait_all 60 "${srv[@]}" || rc=1
	if [ $rc = 0 ]; then
		status "$name" tcp ok
	else
		status "$name" tcp failed "see raw/$name.*.log"
	fi
}

# The lanes (TCP connections per pair of nodes) MCCL's jobs get here:
# streams_per_peer from MCCL_BENCH_CONF, else its auto (daemon/config.c,
# engine/algo.c): 2 to 4, one per four cores, and one on a link of 2.5
# Gbit/s or less, once a ring has measured it (case 1's large sizes).
link_streams() {
	local n
	n=$(sed -n 's/.*"streams_per_peer": *\([0-9][0-9]*\).*/\1/p' \
	    <<<"${MCCL_BENCH_CONF:-}")
	if [ -z "$n" ]; then
		n=$(($(nproc) / 4))
		n=$((n < 2 ? 2 : n > 4 ? 4 : n))
		awk -v r="$RATE" 'BEGIN {
			v = r + 0; u = substr(r, length(v "") + 1)
			m = u == "gbit" ? 1000 : u == "mbit" ? 1 : u == "kbit" ? 1e-3 : 0
			exit !(v * m > 0 && v * m <= 2500) }' && n=1
	fi
	echo "$n"
}

case1() {
	echo "== case 1: 4 hosts x 1 rank, $RATE links, allreduce up to $BIG"
	# Before and after MCCL: a stolen CPU slows tbf too, so one measure
	# alone could understate the link.  Unshaped, the "link" is what TCP
	# gets with as many connections as MCCL's lanes.
	measure_link link
	# Unshaped, the copy a send saves: MSG_ZEROCOPY's stream against
	# link's, and how many of its sends the kernel copied all the same.
	[ "$RATE" = none ] && measure_link link-multi "$(link_streams)" &&
	    measure_link link-zerocopy 1 zerocopy
	measure_ring link-ring 4 "$(link_streams)"
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case1 4 ns; then
			# shellcheck disable=SC2086
			record 1 mccl case1.mccl mccl_perf case1.mccl-small 300 1 \
			    -b 1K -e 1M -f 4 $SMALL_N &&
			cost_snapshot case1.big &&
			record 1 mccl case1.mccl mccl_perf case1.mccl-big 600 1 \
			    -b 4M -e "$BIG" -f 4 $BIG_N &&
			case1_wire &&
			record 1 mccl-bf16 case1.bf16 mccl_perf case1.bf16 600 \
			    1 -b 4M -e "$BIG" -f 4 $BIG_N -W bf16 &&
			record 1 wirebw wirebw bg_wait 120 "$RAW/wirebw.log" "" \
			    "$B/wirebw"
		else
			status 1 mccl failed "cluster did not come up"
		fi
		cluster_down
		measure_link link-after
	else
		status 1 mccl skipped "$WHY_MCCL"
	fi
	if [ $HAVE_GLOO = 1 ]; then
		record 1 gloo case1.gloo gloo_ns case1.gloo 600 4 1 \
		    "$HERE/gloo_allreduce.py" 4 1024 "$BIGB" "$SMALL_IT"
	else
		status 1 gloo skipped "$WHY_GLOO"
	fi
	if [ $HAVE_OMPI = 1 ]; then
		record 1 ompi case1.ompi mpi_ns case1.ompi 600 \
		    4 1 --mca mpi_yield_when_idle 1 \
		    "$OUT/bin/mpi_allreduce" 1024 "$BIGB" "$SMALL_IT"
	else
		status 1 ompi skipped "$WHY_OMPI"
	fi
}

# The largest size once more, every op timed (no warm-up, no check; about
# 2 s of ops, wire_iters), with the links' counters read around it: how
# much of the op's time each link was sending, and what besides payload it
# sent.
case1_wire() {
	local h=(0 1 2 3)
	cost_snapshot case1.wire
	wire_count "$RAW/case1.wire.before" "${h[@]}"
	lane_count "$RAW/case1.lanes.before"
	record 1 mccl case1.wire mccl_perf case1.wire 300 1 \
	    -b "$BIG" -e "$BIG" -w 0 -n "$WIRE_IT" -c 0
	wire_count "$RAW/case1.wire.after" "${h[@]}"
	lane_count "$RAW/case1.lanes.after"
}

# lane_count FILE: each daemon's lanes' time so far and, of it, their wait
# for each op's last lane, its allreduces and those overlapped at their
# ends with the next, and its allreduces by algorithm (mcclctl metrics),
# two lines per daemon appended to FILE: "lanes host=I seconds=S wait=W
# allreduces=N overlapped=O" and "algos host=I ring=N ...".  Lanes that
# share the links unevenly show in the wait.
lane_count() {
	local i=0 sock
	for sock in "${CL_SOCK[@]}"; do
		timeout 5 "$B/mcclctl" -s "$sock" metrics 2>/dev/null |
		    awk -v h="$i" '$1 == "mccl_lane_seconds_total" { s = $2 }
			$1 == "mccl_lane_wait_seconds_total" { w = $2 }
			$1 == "mccl_ops_total{collective=\"allreduce\"}" {
				n = $2 }
			$1 == "mccl_allreduce_overlapped_total" { o = $2 }
			$1 ~ /^mccl_allreduce_algo_total[{]/ {
				split($1, f, "\""); a = a " " f[2] "=" $2 }
			END { if (s != "") print "lanes host=" h " seconds=" s \
			    " wait=" w " allreduces=" n " overlapped=" o
			    if (a != "") print "algos host=" h a }'
		i=$((i + 1))
	done >>"$1"
}

case2() {
	echo "== case 2: 2 hosts x 2 ranks, $RATE links, allreduce $BIG"
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case2 2 ns; then
			# shellcheck disable=SC2086
			record 2 mccl case2.mccl mccl_perf case2.mccl 600 2 \
			    -b "$BIG" -e "$BIG" $BIG_N
		else
			status 2 mccl failed "cluster did not come up"
		fi
		cluster_down
	else
		status 2 mccl skipped "$WHY_MCCL"
	fi
	if [ $HAVE_GLOO = 1 ]; then
		record 2 gloo case2.gloo gloo_ns case2.gloo 600 2 2 \
		    "$HERE/gloo_allreduce.py" 4 "$BIGB" "$BIGB" "$BIG_IT"
	else
		status 2 gloo skipped "$WHY_GLOO"
	fi
	if [ $HAVE_OMPI = 1 ]; then
		record 2 ompi case2.ompi mpi_ns case2.ompi 600 \
		    2 2 --mca mpi_yield_when_idle 1 \
		    "$OUT/bin/mpi_allreduce" "$BIGB" "$BIGB" "$BIG_IT"
	else
		status 2 ompi skipped "$WHY_OMPI"
	fi
}

# The seed's headline: DDP training of a 25 M-parameter MLP, samples/s,
# one process alone against 2 hosts x 2 ranks on mccl and on gloo.
case6() {
	local args=(64 "$DDP_STEPS" 2)
	echo "== case 6: DDP training, 25 M parameters, 2 hosts x 2 ranks," \
	    "$RATE links"
	if [ $HAVE_TORCH = 0 ]; then
		status 6 all skipped "$WHY_TORCH"
		return
	fi
	record 6 alone case6.alone bg_wait 600 "$RAW/case6.alone.log" "$LO" \
	    env OMP_NUM_THREADS=1 "$PY" "$HERE/ddp_bench.py" none "${args[@]}"
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case6 2 ns; then
			record 6 mccl case6.mccl torch_ns case6.mccl 900 2 2 \
			    mccl "${args[@]}"
			MCCL_WIRE_DTYPE=bf16 record 6 mccl-bf16 case6.bf16 \
			    torch_ns case6.bf16 900 2 2 mccl "${args[@]}"
			BENCH_HOOK=bf16 record 6 mccl-hook case6.hook \
			    torch_ns case6.hook 900 2 2 mccl "${args[@]}"
			BENCH_NO_SYNC=1 record 6 mccl-nosync case6.nosync \
			    torch_ns case6.nosync 900 2 2 mccl "${args[@]}"
		else
			status 6 mccl failed "cluster did not come up"
		fi
		cluster_down
	else
		status 6 mccl skipped "$WHY_MCCL"
	fi
	if [ "$ONLY_MCCL" = 1 ]; then
		status 6 gloo skipped "not asked for (-m)"
	else
		record 6 gloo case6.gloo torch_ns case6.gloo 900 2 2 gloo \
		    "${args[@]}"
	fi
}

# GPU tensors (CUDA, every rank on GPU 0): allreduce from 1 KiB to $BIG on
# 2 hosts x 2 ranks, torch.distributed on mccl with CUDA tensors, on mccl
# with CPU tensors (the path CUDA's is measured against) and on gloo with
# CUDA tensors; then case 6's DDP training on CUDA, alone, on mccl and on
# gloo.  Times include the copies to and from the GPU, synchronized.
case8() {
	local sizes=(4 1024 "$C5MAXB" "$SMALL_IT") args=(64 "$DDP_STEPS" 2)
	echo "== case 8: GPU tensors, 2 hosts x 2 ranks, $RATE links"
	if [ $HAVE_TORCH = 0 ]; then
		status 8 all skipped "$WHY_TORCH"
		return
	fi
	if ! "$PY" -c 'import sys, torch
sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
		status 8 all skipped "no CUDA device for $PY's torch"
		return
	fi
	if [ $HAVE_MCCL = 1 ] && cluster_up case8 2 ns; then
		lane_count "$RAW/case8.lanes.before"
		BENCH_BACKEND=mccl BENCH_DEVICE=cuda record 8 mccl-cuda \
		    case8.mccl-cuda gloo_ns case8.mccl-cuda 600 2 2 \
		    "$HERE/gloo_allreduce.py" "${sizes[@]}"
		lane_count "$RAW/case8.lanes.after"
		BENCH_BACKEND=mccl BENCH_DEVICE=cpu record 8 mccl-cpu \
		    case8.mccl-cpu gloo_ns case8.mccl-cpu 600 2 2 \
		    "$HERE/gloo_allreduce.py" "${sizes[@]}"
		BENCH_DEVICE=cuda record 8 ddp-mccl case8.ddp-mccl torch_ns \
		    case8.ddp-mccl 900 2 2 mccl "${args[@]}"
	elif [ $HAVE_MCCL = 1 ]; then
		status 8 mccl-cuda failed "cluster did not come up"
	else
		status 8 mccl-cuda skipped "$WHY_MCCL"
	fi
	cluster_down
	if [ "$ONLY_MCCL" = 1 ]; then
		status 8 gloo-cuda skipped "not asked for (-m)"
		return
	fi
	BENCH_BACKEND=gloo BENCH_DEVICE=cuda record 8 gloo-cuda case8.gloo-cuda \
	    gloo_ns case8.gloo-cuda 600 2 2 "$HERE/gloo_allreduce.py" "${sizes[@]}"
	BENCH_DEVICE=cuda record 8 ddp-gloo case8.ddp-gloo torch_ns \
	    case8.ddp-gloo 900 2 2 gloo "${args[@]}"
	BENCH_DEVICE=cuda record 8 ddp-alone case8.ddp-alone bg_wait 600 \
	    "$RAW/case8.ddp-alone.log" "$LO" env OMP_NUM_THREADS=1 "$PY" \
	    "$HERE/ddp_bench.py" none "${args[@]}"
}

# bg_wait TIMEOUT LOG NS CMD...: one command, waited for.
bg_wait() {
	local tmo=$1
	shift
	bg_run "$@"
	wait_all "$tmo" "$LAST"
}

case3() {
	local s
	echo "== case 3: 4 hosts x 1 rank, 8-byte allreduce latency"
	bg_run "$RAW/case3.tcp.srv.log" "$(ns_name 0)" "$RUN/bin/tcpperf" \
	    serve "$(ns_addr 0)" 5203
	s=$LAST
	bg_run "$RAW/case3.tcp.log" "$(ns_name 1)" "$RUN/bin/tcpperf" \
	    pingpong "$(ns_addr 0)" 5203 "$PING_N"
	if wait_all 120 "$s" "$LAST"; then
		status 3 tcp ok
	else
		status 3 tcp failed "see raw/case3.tcp.log"
	fi
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case3 4 ns; then
			record 3 mccl case3.mccl mccl_lat case3.mccl 300 1 \
			    -b 8 -n "$LAT_N" -w 100
		else
			status 3 mccl failed "cluster did not come up"
		fi
		cluster_down
	else
		status 3 mccl skipped "$WHY_MCCL"
	fi
	if [ $HAVE_OMPI = 1 ]; then
		record 3 ompi case3.ompi mpi_ns case3.ompi 300 \
		    4 1 "$OUT/bin/mpi_lat" 8 "$LAT_N" 100
		record 3 ompi-yield case3.ompi-yield mpi_ns case3.ompi-yield \
		    300 4 1 --mca mpi_yield_when_idle 1 \
		    "$OUT/bin/mpi_lat" 8 "$LAT_N" 100
	else
		status 3 ompi skipped "$WHY_OMPI"
		status 3 ompi-yield skipped "$WHY_OMPI"
	fi
	if [ $HAVE_GLOO = 1 ]; then
		record 3 gloo case3.gloo gloo_ns case3.gloo 300 4 1 \
		    "$HERE/gloo_lat.py" 8 "$LAT_N" 100
	else
		status 3 gloo skipped "$WHY_GLOO"
	fi
}

case4() {
	local size=$((64 << 20)) it=10 threads
	[ "$QUICK" = 1 ] && size=$((16 << 20)) it=3
	threads=$(nproc 2>/dev/null || echo 1)
	[ "$threads" -gt 8 ] && threads=8
	echo "== case 4: 1 host x 2 ranks, allreduce $((size >> 20))M, no network"
	bg_run "$RAW/case4.memcpy.log" "" "$RUN/bin/membw" "$size" "$it" \
	    "$threads"
	if wait_all 120 "$LAST"; then
		status 4 memcpy ok
	else
		status 4 memcpy failed "see raw/case4.memcpy.log"
	fi
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case4 1 lo; then
			record 4 mccl case4.mccl mccl_perf case4.mccl 300 2 \
			    -b "$size" -e "$size" -n "$it" -w 3
		else
			status 4 mccl failed "daemon did not come up"
		fi
		cluster_down
	else
		status 4 mccl skipped "$WHY_MCCL"
	fi
	if [ $HAVE_OMPI = 1 ]; then
		record 4 ompi case4.ompi mpi_lo case4.ompi 300 2 \
		    --mca btl "$OMPI_SHM,self" \
		    "$OUT/bin/mpi_allreduce" "$size" "$size" "$it"
	else
		status 4 ompi skipped "$WHY_OMPI"
	fi
}

case5() {
	echo "== case 5: 2 hosts on loopback x 1 rank, allreduce 1K..$C5MAX"
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case5 2 lo; then
			# shellcheck disable=SC2086
			record 5 mccl case5.mccl mccl_perf case5.mccl-small 300 1 \
			    -b 1K -e "$C5SMALL" -f 2 $SMALL_N &&
			record 5 mccl case5.mccl mccl_perf case5.mccl-big 600 1 \
			    -b "$C5BIG" -e "$C5MAX" -f 2 $BIG_N
		else
			status 5 mccl failed "cluster did not come up"
		fi
		cluster_down
	else
		status 5 mccl skipped "$WHY_MCCL"
	fi
	if [ $HAVE_OMPI = 1 ]; then
		record 5 ompi case5.ompi mpi_lo case5.ompi 600 2 \
		    --mca btl tcp,self --mca btl_tcp_if_include lo \
		    "$OUT/bin/mpi_allreduce" 1024 "$C5MAXB" "$SMALL_IT"
	else
		status 5 ompi skipped "$WHY_OMPI"
	fi
	if [ $HAVE_GLOO = 1 ]; then
		record 5 gloo case5.gloo bg_gloo_lo case5.gloo 600 \
		    "$HERE/gloo_allreduce.py" 2 1024 "$C5MAXB" "$SMALL_IT"
	else
		status 5 gloo skipped "$WHY_GLOO"
	fi
}

# The issue's "1 host x 8 ranks" latency case: no network, so Open MPI over
# its shared-memory transport against MCCL's one daemon.
case7() {
	echo "== case 7: 1 host x 8 ranks, 8-byte allreduce latency, no network"
	if [ $HAVE_MCCL = 1 ]; then
		if cluster_up case7 1 lo; then
			record 7 mccl case7.mccl mccl_lat case7.mccl 300 8 \
			    -b 8 -n "$LAT_N" -w 100
		else
			status 7 mccl failed "daemon did not come up"
		fi
		cluster_down
	else
		status 7 mccl skipped "$WHY_MCCL"
	fi
	if [ $HAVE_OMPI = 1 ]; then
		record 7 ompi case7.ompi mpi_lo case7.ompi 300 8 \
		    --mca btl "$OMPI_SHM,self" --bind-to none --oversubscribe \
		    "$OUT/bin/mpi_lat" 8 "$LAT_N" 100
		record 7 ompi-yield case7.ompi-yield mpi_lo case7.ompi-yield 300 \
		    8 --mca btl "$OMPI_SHM,self" --bind-to none --oversubscribe \
		    --mca mpi_yield_when_idle 1 "$OUT/bin/mpi_lat" 8 "$LAT_N" 100
	else
		status 7 ompi skipped "$WHY_OMPI"
		status 7 ompi-yield skipped "$WHY_OMPI"
	fi
}

# ---- case 9: N hosts ----

# cost_snapshot TAG: the link cost a job formed now would get, in
# raw/TAG.cost: the worst of every daemon's estimate (mcclctl status), as
# the job's coordinator takes it.  Taken just before the run: only a
# heartbeat (before a daemon's first small op) moves it meanwhile.
cost_snapshot() {
	local tag=$1 sock
	for sock in "${CL_SOCK[@]}"; do
		timeout 5 "$B/mcclctl" -s "$sock" -j status 2>/dev/null |
		    sed -n 's/.*"\(alpha_ns\|beta_ps\|beta_pair_ps\|gamma_ps\)": *\([0-9]*\).*/\1 \2/p'
	done | awk '$2 > worst[$1] { worst[$1] = $2 }
	    END { printf "alpha_ns=%d beta_ps=%d gamma_ps=%d beta_pair_ps=%d\n",
		worst["alpha_ns"], worst["beta_ps"], worst["gamma_ps"],
		worst["beta_pair_ps"] }' >"$RAW/$tag.cost"
}

# cost_model TAG N SIZE...: what the daemons' cost model predicted for
# each algorithm at each size, from the job's link cost (cost_snapshot),
# in raw/TAG.model (tools/bench/costmodel.c).
cost_model() {
	local tag=$1 n=$2 a b g p
	shift 2
	read -r a b g p < <(tr ' =' '\n\n' <"$RAW/$tag.cost" 2>/dev/null |
	    sed -n '2p;4p;6p;8p' | tr '\n' ' ')
	[ "${b:-0}" -gt 0 ] && [ "${p:-0}" -gt 0 ] || return 1
	echo "# link cost alpha_ns=$a beta_ps=$b beta_pair_ps=$p gamma_ps=$g" \
	    "nodes=$n" >"$RAW/$tag.model"
	"$B/costmodel" -n "$n" -a "$a" -b "$b" -p "$p" -g "$g" "$@" \
	    >>"$RAW/$tag.model"
}

# scale_perf TAG N ALGO TIMEOUT ARGS...: mccl-perf by MCCL_ALGO=ALGO on the
# cluster up, with the model's predictions from its job's link cost.
scale_perf() {
	local tag=$1 n=$2 algo=$3 tmo=$4 rc
	shift 4
	cost_snapshot "$tag"
	MCCL_ALGO=$algo mccl_perf "$tag" "$tmo" 1 "$@"
	rc=$?
	# shellcheck disable=SC2046
	cost_model "$tag" "$n" $(sizes_of "$RAW/$tag.json")
	return $rc
}

# sizes_of JSON: the sizes mccl-perf ran.
sizes_of() {
	sed -n 's/^[,]*{"size": *\([0-9]*\).*/\1/p' "$1" 2>/dev/null | sort -un
}

# daemon_stats CLUSTER NAME N: each daemon of cluster CLUSTER (its tag)
# now: memory, descriptors and sockets, and its CPU over 10 s of idling,
# in raw/NAME.daemons (procstat.sh).
daemon_stats() {
	local cl=$1 tag=$2 n=$3 i pid pids=() t0=()
	for ((i = 0; i < n; i++)); do
		pid=$(pgrep -f -- "-c $RUN/$cl-h$i.conf" | head -n 1)
		pids+=("${pid:-0}")
		t0+=("$(proc_ticks "${pid:-0}")")
	done
	sleep 10
	for ((i = 0; i < n; i++)); do
		[ "${pids[$i]}" != 0 ] &&
		    echo "daemon h$i $(proc_line "${pids[$i]}" "${t0[$i]}" 10)"
	done >"$RAW/$tag.daemons"
}

# A job's start at scale moves by 2-3 x from one to the next (128 ranks'
# processes scheduled on a few cores): each system's is the median of this
# many ($MCCL_BENCH_START_RUNS; 0: none, for a run of the allreduces alone).
START_RUNS=${MCCL_BENCH_START_RUNS:-3}

case9_mccl() {
	local n=$1 tag=case9.n$1 t0 algo i
	t0=$(date +%s.%N)
	if ! cluster_up "$tag" "$n" ns; then
		status "9.n$n" mccl failed "cluster did not come up"
		return
	fi
	awk -v n="$n" -v t0="$t0" -v t1="$(date +%s.%N)" \
	    'BEGIN { printf "formation nodes=%d seconds=%.2f\n", n, t1 - t0 }' \
	    >"$RAW/$tag.formation"
	daemon_stats "$tag" "$tag.idle" "$n"
	# Each algorithm first: the daemons fit their link cost to these ops,
	# as long-lived daemons have to their earlier jobs' (a fresh one starts
	# from its heartbeats), and AUTO's run then chooses from that.
	# Quick (-q): AUTO to 64 KiB alone, and the job starts.
	[ "$QUICK" = 1 ] ||
	for algo in ring doubling rabenseifner $([ "$n" -le 16 ] && echo direct); do
		record "9.n$n" "mccl-$algo" "$tag.$algo" scale_perf "$tag.$algo" \
		    "$n" "$algo" 600 -b 8 -e 2M -f 8 -n 5 -w 1 -c 0
	done
	# Up to 1 MiB checked; from 4 MiB a few iterations (a 64 MiB op moves
	# 2 x 64 MiB through every one of the N hosts).
	record "9.n$n" mccl "$tag.auto" scale_perf "$tag.auto" "$n" auto 600 \
	    -b 8 -e "$([ "$QUICK" = 1 ] && echo 64K || echo 1M)" -f 2 -n 10 -w 2 &&
	[ "$QUICK" = 0 ] &&
	record "9.n$n" mccl "$tag.auto-big" scale_perf "$tag.auto-big" "$n" \
	    auto 600 -b 4M -e 64M -f 4 -n 2 -w 1 -c 0
	if [ $HAVE_TORCH = 1 ]; then
		for i in $(seq 1 $START_RUNS); do
			record "9.n$n" mccl-start "$tag.mccl-start.$i" start_ns \
			    "$tag.mccl-start.$i" "$n" mccl
		done
	fi
	daemon_stats "$tag" "$tag.busy" "$n"
	cluster_down
}

case9() {
	local n i
	for n in $SCALE_N; do
		echo "== case 9: $n hosts x 1 rank, $RATE links, allreduce 8 B to 64 MiB"
		if [ $HAVE_MCCL = 1 ]; then
			case9_mccl "$n"
		else
			status "9.n$n" mccl skipped "$WHY_MCCL"
		fi
		if [ $HAVE_GLOO = 1 ] && [ $HAVE_TORCH = 1 ]; then
			for i in $(seq 1 $START_RUNS); do
				record "9.n$n" gloo-start \
				    "case9.n$n.gloo-start.$i" start_ns \
				    "case9.n$n.gloo-start.$i" "$n" gloo
			done
		else
			status "9.n$n" gloo-start skipped "$WHY_GLOO"
		fi
		if [ $HAVE_OMPI = 1 ]; then
			record "9.n$n" ompi "case9.n$n.ompi" mpi_ns "case9.n$n.ompi" \
			    600 "$n" 1 --mca mpi_yield_when_idle 1 \
			    "$OUT/bin/mpi_allreduce" 8 \
			    $([ "$QUICK" = 1 ] && echo 65536 || echo $((64 << 20))) 10
			record "9.n$n" ompi-start "case9.n$n.ompi-start" mpi_ns \
			    "case9.n$n.ompi-start" 300 "$n" 1 \
			    --mca mpi_yield_when_idle 1 "$OUT/bin/mpi_start"
		else
			status "9.n$n" ompi skipped "$WHY_OMPI"
		fi
	done
}

# The script spawns its local ranks itself; gloo on the loopback device.
bg_gloo_lo() {
	local tag=$1 tmo=$2
	shift 2
	bg_run "$RAW/$tag.log" "$LO" env GLOO_SOCKET_IFNAME=lo \
	    MASTER_ADDR=127.0.0.1 OMP_NUM_THREADS=1 "$PY" "$@"
	wait_all "$tmo" "$LAST"
}

# mpirun's rsh agent: runs the command in the named host, as bg_run does.
write_agent() {
	cat >"$RUN/rsh-agent" <<EOF
#!/bin/sh
# rsh agent of tools/bench/bench.sh: agent [options] HOST COMMAND...
while [ "\${1#-}" != "\$1" ]; do shift; done
h=\$1
shift
case \$h in
${NS_PREFIX}[0-9]*) ;;
198.18.0.[0-9]*) h=${NS_PREFIX}\$((\${h##*.} - 10)) ;;
*) echo "rsh-agent: unknown host \$h" >&2; exit 1 ;;
esac
exec ip netns exec "\$h" unshare --uts sh -c '$HOST_SH' "\$h" sh -c "\$*"
EOF
	chmod +x "$RUN/rsh-agent"
}

write_meta() {
	{
		echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "host=$(uname -srm), $(nproc) cpus, load average" \
		    "$(cut -d' ' -f1-3 /proc/loadavg) at the start"
		echo "rate=$RATE"
		echo "haltpoll_ns=$(cat "$HALTPOLL" 2>/dev/null || echo none)"
		echo "tcp_congestion=$(hosts_cc)"
		echo "flow_order=$FLOW_ORDER"
		echo "big_iters=$BIG_IT"
		echo "wire_iters=$WIRE_IT"
		echo "quick=$QUICK"
		echo "cases=$*"
		echo "mccl=$HAVE_MCCL ompi=$HAVE_OMPI gloo=$HAVE_GLOO"
		[ -f "$RAW/ompi.version" ] && echo "ompi_version=$(cat "$RAW/ompi.version")"
		[ -f "$RAW/gloo.version" ] && echo "torch_version=$(cat "$RAW/gloo.version")"
	} >"$RAW/meta.txt"
}

# ---- main ----

# -r A,B,...: one run of this script per rate, each into OUT/RATE (each
# cleans up after itself), then OUT/summary.md: every rate's case 1 as a
# fraction of its link, side by side.
run_rates() {
	local r rc=0 dirs=() opts=(-B "$B")
	[ "$ONLY_MCCL" = 1 ] && opts+=(-m)
	[ "$QUICK" = 1 ] && opts+=(-q)
	[ -n "$POLL_NS" ] && opts+=(-H "$POLL_NS")
	[ -n "$HOST_CC" ] && opts+=(-C "$HOST_CC")
	[ "$FLOW_ORDER" = 0 ] && opts+=(-U)
	opts+=(-N "$SCALE_N")
	for r in ${RATE//,/ }; do
		[[ $r =~ ^([0-9]+[kmg]?bit|none)$ ]] || usage
	done
	OUT=${OUT:-$B/bench}
	mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
	for r in ${RATE//,/ }; do
		"$0" "${opts[@]}" -r "$r" -o "$OUT/$r" "$@" || rc=1
		dirs+=("$OUT/$r")
	done
	python3 "$HERE/report.py" --rates "$OUT" "${dirs[@]}" || rc=1
	echo "summary of every rate: $OUT/summary.md"
	exit $rc
}

main() {
	local ch c cases="" ns_cases="" rc=0
	while getopts "B:C:H:M:N:Uhmo:qr:" ch; do
		case $ch in
		B) B=$OPTARG ;;
		C) HOST_CC=$OPTARG
		   grep -qw -- "$HOST_CC" \
		       /proc/sys/net/ipv4/tcp_available_congestion_control ||
		       { echo "bench: -C $HOST_CC: not one of the kernel's" \
		       "($(cat /proc/sys/net/ipv4/tcp_available_congestion_control))" >&2
		       exit 2; } ;;
		H) POLL_NS=$OPTARG
		   [[ $POLL_NS =~ ^[0-9]+$ ]] || usage ;;
		M) PERF_MEM=$OPTARG
		   [[ $PERF_MEM =~ ^(shared|host)$ ]] || usage ;;
		N) SCALE_N=$OPTARG
		   [[ $SCALE_N =~ ^[0-9\ ]+$ ]] || usage ;;
		o) OUT=$OPTARG ;;
		m) ONLY_MCCL=1 ;;
		q) QUICK=1 ;;
		r) RATE=$OPTARG ;;
		U) FLOW_ORDER=0 ;;
		*) usage ;;
		esac
	done
	shift $((OPTIND - 1))
	B=$(cd "$B" 2>/dev/null && pwd) || {
		echo "bench: no build directory $B" >&2
		exit 2
	}
	exec 9<"$0"
	if [ "${1:-}" = clean ]; then
		[ $# = 1 ] || usage
		do_clean
		exit 0
	fi
	for c in $(printf '%s\n' "${@:-$ALL_CASES}"); do
		c=${c#case}
		case $c in
		[1-9]) cases="$cases $c" ;;
		*) usage ;;
		esac
	done
	# shellcheck disable=SC2086
	[[ $RATE == *,* ]] && run_rates $cases
	if ! flock -n 9; then
		echo "bench: another bench.sh is running" >&2
		exit 1
	fi
	if is_root && ip netns list 2>/dev/null | awk '{print $1}' |
	    grep -qE "$OUR_NS"; then
		echo "bench: namespaces of an earlier run are left:" \
		    "run $0 clean" >&2
		exit 2
	fi
	OUT=${OUT:-$B/bench}
	mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
	RAW=$OUT/raw
	rm -rf "${RAW:?}" "${OUT:?}/data" "${OUT:?}/bin"
	mkdir -p "$RAW" "$OUT/data"
	: >"$RAW/status.tsv"
	RUN=$(mktemp -d /tmp/mccl-bench.XXXXXX) || exit 2
	: >"$RUN/pids"
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	set_params
	if [ -n "$POLL_NS" ]; then
		haltpoll_set "$POLL_NS" || exit 2
	fi
	build_helpers || exit 2
	"$PY" -c 'import torch.distributed' >/dev/null 2>&1 && HAVE_TORCH=1
	if [ "$ONLY_MCCL" = 1 ]; then
		WHY_OMPI="not asked for (-m)" WHY_GLOO="not asked for (-m)"
	else
		detect_ompi
		detect_gloo
	fi
	if command -v gnuplot >/dev/null; then
		HAVE_PLOT=1
	else
		note "gnuplot not installed (apt-get install -y gnuplot-nox):" \
		    "no plots"
	fi

	for c in $cases; do
		case $c in 1|2|3|6|8|9) ns_cases="$ns_cases $c" ;; esac
	done
	if [ -n "$ns_cases" ] && ! is_root; then
		note "not root: case(s)$ns_cases need root (network" \
		    "namespaces); running the loopback cases only"
		for c in $ns_cases; do
			status "$c" all skipped "needs root"
		done
		cases=$(echo "$cases" | tr ' ' '\n' | grep '[45]' | tr '\n' ' ')
		ns_cases=""
	fi
	# shellcheck disable=SC2086
	write_meta $cases
	if [ -n "$ns_cases" ]; then
		write_agent
		if [ $HAVE_OMPI = 1 ] && ! hosts_add; then
			WHY_OMPI="cannot edit /etc/hosts"
			note "Open MPI skipped: $WHY_OMPI"
			HAVE_OMPI=0
		fi
		if [[ " $cases " == *" 9 "* ]]; then	# the scale case's hosts
			for c in $SCALE_N; do
				[ "$c" -le "$NET_HOSTS" ] || NET_HOSTS=$c
			done
			[ "$NET_HOSTS" -le 240 ] || usage	# ns_addr's /24
		fi
		echo "== network: $NET_HOSTS hosts on $BR, links $RATE"
		if ! net_up "$NET_HOSTS" "${RATE#none}"; then
			note "cannot build the simulated network"
			for c in $ns_cases; do
				status "$c" all failed "no network"
			done
			cases=$(echo "$cases" | tr ' ' '\n' | grep '[45]' | tr '\n' ' ')
		fi
	fi
	if is_root && [ -n "$(echo "$cases" | tr -dc 45)" ]; then
		if lo_up; then
			LO=$LO_NS
		else
			note "cannot make namespace $LO_NS: cases 4 and 5 run here"
		fi
	fi
	for c in $cases; do
		cpu_count "$RAW/case$c.cpu.before"
		"case$c"
		cpu_count "$RAW/case$c.cpu.after"
	done
	stop_all
	[ "$NET_UP" = 1 ] && net_down
	[ "$HOSTS_EDITED" = 1 ] && hosts_remove

	python_report || rc=1
	grep -q "	failed	" "$RAW/status.tsv" && rc=1
	echo
	echo "tables: $OUT/results.txt  summary: $OUT/summary.md  raw logs: $RAW"
	return $rc
}

python_report() {
	local py=python3
	command -v python3 >/dev/null || py=$PY
	"$py" "$HERE/report.py" "$OUT" || { note "report failed"; return 1; }
	[ $HAVE_PLOT = 1 ] || return 0
	for gp in "$OUT"/data/*.gp; do
		[ -f "$gp" ] || continue
		(cd "$OUT/data" && gnuplot "$gp") >>"$RAW/gnuplot.log" 2>&1 ||
		    note "gnuplot failed on $gp (see raw/gnuplot.log)"
	done
}

main "$@"
