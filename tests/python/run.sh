#!/usr/bin/env bash
# run.sh BUILD_DIR [cuda|torch]: the Python package, the torch backend and
# mcclrun, against a 2-node cluster on loopback (tests/integration/lib.sh:
# every process and file is cleaned up, also on failure).  Ranks reach
# "their" node through mcclrun --ssh tests/python/fakessh, which plays ssh:
# node nI's ranks get nI's socket.  Debian's python3, numpy and torch.
# cuda: the GPU tests alone; torch: the torch backend's alone, with a part
# of PyTorch's own tests (to try a torch newer than Debian's).
set -u
B=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
. "$TOP/tests/integration/lib.sh"

export PYTHONPATH="$TOP/libclient/python"
export MCCL_LIBRARY="$B/libmccl.so.0"
export GLOO_SOCKET_IFNAME=lo
# the C++ backend where make built it: one that does not load fails
compgen -G "$TOP/libclient/python/mccl/_native*.so" >/dev/null &&
    export MCCL_TORCH_NATIVE=1
export OMP_NUM_THREADS=1	# as mcclrun and torchrun default to (tested below)
unset MCCL_SOCKET MCCL_JOB MCCL_RANK MCCL_NRANKS RANK WORLD_SIZE
MCCLRUN=("$PY" "$TOP/tools/mcclrun" --mcclctl "$B/mcclctl")
REMOTE=(--ssh "$HERE/fakessh $T" --hosts n0,n1 --master-addr 127.0.0.1)

# Lines of a rank: mcclrun's "[3] " or torchrun's "[default1]:" first.
PREFIX_RE='(\[[0-9]+\] |\[default[0-9]+\]:)?'

# report NAME OUTPUT_FILE STATUS: one ok/bad per "ok"/"FAIL" line of a
# checking script, and the script's own exit status.
report() {
	local name=$1 out=$2 rc=$3 nok nfail
	nok=$(grep -cE "^$PREFIX_RE"'ok ' "$out")
	nfail=$(grep -cE "^$PREFIX_RE"'FAIL ' "$out")
	if [ "$rc" = 0 ] && [ "$nfail" = 0 ] && [ "$nok" -gt 0 ]; then
		ok "$name ($nok checks)"
	else
		bad "$name: exit $rc, $nok ok, $nfail failed"
		grep -E "^$PREFIX_RE"'FAIL ' "$out" | head -n 10
		grep -vE "^$PREFIX_RE"'(ok|FAIL) ' "$out" | tail -n 15
	fi
}

echo "== a world of one: no launcher, no daemon, no C library"
out=$(MCCL_LIBRARY=/nonexistent/libmccl.so.0 "$PY" -m unittest \
    "$HERE/test_alone.py" 2>&1)
rc=$?
if [ $rc = 0 ]; then
	ok "test_alone.py: $(echo "$out" | grep -o 'Ran [0-9]* tests')"
else
	bad "test_alone.py"
	echo "$out" | tail -n 20
fi
out=$("$PY" -m unittest "$HERE/test_constants.py" 2>&1)
if [ $? = 0 ]; then
	ok "test_constants.py: mccl.h's constants in Python: $(echo "$out" |
	    grep -o 'Ran [0-9]* tests')"
else
	bad "test_constants.py"
	echo "$out" | tail -n 20
fi
out=$(MCCL_LIBRARY=/nonexistent MCCL_SOCKET="$T/none.sock" "$PY" \
    "$HERE/torch_alone.py" 2>&1)
[ "$(tail -n 1 <<<"$out")" = "ok 5" ] &&
    ok "the torch backend in a group of one: no daemon, no library (5 checks)" ||
    bad "the torch backend alone: $(tail -n 5 <<<"$out")"
# The backend's name: "mccl", or "mccld" where another plugin holds it.
name_case() {	# ARGS...: torch_name.py's lines and mccl.torch's (not torch's warnings)
	MCCL_LIBRARY=/nonexistent MCCL_SOCKET="$T/none.sock" "$@" 2>&1 |
	    grep -E '^(name |ok$|FAIL|mccl\.torch: |RuntimeError: )' | tr '\n' '|'
}
out=$(name_case "$PY" "$HERE/torch_name.py" free)
[ "$out" = "name mccl|ok|" ] && ok "torch backend name: \"mccl\" where it is free" ||
    bad "torch backend name, free: $out"
out=$(name_case "$PY" "$HERE/torch_name.py" taken)
case $out in
*'another plugin holds the backend name "mccl"; MCCL'"'"'s is "mccld": init_process_group("mccld")'*"name mccld|ok|")
	ok "torch backend name: \"mccld\" where another plugin holds \"mccl\", said once" ;;
*)	bad "torch backend name, taken: $out" ;;
esac
out=$(MCCL_TORCH_BACKEND=mcclx name_case "$PY" "$HERE/torch_name.py" taken)
[ "$out" = "name mcclx|ok|" ] && ok "torch backend name: MCCL_TORCH_BACKEND chooses it" ||
    bad "torch backend name, chosen: $out"
out=$(MCCL_TORCH_BACKEND=mccl name_case "$PY" "$HERE/torch_name.py" taken)
case $out in
*"MCCL_TORCH_BACKEND=mccl: another backend holds that name"*)
	ok "torch backend name: one another plugin holds is refused, named" ;;
*)	bad "torch backend name, chosen and taken: $out" ;;
esac
out=$(MCCL_LIBRARY=/nonexistent "$PY" "$TOP/libclient/python/examples/allreduce.py" 2>&1)
[ "$out" = "rank 0 of 1: 1 (expected 1)" ] &&
    ok "the README's example, alone" || bad "the example alone: $out"

# torchrun_2x2 PORT SCRIPT ARGS...: 2 nodes x 2 ranks, one torchrun per
# node, each rank on its node's daemon.  Debian 12's torchrun (torch
# 1.13 on Python 3.11) cannot parse its own default --redirects 0: give 1.
torchrun_2x2() {
	local port=$1 i pids=() rc=0
	shift
	for i in 0 1; do
		MCCL_SOCKET="$T/n$i.sock" timeout 300 "$PY" -m \
		    torch.distributed.run --redirects 1 --tee 1 \
		    --log_dir "$T/torchrun.$port.$i" --nnodes 2 \
		    --nproc_per_node 2 --node_rank $i --master_addr 127.0.0.1 \
		    --master_port "$port" "$@" >>"$T/torchrun.$port.out" 2>&1 &
		pids+=($!)
		CHILD_PIDS+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	return $rc
}

# ddp_example DEVICE: the shipped DDP example (examples/ddp.py) on DEVICE,
# 2 nodes x 2 ranks, under mcclrun and under torchrun: every rank trains,
# its loss falls, and all four end with the same weights.
ddp_example() {
	local dev=$1 launcher out rc p lines
	for launcher in mcclrun torchrun; do
		out="$T/example.$dev.$launcher"
		if [ $launcher = mcclrun ]; then
			timeout 300 "${MCCLRUN[@]}" "${REMOTE[@]}" -N 2 "$PY" \
			    "$TOP/libclient/python/examples/ddp.py" "$dev" \
			    >"$out" 2>&1
			rc=$?
		else
			p=$(free_ports 1)
			torchrun_2x2 "$p" "$TOP/libclient/python/examples/ddp.py" \
			    "$dev"
			rc=$?
			cp "$T/torchrun.$p.out" "$out"
		fi
		lines=$(grep -oE "rank [0-9] of 4 on $dev[:0-9]*: loss .*" "$out")
		if [ $rc = 0 ] && [ "$(wc -l <<<"$lines")" = 4 ] &&
		    [ "$(awk '{ print $NF }' <<<"$lines" | sort -u | wc -l)" = 1 ] &&
		    awk '{ if ($10 + 0 >= $8 + 0) bad = 1 } END { exit bad }' \
		    <<<"$lines"; then
			ok "the DDP example on $dev under $launcher: 4 ranks' \
losses fall, their weights agree"
		else
			bad "the DDP example on $dev under $launcher: exit $rc"
			tail -n 20 "$out"
		fi
	done
}

# ddp_fault.py: the last rank is killed or stopped at step 20, or rank 0
# aborts the job; the ranks left must print "raised" (and exit 3) within
# the time the failure takes to be seen, none may crash.
ddp_fault() {	# MODE RAISERS SECONDS DEVICE [MCCLRUN_ARGS...]: 2 nodes x 2
	local mode=$1 want=$2 limit=$3 dev=$4 rc raised slow
	shift 4
	rm -f "$T/fault.out"
	timeout 120 "${MCCLRUN[@]}" "${REMOTE[@]}" -N 2 "$@" \
	    --env PYTHONFAULTHANDLER=1 \
	    "$PY" "$HERE/ddp_fault.py" "$mode" "$dev" >"$T/fault.out" 2>&1 &
	CHILD_PIDS+=($!)
	wait $!
	rc=$?
	raised=$(grep -cE "^\[[0-9]\] raised [A-Za-z]+Error after" "$T/fault.out")
	slow=$(awk -v lim="$limit" '/ raised / { if ($5 + 0 > lim) n++ }
	    END { print n + 0 }' "$T/fault.out")
	if [ "$raised" = "$want" ] && [ "$slow" = 0 ] &&
	    ! grep -qE "Segmentation|Fatal Python|core dumped|exit(ed with)? status 139" \
	    "$T/fault.out"; then
		ok "DDP on $dev, $mode: $want ranks raise within $limit s \
($(grep -m1 -o 'raised [A-Za-z]*Error after [0-9.]* s: .\{0,60\}' "$T/fault.out"))"
	else
		bad "DDP on $dev, $mode: $raised of $want raised, $slow too late (mcclrun \
exit $rc)"
		tail -n 15 "$T/fault.out"
	fi
}

# The GPU tests (cuda_check.py, DDP on CUDA against gloo on CUDA, a rank
# that fails under DDP on CUDA), where
# torch sees a GPU; also alone: run.sh BUILD cuda.
cuda_tests() {
	local p
	echo "== CUDA tensors, 2 nodes x 2 ranks on GPU 0"
	if ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' \
	    2>/dev/null; then
		echo "skipped: no CUDA device"
		return
	fi
	"${MCCLRUN[@]}" "${REMOTE[@]}" -N 2 "$PY" "$HERE/cuda_check.py" \
	    >"$T/cuda.out" 2>&1
	report "cuda_check.py under mcclrun" "$T/cuda.out" $?
	p=$(free_ports 2)
	torchrun_2x2 "$p" "$HERE/ddp_train.py" mccl "$T/cddp_mccl" cuda &&
	    torchrun_2x2 $((p + 1)) "$HERE/ddp_train.py" gloo "$T/cddp_gloo" \
	    cuda && "$PY" "$HERE/ddp_compare.py" "$T/cddp_mccl" "$T/cddp_gloo" \
	    4 >"$T/cddp.out" 2>&1
	report "DDP on CUDA: mccl against gloo" "$T/cddp.out" $?
	[ -s "$T/cddp.out" ] || tail -n 20 "$T/torchrun.$p.out" \
	    "$T/torchrun.$((p + 1)).out"
	ddp_example cuda
	ddp_fault kill 3 5 cuda
	ddp_fault abort 4 5 cuda
}

# The torch backend under mcclrun and torchrun, and DDP against gloo's;
# also alone, with PyTorch's own tests: run.sh BUILD torch.
torch_tests() {
	echo "== torch.distributed on backend mccl, 2 nodes x 2 ranks"
	"${MCCLRUN[@]}" "${REMOTE[@]}" -N 2 "$PY" "$HERE/torch_check.py" \
	    >"$T/torch.out" 2>&1
	report "torch_check.py under mcclrun" "$T/torch.out" $?
	# the backend in Python, where the native one is not built
	MCCL_TORCH_NATIVE=0 "${MCCLRUN[@]}" "${REMOTE[@]}" -N 2 "$PY" \
	    "$HERE/torch_check.py" >"$T/torch.py.out" 2>&1
	report "torch_check.py under mcclrun, the Python backend" \
	    "$T/torch.py.out" $?

	"${MCCLRUN[@]}" "${REMOTE[@]}" --job torchjob -N 2 "$PY" \
	    "$HERE/torch_job.py" torchjob >"$T/torchjob.out" 2>&1
	rc=$?
	[ $rc = 0 ] && [ "$(grep -c '^\[[0-9]\] ok ' "$T/torchjob.out")" = 16 ] &&
	    ok "the torch world is mcclrun's job and mccl.init()'s world (4 ranks x 4 checks)" ||
	    bad "torch_job.py: exit $rc: $(grep -v '^\[[0-9]\] ok ' "$T/torchjob.out" | head -n 8)"

	echo "== torch checks under torchrun"
	local p
	p=$(free_ports 5)
	torchrun_2x2 "$p" "$HERE/torch_check.py"
	report "torch_check.py under torchrun, 2 nodes x 2 ranks" \
	    "$T/torchrun.$p.out" $?

	echo "== DDP on mccl against DDP on gloo, 2 nodes x 2 ranks"
	torchrun_2x2 $((p + 1)) "$HERE/ddp_train.py" mccl "$T/ddp_mccl" &&
	    torchrun_2x2 $((p + 2)) "$HERE/ddp_train.py" gloo "$T/ddp_gloo" &&
	    "$PY" "$HERE/ddp_compare.py" "$T/ddp_mccl" "$T/ddp_gloo" 4 \
	    >"$T/ddp.out" 2>&1
	report "DDP: broadcast at construction, buckets, no_sync, a short \
last batch" "$T/ddp.out" $?
	[ -s "$T/ddp.out" ] || tail -n 20 "$T/torchrun.$((p + 1)).out" \
	    "$T/torchrun.$((p + 2)).out"
	ddp_example cpu
}

# A part of PyTorch's own distributed tests (torch_suite.sh runs them all):
# each collective, send/recv, groups, objects, futures and DDP once.
# Run with no cluster of run.sh's up: torch_suite.sh starts its own.
torch_suite_part() {
	echo "== PyTorch's distributed_test.py, a part, 4 ranks on 2 nodes"
	local SUITE_PART="all_reduce_sum all_reduce_sum_async all_reduce_group_max
	    all_reduce_coalesced_sum broadcast broadcast_group broadcast_object_list
	    all_gather all_gather_coalesced_simple all_gather_object_default_pg
	    gather gather_object scatter scatter_object_list reduce_sum
	    reduce_group_min send_recv send_recv_any_source send_recv_with_tag isend
	    irecv batch_isend_irecv_gloo barrier barrier_group get_future
	    sparse_all_reduce_sum destroy_group DistributedDataParallel_requires_grad"
	# Gates of torch's own that newer releases close whatever the backend:
	# the group tests want 8 ranks from torch 2.6, one test is off upstream.
	local TORCH_OWN_SKIPS="'Skipped due to small world size\.'|'Test is failing"
	local t rc nran nok nown nwant suite_args=()
	for t in $SUITE_PART; do suite_args+=(-k "*.test_$t"); done
	"$HERE/torch_suite.sh" "$B" mccl 4 -g "${suite_args[@]}" >"$T/suite.txt" 2>&1
	rc=$?
	nran=$(grep -cE '^(ok|FAIL|skip) ' "$T/suite.txt")
	nok=$(grep -c '^ok ' "$T/suite.txt")
	nown=$(grep -cE "^skip test_[A-Za-z0-9_]+ ($TORCH_OWN_SKIPS)" "$T/suite.txt")
	nwant=$(wc -w <<<"$SUITE_PART")
	if [ $rc = 0 ] && [ "$nran" = "$nwant" ] && [ "$nok" -gt 0 ] &&
	    [ $((nok + nown)) = "$nwant" ]; then
		ok "$nok of PyTorch's tests pass on backend mccl$( [ "$nown" = 0 ] ||
		    echo ", $nown skipped by torch's own gates")"
		grep '^skip ' "$T/suite.txt" | sed 's/^/    /'
	else
		bad "PyTorch's tests: exit $rc, $nok of $nwant passed ($nran ran)"
		grep -v '^ok ' "$T/suite.txt" | head -n 60
	fi
}

cluster_up 2 || { bad "cluster start"; summary; exit 1; }
case ${2:-} in
cuda)	cuda_tests
	summary
	exit ;;
torch)	torch_tests
	cluster_down
	torch_suite_part
	summary
	exit ;;
esac

echo "== the README's example under mcclrun -n 4 (one node)"
out=$("${MCCLRUN[@]}" --socket "$T/n0.sock" -n 4 "$PY" \
    "$TOP/libclient/python/examples/allreduce.py" 2>&1)
rc=$?
[ $rc = 0 ] && [ "$(grep -c 'of 4: 10 (expected 10)' <<<"$out")" = 4 ] &&
    ok "4 ranks, each prints 10, prefixed by its rank" ||
    { bad "the example under mcclrun: exit $rc"; echo "$out"; }
grep -q '^\[3\] rank 3 of 4' <<<"$out" &&
    ok "mcclrun prefixes each line with its rank" || bad "no rank prefix"
omp='import os; print("omp", os.environ.get("OMP_NUM_THREADS"))'
out=$(env -u OMP_NUM_THREADS "${MCCLRUN[@]}" --socket "$T/n0.sock" -n 2 \
    "$PY" -c "$omp" 2>&1)
out2=$(OMP_NUM_THREADS=3 "${MCCLRUN[@]}" --socket "$T/n0.sock" -n 2 \
    "$PY" -c "$omp" 2>&1)
[ "$(grep -c '] omp 1$' <<<"$out")" = 2 ] &&
    grep -q '^mcclrun: OMP_NUM_THREADS=1 for ranks that share a host' \
    <<<"$out" && [ "$(grep -c '] omp 3$' <<<"$out2")" = 2 ] &&
    ! grep -q '^mcclrun: OMP' <<<"$out2" &&
    ok "ranks sharing a host get OMP_NUM_THREADS=1 (said), unless it is set" ||
    bad "OMP_NUM_THREADS: $out / $out2"

echo "== mccl on 2 nodes x 2 ranks: every collective, dtype and op"
"${MCCLRUN[@]}" "${REMOTE[@]}" -N 2 "$PY" "$HERE/dist_check.py" \
    >"$T/dist.out" 2>&1
report "dist_check.py under mcclrun --hosts n0,n1 -N 2" "$T/dist.out" $?

torch_tests

echo "== DDP on a bfloat16 wire, 2 nodes x 2 ranks, 200 steps"
# The wire's numbers are under test, so every mode runs the ring, where the
# wire applies: AUTO's choice for the 800 kB bucket follows the link cost
# the daemons measure, which a loaded machine moves.
for mode in fp32 wire hook; do
	wp=$(free_ports 1)
	MCCL_ALGO=ring torchrun_2x2 "$wp" "$HERE/ddp_wire.py" "$T/wire_$mode" \
	    "$mode" ||
	    tail -n 20 "$T/torchrun.$wp.out"
done
"$PY" "$HERE/ddp_wire_compare.py" "$T/wire_fp32" "$T/wire_wire" \
    "$T/wire_hook" >"$T/wire.out" 2>&1
report "DDP on a bfloat16 wire against float32 and bf16_compress_hook" \
    "$T/wire.out" $?

cuda_tests

echo "== a rank that fails under DDP: the others raise, never crash"
ddp_fault kill 3 5 cpu
ddp_fault stop 3 6 cpu --env MCCL_OP_TIMEOUT_MS=3000
ddp_fault abort 4 5 cpu

echo "== mcclrun's failure paths"
out=$("${MCCLRUN[@]}" --socket "$T/none.sock" -n 2 true 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "the daemon on this host does not answer.*$T/none.sock.*nothing started" <<<"$out" &&
    ok "a daemon that does not answer: named, nothing started (exit 2)" ||
    bad "no daemon: exit $rc: $out"
out=$("${MCCLRUN[@]}" --ssh "$HERE/fakessh $T" --hosts n0,n9 true 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "the daemon on n9 does not answer" <<<"$out" &&
    ok "the host whose daemon does not answer is named" ||
    bad "a host without a daemon: exit $rc: $out"
start=$SECONDS
out=$("${MCCLRUN[@]}" --socket "$T/n0.sock" -n 3 sh -c \
    'if [ $MCCL_RANK = 1 ]; then exit 7; fi; trap "exit 0" TERM; sleep 30 & wait' 2>&1)
rc=$?
[ $rc = 7 ] && [ $((SECONDS - start)) -lt 10 ] &&
    grep -q "rank 1 exited with status 7; stopping the other ranks" <<<"$out" &&
    ok "a failed rank: the others stopped, its status returned (7)" ||
    bad "a failed rank: exit $rc after $((SECONDS - start)) s: $out"
out=$("${MCCLRUN[@]}" --socket "$T/n0.sock" -n 2 sh -c 'kill -KILL $$' 2>&1)
rc=$?
[ $rc = 137 ] && grep -q "was killed by SIGKILL" <<<"$out" &&
    ok "a rank killed by a signal: named, exit 128 + 9" ||
    bad "a killed rank: exit $rc: $out"
out=$(printf 'line one\nline two\n' | "${MCCLRUN[@]}" --socket "$T/n0.sock" \
    -n 2 sh -c 'cat; echo "end $MCCL_RANK"' 2>&1)
[ "$(grep -c '^\[0\] line' <<<"$out")" = 2 ] &&
    ! grep -q '^\[1\] line' <<<"$out" && grep -q '^\[1\] end 1' <<<"$out" &&
    ok "stdin goes to rank 0 only" || bad "stdin: $out"
"${MCCLRUN[@]}" --socket "$T/n0.sock" -n 2 sh -c \
    'trap "echo got TERM; exit 3" TERM; echo ready; sleep 30 & wait' \
    >"$T/sig.out" 2>&1 &
mr=$!
CHILD_PIDS+=($mr)
for _ in $(seq 50); do
	[ "$(grep -c ready "$T/sig.out")" = 2 ] && break
	sleep 0.1
done
kill -TERM $mr
wait $mr
rc=$?
grep -q '^\[0\] got TERM' "$T/sig.out" &&
    grep -q '^\[1\] got TERM' "$T/sig.out" && [ $rc = 3 ] &&
    ok "SIGTERM to mcclrun reaches every rank" ||
    { bad "signals: exit $rc"; cat "$T/sig.out"; }

echo "== remote ranks end with their launcher"
# fakessh runs each rank in a session of its own, as ssh does: only the
# launcher's connection going away can tell a rank to stop.  Each rank
# leaves its pid in $T/rpid.RANK.
rpids_gone() {	# RANK...: those ranks' processes end within 6 s
	local deadline=$((SECONDS + 6)) r live
	while :; do
		live=""
		for r in "$@"; do
			kill -0 "$(cat "$T/rpid.$r" 2>/dev/null || echo x)" \
			    2>/dev/null && live="$live $r"
		done
		[ -n "$live" ] || return 0
		[ $SECONDS -lt $deadline ] || break
		sleep 0.1
	done
	echo "ranks still running:$live"
	for r in $live; do kill -9 "$(cat "$T/rpid.$r")"; done
	return 1
}
rm -f "$T"/rpid.*
"${MCCLRUN[@]}" "${REMOTE[@]}" sh -c 'echo $$ >"$0/rpid.$MCCL_RANK"; \
echo ready; exec sleep 60' "$T" >"$T/rsig.out" 2>&1 &
mr=$!
CHILD_PIDS+=($mr)
for _ in $(seq 100); do
	[ "$(grep -c ready "$T/rsig.out")" = 2 ] && break
	sleep 0.1
done
kill -TERM $mr
wait $mr
rpids_gone 0 1 && ok "SIGTERM to mcclrun --ssh ends the remote ranks" ||
    { bad "SIGTERM to mcclrun --ssh"; cat "$T/rsig.out"; }
rm -f "$T"/rpid.*
out=$("${MCCLRUN[@]}" "${REMOTE[@]}" sh -c 'if [ $MCCL_RANK = 0 ]; then \
while [ ! -s "$0/rpid.1" ]; do sleep 0.05; done; exit 5; fi; \
echo $$ >"$0/rpid.1"; exec sleep 60' "$T" 2>&1)
rc=$?
[ $rc = 5 ] && rpids_gone 1 &&
    ok "a failed rank: the remote ranks are stopped, its status returned" ||
    bad "a failed rank with remote ranks: exit $rc: $out"
out=$("${MCCLRUN[@]}" "${REMOTE[@]}" sh -c 'exit 3' 2>&1)
[ $? = 3 ] && ok "a remote rank's exit status comes back" ||
    bad "a remote rank's status: $out"

out=$("${MCCLRUN[@]}" --socket "$T/n0.sock" --job fixedname -n 1 sh -c \
    'echo "$MCCL_JOB $MCCL_RANK $MCCL_NRANKS $RANK $WORLD_SIZE $LOCAL_RANK"' 2>&1)
[ "$out" = "[0] fixedname 0 1 0 1 0" ] &&
    ok "--job, and the MCCL and torchrun variables" || bad "variables: $out"
cat >"$T/hosts.json" <<EOF
[{"host": "n0", "ranks": 1}, {"host": "n1", "ranks": 2}]
EOF
out=$("${MCCLRUN[@]}" --ssh "$HERE/fakessh $T" --hostfile "$T/hosts.json" \
    --master-addr 127.0.0.1 \
    --env EXTRA=yes sh -c 'echo "$MCCL_RANK $MCCL_SOCKET $EXTRA"' 2>&1)
[ "$(sort <<<"$out")" = "[0] 0 $T/n0.sock yes
[1] 1 $T/n1.sock yes
[2] 2 $T/n1.sock yes" ] && ok "--hostfile with ranks per host, --env" ||
    bad "hostfile: $out"
printf '# Open MPI and MPICH forms\nn0 slots=1 max_slots=4\nn1:2\n' \
    >"$T/hosts.txt"
out=$("${MCCLRUN[@]}" --ssh "$HERE/fakessh $T" --hostfile "$T/hosts.txt" \
    --master-addr 127.0.0.1 sh -c 'echo "$MCCL_RANK $MCCL_SOCKET"' 2>&1)
[ "$(sort <<<"$out")" = "[0] 0 $T/n0.sock
[1] 1 $T/n1.sock
[2] 2 $T/n1.sock" ] && ok "--hostfile in Open MPI's and MPICH's text form" ||
    bad "text hostfile: $out"
out=$("${MCCLRUN[@]}" --ssh "$HERE/fakessh $T" --hosts n0,n1 true 2>&1)
[ $? != 0 ] && grep -q "rank 0's host 'n0' does not resolve, so it cannot be torch.distributed's MASTER_ADDR: give --master-addr" <<<"$out" &&
    ok "a rank 0 host that does not resolve: refused at once, named" ||
    bad "an unresolvable MASTER_ADDR: $out"
for bad_host in '{"host": "n0", "ranks": true}' '{"host": ""}' '""'; do
	echo "[$bad_host]" >"$T/bad-hosts.json"
	out=$("${MCCLRUN[@]}" --ssh "$HERE/fakessh $T" --hostfile \
	    "$T/bad-hosts.json" true 2>&1)
	[ $? != 0 ] && grep -qE 'positive integer|empty host name' <<<"$out" &&
	    ok "hostfile entry $bad_host: refused" ||
	    bad "hostfile entry $bad_host: $out"
done
out=$("${MCCLRUN[@]}" --ssh "$HERE/fakessh $T" --hosts n0,,n1 true 2>&1)
[ $? = 2 ] && grep -q 'empty host name' <<<"$out" &&
    ok "--hosts with an empty name: refused" || bad "--hosts n0,,n1: $out"
out=$(cd "$T" && "$PY" "$TOP/tools/mcclrun" --socket "$T/n0.sock" -n 2 \
    sh -c 'echo "rank $MCCL_RANK"' 2>&1)
[ "$(sort <<<"$out")" = "[0] rank 0
[1] rank 1" ] && ok "mcclrun from the build tree finds build/mcclctl itself" ||
    bad "mcclrun without --mcclctl: $out"
out=$(cd "$T" && "$PY" -m mccl.run --socket "$T/n0.sock" -n 1 echo one 2>&1)
[ "$out" = "[0] one" ] && ok "python -m mccl.run is the launcher too" ||
    bad "python -m mccl.run: $out"
# A launcher and package far from any build tree, no mcclctl on PATH.
mkdir -p "$T/lonely/pkg"
cp "$TOP/tools/mcclrun" "$T/lonely/"
cp -r "$TOP/libclient/python/mccl" "$T/lonely/pkg/"
out=$(cd "$T" && PATH=/usr/bin:/bin PYTHONPATH="$T/lonely/pkg" "$PY" \
    "$T/lonely/mcclrun" --socket "$T/n0.sock" -n 1 true 2>&1)
[ $? != 0 ] && grep -q "no mcclctl to check the daemons with: tried .*lonely/mcclctl.* and PATH" <<<"$out" &&
    ok "no mcclctl anywhere: every place tried is named" ||
    bad "no mcclctl: $out"
out=$("${MCCLRUN[@]}" -n 1 2>&1)
[ $? = 2 ] && grep -q "no command to run" <<<"$out" &&
    ok "no command: a usage error" || bad "no command: $out"

echo "== tools/cluster.sh: two daemons from the build tree, as the README"
CL=$T/cl
cl_stop() { BUILD="$B" "$TOP/tools/cluster.sh" stop "$CL" >/dev/null 2>&1; }
CLEANUP_HOOKS+=(cl_stop)
if out=$(BUILD="$B" "$TOP/tools/cluster.sh" start 2 "$CL" 2>&1); then
	ok "cluster.sh start 2: $out"
else
	bad "cluster.sh start 2: $out"
fi
out=$("${MCCLRUN[@]}" --ssh "$TOP/tools/cluster.sh on $CL" --hosts n0,n1 \
    --master-addr 127.0.0.1 \
    -N 2 "$PY" "$TOP/libclient/python/examples/allreduce.py" 2>&1)
[ "$(grep -c 'of 4: 10 (expected 10)' <<<"$out")" = 4 ] &&
    ok "the example on them, 2 ranks on each, by mcclrun --ssh \
\"cluster.sh on\"" || bad "the example on cluster.sh's daemons: $out"
pids=$(cat "$CL"/n*.pid 2>/dev/null)
BUILD="$B" "$TOP/tools/cluster.sh" stop "$CL"
alive=""
for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
[ -n "$pids" ] && [ -z "$alive" ] && ok "cluster.sh stop: the daemons are gone" ||
    bad "cluster.sh stop: still running:$alive"

echo "== pip install into a virtual environment, without the network"
# As a torch user does: a venv (Debian's torch and numpy through
# --system-site-packages), pip install ./libclient/python from the top of
# the tree: the wheel carries libmccl.so.0 and mcclctl (and the torch backend), and the tree is
# left as it was.
VENV=$T/venv VENV_OK=0
before=$(cd "$TOP" && git status --porcelain --ignored libclient/python 2>/dev/null)
if ! "$PY" -m venv --system-site-packages "$VENV" >"$T/venv.out" 2>&1; then
	bad "python -m venv: $(tail -n 3 "$T/venv.out")"
elif ! "$VENV/bin/python" -c 'import setuptools, wheel' 2>/dev/null; then
	echo "(skipped: no setuptools and wheel for the venv to build with, offline)"
elif (cd "$TOP" && "$VENV/bin/pip" install --no-index --no-build-isolation \
    --quiet ./libclient/python) >>"$T/venv.out" 2>&1; then
	ok "pip install ./libclient/python into a venv"
	VENV_OK=1
else
	bad "pip install into a venv: $(tail -n 3 "$T/venv.out")"
fi
after=$(cd "$TOP" && git status --porcelain --ignored libclient/python 2>/dev/null)
[ "$before" = "$after" ] && ok "pip leaves the tree as it was" ||
    bad "pip left in the tree: $(diff <(echo "$before") <(echo "$after") | tail -n 3)"
if [ $VENV_OK = 1 ]; then
	site=$(cd "$T" && env -u PYTHONPATH "$VENV/bin/python" -c \
	    'import mccl, os; print(os.path.dirname(mccl.__file__))')
	[ -x "$site/mcclctl" ] && [ -f "$site/libmccl.so.0" ] &&
	    compgen -G "$site/_native*.so" >/dev/null &&
	    ok "the wheel carries libmccl.so.0, mcclctl and the torch backend in C++" ||
	    bad "the installed package: $(ls "$site")"
	out=$(cd "$T" && env -u PYTHONPATH -u MCCL_LIBRARY "$VENV/bin/python" \
	    -c 'import mccl.torch; print(mccl.torch._native is not None)' 2>&1)
	[ "$out" = True ] && ok "the venv's mccl.torch takes its C++ backend" ||
	    bad "the venv's mccl.torch: $out"
	out=$(cd "$T" && env -u PYTHONPATH -u MCCL_LIBRARY -u MCCLCTL \
	    MCCL_SOCKET="$T/n0.sock" "$VENV/bin/mcclrun" -n 4 "$VENV/bin/python" \
	    -c 'import mccl, numpy
w = mccl.init()
x = numpy.full(4, w.rank + 1.0)
w.allreduce(x)
print("of %d: %g" % (w.size, x[0]))' 2>&1)
	[ "$(grep -c 'of 4: 10$' <<<"$out")" = 4 ] &&
	    ok "4 ranks under the venv's mcclrun, outside the tree, nothing set but the socket" ||
	    bad "4 ranks from the venv: $out"
fi
# make wheel, installed into a plain venv (offline: no numpy, --no-deps).
if make -C "$TOP" --no-print-directory B="$B" wheel >"$T/wheel.out" 2>&1 &&
    whl=$(ls "$B"/mccl-*.whl 2>/dev/null | head -n 1) && [ -n "$whl" ]; then
	PLAIN=$T/plain
	if "$PY" -m venv "$PLAIN" >>"$T/wheel.out" 2>&1 &&
	    "$PLAIN/bin/pip" install --no-index --no-deps --quiet "$whl" \
	    >>"$T/wheel.out" 2>&1; then
		out=$(cd "$T" && env -u PYTHONPATH -u MCCL_LIBRARY -u MCCLCTL \
		    MCCL_SOCKET="$T/n0.sock" "$PLAIN/bin/mcclrun" -n 2 \
		    "$PLAIN/bin/python" -c 'import array, mccl
w = mccl.init()
x = array.array("d", [w.rank + 1.0] * 4)
w.allreduce(x)
print("of %d: %g" % (w.size, x[0]))' 2>&1)
		[ "$(grep -c 'of 2: 3$' <<<"$out")" = 2 ] &&
		    ok "make wheel, in a plain venv: 2 ranks under its mcclrun" ||
		    bad "the wheel in a plain venv: $out"
	else
		bad "the wheel into a plain venv: $(tail -n 3 "$T/wheel.out")"
	fi
else
	bad "make wheel: $(tail -n 3 "$T/wheel.out")"
fi
if [ $VENV_OK = 1 ]; then
VPY=$VENV/bin/python
vrun() {	# ARGS...: from the venv, outside the tree, its own mccl only
	(cd "$T" && env -u PYTHONPATH -u MCCL_LIBRARY "$@")
}
out=$(vrun MCCL_LIBRARY=/none "$VPY" -c 'import mccl; print(mccl.__file__)' \
    2>&1)
case $out in
"$VENV"/*) ok "the venv's python imports the venv's mccl" ;;
*) bad "the venv's mccl: $out" ;;
esac
out=$(vrun MCCL_LIBRARY=/none/libmccl.so.0 "$VPY" -c 'import mccl; mccl.Comm.create("x", 0, 1)' 2>&1)
grep -q "cannot load libmccl.so.0: .*/none/libmccl.so.0.*MCCL_LIBRARY" <<<"$out" &&
    ok "a libmccl that cannot be loaded: the error names where it looked" ||
    bad "no libmccl: $out"
# array.array, not numpy: a venv made from a venv sees no numpy.
out=$(vrun MCCL_LIBRARY="$B/libmccl.so.0" "$VENV/bin/mcclrun" --mcclctl \
    "$B/mcclctl" --socket "$T/n0.sock" -n 2 "$VPY" -c 'import array, mccl
w = mccl.init()
x = array.array("d", [w.rank + 1.0] * 4)
w.allreduce(x)
print("of %d: %g" % (w.size, x[0]))' 2>&1)
[ "$(grep -c 'of 2: 3$' <<<"$out")" = 2 ] &&
    ok "an allreduce under the venv's mcclrun, MCCL_LIBRARY" ||
    bad "an allreduce from the venv: $out"
# --system-site-packages reaches Debian's torch; from a python that is a
# venv itself (the 16-core machine's), only its base's packages.
if ! vrun "$VPY" -c 'import torch' 2>/dev/null; then
	echo "(skipped: the venv sees no torch: $PY is a venv itself)"
else
out=$(vrun "$VPY" -m mccl.run --mcclctl "$B/mcclctl" --socket "$T/n0.sock" \
    -n 2 "$VPY" -c 'import torch, torch.distributed as dist, mccl.torch
dist.init_process_group("mccl")
t = torch.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("sum", t.tolist())' 2>&1)
[ "$(grep -c 'sum \[3.0, 3.0, 3.0\]' <<<"$out")" = 2 ] &&
    ok "a torch all_reduce from the venv, libmccl.so.0 next to the package" ||
    bad "torch from the venv: $out"
fi
fi

echo "== per-call overhead over the C call"
out=$(MCCL_SOCKET="$T/n0.sock" MCCL_JOB=pyoverhead MCCL_RANK=0 \
    MCCL_NRANKS=1 "$PY" "$TOP/tools/bench/pyoverhead.py" 5 2000 2>&1)
echo "$out" | sed 's/^/    /'
grep -q "overhead over the C call, numpy: .* by parts" <<<"$out" &&
    ok "measured (tools/bench/pyoverhead.py; the README has the figures)" ||
    bad "pyoverhead.py: $out"

cluster_down

torch_suite_part
summary
