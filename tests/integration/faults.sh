# faults.sh: fault injection on the loopback cluster (sourced by run.sh).
# Each case kills, freezes or stops something in the middle of a job, then
# checks the error codes and messages, how fast they came, that another job
# on the same daemons was not disturbed, that the daemons gave back every
# descriptor and mapping of the failed job, and that a new job works.

# The test config: heartbeat 300 ms, timeout 1500 ms.
HB_LIMIT=3.0		# detection bound for a dead or frozen daemon, s
CLIENT_LIMIT=2.0	# for a dead client process, s

now() { date +%s.%N; }

# Descriptors and mccl segment mappings of daemon I.
resources() {
	local pid=${DAEMON_PIDS[$1]}
	echo "$(ls /proc/$pid/fd | wc -l) $(grep -c 'memfd:mccl' /proc/$pid/maps)"
}

# Node $1's resources once they hold still for 0.3 s (at most 5 s): a job
# that just ended is torn down after its ranks have gone.
resources_settled() {
	local a b deadline=$((SECONDS + 5))
	a=$(resources "$1")
	while sleep 0.3; b=$(resources "$1"); [ "$a" != "$b" ] &&
	    [ $SECONDS -lt $deadline ]; do
		a=$b
	done
	echo "$b"
}

# Node $1's resources once back to $2, or what they are after 5 s.
resources_back() {
	local got deadline=$((SECONDS + 5))
	while got=$(resources "$1"); [ "$got" != "$2" ] &&
	    [ $SECONDS -lt $deadline ]; do
		sleep 0.2
	done
	echo "$got"
}

# Wait until every rank of JOB printed "looping".
wait_looping() {
	local job=$1 n=$2 deadline=$((SECONDS + 15))
	while [ "$(cat "$T/$job".r*.out 2>/dev/null | grep -c looping)" -lt "$n" ]; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
	sleep 0.3
}

# detected NAME JOB RANK T0 LIMIT: rank's failure came within LIMIT s of T0.
detected() {
	local at
	at=$(sed -n 's/.*failed_at=\([0-9.]*\).*/\1/p' "$T/$2.r$3.out")
	if [ -n "$at" ] && awk -v a="$at" -v t="$4" -v l="$5" \
	    'BEGIN { exit !(a - t <= l) }'; then
		ok "$1 (rank $3 after $(awk -v a="$at" -v t="$4" \
		    'BEGIN { printf "%.2f", a - t }') s)"
	else
		bad "$1: rank $3 not within $5 s"
		cat "$T/$2.r$3.out"
	fi
}

# expect_exit NAME PID: the process exited 0 (its checks passed).
expect_exit() {
	if wait "$2"; then ok "$1"; else bad "$1"; fi
}

restart_daemon() {
	"$B/mccld" -c "$T/n$1.conf" >>"$T/n$1.log" 2>&1 &
	DAEMON_PIDS[$1]=$!
	wait_cluster 3
}

echo "== faults: a client killed in the middle of a collective"
sleep 3.5	# links of jobs failed earlier linger 3 s: count without them
before=("$(resources_settled 0)" "$(resources_settled 1)" \
    "$(resources_settled 2)")
spawn 0 bystander 3 0 steady 5000; by0=$LAST_PID
spawn 1 bystander 3 1 steady 5000; by1=$LAST_PID
spawn 2 bystander 3 2 steady 5000; by2=$LAST_PID
spawn 0 jkill 3 0 loop MCCL_ERR_PEER_FAILED "rank 1"; k0=$LAST_PID
spawn 1 jkill 3 1 loop MCCL_ERR_PEER_FAILED "rank 1"; k1=$LAST_PID
spawn 2 jkill 3 2 loop MCCL_ERR_PEER_FAILED "rank 1"; k2=$LAST_PID
wait_looping jkill 3 || bad "jkill never started"
t0=$(now)
pkill -KILL -P "$k1"	# the rank itself, not its timeout(1) wrapper
expect_exit "survivor rank 0 gets PEER_FAILED naming rank 1" "$k0"
expect_exit "survivor rank 2 gets PEER_FAILED naming rank 1" "$k2"
detected "client death detected" jkill 0 "$t0" "$CLIENT_LIMIT"
detected "client death detected" jkill 2 "$t0" "$CLIENT_LIMIT"
wait "$k1" 2>/dev/null
expect_exit "another job on the same daemons is not disturbed" "$by0"
wait "$by1"; wait "$by2"
sleep 3.5	# the failed job's links linger 3 s
for i in 0 1 2; do
	after=$(resources_back "$i" "${before[$i]}")
	[ "$after" = "${before[$i]}" ] &&
	    ok "n$i: descriptors and mappings back to $after" ||
	    bad "n$i: descriptors and mappings ${before[$i]} -> $after"
done
run_job "a new job after the client's death" jafter1 "0 1 2" hold 10

echo "== faults: a client dies with collectives queued in its ring"
before=("$(resources_settled 0)")
spawn 0 jqd 2 0 late 300 MCCL_ERR_PEER_FAILED "rank 1"; q0=$LAST_PID
spawn 0 jqd 2 1 queued die; q1=$LAST_PID
wait "$q1"
expect_exit "the other rank gets PEER_FAILED naming rank 1" "$q0"
after=$(resources_back 0 "${before[0]}")
[ "$after" = "${before[0]}" ] &&
    ok "n0: the dead rank's ring and segments unmapped" ||
    bad "n0: descriptors and mappings ${before[0]} -> $after"

echo "== faults: a rank unmaps a buffer the daemon reads or writes in place"
# Rank 0 and rank 1 on n0, rank 2 on n1: n0's op waits for rank 1, which
# comes 300 ms after rank 0 unmapped its buffer (mccl-test xmem-unmap).
for which in send recv; do
	run_job "rank 0's $which buffer unmapped before its 32 MiB allreduce \
ran: INVALID_ARGUMENT naming it, no rank hangs, no wrong sums" "jxu$which" \
	    "0 0 1" xmem-unmap "$which"
done
run_job "rank 0's receive buffer unmapped where the last segment of the \
first of two queued allreduces goes, handed out beside the second: \
INVALID_ARGUMENT naming it, both fail, no rank hangs" jxulast "0 0 1" \
    xmem-unmap-last
grep -Eq "job jxulast: op [0-9]+ allreduce of 33554432 bytes .*its last \
segment handed out beside the next op, failed" "$T/n0.log" &&
    ok "n0 logs the first op failed in the hand-out beside the second" ||
    bad "n0's log has no first op failed in its hand-out: $(grep -m2 'job jxulast: op' "$T/n0.log")"
for i in 0 1; do
	kill -0 "${DAEMON_PIDS[$i]}" 2>/dev/null && ok "n$i still running" ||
	    bad "n$i died"
done
run_job "a new job after the unmapped buffers" jxuafter "0 0 1" hold 10

echo "== faults: a daemon killed in the middle of a collective"
# A job aborted on n2 before: n2's failed jobs outlive its restart.
run_job "a job aborted on n2, kept as failed" jkept "2" abort
ctl 2 jobs --failed | grep -q "^jkept " ||
    bad "n2 does not list jkept as failed: $(ctl 2 jobs --failed)"
spawn 0 jdk 3 0 loop MCCL_ERR_PEER_FAILED "n2"; d0=$LAST_PID
spawn 1 jdk 3 1 loop MCCL_ERR_PEER_FAILED "n2"; d1=$LAST_PID
spawn 2 jdk 3 2 loop MCCL_ERR_CONNECT "daemon connection lost"; d2=$LAST_PID
wait_looping jdk 3 || bad "jdk never started"
t0=$(now)
kill -9 "${DAEMON_PIDS[2]}"
wait "${DAEMON_PIDS[2]}" 2>/dev/null
expect_exit "rank 0 gets PEER_FAILED naming n2" "$d0"
expect_exit "rank 1 gets PEER_FAILED naming n2" "$d1"
expect_exit "rank 2 on the dead daemon gets MCCL_ERR_CONNECT" "$d2"
detected "daemon death detected" jdk 0 "$t0" "$HB_LIMIT"
detected "daemon death detected" jdk 1 "$t0" "$HB_LIMIT"
restart_daemon 2 && ok "n2 restarted and rejoined" || bad "n2 rejoin"
out=$(ctl 2 jobs --failed)
grep -q "^jkept " <<<"$out" && grep -q "aborted by rank 0" <<<"$out" &&
    grep -q "failed jobs kept from before the restart" "$T/n2.log" &&
    ok "n2's failed jobs outlive its restart (SIGKILL)" ||
    bad "n2's failed jobs after its restart: $out"
run_job "a new job after the daemon's restart" jafter2 "0 1 2" hold 10

echo "== faults: a daemon killed in the middle of a 24 MiB allreduce in segments"
# 2 ranks on n0 and n1 each: the allreduce runs in segments, a node's
# passes on its side crew beside the network; they end before the op fails.
for r in 0 1 2 3; do
	spawn $((r / 2)) jdks 5 $r loop MCCL_ERR_PEER_FAILED "n2" 6291456
	ds[$r]=$LAST_PID
done
spawn 2 jdks 5 4 loop MCCL_ERR_CONNECT "daemon connection lost" 6291456
ds[4]=$LAST_PID
wait_looping jdks 5 || bad "jdks never started"
sleep 0.3
kill -9 "${DAEMON_PIDS[2]}"
wait "${DAEMON_PIDS[2]}" 2>/dev/null
for r in 0 1 2 3; do
	expect_exit "rank $r (2 a node) gets PEER_FAILED naming n2" "${ds[$r]}"
done
expect_exit "rank 4 on the dead daemon gets MCCL_ERR_CONNECT" "${ds[4]}"
restart_daemon 2 && ok "n2 restarted and rejoined" || bad "n2 rejoin"

echo "== faults: a daemon killed before its rank's first message"
# Send/recv links come with a pair's first message: none joins n2 to n0
# here, so the receive learns of n2's death from the control plane.
spawn 2 jrk 2 0 recv-wait MCCL_ERR_CONNECT "daemon connection lost"
r0=$LAST_PID
spawn 0 jrk 2 1 recv-wait MCCL_ERR_PEER_FAILED "n2"; r1=$LAST_PID
wait_looping jrk 2 || bad "jrk never started"
t0=$(now)
kill -9 "${DAEMON_PIDS[2]}"
wait "${DAEMON_PIDS[2]}" 2>/dev/null
expect_exit "a receive from a rank of the dead daemon gets PEER_FAILED naming n2" \
    "$r1"
detected "the death seen by the receive" jrk 1 "$t0" "$HB_LIMIT"
kill "$r0" 2>/dev/null; wait "$r0" 2>/dev/null
restart_daemon 2 && ok "n2 restarted and rejoined" || bad "n2 rejoin"

echo "== faults: a daemon killed with collectives queued in a ring"
spawn 2 jqk 2 0 queued wait MCCL_ERR_CONNECT "daemon connection lost"
k0=$LAST_PID
spawn 2 jqk 2 1 late 60000 MCCL_ERR_CONNECT "daemon connection lost"
k1=$LAST_PID
wait_looping jqk 2 || bad "jqk never started"
t0=$(now)
kill -9 "${DAEMON_PIDS[2]}"
wait "${DAEMON_PIDS[2]}" 2>/dev/null
expect_exit "the rank waiting on queued ops gets MCCL_ERR_CONNECT" "$k0"
detected "the daemon's death seen by the waiting rank" jqk 0 "$t0" \
    "$CLIENT_LIMIT"
kill "$k1" 2>/dev/null; wait "$k1" 2>/dev/null
restart_daemon 2 && ok "n2 restarted and rejoined" || bad "n2 rejoin"
run_job "a new job, 2 ranks on the restarted daemon" jafter2q "2 2" ring-full

echo "== faults: a daemon frozen (SIGSTOP)"
spawn 0 jst 3 0 loop MCCL_ERR_PEER_FAILED "n1"; s0=$LAST_PID
spawn 1 jst 3 1 loop MCCL_ERR_PEER_FAILED ""; s1=$LAST_PID
spawn 2 jst 3 2 loop MCCL_ERR_PEER_FAILED "n1"; s2=$LAST_PID
wait_looping jst 3 || bad "jst never started"
t0=$(now)
kill -STOP "${DAEMON_PIDS[1]}"
expect_exit "rank 0 gets PEER_FAILED naming n1" "$s0"
expect_exit "rank 2 gets PEER_FAILED naming n1" "$s2"
detected "frozen daemon detected" jst 0 "$t0" "$HB_LIMIT"
detected "frozen daemon detected" jst 2 "$t0" "$HB_LIMIT"
# n0 dials the frozen n1 again: the kernel answers its connect, nothing
# else; mcclctl peers must say so within the connect timeout (3 s).
for i in $(seq 80); do
	ctl 0 peers | grep -q "last error: no answer within 3000 ms while" && break
	sleep 0.1
done
out=$(ctl 0 peers)
grep -q "last error: no answer within 3000 ms while \(connecting\|authenticating\|handshake\) (a frozen node answers the TCP connect, nothing else)" <<<"$out" &&
    ok "mcclctl peers: a frozen node's handshake times out, said so" ||
    bad "mcclctl peers with n1 frozen: $out"
kill -CONT "${DAEMON_PIDS[1]}"
expect_exit "rank 1 on the thawed daemon gets an error" "$s1"
wait_cluster 3 && ok "n1 back in the cluster" || bad "n1 back"
run_job "a new job after the freeze" jafter3 "0 1 2" hold 10

echo "== faults: SIGTERM to a daemon"
spawn 0 jterm 3 0 loop MCCL_ERR_ABORTED "shutting down"; e0=$LAST_PID
spawn 1 jterm 3 1 loop MCCL_ERR_ABORTED "shutting down"; e1=$LAST_PID
spawn 2 jterm 3 2 loop MCCL_ERR_ABORTED "shutting down"; e2=$LAST_PID
wait_looping jterm 3 || bad "jterm never started"
t0=$(now)
kill -TERM "${DAEMON_PIDS[1]}"
wait "${DAEMON_PIDS[1]}"
t1=$(now)
awk -v a="$t1" -v b="$t0" 'BEGIN { exit !(a - b <= 2) }' &&
    ok "n1 exits within 2 s of SIGTERM" || bad "n1 took $t0 -> $t1"
expect_exit "its local rank gets ABORTED: shutting down" "$e1"
expect_exit "remote rank 0 gets ABORTED: shutting down" "$e0"
expect_exit "remote rank 2 gets ABORTED: shutting down" "$e2"
restart_daemon 1 && ok "n1 restarted" || bad "n1 restart"
run_job "a new job after the restart" jafter4 "0 1 2" hold 10
