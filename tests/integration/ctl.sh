# ctl.sh: mcclctl against the running test cluster (sourced by run.sh).
# Columns that change from run to run (ports, ids, times) are cut away;
# the rest is compared exactly.

echo "== mcclctl"

expect_output "mcclctl status" "node:         n1 (index 1)
cluster size: 3
peers up:     2/2" "$(ctl 1 status | grep -E '^(node|cluster size|peers up):')"

expect_output "mcclctl peers" "NODE INDEX STATE
n0 0 up
n1 1 self
n2 2 up" "$(ctl 1 peers | awk '{ print $1, $2, $4 }')"

ctl 1 -j peers >"$T/peers.json"
n=$(grep -c '"state": "up"' "$T/peers.json")
expect_output "mcclctl -j peers: two peers up" 2 "$n"

# A job on every node, for what follows (the transport its data links
# took shows in transport.sh, which runs over each transport).
run_job "a job on every node" ctlpeers "0 1 2" collectives

# A job held open across two nodes, seen from n0 while it runs.
spawn 0 ctljob 2 0 hold 1500
h0=$LAST_PID
spawn 2 ctljob 2 1 hold 1500
h1=$LAST_PID
deadline=$((SECONDS + 10))
until ctl 0 jobs | grep -q '^ctljob .* ready'; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
expect_output "mcclctl jobs" "JOB STATE RANKS(here/total) NODES OPS
ctljob ready 1/2 2 1" "$(ctl 0 jobs | awk '{ print $1, $3, $4, $5, $6 }')"
expect_output "mcclctl -j jobs" '"name": "ctljob",
"nranks": 2,
"state": "ready",' "$(ctl 0 -j jobs | grep -E '"(name|nranks|state)"' | sed 's/^ *//')"
wait "$h0" && wait "$h1" || bad "held job"

out=$("$B/mcclctl" -s "$T/nobody.sock" status 2>&1)
rc=$?
expect_output "mcclctl: no daemon exits 2" 2 "$rc"
case "$out" in
*"$T/nobody.sock"*) ok "mcclctl: no daemon names the socket" ;;
*) bad "mcclctl: no daemon names the socket: $out" ;;
esac
"$B/mcclctl" -s "$T/n0.sock" frobnicate >/dev/null 2>&1
expect_output "mcclctl: unknown command exits 2" 2 "$?"

out=$(ctl 1 reload 2>&1)
case $out in
*"reloaded:"*"yes"*) ok "mcclctl reload" ;;
*) bad "mcclctl reload: $out" ;;
esac
# Every value starts in one column, after the longest key.
expect_output "mcclctl reload: the values aligned" "1 col 18" \
    "$(awk '{ match($0, /: +/); print RSTART + RLENGTH }' <<<"$out" |
    sort -u | awk '{ n++; c = $1 } END { print n, "col", c }')"

# abort: a running job fails on every rank, with who aborted it.
spawn 0 ctlabort 2 0 loop MCCL_ERR_ABORTED "aborted by mcclctl"; a0=$LAST_PID
spawn 1 ctlabort 2 1 loop MCCL_ERR_ABORTED "aborted by mcclctl"; a1=$LAST_PID
deadline=$((SECONDS + 15))
until [ "$(cat "$T"/ctlabort.r*.out 2>/dev/null | grep -c looping)" = 2 ]; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
expect_output "mcclctl abort" "aborted 1 job named ctlabort" \
    "$(ctl 1 abort ctlabort 2>&1)"
wait "$a0" && wait "$a1" && ok "mcclctl abort reaches every rank" ||
    { bad "mcclctl abort reaches every rank"; cat "$T"/ctlabort.*.out; }
ctl 1 abort no-such-job >/dev/null 2>&1
expect_output "mcclctl abort of no job exits 1" 1 "$?"

echo "== which daemon: mcclctl status and MCCL_DEBUG say"
ctl 0 status | grep -q "^reached: *given with -s$" &&
    MCCL_SOCKET="$T/n1.sock" "$B/mcclctl" status | grep -q "^reached: *MCCL_SOCKET$" &&
    MCCL_SOCKET="$T/n1.sock" "$B/mcclctl" status | grep -q "^socket: *$T/n1.sock$" &&
    ok "mcclctl status names the socket it reached and why" ||
    bad "mcclctl status: $(ctl 0 status | head -n 7)"
MCCL_DEBUG=INFO MCCL_SOCKET="$T/n0.sock" MCCL_JOB=dbginfo MCCL_RANK=0 \
    MCCL_NRANKS=1 "$B/mccl-test" hold 10 >"$T/dbginfo.out" 2>&1
grep -Eq "^MCCL INFO: pid [0-9]+ rank 0 of 1, job dbginfo: the daemon at $T/n0.sock \(MCCL_SOCKET\), node n0 \(0 of 3\)$" \
    "$T/dbginfo.out" && ok "MCCL_DEBUG=INFO: a rank says once which daemon and node it joined" ||
    bad "MCCL_DEBUG=INFO: $(cat "$T/dbginfo.out")"
MCCL_DEBUG=WARN MCCL_SOCKET="$T/nothing.sock" MCCL_JOB=dbgwarn MCCL_RANK=0 \
    MCCL_NRANKS=1 "$B/mccl-test" expect-init MCCL_ERR_CONNECT "nothing.sock" \
    >"$T/dbgwarn.out" 2>&1 &&
    grep -q "^MCCL WARN: pid [0-9]* rank -1: cannot connect to the daemon: cannot connect to mccld at $T/nothing.sock" "$T/dbgwarn.out" &&
    ok "MCCL_DEBUG=WARN: an error is printed as it happens, with its code" ||
    bad "MCCL_DEBUG=WARN: $(cat "$T/dbgwarn.out")"
MCCL_DEBUG=loud MCCL_SOCKET="$T/n0.sock" MCCL_JOB=dbgbad MCCL_RANK=0 \
    MCCL_NRANKS=1 "$B/mccl-test" expect-init MCCL_ERR_INVALID_ARGUMENT \
    "MCCL_DEBUG=loud: expected WARN or INFO" >"$T/dbgbad.out" 2>&1 &&
    ok "MCCL_DEBUG with another value: refused, named" ||
    bad "MCCL_DEBUG=loud: $(cat "$T/dbgbad.out")"

echo "== another user"
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
	xbin || bad "copying the programs for the test users"
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	spawn 0 xuser 2 0 hold 2500; x0=$LAST_PID
	sleep 0.5
	jobs_seen=$(as_nobody "$XB/mcclctl" -s "$T/n0.sock" jobs 2>&1)
	case $jobs_seen in
	*xuser*) bad "uid 65534 sees root's job: $jobs_seen" ;;
	*) ok "another uid does not see root's jobs" ;;
	esac
	out=$(as_nobody "$XB/mcclctl" -s "$T/n0.sock" abort xuser 2>&1)
	rc=$?
	case "$rc $out" in
	"1 "*"for root, the daemon's own user and the admin group"*)
		ok "another uid may not abort (exit 1, permission)" ;;
	*) bad "another uid aborting: $rc $out" ;;
	esac
	# Same job name, other uid: a job of its own, which never forms.
	MCCL_SOCKET="$T/n1.sock" MCCL_JOB=xuser MCCL_NRANKS=2 MCCL_RANK=1 \
	    MCCL_INIT_TIMEOUT_MS=1000 as_nobody "$XB/mccl-test" expect-init \
	    MCCL_ERR_TIMEOUT "rank 0" >"$T/xuser.nobody.out" 2>&1 &&
	    ok "another uid cannot join root's job" ||
	    { bad "another uid joined root's job"; cat "$T/xuser.nobody.out"; }
	kill "$x0" 2>/dev/null
	wait "$x0" 2>/dev/null
else
	echo "(not root, or no setpriv: the cross-user tests are skipped)"
fi

echo "== per-user limits"
lport=$(free_ports 1)
cat >"$T/lim.conf" <<EOC
{ "node": "lim", "socket": "$T/lim.sock", "log_level": "debug",
  "nodes": [{ "name": "lim", "address": "127.0.0.1:$lport" }],
  "max_jobs_per_uid": 1, "max_connections_per_uid": 2,
  "init_timeout_ms": 10000 }
EOC
"$B/mccld" -c "$T/lim.conf" >>"$T/lim.log" 2>&1 &
DAEMON_PIDS[30]=$!
deadline=$((SECONDS + 10))
until "$B/mcclctl" -s "$T/lim.sock" status >/dev/null 2>&1; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
lim_rank() {	# RANK: rank of job lim1 (2 ranks), held 1.5 s
	MCCL_SOCKET="$T/lim.sock" MCCL_JOB=lim1 MCCL_NRANKS=2 MCCL_RANK=$1 \
	    timeout 30 "$B/mccl-test" hold 1500 >"$T/lim1.r$1.out" 2>&1 &
	CHILD_PIDS+=($!)
	LAST_PID=$!
}
lim_rank 0; l0=$LAST_PID
sleep 0.3	# one connection held: a second one may join another job...
MCCL_SOCKET="$T/lim.sock" MCCL_JOB=lim2 MCCL_NRANKS=1 MCCL_RANK=0 \
    "$B/mccl-test" expect-init MCCL_ERR_NO_MEMORY "max_jobs_per_uid" \
    >"$T/lim2.out" 2>&1 && ok "a second job of the uid: max_jobs_per_uid" ||
    { bad "max_jobs_per_uid"; cat "$T/lim2.out"; }
lim_rank 1; l1=$LAST_PID
sleep 0.5	# ...but with two held, a third connection is refused
out=$("$B/mcclctl" -s "$T/lim.sock" status 2>&1)
expect_output "a third connection of the uid: refused (mcclctl exits 2)" 2 "$?"
case $out in
*"refused the connection: uid 0 already has 2 connections (max_connections_per_uid)"*)
	ok "the refused client is told why" ;;
*) bad "the refused client was told: $out" ;;
esac
grep -q "already has 2 connections (max_connections_per_uid)" \
    "$T/lim.log" && ok "the refusal is logged with its reason" ||
    bad "no refusal logged"
wait "$l0" && wait "$l1" && ok "the job within the limits worked" ||
    bad "the job within the limits"
kill -TERM "${DAEMON_PIDS[30]}"
wait "${DAEMON_PIDS[30]}"
unset "DAEMON_PIDS[30]"

# value NAME_AND_LABELS < text: the sample's value.
value() { awk -v k="$1" '$1 == k { print $2 }'; }

echo "== data links: a job's lanes at its start, send/recv's on a pair's first message"
# links NODE KIND: n<NODE>'s data links open of KIND (lane, p2p).
links() { ctl "$1" metrics | value "mccl_data_links{kind=\"$2\"}"; }
# links_become NODE KIND N: wait (5 s at most) until n<NODE> has N.
links_become() {
	local deadline=$((SECONDS + 5))
	until [ "$(links "$1" "$2")" = "$3" ]; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05
	done
}
for i in 0 1 2; do links_become $i p2p 0 || bad "n$i: send/recv links before"; done
spawn 0 jlz 3 0 hold 1500; z0=$LAST_PID
spawn 1 jlz 3 1 hold 1500; z1=$LAST_PID
spawn 2 jlz 3 2 hold 1500; z2=$LAST_PID
job_ready jlz && sleep 0.3
lz="$(links 0 lane) $(links 1 lane) $(links 2 lane)"
pz="$(links 0 p2p) $(links 1 p2p) $(links 2 p2p)"
wait "$z0" && wait "$z1" && wait "$z2" || bad "jlz: a rank failed"
[ "$pz" = "0 0 0" ] && ! echo "$lz" | grep -qw 0 &&
    ok "3 nodes of collectives: lane links ($lz), no send/recv link" ||
    bad "3 nodes of collectives: lane links '$lz', send/recv links '$pz'"
spawn 0 jls 2 0 send-hold 716800 1500; s0=$LAST_PID
spawn 2 jls 2 1 send-hold 716800 1500; s1=$LAST_PID
links_become 0 p2p 1 && links_become 2 p2p 1 && [ "$(links 1 p2p)" = 0 ] &&
    ok "one message from n0 to n2: one send/recv link, at each end, none at n1" ||
    bad "send/recv links after a message n0 -> n2: $(links 0 p2p) $(links 1 p2p) $(links 2 p2p)"
wait "$s0" && wait "$s1" && ok "the message arrived, kept until received" ||
    bad "jls: a rank failed"
links_become 0 p2p 0 && links_become 2 p2p 0 &&
    ok "the send/recv links closed with the job" ||
    bad "send/recv links left open: $(links 0 p2p) $(links 2 p2p)"

echo "== metrics"
ctl 0 metrics >"$T/metrics.txt"
v=$(value 'mccl_ops_total{collective="allreduce"}' <"$T/metrics.txt")
awk -v v="${v:-0}" 'BEGIN { exit !(v > 0) }' &&
    ok "mcclctl metrics: allreduces counted ($v)" ||
    { bad "mcclctl metrics: no allreduce counted"; head -n 30 "$T/metrics.txt"; }
v=$(value 'mccl_peer_bytes_total{peer="n1",direction="tx",kind="data"}' \
    <"$T/metrics.txt")
awk -v v="${v:-0}" 'BEGIN { exit !(v > 0) }' &&
    ok "mcclctl metrics: data bytes to n1 counted ($v)" ||
    bad "mcclctl metrics: no data bytes to n1"
[ "$(grep -c '^# TYPE' "$T/metrics.txt")" = \
    "$(grep '^# TYPE' "$T/metrics.txt" | sort -u | wc -l)" ] &&
    ok "each metric family is described once" ||
    bad "a metric family is described twice"
lat=$(value mccl_link_latency_seconds <"$T/metrics.txt")
rate=$(value mccl_link_bytes_per_second <"$T/metrics.txt")
red=$(value mccl_reduce_bytes_per_second <"$T/metrics.txt")
awk -v l="${lat:-0}" -v r="${rate:-0}" -v g="${red:-0}" \
    'BEGIN { exit !(l > 0 && l < 0.1 && r > 0 && g > 1e8) }' &&
    ok "mcclctl metrics: the link cost estimate (${lat}s, ${rate} B/s, reduction ${red} B/s)" ||
    bad "mcclctl metrics: link cost: '$lat' '$rate' '$red'"
grep -q '^mccl_broadcast_algo_total{algo="tree"} ' "$T/metrics.txt" &&
    ! grep -q '^mccl_allreduce_algo_total{algo="tree"}' "$T/metrics.txt" &&
    ok "mcclctl metrics: broadcasts and allreduces counted by their own algorithms" ||
    bad "mcclctl metrics: algorithm counters: $(grep algo_total "$T/metrics.txt")"
# ctlabort's 4 MiB allreduces ran n0's two lanes on threads of their own.
lane=$(value mccl_lane_seconds_total <"$T/metrics.txt")
wait_s=$(value mccl_lane_wait_seconds_total <"$T/metrics.txt")
awk -v l="${lane:-0}" -v w="${wait_s:--1}" \
    'BEGIN { exit !(l > 0 && w >= 0 && w < l) }' &&
    ok "mcclctl metrics: the lanes' time (${lane}s), of it waiting for the last lane (${wait_s}s)" ||
    bad "mcclctl metrics: lanes' time '$lane', waiting '$wait_s'"
grep -q '^# TYPE mccl_op_duration_seconds histogram$' "$T/metrics.txt" &&
    grep -q '^mccl_op_duration_seconds_bucket{le="+Inf"} ' "$T/metrics.txt" &&
    ok "mcclctl metrics: the latency histogram" || bad "no latency histogram"
# One job's collectives run one at a time, so their durations add up to
# no more than the time they ran in, though the main thread collects them
# in batches of up to 32.
op_sums() { ctl 0 metrics | awk '$1 == "mccl_op_duration_seconds_sum" { s = $2 }
	$1 == "mccl_op_duration_seconds_count" { n = $2 } END { print s, n }'; }
read -r sum0 n0 <<<"$(op_sums)"
t0=$(date +%s.%N)
run_job "a second of small allreduces back to back" opsum "0 1" steady 1000
t1=$(date +%s.%N)
sleep 0.1		# the last batch, collected once the engine idles
read -r sum1 n1 <<<"$(op_sums)"
awk -v s0="$sum0" -v s1="$sum1" -v n0="$n0" -v n1="$n1" -v t0="$t0" \
    -v t1="$t1" 'BEGIN { exit !(n1 - n0 > 100 && s1 - s0 <= t1 - t0) }' &&
    ok "mcclctl metrics: $((n1 - n0)) ops' durations within the time they ran in" ||
    bad "mcclctl metrics: $n0 -> $n1 ops took $sum0 -> $sum1 s in $t0 -> $t1"
ctl 0 -j metrics | grep -q '"name": "mccl_peer_up"' &&
    ok "mcclctl -j metrics: samples as JSON" || bad "mcclctl -j metrics"
# The same over HTTP, as Prometheus would scrape it.
if exec 8<>"/dev/tcp/127.0.0.1/$METRICS_PORT"; then
	printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&8
	timeout 5 cat <&8 | tr -d '\r' >"$T/scrape.txt"
	exec 8<&-
	head -n 1 "$T/scrape.txt" | grep -q '^HTTP/1.[01] 200' &&
	    grep -q '^Content-Type: text/plain; version=0.0.4' "$T/scrape.txt" &&
	    [ -n "$(value 'mccl_ops_total{collective="allreduce"}' \
	    <"$T/scrape.txt")" ] && ok "metrics scraped over HTTP and parsed" ||
	    { bad "metrics over HTTP"; head -n 5 "$T/scrape.txt"; }
else
	bad "metrics over HTTP: nothing on port $METRICS_PORT"
fi

echo "== mcclctl job: a rank that never submits"
MCCL_OP_TIMEOUT_MS=20000 spawn 0 stuck 3 0 loop MCCL_ERR_ABORTED "mcclctl"
s0=$LAST_PID
MCCL_OP_TIMEOUT_MS=20000 spawn 1 stuck 3 1 loop MCCL_ERR_ABORTED "mcclctl"
s1=$LAST_PID
spawn 2 stuck 3 2 idle 4000
s2=$LAST_PID
deadline=$((SECONDS + 15))
until [ "$(cat "$T"/stuck.r*.out 2>/dev/null | grep -c looping)" = 2 ]; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
sleep 0.5
expect_output "mcclctl job: every node's ranks" \
"RANK NODE SUBMITTED COMPLETED STATE
0 n0 1 0 ready
1 n1 1 0 ready
2 n2 0 0 ready" \
    "$(ctl 1 job stuck | sed 1,4d | awk '{ $1 = $1; print }' | sed -n 1,4p)"
out=$(ctl 1 job stuck)
range='[a-z]+ up to [0-9]+ B \([0-9.]+ (us|ms|s)\), '
grep -Eq "^allreduce between nodes: auto: ($range)*ring above \(1\.0G: [0-9.]+ (ms|s)\)$" <<<"$out" &&
    grep -Eq "^broadcast between nodes: auto: ($range)*[a-z]+ above \(1\.0G: [0-9.]+ (ms|s)\)$" <<<"$out" &&
    grep -Eq "^link cost \(the worst of the job's nodes\): [0-9.]+ us a message, [0-9.]+ GB/s by the ring, [0-9.]+ GB/s by the others, reduction [0-9.]+ GB/s$" <<<"$out" &&
    ok "mcclctl job: the link cost, and what AUTO runs between the job's 3 nodes by size, with predicted times" ||
    bad "mcclctl job: the algorithm lines: $out"
# Every node of the job predicts from the same cost, so shows the same.
for n in 0 1 2; do
	ctl $n -j job stuck | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(json.dumps([d["link_cost"], d["allreduce_auto"], d["broadcast_auto"]]))' \
	    >"$T/auto.$n" 2>&1
done
cmp -s "$T/auto.0" "$T/auto.1" && cmp -s "$T/auto.0" "$T/auto.2" &&
    grep -q '"alpha_ns"' "$T/auto.0" &&
    ok "mcclctl -j job: all 3 nodes show the same link cost and choices" ||
    bad "mcclctl -j job: the nodes differ: $(cat "$T"/auto.[012])"
grep -q "allreduce seq 1 on node n0: in flight [0-9.]* s, times out in [0-9.]* s, waiting for node n2: rank 2 on node n2 has not submitted it" <<<"$out" &&
    ok "mcclctl job: the op in flight, its age, deadline and the rank it waits for" ||
    bad "mcclctl job: the diagnosis: $out"
out=$(ctl 0 -j job stuck)
grep -q '"waiting_for": "n2"' <<<"$out" && grep -q '"age_ms": ' <<<"$out" &&
    grep -q '"timeout_in_ms": ' <<<"$out" &&
    grep -q 'rank 2 on node n2 has not submitted it' <<<"$out" &&
    grep -q '"algo": "auto"' <<<"$out" &&
    [ "$(grep -c '"up_to_bytes": null' <<<"$out")" = 2 ] &&
    ok "mcclctl -j job: the same in JSON" || bad "mcclctl -j job: $out"
ctl 0 abort stuck >/dev/null
wait "$s0" && wait "$s1" || bad "stuck job: the looping ranks"
wait "$s2"

echo "== failed jobs are kept"
# failed_kept SOCKET JOB: wait (5 s at most) until the daemon has let the
# failed JOB go (its ranks' connections closed) and kept it.
failed_kept() {
	local deadline=$((SECONDS + 5))
	until "$B/mcclctl" -s "$1" jobs --failed | grep -q "^$2 "; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05
	done
}
failed_kept "$T/n0.sock" stuck && failed_kept "$T/n1.sock" stuck &&
    failed_kept "$T/n2.sock" stuck || bad "the failed job stuck was not kept"
out=$(ctl 0 jobs --failed)
grep -qE "^stuck +[0-9a-f]{16} +20[0-9-]+T[0-9:]+Z +1/3 +3 +0 +- +aborted$" \
    <<<"$out" &&
    grep -q "^  error: job stuck: aborted by mcclctl (uid $(id -u)) on node n0" \
    <<<"$out" && ok "mcclctl jobs --failed: the job, when, its ranks, why" ||
    bad "mcclctl jobs --failed: $out"
out=$(ctl 2 -j jobs --failed)
grep -q '"error": "job stuck: aborted by mcclctl' <<<"$out" &&
    grep -q '"code": "aborted"' <<<"$out" &&
    ok "mcclctl jobs -j --failed on another node of the job" ||
    bad "mcclctl -j jobs --failed on n2: $out"
out=$(ctl 1 job stuck)
grep -q "^job stuck (id [0-9a-f]*): failed, 3 ranks on 3 nodes" <<<"$out" &&
    grep -q "the job has ended: it failed at 20.*: job stuck: aborted by mcclctl" \
    <<<"$out" && ok "mcclctl job of a job that has ended: its failure" ||
    bad "mcclctl job of an ended job: $out"
out=$(ctl 0 status -j 2>&1)
grep -q '"node": "n0"' <<<"$out" && ok "mcclctl status -j: options after the command" ||
    bad "mcclctl status -j: $out"
out=$(ctl 0 peers --failed 2>&1)
expect_output "mcclctl peers --failed: refused, exit 2" \
    "2:mcclctl: peers: takes no --failed" "$?:$(head -n 1 <<<"$out")"
# failed_jobs_kept: 2 on a node of its own: the third failure drops the first.
if cluster_up 1 fk 70 '"failed_jobs_kept": 2,'; then
	for k in 1 2 3; do
		NODE_PREFIX=fk spawn 0 "kept$k" 1 0 loop MCCL_ERR_ABORTED mcclctl
		a=$LAST_PID
		for i in $(seq 200); do
			grep -q looping "$T/kept$k.r0.out" 2>/dev/null && break
			sleep 0.05
		done
		"$B/mcclctl" -s "$T/fk0.sock" abort "kept$k" >/dev/null
		wait "$a" || bad "job kept$k"
		failed_kept "$T/fk0.sock" "kept$k" || bad "kept$k not kept"
	done
	expect_output "failed_jobs_kept: 2: the last two, oldest first" \
	    "kept2 kept3" "$("$B/mcclctl" -s "$T/fk0.sock" jobs --failed |
	    awk 'NR > 1 && !/^ / { printf "%s%s", s, $1; s = " " }')"
else
	bad "the one-node cluster fk did not come up"
fi
daemons_stop 70 1
# A document longer than one record (256 KiB) comes in pieces: 1000 failed
# jobs of 120-byte names are about 400 KB of JSON.
if cluster_up 1 fm 72 '"failed_jobs_kept": 1024,'; then
	NODE_PREFIX=fm spawn 0 many 1 0 abort-many 1000
	wait "$LAST_PID" || { bad "1000 jobs aborted"; cat "$T"/many.r0.out; }
	for i in $(seq 100); do
		n=$("$B/mcclctl" -s "$T/fm0.sock" -j jobs --failed | grep -o \
		    '"many-[0-9]*-[0-9]*-x*"' | sort -u | wc -l)
		[ "$n" = 1000 ] && break
		sleep 0.05
	done
	bytes=$("$B/mcclctl" -s "$T/fm0.sock" -j jobs --failed | wc -c)
	[ "$n" = 1000 ] && [ "$bytes" -gt 262144 ] &&
	    ok "mcclctl jobs --failed: 1000 jobs, $bytes bytes: a reply in pieces" ||
	    bad "mcclctl jobs --failed: $n jobs, $bytes bytes"
else
	bad "the one-node cluster fm did not come up"
fi
daemons_stop 72 1
ctl 0 job nosuch >/dev/null 2>&1
expect_output "mcclctl job of no job exits 1" 1 "$?"

echo "== mcclctl job: a healthy job at full speed, then a rank stopped"
# Small allreduces back to back: two snapshots taken a moment apart differ,
# which must never read as a rank behind.
MCCL_OP_TIMEOUT_MS=20000 spawn 0 busy 2 0 steady 6000
b0=$LAST_PID
MCCL_OP_TIMEOUT_MS=20000 spawn 1 busy 2 1 steady 6000
b1=$LAST_PID
job_ready busy || bad "job busy did not form"
sleep 0.3
clean=0
for i in 1 2 3 4 5 6 7 8 9 10; do
	out=$(ctl $((i % 2)) job busy)
	if grep -q "^  no problem seen" <<<"$out"; then
		clean=$((clean + 1))
	else
		echo "$out" | sed -n '/^diagnosis/,$p'
	fi
	sleep 0.1
done
expect_output "mcclctl job: no diagnosis for a busy job, 10 looks of 10" \
    10 "$clean"
# Now stop rank 1: named within a second.
kill -STOP "$(pgrep -P "$b1")"
t0=$(date +%s%N)
named=
while [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 3000 ]; do
	if ctl 0 job busy | grep -q "waiting for node n1: rank 1 on node n1 has not submitted it"; then
		named=$(( ($(date +%s%N) - t0) / 1000000 ))
		break
	fi
done
kill -CONT "$(pgrep -P "$b1")"
[ -n "$named" ] && [ "$named" -lt 1000 ] &&
    ok "mcclctl job: a stopped rank named after $named ms" ||
    bad "mcclctl job: the stopped rank named after ${named:-no} ms (limit 1000)"
wait "$b0" && wait "$b1" && ok "the job went on once the rank did" ||
    { bad "job busy failed"; cat "$T"/busy.r*.out; }

echo "== mcclctl monitor"
"$B/mcclctl" -s "$T/n0.sock" monitor >"$T/mon.txt" 2>&1 &
mon=$!
"$B/mcclctl" -s "$T/n1.sock" -j monitor >"$T/mon.json" 2>&1 &
monj=$!
CHILD_PIDS+=($mon $monj)
sleep 0.3
run_job "a job under monitoring" monjob "0 1" hold 10
spawn 0 monfail 2 0 loop MCCL_ERR_ABORTED "mcclctl"; f0=$LAST_PID
spawn 1 monfail 2 1 loop MCCL_ERR_ABORTED "mcclctl"; f1=$LAST_PID
deadline=$((SECONDS + 15))
until [ "$(cat "$T"/monfail.r*.out 2>/dev/null | grep -c looping)" = 2 ]; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
ctl 0 abort monfail >/dev/null
wait "$f0"; wait "$f1"
sleep 0.3
kill "$mon" "$monj" 2>/dev/null
wait "$mon" "$monj" 2>/dev/null
expect_output "mcclctl monitor: events as text" \
"n0 monitoring
n0 job_formed job=monjob nnodes=2 nranks=2 uid=0
n0 job_finished job=monjob ops_completed=1 uid=0
n0 job_formed job=monfail nnodes=2 nranks=2 uid=0" \
    "$(cut -d' ' -f2- "$T/mon.txt" | head -n 4)"
grep -q '^[0-9TZ:-]* n0 job_failed job=monfail reason=job monfail: aborted by mcclctl' \
    "$T/mon.txt" && ok "mcclctl monitor: the failure and its reason" ||
    { bad "mcclctl monitor: no job_failed"; cat "$T/mon.txt"; }
grep -q '"event":"job_failed","job":"monfail","node":"n1"' "$T/mon.json" &&
    ok "mcclctl -j monitor: one JSON object per event" ||
    { bad "mcclctl -j monitor"; cat "$T/mon.json"; }

echo "== reload: the cluster grows"
gport=$(free_ports 3)
grow_conf() {	# NODES: m0 .. m(NODES-1), written for every one of them
	local n=$1 i nodes="" sep=""
	for i in $(seq 0 $((n - 1))); do
		nodes="$nodes$sep{\"name\": \"m$i\", \"address\": \"127.0.0.1:$((gport + i))\"}"
		sep=", "
	done
	for i in $(seq 0 $((n - 1))); do
		echo "{ \"node\": \"m$i\", \"socket\": \"$T/m$i.sock\"," \
		    "\"log_level\": \"debug\", \"nodes\": [$nodes] }" \
		    >"$T/m$i.conf"
	done
}
grow_up() {	# I: node mI's daemon sees N-1 peers up (10 s)
	local deadline=$((SECONDS + 10))
	until "$B/mcclctl" -s "$T/m$1.sock" -j status 2>/dev/null |
	    grep -q "\"peers_up\": $2"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}
grow_conf 2
for i in 0 1; do
	"$B/mccld" -c "$T/m$i.conf" >>"$T/m$i.log" 2>&1 &
	DAEMON_PIDS[$((40 + i))]=$!
done
grow_up 0 1 && grow_up 1 1 || bad "2-node cluster for the reload test"
MCCL_SOCKET="$T/m0.sock" MCCL_JOB=across MCCL_NRANKS=2 MCCL_RANK=0 \
    timeout 60 "$B/mccl-test" steady 3000 >"$T/across.r0.out" 2>&1 &
g0=$!
MCCL_SOCKET="$T/m1.sock" MCCL_JOB=across MCCL_NRANKS=2 MCCL_RANK=1 \
    timeout 60 "$B/mccl-test" steady 3000 >"$T/across.r1.out" 2>&1 &
g1=$!
CHILD_PIDS+=($g0 $g1)
sleep 0.5
grow_conf 3
for i in 0 1; do
	"$B/mcclctl" -s "$T/m$i.sock" reload >"$T/m$i.reload" 2>&1 ||
	    bad "reload of m$i: $(cat "$T/m$i.reload")"
done
"$B/mccld" -c "$T/m2.conf" >>"$T/m2.log" 2>&1 &
DAEMON_PIDS[42]=$!
grow_up 0 2 && grow_up 1 2 && grow_up 2 2 &&
    ok "reload: a third node joined the running cluster" ||
    { bad "reload: the third node did not join"; tail -n 5 "$T"/m*.log; }
wait "$g0" && wait "$g1" && ok "reload: a job running across it went on" ||
    { bad "reload: the running job failed"; cat "$T"/across.r*.out;
      tail -n 15 "$T"/m0.log "$T"/m1.log; }
pids=()
for i in 0 1 2; do
	MCCL_SOCKET="$T/m$i.sock" MCCL_JOB=grown MCCL_NRANKS=3 MCCL_RANK=$i \
	    timeout 60 "$B/mccl-test" hold 10 >"$T/grown.r$i.out" 2>&1 &
	pids+=($!)
	CHILD_PIDS+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc -eq 0 ] && ok "reload: a new job spans the grown cluster" ||
    { bad "reload: no job on the grown cluster"; cat "$T"/grown.*.out; }
for i in 40 41 42; do
	kill -TERM "${DAEMON_PIDS[$i]}" 2>/dev/null
	wait "${DAEMON_PIDS[$i]}" 2>/dev/null
	unset "DAEMON_PIDS[$i]"
done
