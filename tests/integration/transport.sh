# transport.sh: how two nodes agree on their data links' transport
# (sourced by run.sh).  A node set to a transport the other does not offer
# fails the job on both, saying why; under check-rdma (the tests' verbs
# provider), "auto" takes RDMA where both nodes have a device and TCP where
# one has none, and a named device that is not there is said so.

# tp_run CMD...: CMD in namespace $TP_NS where it is set, as this process
# (run in the background, $! is CMD's).
tp_run() {
	if [ -n "${TP_NS:-}" ]; then
		exec ip netns exec "$TP_NS" "$@"
	else
		exec "$@"
	fi
}

# tp_up T0_KEYS T1_KEYS T0_RDMA [T1_ENV...]: nodes t0 and t1 with those
# keys (JSON, each followed by a comma), t0's "rdma" map T0_RDMA ({} for
# none), t1 run under env T1_ENV; in namespace $TP_NS where it is set.
tp_up() {
	local base i keys
	base=$(free_ports 2)
	for i in 0 1; do
		[ $i = 0 ] && keys=$1 || keys=$2
		cat >"$T/t$i.conf" <<EOC
{ $keys "node": "t$i", "socket": "$T/t$i.sock", "log_level": "debug",
  "nodes": [{"name": "t0", "address": "127.0.0.1:$base", "rdma": $3},
            {"name": "t1", "address": "127.0.0.1:$((base + 1))"}],
  "connect_timeout_ms": 3000, "heartbeat_interval_ms": 300,
  "heartbeat_timeout_ms": 1500 }
EOC
	done
	(tp_run "$B/mccld" -c "$T/t0.conf") >>"$T/t0.log" 2>&1 &
	DAEMON_PIDS[70]=$!
	shift 3
	(tp_run env "$@" "$B/mccld" -c "$T/t1.conf") >>"$T/t1.log" 2>&1 &
	DAEMON_PIDS[71]=$!
	wait_cluster 2 t
}

tp_down() {
	kill -TERM "${DAEMON_PIDS[70]}" "${DAEMON_PIDS[71]}" 2>/dev/null
	wait "${DAEMON_PIDS[70]}" "${DAEMON_PIDS[71]}" 2>/dev/null
	unset "DAEMON_PIDS[70]" "DAEMON_PIDS[71]"
}

# tp_fails NAME TEXT: a job over t0 and t1 fails on both ranks with TEXT.
tp_fails() {
	local a
	NODE_PREFIX=t spawn 0 "$1" 2 0 expect-init MCCL_ERR_PEER_FAILED "$2"
	a=$LAST_PID
	NODE_PREFIX=t spawn 1 "$1" 2 1 expect-init MCCL_ERR_PEER_FAILED "$2"
	wait "$a" && wait "$LAST_PID" &&
	    ok "$1: the job fails on both nodes: $2" ||
	    { bad "$1"; cat "$T/$1".r*.out; }
}

# tp_links WANT: what t0 says t1's data links run over ("tcp", "rdma DEV").
tp_links() {
	local line tp dev
	line=$("$B/mcclctl" -s "$T/t0.sock" -j peers |
	    grep -E '"(device|name|transport)"' | paste - - - | tr -d ' \t"' |
	    grep "name:t1,")
	tp=${line##*transport:}
	tp=${tp%,}
	dev=${line#device:}
	dev=${dev%%,*}
	[ "$tp${dev:+ $dev}" = "$1" ] &&
	    ok "mcclctl peers on t0: t1's data links: $1" ||
	    bad "mcclctl peers on t0: t1's data links: \"$line\", not $1"
}

echo "== the data links' transport, as mcclctl shows it"
# After a job on every node of the cluster: its data links' transport and
# device in mcclctl peers (both forms) and in the metrics.
run_job "a job on every node" tpshow "0 1 2" collectives
ctl 1 -j peers >"$T/peers.json"
[ "$TRANSPORT" = rdma ] && want_dev="fake0:1" || want_dev=""
n=$(grep -E '"(device|transport)"' "$T/peers.json" | paste - - | tr -d ' \t' |
    grep -c "^\"device\":\"$want_dev\",\"transport\":\"$TRANSPORT\",\$")
expect_output "mcclctl -j peers: both peers' data links over $TRANSPORT" 2 "$n"
n=$(ctl 1 peers | grep -c "  $TRANSPORT${want_dev:+ $want_dev}  ")
expect_output "mcclctl peers: the DATA LINKS column says so" 2 "$n"
ctl 0 metrics | grep -q "^mccl_peer_link_info{peer=\"n1\",transport=\"$TRANSPORT\",device=\"$want_dev\"} 1$" &&
    ok "mcclctl metrics: n1's data links over $TRANSPORT" ||
    bad "mcclctl metrics: n1's data links: $(ctl 0 metrics | grep link_info)"

echo "== transports: each end's, agreed"
tp_up '"transport": "rdma",' '"transport": "tcp",' '{}' ||
    bad "t cluster (rdma against tcp)"
tp_fails tpmix "is set to transport"
tp_down

if [ "$TRANSPORT" = rdma ]; then
	tp_up '"transport": "auto",' '"transport": "auto",' '{}' \
	    -u MCCL_FAKEVERBS_DIR || bad "t cluster (t1 without a device)"
	NODE_PREFIX=t run_job "auto, t1 without a device: a job runs" tpauto \
	    "0 1" collectives
	tp_links tcp
	grep -q "node t1: data links over tcp" "$T/t0.log" &&
	    ok "t0's log says t1's links are over tcp" ||
	    bad "t0's log does not say which transport t1's links use"
	tp_down

	tp_up '"transport": "auto",' '"transport": "auto",' \
	    '{"t1": "fake0:1"}' || bad "t cluster (a named device)"
	NODE_PREFIX=t run_job "auto, a named device: a job runs" tpnamed \
	    "0 1" collectives
	tp_links "rdma fake0:1"
	tp_down

	tp_up '"transport": "rdma",' '"transport": "auto",' \
	    '{"t1": "nosuch0"}' || bad "t cluster (a device that is not there)"
	tp_fails tpnodev "node t0 is set to transport rdma"
	grep -q 'no rdma: no RDMA device "nosuch0" on this node' "$T/t0.log" &&
	    ok "t0's log names the device that is not there" ||
	    bad "t0's log does not name the missing device"
	tp_down
fi

# cc_other: a congestion control the kernel offers other than this
# namespace's default, so that a link that takes it can be told apart.
cc_other() {
	local dflt cc
	dflt=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
	for cc in reno cubic $(cat /proc/sys/net/ipv4/tcp_available_congestion_control); do
		[ "$cc" != "$dflt" ] &&
		    grep -qw "$cc" /proc/sys/net/ipv4/tcp_available_congestion_control &&
		    { echo "$cc"; return 0; }
	done
	return 1
}

# tp_cc_count CC: sockets between t0 and t1 that run congestion control CC.
tp_cc_count() {
	local p0 p1
	p0=$(sed -n 's/.*"t0", "address": "127.0.0.1:\([0-9]*\)".*/\1/p' \
	    "$T/t0.conf")
	p1=$((p0 + 1))
	(tp_run ss -tniH state established "( sport = :$p0 or dport = :$p0 or \
	    sport = :$p1 or dport = :$p1 )") | grep -cw "$1"
}

# tp_cc_links DATA CONTROL LABEL: while a job holds them, t0 and t1's data
# link runs congestion control DATA and their control connection CONTROL
# (both ends of each: 2 sockets, or 4 where the two are alike).
tp_cc_links() {
	local want=2 a b n=0 m=0 _
	[ "$1" = "$2" ] && want=4
	NODE_PREFIX=t spawn 0 "tpcc$1" 2 0 hold 3000 allreduce
	a=$LAST_PID
	NODE_PREFIX=t spawn 1 "tpcc$1" 2 1 hold 3000 allreduce
	b=$LAST_PID
	for _ in $(seq 60); do
		n=$(tp_cc_count "$1")
		[ "$n" -ge $want ] && break
		sleep 0.05
	done
	m=$(tp_cc_count "$2")
	[ "$n" -ge $want ] && [ "$m" -ge 2 ] &&
	    ok "$3: the data link runs $1, the control connection $2" ||
	    bad "$3: $n sockets run $1 (want $want), $m $2 (want 2)"
	wait "$a" && wait "$b" && ok "$3: the job ran" ||
	    { bad "$3: the job"; cat "$T"/tpcc"$1".r*.out; }
}

echo "== tcp_congestion: the data links take it, control connections not"
if ! CC=$(cc_other); then
	echo "skip tcp_congestion: the kernel offers only its default"
else
	tp_up "\"transport\": \"tcp\", \"tcp_congestion\": \"$CC\"," \
	    "\"transport\": \"tcp\", \"tcp_congestion\": \"$CC\"," '{}' ||
	    bad "t cluster (tcp_congestion $CC)"
	tp_cc_links "$CC" "$(cat /proc/sys/net/ipv4/tcp_congestion_control)" \
	    "tcp_congestion $CC"
	tp_down
	cat >"$T/tcc.conf" <<EOC
{ "tcp_congestion": "no_such_cc", "socket": "$T/tcc.sock",
  "nodes": [{"name": "t0", "address": "127.0.0.1:$(free_ports 1)"}] }
EOC
	if timeout 10 "$B/mccld" -c "$T/tcc.conf" >"$T/tcc.log" 2>&1; then
		bad "tcp_congestion no_such_cc: mccld started"
	else
		grep -q '"no_such_cc" is not available on this host' \
		    "$T/tcc.log" &&
		    ok "tcp_congestion no_such_cc: mccld refuses to start, saying why" ||
		    { bad "tcp_congestion no_such_cc: no clear error"; cat "$T/tcc.log"; }
	fi
fi

echo "== tcp_congestion auto on a host whose default is bbr"
if [ "$(id -u)" != 0 ] ||
    ! grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control ||
    ! grep -qw cubic /proc/sys/net/ipv4/tcp_available_congestion_control; then
	echo "skip tcp_congestion auto: needs root, bbr and cubic"
else
	TP_NS=$(host_ns ccw 0)
	CLEANUP_HOOKS+=("hosts_down ccw 1")
	ip netns add "$TP_NS" && ip -n "$TP_NS" link set lo up &&
	    ip netns exec "$TP_NS" \
	    sysctl -qw net.ipv4.tcp_congestion_control=bbr ||
	    bad "a namespace whose default is bbr"
	: >"$T/t0.log"
	tp_up '"transport": "tcp",' '"transport": "tcp",' '{}' ||
	    bad "t cluster in $TP_NS (auto)"
	grep -q "the data links take cubic, not the system's bbr" \
	    "$T/t0.log" && ok "auto: mccld says its data links take cubic" ||
	    { bad "auto: no word of cubic"; cat "$T/t0.log"; }
	tp_cc_links cubic bbr "auto"
	tp_down
	: >"$T/t0.log"
	tp_up '"transport": "tcp", "tcp_congestion": "system",' \
	    '"transport": "tcp", "tcp_congestion": "system",' '{}' ||
	    bad "t cluster in $TP_NS (system)"
	! grep -q "congestion\|cubic" "$T/t0.log" &&
	    ok "system: nothing said of congestion control" ||
	    { bad "system: a word of it"; cat "$T/t0.log"; }
	tp_cc_links bbr bbr "system"
	tp_down
	hosts_down ccw 1
	unset TP_NS
fi
