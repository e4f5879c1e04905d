#!/usr/bin/env bash
# run.sh BUILD_DIR [SECTION...]: the integration tests.  Real daemons on
# loopback, ranks spread over them, every result checked; error paths
# checked by code and message; mcclctl output checked; hostile input and
# injected faults.  Sections (default: all): matrix api formation timeouts
# ctl check hostile security faults transport.
set -u
B=$(cd "${1:-build}" && pwd)
shift
SECTIONS=${*:-matrix api formation timeouts ctl check hostile security \
    faults transport}
TRANSPORT=tcp		# unless MCCL_TEST_TRANSPORT says otherwise
. "$(dirname "$0")/lib.sh"

section() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

# overlapped NODE: mccl_allreduce_overlapped_total of daemon nNODE.
overlapped() {
	"$B/mcclctl" -s "$T/n$1.sock" metrics |
	    awk '$1 == "mccl_allreduce_overlapped_total" { print $2 }'
}

cluster_up 3 || { bad "cluster start"; summary; exit 1; }
# anon_kb NODE: daemon nNODE's anonymous memory, in kB.
anon_kb() { awk '/^RssAnon/ { print $2 }' "/proc/${DAEMON_PIDS[$1]}/status"; }
anon_start=$(anon_kb 1)
if section matrix; then
echo "== every collective x dtype x op x placement x count"
run_job "3 nodes x 2 ranks" j3x2 "0 0 1 1 2 2" collectives
run_job "1 node x 4 ranks" j1x4 "1 1 1 1" collectives
run_job "3 nodes x 1 rank" j3x1 "0 1 2" collectives
MCCL_SPIN_US=40 run_job "3 nodes x 1 rank, clients spinning on their \
doorbells (MCCL_SPIN_US=40)" j3x1s "0 1 2" collectives
run_job "2 nodes x 3 ranks, 2 + 1, out of rank order" j2u "2 0 2" collectives
run_job "an allreduce of more than 2 GiB across 2 nodes" jbig "0 1" big
before=$(overlapped 1)
run_job "20 MiB collectives, the node's passes on several threads and \
beside the network: 2 nodes x 2 ranks" jlarge "0 0 1 1" large
after=$(overlapped 1)
# Of the four queued ones, the second and third start beside the one
# before; the fourth reads what the third writes, and waits.
awk -v a="${after:-0}" -v b="${before:-0}" \
    'BEGIN { exit !(a - b >= 1 && a - b <= 2) }' &&
    ok "n1 overlapped the queued allreduces that share no buffer ($before -> $after)" ||
    bad "n1 overlapped $before -> $after of the queued allreduces, not 1 or 2"
# At debug level each collective's times are in the log: a large
# allreduce's run includes its time between nodes.
awk '/job jlarge: op [0-9]+ allreduce of [0-9]+ bytes \((ring|doubling|rabenseifner|direct)\): taken at [0-9.]+ ms, started [0-9.]+ ms later, ran [0-9.]+ ms \(between nodes [0-9.]+ ms, lanes waiting [0-9.]+ ms of [0-9.]+\)/ {
	for (i = 1; i <= NF; i++) {
		if ($i == "of" && $(i + 2) == "bytes") bytes = $(i + 1)
		if ($i == "ran") ran = $(i + 1)
		if ($i == "(between") nodes = $(i + 2)
	}
	if (bytes >= 16777216 && nodes > 0 && ran >= nodes) found = 1
} END { exit !found }' "$T/n1.log" &&
    ok "n1's debug log times each large allreduce, its part between nodes within" ||
    bad "n1's debug log has no large allreduce timed: $(grep -m1 'job jlarge: op' "$T/n1.log")"
run_job "the same on 2 nodes, 2 ranks + 1" jlarge2 "0 1 0" large
run_job "the same on 1 node x 3 ranks" jlarge1 "2 2 2" large
MCCL_XMEM=2 run_job "the same on 2 + 1, every heap allreduce read and \
written in place, the lone rank's too (MCCL_XMEM=2)" jlarge3 "0 1 0" large
echo "== memory given back after jobs"
# After every job so far and rounds of the same jobs, an idle daemon holds
# about what it held at start: what the jobs' threads freed goes back (at
# once, or 2 s after the last job).  Under the sanitizers the allocator is
# theirs, which keeps freed memory.
case $(basename "$B") in
*asan*|*tsan*) echo "(sanitizer build: its allocator keeps freed memory)" ;;
*)
	mem=()
	for round in 1 2 3; do
		run_job "memory round $round: 20 MiB collectives, 2 nodes x 2 \
ranks" "jmem$round" "0 0 1 1" large
		sleep 2.5
		mem+=("$(anon_kb 1)")
	done
	awk -v s="$anon_start" -v a="${mem[0]}" -v b="${mem[1]}" \
	    -v c="${mem[2]}" 'BEGIN { exit !(a <= s + 16384 &&
	    b <= s + 16384 && c <= s + 16384) }' &&
	    ok "n1 idle holds about what it held at start ($anon_start kB; after each round ${mem[*]} kB)" ||
	    bad "n1 idle holds more than at start: $anon_start kB, after each round ${mem[*]} kB"
	;;
esac
echo "== the algorithms of MCCL_ALGO (3 nodes: folded)"
# algo_runs ALGO: allreduces (broadcasts, for tree) node n0 ran by ALGO,
# from mcclctl metrics.
algo_runs() {
	local coll=allreduce
	[ "$1" = tree ] && coll=broadcast
	"$B/mcclctl" -s "$T/n0.sock" metrics |
	    awk -v k="mccl_${coll}_algo_total{algo=\"$1\"}" \
	    '$1 == k { print $2 }'
}
for algo in ring doubling rabenseifner direct tree; do
	before=$(algo_runs "$algo")
	MCCL_ALGO=$algo run_job "3 nodes x 2 ranks by $algo" "ja$algo" \
	    "0 0 1 1 2 2" collectives
	after=$(algo_runs "$algo")
	awk -v a="${after:-0}" -v b="${before:-0}" 'BEGIN { exit !(a > b) }' &&
	    ok "the daemon ran them by $algo ($before -> $after)" ||
	    bad "the daemon ran none by $algo ($before -> $after)"
done
fi
if section api; then
echo "== send/recv, the API's errors and concurrency"
run_job "send/recv between every pair, 5 ranks on 3 nodes" jp2p "0 0 1 2 2" p2p
run_job "a sender that leaves, heard from only on the link its message made, \
costs its receiver nothing" jp2pl "0 1 2" p2p-leave
run_job "API: bad arguments, 100 in flight, split, threads" japi "0 0 1 2 2" api
run_job "API on one node x 4 ranks" japi1 "1 1 1 1" api
run_job "mismatched counts fail every rank" jmis "0 1 1" mismatch
run_job "abort reaches every rank" jab "0 1 2" abort
run_job "alltoallv counts that disagree: every rank INVALID_ARGUMENT, the \
pair named (2 nodes)" jmv0 "0 1" mismatch-v 0
run_job "alltoallv counts that disagree on one node: its ranks fail, the \
others at the latest on their next call" jmv0l "1 1 2" mismatch-v 0
run_job "allgatherv recvcounts that differ between nodes: every rank \
INVALID_ARGUMENT" jmv1 "0 1 1" mismatch-v 1
run_job "allgatherv recvcounts that differ on one node" jmv1l "2 2 0" \
    mismatch-v 1
echo "== the submission ring"
run_job "3 rings' worth of ops at once, a rank 300 ms late: 1 node x 3" \
    jrf1 "0 0 0" ring-full
run_job "3 rings' worth of ops at once, ranks late: 2 nodes x 2" \
    jrf2 "1 2 1 2" ring-full
before=$(overlapped 1)
run_job "queued 20 MiB allreduces in the ranks' own memory, read and \
written in place: 2 nodes x 2 ranks" jqheap "0 0 1 1" queued-heap
after=$(overlapped 1)
awk -v a="${after:-0}" -v b="${before:-0}" \
    'BEGIN { exit !(a - b >= 1 && a - b <= 2) }' &&
    ok "n1 overlapped those that share no byte, in the ranks' memory too ($before -> $after)" ||
    bad "n1 overlapped $before -> $after of the queued allreduces in the ranks' memory, not 1 or 2"
echo "== an idle job costs its daemon under 1 % of a core"
spawn 0 jidle 2 0 hold 7000; i0=$LAST_PID
spawn 1 jidle 2 1 hold 7000; i1=$LAST_PID
sleep 2		# formed, its barrier done, the engines asleep
c0=$(cpu_ticks "${DAEMON_PIDS[0]}")
sleep 4
c1=$(cpu_ticks "${DAEMON_PIDS[0]}")
pct=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", t * 100 / (hz * 4) }')
awk -v p="$pct" 'BEGIN { exit !(p < 1) }' &&
    ok "n0 used ${pct} % of a core in 4 s with an idle job" ||
    bad "n0 used ${pct} % of a core in 4 s with an idle job"
wait "$i0" "$i1" || bad "the idle job's ranks"
echo "== mismatched collectives: the same error on every rank, every time"
# Its own 4 nodes m0..m3 (DAEMON_PIDS 60..63), one rank on each; their
# engines spin a while before they sleep, whatever the machine's load.
if cluster_up 4 m 60 '"spin_us": 30,'; then
	for rep in 1 2 3 4; do
		for kind in 0 1 2; do
			NODE_PREFIX=m run_job "4 nodes, mismatch kind $kind, run \
$rep: every rank INVALID_ARGUMENT naming both" "jmc$kind$rep" "0 1 2 3" \
			    mismatch-coll "$kind"
		done
	done
	run_job "2 nodes: broadcast against allreduce, both named" jmc2n \
	    "0 1" mismatch-coll 0
else
	bad "the 4-node cluster did not come up"
fi
daemons_stop 60 4
run_job "mccl_test alone completes a receive, and an allreduce whose peer \
died (PEER_FAILED)" jpoll "0 1" poll
MCCL_ALGO=fastest spawn 0 jalgo 1 0 expect-init MCCL_ERR_INVALID_ARGUMENT \
    "MCCL_ALGO=fastest: expected auto, ring, doubling, rabenseifner, direct or tree"
wait "$LAST_PID" && ok "an unknown MCCL_ALGO fails mccl_comm_init, named" ||
    { bad "an unknown MCCL_ALGO"; cat "$T"/jalgo.*.out; }
MCCL_SPIN_US=-5 spawn 0 jspinbad 1 0 expect-init MCCL_ERR_INVALID_ARGUMENT \
    "MCCL_SPIN_US=\"-5\": expected auto or microseconds from 0 to 100000"
wait "$LAST_PID" && ok "a bad MCCL_SPIN_US fails mccl_comm_init, named" ||
    { bad "a bad MCCL_SPIN_US"; cat "$T"/jspinbad.*.out; }
MCCL_XMEM=yes spawn 0 jxmembad 1 0 expect-init MCCL_ERR_INVALID_ARGUMENT \
    "MCCL_XMEM is \"yes\": it must be 0, 1 or 2"
wait "$LAST_PID" && ok "a bad MCCL_XMEM fails mccl_comm_init, named" ||
    { bad "a bad MCCL_XMEM"; cat "$T"/jxmembad.*.out; }
# Two ranks of one node ask for different algorithms: both fail, named.
MCCL_ALGO=ring spawn 1 jalgo2 2 0 loop MCCL_ERR_INVALID_ARGUMENT "by doubling"
a=$LAST_PID
MCCL_ALGO=doubling spawn 1 jalgo2 2 1 loop MCCL_ERR_INVALID_ARGUMENT "by ring"
wait "$a" && wait "$LAST_PID" && ok "local ranks asking for different \
algorithms fail naming both" || { bad "local ranks, different algorithms"; \
cat "$T"/jalgo2.*.out; }
. "$(dirname "$0")/perf.sh"
fi

if section formation; then
echo "== job formation errors"
# rank 0 of 3 alone: the message must say who never came
MCCL_INIT_TIMEOUT_MS=1500 spawn 1 jto3 3 0 expect-init MCCL_ERR_TIMEOUT \
    "2 of 3 ranks never joined within 1500 ms: ranks 1, 2"
wait "$LAST_PID" && ok "init timeout names the missing ranks" ||
    { bad "init timeout names the missing ranks"; cat "$T"/jto3.*.out; }

spawn 0 jdup 2 0 hold 100
holder=$LAST_PID
sleep 0.3
spawn 2 jdup 2 0 expect-init MCCL_ERR_INVALID_ARGUMENT "already held"
wait "$LAST_PID" && ok "duplicate rank on another node" ||
    { bad "duplicate rank on another node"; cat "$T"/jdup.*.out; }
spawn 0 jdup 2 0 expect-init MCCL_ERR_INVALID_ARGUMENT "already held"
wait "$LAST_PID" && ok "duplicate rank on the same node" ||
    { bad "duplicate rank on the same node"; cat "$T"/jdup.*.out; }
spawn 1 jdup 3 1 expect-init MCCL_ERR_INVALID_ARGUMENT "nranks"
wait "$LAST_PID" && ok "ranks disagree on nranks" ||
    { bad "ranks disagree on nranks"; cat "$T"/jdup.*.out; }
spawn 1 jdup 2 1 hold 100
wait "$LAST_PID" && wait "$holder" && ok "job forms after rejected claims" ||
    { bad "job forms after rejected claims"; cat "$T"/jdup.*.out; }

MCCL_SOCKET="$T/nobody.sock" MCCL_JOB=x MCCL_RANK=0 MCCL_NRANKS=1 \
    "$B/mccl-test" expect-init MCCL_ERR_CONNECT "$T/nobody.sock" \
    >"$T/noconn.out" 2>&1 && ok "no daemon: the message names the socket" ||
    { bad "no daemon"; cat "$T/noconn.out"; }

fi
if section timeouts; then
echo "== operation timeouts"
# A rank that joins but never submits: the others time out, and their
# node asks the silent one why, so they name the rank too.
MCCL_OP_TIMEOUT_MS=1000 spawn 0 jopt 2 0 loop MCCL_ERR_TIMEOUT \
    "timeout waiting for node n1: rank 1 on node n1 has not submitted it"
a=$LAST_PID
spawn 1 jopt 2 1 idle 4000
b=$LAST_PID
wait "$a" && ok "op timeout on another node names the node and its rank" ||
    { bad "op timeout names the silent node and rank"; cat "$T"/jopt.*.out; }
wait "$b"
MCCL_OP_TIMEOUT_MS=1000 spawn 2 jopt2 2 0 loop MCCL_ERR_TIMEOUT \
    "timeout waiting for rank 1 on node n2: it has not submitted the op"
a=$LAST_PID
spawn 2 jopt2 2 1 idle 4000
b=$LAST_PID
wait "$a" && ok "op timeout names the silent local rank" ||
    { bad "op timeout names the silent local rank"; cat "$T"/jopt2.*.out; }
wait "$b"
fi

section matrix && . "$(dirname "$0")/lazylinks.sh"
section ctl && . "$(dirname "$0")/ctl.sh"
section check && . "$(dirname "$0")/check.sh"
section hostile && . "$(dirname "$0")/hostile.sh"
section security && . "$(dirname "$0")/security.sh"
section faults && . "$(dirname "$0")/faults.sh"
section faults && . "$(dirname "$0")/netfault.sh"
section faults && . "$(dirname "$0")/liveness.sh"
section faults && . "$(dirname "$0")/heartbeats.sh"
section transport && . "$(dirname "$0")/transport.sh"

echo "== daemon health"
for i in 0 1 2; do
	kill -0 "${DAEMON_PIDS[$i]}" 2>/dev/null && ok "n$i still running" ||
	    { bad "n$i died"; tail -n 30 "$T/n$i.log"; }
done
cluster_down
# Built with sanitizers, every report is a failure: look in every log.
if grep -l -E "ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer" \
    "$T"/*.log "$T"/*.out >"$T/san" 2>/dev/null; then
	bad "sanitizer reports in: $(tr '\n' ' ' <"$T/san")"
	grep -h -A 12 -E "ERROR: |runtime error:|WARNING: ThreadSanitizer" \
	    $(cat "$T/san") | head -n 60
else
	ok "no sanitizer reports"
fi
summary
