# check.sh: mcclctl check (sourced by run.sh).  --write-config: its file
# taken by mccld, its refusals.  On the loopback cluster: every pair
# measured, refused while a job runs unless forced, a frozen node's pairs
# marked unreachable; on rdma, a node killed mid-check ends the survivor's
# check threads at once.  As root, four hosts in network
# namespaces on a bridge (198.18.2.0/24), each host's egress shaped by
# tc tbf to 200 Mbit/s but one host's to 40: that host's pairs, and no
# other, must be marked; a job formed once a ring measured those links
# gets one lane.  Everything made here is removed at exit.

echo "== mcclctl check --write-config: one file for every node"
me=$(hostname)
out=$("$B/mcclctl" check --write-config "$me=127.0.0.1:7001" \
    "peer=localhost:7002" 2>&1)
"$B/mcclctl" check --write-config "$me=127.0.0.1:7001" \
    "peer=localhost:7002" >"$T/wc.conf" 2>&1 &&
    "$B/mccld" -n -c "$T/wc.conf" -s "$T/wc.sock" >"$T/wc.out" 2>&1 &&
    grep -qE "^node +$me$" "$T/wc.out" &&
    grep -qE "^listen +127.0.0.1:7001$" "$T/wc.out" &&
    grep -qE "^nodes +$me 127.0.0.1:7001, peer 127.0.0.1:7002$" "$T/wc.out" &&
    ok "--write-config: mccld takes the file, finds itself by host name" ||
    bad "--write-config: $out / $(cat "$T/wc.out" 2>/dev/null)"
wc_fails() {	# NAME EXPECTED HOST...
	local name=$1 want=$2 out
	shift 2
	out=$("$B/mcclctl" check --write-config "$@" 2>&1)
	expect_output "--write-config refuses $name" \
	    "1:mcclctl: check --write-config: $want" "$?:$out"
}
wc_fails "one host twice" \
    '"127.0.0.1" and "localhost" are both 127.0.0.1:7470' 127.0.0.1 localhost
wc_fails "two nodes of one name" 'two nodes named "a"' \
    a=127.0.0.1:7001 a=127.0.0.1:7002
wc_fails "loopback beside other hosts" \
    '"127.0.0.1" is a loopback address (127.0.0.1:7470): node 198.18.0.1 could not reach it' \
    198.18.0.1 127.0.0.1
wc_fails "a bad port" '"198.18.0.1:0": the port must be 1 to 65535' \
    198.18.0.1:0
out=$("$B/mcclctl" check --write-config no-such-host.invalid 2>&1)
[ $? = 1 ] && grep -q '"no-such-host.invalid": ' <<<"$out" &&
    ok "--write-config: a host that does not resolve, named" ||
    bad "--write-config of an unknown host: $out"
echo "the running configuration" >"$T/wc-o.conf"
"$B/mcclctl" check --write-config -o "$T/wc-o.conf" 127.0.0.1:7001 \
    no-such-host.invalid >/dev/null 2>&1
[ $? = 1 ] && [ "$(cat "$T/wc-o.conf")" = "the running configuration" ] &&
    [ "$(ls "$T"/wc-o.conf* | wc -l)" = 1 ] &&
    ok "--write-config -o FILE: a host that does not resolve leaves FILE as it was" ||
    bad "--write-config -o: FILE is now: $(head -c 80 "$T/wc-o.conf")"
"$B/mcclctl" check --write-config -o "$T/wc-o.conf" "$me=127.0.0.1:7001" \
    "peer=127.0.0.1:7002" && "$B/mccld" -n -c "$T/wc-o.conf" \
    -s "$T/wc-o.sock" >/dev/null 2>&1 &&
    ok "--write-config -o FILE: written whole, mccld takes it" ||
    bad "--write-config -o FILE: $(cat "$T/wc-o.conf")"

echo "== mcclctl check on a cluster of one node"
oport=$(free_ports 1)
"$B/mcclctl" check --write-config -o "$T/one.conf" "one=127.0.0.1:$oport" &&
    { "$B/mccld" -c "$T/one.conf" -s "$T/one.sock" >>"$T/one.log" 2>&1 &
    DAEMON_PIDS[30]=$!; }
for i in $(seq 50); do
	"$B/mcclctl" -s "$T/one.sock" status >/dev/null 2>&1 && break
	sleep 0.1
done
out=$("$B/mcclctl" -s "$T/one.sock" check 2>&1)
expect_output "mcclctl check on one node: nothing to measure, said" \
    "0:a cluster of 1 node: no pair of nodes to measure" "$?:$out"
kill -TERM "${DAEMON_PIDS[30]}" 2>/dev/null
wait "${DAEMON_PIDS[30]}" 2>/dev/null
unset "DAEMON_PIDS[30]"

echo "== mcclctl check: every pair of nodes"
out=$(ctl 1 check 2>&1)
rc=$?
[ $rc = 0 ] && grep -qE '^n0 +- +[0-9.]+\*? +[0-9.]+\*?$' <<<"$out" &&
    grep -qE '^n2 +[0-9.]+\*? +[0-9.]+\*? +-$' <<<"$out" &&
    grep -q '^median [0-9.]* Gbit/s, round trip [0-9.]* ms' <<<"$out" &&
    ok "mcclctl check: a matrix of the three nodes" ||
    bad "mcclctl check: exit $rc: $out"
out=$(ctl 0 -j check 2>&1)
expect_output "mcclctl -j check: 6 directions, each with a rate and a round trip" \
    "6 6" "$(grep -c '"from"' <<<"$out") $(grep -cE '"gbps": [0-9]' <<<"$out")"

# A job here: refused, unless forced.
spawn 0 ckjob 1 0 hold 3000
ck=$LAST_PID
job_ready ckjob || bad "job ckjob did not form"
out=$(ctl 0 check 2>&1)
expect_output "mcclctl check while a job runs: refused, exit 1" \
    "1:mcclctl: check: mccld: 1 job runs on node n0: the check's traffic and theirs would disturb each other (mcclctl check --force runs it anyway)" \
    "$?:$out"
out=$(ctl 0 check --force 2>&1)
[ $? = 0 ] && grep -q '^median' <<<"$out" &&
    ok "mcclctl check --force runs beside the job" ||
    bad "mcclctl check --force: $out"
wait "$ck" || bad "the job beside the check failed"

# A job on n2 alone, the check asked of idle n0: n2's pairs are not
# measured (no test traffic beside its job), the others are.
spawn 2 ckbusy 1 0 hold 4000
ck=$LAST_PID
job_ready ckbusy 2 || bad "job ckbusy did not form"
rx0=$(ctl 2 metrics | awk '$1 ~ /^mccl_peer_bytes_total/ && /direction="rx"/ { s += $2 } END { printf "%.0f\n", s }')
out=$(ctl 0 check 2>&1)
rx1=$(ctl 2 metrics | awk '$1 ~ /^mccl_peer_bytes_total/ && /direction="rx"/ { s += $2 } END { printf "%.0f\n", s }')
grep -q '^  n0 <-> n2: not measured: node n2 runs 1 job: not measured (mcclctl check --force measures anyway)' <<<"$out" &&
    grep -q '^  n1 <-> n2: not measured: node n2 runs 1 job' <<<"$out" &&
    grep -qE '^n0 +- +[0-9.]+\*? +X\*$' <<<"$out" &&
    ok "mcclctl check on an idle node: a busy node's pairs not measured, named" ||
    bad "mcclctl check with a job on n2: $out"
[ $((rx1 - rx0)) -lt 1048576 ] &&
    ok "mcclctl check: the busy node got no test traffic ($((rx1 - rx0)) bytes)" ||
    bad "mcclctl check: the busy node received $((rx1 - rx0)) bytes"
wait "$ck" || bad "the job beside the check failed"

# A frozen node: its pairs unreachable, the others measured.
kill -STOP "${DAEMON_PIDS[2]}"
for i in $(seq 100); do
	ctl 0 -j status | grep -q '"peers_up": 1' && break
	sleep 0.05
done
out=$(ctl 0 check 2>&1)
kill -CONT "${DAEMON_PIDS[2]}"
grep -q '^  n0 <-> n2: unreachable: node n2 is down' <<<"$out" &&
    grep -q '^  n1 <-> n2: unreachable: node n2 is down' <<<"$out" &&
    grep -qE '^n0 +- +[0-9.]+\*? +X\*$' <<<"$out" &&
    ok "mcclctl check: a frozen node's pairs marked unreachable" ||
    bad "mcclctl check with n2 frozen: $out"
wait_cluster 3 || bad "the cluster did not come back after the check"

# A node killed mid-check, on rdma: a queue pair that only receives learns
# nothing of the peer's death (as on a device, tests/fakeverbs), only the
# connection's hang-up says it, and the survivor's check threads must end
# on it rather than poll it at full CPU until their deadline.
if [ "$TRANSPORT" = rdma ]; then
	echo "== mcclctl check: a node killed mid-check (rdma)"
	if cluster_up 2 cs 86; then
		"$B/mcclctl" -s "$T/cs1.sock" check >"$T/cs-check.out" 2>&1 &
		ck=$!
		CHILD_PIDS+=($ck)
		sleep 0.3
		kill -9 "${DAEMON_PIDS[86]}"
		wait "${DAEMON_PIDS[86]}" 2>/dev/null
		t0=$(cpu_ticks "${DAEMON_PIDS[87]}")
		sleep 2
		spent=$(($(cpu_ticks "${DAEMON_PIDS[87]}") - t0))
		wait "$ck"
		[ "$spent" -lt 50 ] &&
		    ok "the survivor's check threads end on the hang-up ($spent \
ticks of CPU in the 2 s after it)" ||
		    bad "the survivor spun: $spent ticks of CPU in 2 s"
		grep -q '^  cs0 <-> cs1: unreachable' "$T/cs-check.out" &&
		    kill -0 "${DAEMON_PIDS[87]}" 2>/dev/null &&
		    ok "the check marks the dead node's pair, and the survivor runs" ||
		    bad "check with cs0 killed: $(cat "$T/cs-check.out")"
	else
		bad "the cs cluster did not come up"
	fi
	daemons_stop 86 2
fi

# ---- four hosts, one slow ----

CK_NS=()
for i in 0 1 2 3; do
	CK_NS+=("$(host_ns ck "$i")")
done
ck_down() { hosts_down ck 4; }

# ck_up: the hosts, their egress shaped (host 3: 40 Mbit/s).
ck_up() {
	local i rate
	hosts_up ck 2 4 || return 1
	for i in 0 1 2 3; do
		rate=200mbit
		[ $i = 3 ] && rate=40mbit
		tc -n "${CK_NS[$i]}" qdisc add dev eth0 root tbf rate $rate \
		    burst 64kb latency 100ms || return 1
	done
}

# ck_ranks JOB CMD...: CMD as ranks 0-3 of JOB, rank i on host i's daemon;
# fails if one did.
ck_ranks() {
	local job=$1 i p rc=0 pids=()
	shift
	for i in 0 1 2 3; do
		MCCL_SOCKET="$T/h$i.ck.sock" MCCL_JOB=$job MCCL_RANK=$i \
		    MCCL_NRANKS=4 timeout 60 "$@" >"$T/$job.$i.out" 2>&1 &
		pids+=($!)
		CHILD_PIDS+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}

# ck_job_lanes JOB: the lanes job JOB forms with on the four hosts.
ck_job_lanes() {
	local job=$1 i
	ck_ranks "$job" "$B/mccl-test" hold 1500 &
	for i in $(seq 100); do
		"$B/mcclctl" -s "$T/h0.ck.sock" -j job "$job" 2>/dev/null |
		    sed -n 's/.*"lanes": *\([0-9]*\).*/\1/p' | grep . && break
		sleep 0.05
	done
	wait $!
}

# ck_ring_allreduce: ring allreduces of 1 MiB, the link cost's measure.
ck_ring_allreduce() {
	MCCL_ALGO=ring ck_ranks ckperf "$B/mccl-perf" -b 1M -e 1M -n 2 -w 0
}

echo "== mcclctl check: four hosts, one of them slow (namespaces)"
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
	echo "(not root: the shaped hosts need network namespaces; skipped)"
elif ! ck_up; then
	bad "check: cannot build the namespaces"
	ck_down
else
	CLEANUP_HOOKS+=(ck_down)
	head -c 64 /dev/urandom >"$T/ck.key"
	chmod 600 "$T/ck.key"
	# One file for the four, from --write-config; each daemon finds
	# itself by its host name (a UTS namespace each).  Only the key's
	# path is the test's own.  No fake verbs device (check-rdma): tc
	# shapes TCP, not the fake queue pairs.
	"$B/mcclctl" check --write-config h0=198.18.2.10 h1=198.18.2.11 \
	    h2=198.18.2.12 h3=198.18.2.13 |
	    sed "s#/etc/mccl/cluster.key#$T/ck.key#" >"$T/ck.conf"
	for i in 0 1 2 3; do
		ip netns exec "${CK_NS[$i]}" env -u MCCL_FAKEVERBS_DIR \
		    unshare --uts sh -c \
		    'hostname "$1" && exec "$2" -c "$3" -s "$4"' - "h$i" \
		    "$B/mccld" "$T/ck.conf" "$T/h$i.ck.sock" \
		    >>"$T/h$i.ck.log" 2>&1 &
		DAEMON_PIDS[$((80 + i))]=$!
	done
	for i in $(seq 100); do
		"$B/mcclctl" -s "$T/h0.ck.sock" -j status 2>/dev/null |
		    grep -q '"peers_up": 3' && break
		sleep 0.1
	done
	out=$("$B/mcclctl" -s "$T/h0.ck.sock" check 2>&1)
	rc=$?
	echo "$out" | sed 's/^/    /'
	slow=$(grep -cE '^  h3 -> h[012]: [0-9.]+ Gbit/s, under half the median' <<<"$out")
	asym=$(grep -cE '^  h[012] <-> h3: asymmetric' <<<"$out")
	others=$(sed -n '/^outliers:/,$p' <<<"$out" | sed 1d | grep -vc 'h3')
	[ $rc = 0 ] && [ "$slow" = 3 ] && [ "$asym" = 3 ] && [ "$others" = 0 ] &&
	    grep -qE '^h3 +[0-9.]+\* +[0-9.]+\* +[0-9.]+\* +-$' <<<"$out" &&
	    ok "mcclctl check: the slow host's three links marked, no other" ||
	    bad "mcclctl check on shaped hosts: exit $rc, $slow slow, $asym \
asymmetric, $others other outliers"
	# auto's lanes on these links: by the cores until a ring allreduce
	# measured them, then the one that fills them (the job takes the
	# worst node's measure: 40 Mbit/s).
	lanes_before=$(ck_job_lanes ckl0)
	ck_ring_allreduce || bad "mccl-perf on the shaped hosts failed"
	lanes_after=$(ck_job_lanes ckl1)
	[ "${lanes_before:-0}" -ge 2 ] && [ "$lanes_after" = 1 ] &&
	    ok "lanes by the link: $lanes_before before the link was measured, 1 on them (40 and 200 Mbit/s)" ||
	    bad "lanes on the shaped hosts: '$lanes_before' before, '$lanes_after' after the link was measured"
	daemons_stop 80 4
fi
