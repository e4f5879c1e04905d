# perf.sh: mccl-perf on the test cluster (sourced by run.sh): every
# collective with its results checked, and ranks found from the
# environments of torchrun, Slurm and Open MPI's mpirun.

# perf_ok NAME OUT...: every output says the run checked out.
perf_ok() {
	local name=$1 f
	shift
	for f in "$@"; do
		if ! grep -q "^# Out of bounds values : 0 OK" "$f"; then
			bad "$name"
			cat "$f" | tail -n 5
			return
		fi
	done
	ok "$name"
}

# perf_on_three JOB ARGS...: mccl-perf ARGS as ranks 0-2 of job JOB, one
# on each node, each one's output in $T/JOB.RANK.out; fails if one did.
perf_on_three() {
	local job=$1 i p rc=0 pids=()
	shift
	for i in 0 1 2; do
		MCCL_SOCKET="$T/n$i.sock" timeout 120 "$B/mccl-perf" "$@" \
		    --nprocs 1 --total 3 --first "$i" --job "$job" \
		    >"$T/$job.$i.out" 2>&1 &
		pids+=($!)
		CHILD_PIDS+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}

# --memory host: the buffers are the process's own, staged by the library
perf_on_three perf-host --memory host -b 8 -e 8M -f 64 -n 2 -w 1
grep -q "memory: host" "$T/perf-host.0.out" &&
    perf_ok "mccl-perf --memory host: staged buffers, results checked" \
    "$T/perf-host.0.out" || bad "mccl-perf --memory host: $(tail -n 2 \
    "$T/perf-host.0.out")"

# -P: a buffer as parts in flight together, in the ranks' own memory (the
# torch backend's way), checked element by element; bad parts refused
perf_on_three perf-parts --memory host -P 1M -b 1M -e 5M -i 2M -n 2 -w 1
grep -q "parts: 1048576" "$T/perf-parts.0.out" &&
    perf_ok "mccl-perf -P: parts in flight, results checked" \
    "$T/perf-parts.0.out" || bad "mccl-perf -P: $(tail -n 2 \
    "$T/perf-parts.0.out")"
for args in "--coll broadcast -P 1M" "-P 2" "-e 64M -P 1K" "-e 20K -P 6"; do
	"$B/mccl-perf" $args >"$T/perf-badparts.out" 2>&1
	rc=$?
	if [ $rc = 2 ] && grep -q "^mccl-perf: -P: " "$T/perf-badparts.out"; then
		ok "mccl-perf $args: refused ($(head -n 1 "$T/perf-badparts.out"))"
	else
		bad "mccl-perf $args: rc $rc, $(head -n 1 "$T/perf-badparts.out")"
	fi
done

# nccl-tests' letters with their meanings: a pasted all_reduce_perf line
# runs as typed; -t and -g take 1, -G 0; -r, -a, -z, -C, -N, -T work.
out=$(MCCL_SOCKET="$T/n0.sock" MCCL_JOB=perf-nccl MCCL_RANK=0 \
    MCCL_NRANKS=1 timeout 120 "$B/mccl-perf" -b 8 -e 128M -f 2 -g 1 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "^ *134217728 " <<<"$out" &&
    grep -q "^# Out of bounds values : 0 OK" <<<"$out" &&
    ok "mccl-perf -b 8 -e 128M -f 2 -g 1: nccl-tests' line runs, to 128M, checked" ||
    bad "mccl-perf -b 8 -e 128M -f 2 -g 1: rc $rc: $(tail -n 3 <<<"$out")"
for args in "-t 2" "-g 2" "-G 1" "-a 4" "-z 2" "-r 1"; do
	out=$("$B/mccl-perf" $args 2>&1)
	rc=$?
	[ $rc = 2 ] && grep -q "^mccl-perf: -${args:1:1}" <<<"$out" &&
	    ok "mccl-perf $args: refused ($(head -n 1 <<<"$out"))" ||
	    bad "mccl-perf $args: rc $rc: $(head -n 1 <<<"$out")"
done
perf_on_three perf-root --coll broadcast -r 2 -b 8 -e 64K -f 16 -n 2 -w 1 &&
    grep -Eq "^ +32768 +8192 +float +- +2 " "$T/perf-root.0.out" &&
    perf_ok "mccl-perf --coll broadcast -r 2: from rank 2, checked" \
    "$T/perf-root.0.out" || bad "mccl-perf -r 2: $(tail -n 4 "$T/perf-root.0.out")"
perf_on_three perf-opts -a 1 -z 0 -C 1 -N 2 -T 30 -b 8 -e 64K -f 16 -n 3 \
    -w 1 && grep -q "blocking: 0 time: cpu (mean)" "$T/perf-opts.0.out" &&
    [ "$(grep -c '^# Out of bounds values : 0 OK' "$T/perf-opts.0.out")" = 2 ] &&
    ok "mccl-perf -a 1 -z 0 -C 1 -N 2 -T 30: two checked tables, mean CPU time, queued" ||
    bad "mccl-perf -a 1 -z 0 -C 1 -N 2: $(tail -n 4 "$T/perf-opts.0.out")"

for coll in allreduce reduce broadcast allgather reduce_scatter alltoall \
    gather scatter allgatherv alltoallv \
    sendrecv barrier; do
	if ! perf_on_three "perf-$coll" --coll "$coll" -b 8 -e 1M -f 16 -n 2 -w 1
	then
		bad "mccl-perf --coll $coll"
		tail -n 3 "$T/perf-$coll".*.out
	elif [ "$coll" = barrier ]; then
		ok "mccl-perf --coll $coll"
	else
		perf_ok "mccl-perf --coll $coll: results checked" "$T/perf-$coll.0.out"
	fi
done

# launch VARS...: mccl-perf as rank 0 on n0 and rank 1 on n1, each with the
# variables a launcher sets; {R} stands for the rank.
launch() {
	local name=$1 pids=() r v env
	shift
	for r in 0 1; do
		env=()
		for v in "$@"; do env+=("${v//\{R\}/$r}"); done
		env "${env[@]}" MCCL_SOCKET="$T/n$r.sock" timeout 60 \
		    "$B/mccl-perf" -b 8 -e 64K -f 8 -n 2 -w 1 \
		    >"$T/launch-$name.$r.out" 2>&1 &
		pids+=($!)
		CHILD_PIDS+=($!)
	done
	rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	if [ $rc -eq 0 ]; then
		perf_ok "mccl-perf under $name" "$T/launch-$name.0.out"
	else
		bad "mccl-perf under $name"
		tail -n 3 "$T/launch-$name".*.out
	fi
}

launch torchrun RANK={R} WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$((20000 + RANDOM % 10000)) TORCHELASTIC_RUN_ID=none
launch slurm SLURM_PROCID={R} SLURM_NTASKS=2 SLURM_JOB_ID=$$ SLURM_STEP_ID=0
launch mpirun OMPI_COMM_WORLD_RANK={R} OMPI_COMM_WORLD_SIZE=2 \
    "OMPI_MCA_orte_hnp_uri=$$.0;tcp://127.0.0.1:$RANDOM"
