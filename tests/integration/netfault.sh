# netfault.sh: a link that goes down and comes back (sourced by run.sh).
# Needs root: two hosts in network namespaces on a bridge, addresses in
# 198.18.1.0/24, one keyed mccld in each.  The host's interface goes down
# in the middle of a collective: both ranks must fail with PEER_FAILED
# within the heartbeat timeout; when it comes back up, the daemons must
# reconnect by themselves and a new job must work.  Everything created
# here is removed at exit (lib.sh runs CLEANUP_HOOKS), also on failure.

NF_NS=("$(host_ns nf 0)" "$(host_ns nf 1)")
nf_down() { hosts_down nf 2; }

# nf_peers_up I: host I's daemon sees its peer up, within 10 s.
nf_peers_up() {
	local deadline=$((SECONDS + 10))
	until "$B/mcclctl" -s "$T/h$1.sock" -j status 2>/dev/null |
	    grep -q '"peers_up": 1'; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

# nf_rank I JOB RANK ARGS...: a rank on host I (its daemon's socket).
nf_rank() {
	local i=$1 job=$2 rank=$3
	shift 3
	MCCL_SOCKET="$T/h$i.sock" MCCL_JOB=$job MCCL_NRANKS=2 MCCL_RANK=$rank \
	    timeout 60 ip netns exec "${NF_NS[$i]}" "$B/mccl-test" "$@" \
	    >>"$T/$job.r$rank.out" 2>&1 &
	CHILD_PIDS+=($!)
	LAST_PID=$!
}

echo "== faults: a link down and up again (namespaces)"
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
	echo "(not root: the link test needs network namespaces; skipped)"
elif ! hosts_up nf 1 2; then
	bad "link test: cannot build the namespaces"
	nf_down
else
	CLEANUP_HOOKS+=(nf_down)
	head -c 64 /dev/urandom >"$T/nf.key"
	chmod 600 "$T/nf.key"
	# TCP in every run: tc and iptables act on the veth links, and the
	# tests' verbs provider carries RDMA through Unix sockets instead.
	for i in 0 1; do
		cat >"$T/h$i.conf" <<EOC
{ "node": "h$i", "socket": "$T/h$i.sock", "key_file": "$T/nf.key",
  "transport": "tcp",
  "nodes": [{ "name": "h0", "address": "198.18.1.10:7470" },
            { "name": "h1", "address": "198.18.1.11:7470" }],
  "log_level": "debug", "heartbeat_interval_ms": 300,
  "heartbeat_timeout_ms": 1500, "connect_timeout_ms": 2000,
  "op_timeout_ms": 20000 }
EOC
		ip netns exec "${NF_NS[$i]}" "$B/mccld" -c "$T/h$i.conf" \
		    >>"$T/h$i.log" 2>&1 &
		DAEMON_PIDS[$((20 + i))]=$!
	done
	nf_peers_up 0 && nf_peers_up 1 && ok "link test: keyed hosts up" ||
	    bad "link test: hosts never saw each other"
	nf_rank 0 jlink 0 loop MCCL_ERR_PEER_FAILED "h1"; l0=$LAST_PID
	nf_rank 1 jlink 1 loop MCCL_ERR_PEER_FAILED "h0"; l1=$LAST_PID
	wait_looping jlink 2 || bad "jlink never started"
	t0=$(now)
	ip -n "${NF_NS[1]}" link set eth0 down
	expect_exit "link down: rank 0 gets PEER_FAILED naming h1" "$l0"
	expect_exit "link down: rank 1 gets PEER_FAILED naming h0" "$l1"
	detected "link down detected" jlink 0 "$t0" "$HB_LIMIT"
	detected "link down detected" jlink 1 "$t0" "$HB_LIMIT"
	ip -n "${NF_NS[1]}" link set eth0 up
	nf_peers_up 0 && nf_peers_up 1 &&
	    ok "link up: the daemons reconnected by themselves" ||
	    bad "link up: no reconnection"
	nf_rank 0 jlink2 0 hold 10; h0=$LAST_PID
	nf_rank 1 jlink2 1 hold 10; h1=$LAST_PID
	expect_exit "link up: a new job works" "$h0"
	wait "$h1"
	daemons_stop 20 2
fi
