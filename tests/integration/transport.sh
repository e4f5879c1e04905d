# transport.sh: how two nodes agree on their data links' transport
# (sourced by run.sh).  A node set to a transport the other does not offer
# fails the job on both, saying why; under check-rdma (the tests' verbs
# provider), "auto" takes RDMA where both nodes have a device and TCP where
# one has none, and a named device that is not there is said so.

# tp_up T0_KEYS T1_KEYS T0_RDMA [T1_ENV...]: nodes t0 and t1 with those
# keys (JSON, each followed by a comma), t0's "rdma" map T0_RDMA ({} for
# none), t1 run under env T1_ENV.
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
	"$B/mccld" -c "$T/t0.conf" >>"$T/t0.log" 2>&1 &
	DAEMON_PIDS[70]=$!
	shift 3
	env "$@" "$B/mccld" -c "$T/t1.conf" >>"$T/t1.log" 2>&1 &
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
