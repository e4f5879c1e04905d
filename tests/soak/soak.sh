#!/usr/bin/env bash
# soak.sh BUILD_DIR SECONDS: three daemons on loopback, three users' jobs
# of 3 to 6 ranks spread over them doing random verified collectives
# (mccl-test soak), while faults land on them: other jobs' ranks SIGKILLed
# or stopped for 2-5 s, a daemon stopped for 2 s, and (runs of 60 s and
# more) a daemon SIGKILLed and restarted.  Every job either ends with
# every result right or fails with a named error; none may hang, and no
# result may be wrong.  At the end: the verified operations and elements,
# the wrong results (must be 0), the hangs (must be 0), the jobs that
# failed by a fault, and each daemon's memory and descriptors before and
# after, with no job left.  As root the three users are made for the run
# (and removed); otherwise every job is the caller's.
set -u
B=$(cd "${1:-build}" && pwd)
SECS=${2:-600}
. "$(dirname "$0")/../integration/lib.sh"
NODES=3
RANK_MS_MIN=2000
RANK_MS_MAX=6000
LOG_LEVEL=info

# The three users: made here as root, else the caller three times.
uids=()
if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null &&
    command -v setpriv >/dev/null; then
	xbin || { bad "copying the programs for the soak's users"; summary; exit 1; }
	for u in a b c; do
		name=mcclsoak$u$$
		test_user "$name" && uids+=("$(id -u "$name")")
	done
	TESTBIN=$XB/mccl-test
else
	uids=("$(id -u)" "$(id -u)" "$(id -u)")
	TESTBIN=$B/mccl-test
	echo "(not root: the three users' jobs all run as uid $(id -u))"
fi
[ ${#uids[@]} = 3 ] || { bad "making the soak's users"; summary; exit 1; }

cluster_up $NODES s 0 ||
    { bad "soak cluster start"; summary; exit 1; }
chmod 755 "$T"

anon_kb() { awk '/^RssAnon/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
mem0=() fd0=()
for i in $(seq 0 $((NODES - 1))); do
	mem0+=("$(anon_kb "${DAEMON_PIDS[$i]}")")
	fd0+=("$(fds "${DAEMON_PIDS[$i]}")")
done

mkdir -p "$T/soak"
end=$((SECONDS + SECS))

# run_user U: user U's jobs back to back until the end; each job's ranks'
# pids go to $T/soak/pids.U (the fault injector's targets), each rank's
# exit status and output to $T/soak/U.JOB.rR.
run_user() {
	local u=$1 uid=${uids[$1]} job=0 n r node ms seed pids
	while [ $SECONDS -lt $end ]; do
		job=$((job + 1))
		n=$((3 + RANDOM % 4))
		ms=$((RANK_MS_MIN + RANDOM % (RANK_MS_MAX - RANK_MS_MIN)))
		seed=$((RANDOM * 32768 + RANDOM))
		pids=()
		for r in $(seq 0 $((n - 1))); do
			node=$((RANDOM % NODES))
			(
				cmd=(env MCCL_SOCKET="$T/s$node.sock"
				    MCCL_JOB="soak$u-$job" MCCL_NRANKS=$n
				    MCCL_RANK=$r MCCL_INIT_TIMEOUT_MS=15000
				    timeout $((ms / 1000 + 60)) "$TESTBIN" soak
				    "$ms" "$seed")
				if [ "$uid" != "$(id -u)" ]; then
					setpriv --reuid="$uid" --regid="$uid" \
					    --clear-groups "${cmd[@]}"
				else
					"${cmd[@]}"
				fi
				echo "exit $?"
			) >"$T/soak/$u.$job.r$r" 2>&1 &
			pids+=($!)
		done
		echo "${pids[*]}" >"$T/soak/pids.$u"
		wait "${pids[@]}"
	done
	rm -f "$T/soak/pids.$u"
}

# A rank of a running job, as "PID" (its mccl-test), or nothing.
some_rank() {
	local f pids
	f=$(ls "$T"/soak/pids.* 2>/dev/null | shuf -n 1)
	[ -n "$f" ] || return
	pids=$(cat "$f" 2>/dev/null)
	[ -n "$pids" ] || return
	pgrep -P "$(tr ' ' '\n' <<<"$pids" | shuf -n 1)" -f mccl-test 2>/dev/null |
	    head -n 1 || true
}

# The faults, until the end: one every 2-4 s.
inject() {
	local p d kind restarts=0
	while [ $SECONDS -lt $((end - 3)) ]; do
		sleep $((2 + RANDOM % 3))
		kind=$((RANDOM % 10))
		if [ $kind -lt 4 ]; then
			p=$(some_rank)
			# pgrep -P finds timeout's child; the rank is below it
			p=$(pgrep -P "${p:-0}" 2>/dev/null | head -n 1)
			[ -n "$p" ] && kill -KILL "$p" 2>/dev/null &&
			    echo "fault: rank pid $p killed"
		elif [ $kind -lt 7 ]; then
			p=$(pgrep -P "$(some_rank)" 2>/dev/null | head -n 1)
			[ -n "$p" ] && kill -STOP "$p" 2>/dev/null && {
				echo "fault: rank pid $p stopped"
				( sleep $((2 + RANDOM % 4)); kill -CONT "$p" ) &
			}
		elif [ $kind -lt 9 ] || [ "$SECS" -lt 60 ] ||
		    [ $restarts -ge $((SECS / 120 + 1)) ]; then
			d=$((RANDOM % NODES))
			kill -STOP "${DAEMON_PIDS[$d]}" && sleep 2 &&
			    kill -CONT "${DAEMON_PIDS[$d]}" &&
			    echo "fault: daemon s$d stopped for 2 s"
		else
			d=$((1 + RANDOM % (NODES - 1)))
			kill -KILL "${DAEMON_PIDS[$d]}"
			wait "${DAEMON_PIDS[$d]}" 2>/dev/null
			"$B/mccld" -c "$T/s$d.conf" >>"$T/s$d.log" 2>&1 &
			DAEMON_PIDS[$d]=$!
			restarts=$((restarts + 1))
			echo "fault: daemon s$d killed and restarted"
		fi
	done
}

echo "== soak: $SECS s, 3 users' jobs on $NODES daemons, with faults"
for u in 0 1 2; do
	run_user "$u" &
	CHILD_PIDS+=($!)
done
inject >"$T/soak/faults" 2>&1 &
injector=$!
CHILD_PIDS+=($injector)
wait "${CHILD_PIDS[@]}" 2>/dev/null
grep -c . "$T/soak/faults" >/dev/null &&
    echo "faults: $(grep -c 'killed$' "$T/soak/faults") ranks killed," \
    "$(grep -c 'rank pid .* stopped' "$T/soak/faults") stopped," \
    "$(grep -c 'daemon .* stopped' "$T/soak/faults") daemon stops," \
    "$(grep -c 'restarted' "$T/soak/faults") daemon restarts"

# What the ranks said.
ops=0 elems=0 wrong=0 hangs=0 faulted=0 clean=0 unnamed=0 jobs=0
for f in "$T"/soak/*.r*; do
	read -r o e w < <(awk '/ ops verified, / { print $4, $7, $9 }' "$f")
	ops=$((ops + ${o:-0}))
	elems=$((elems + ${e:-0}))
	wrong=$((wrong + ${w:-0}))
	case $(tail -n 1 "$f") in
	"exit 0") clean=$((clean + 1)) ;;
	"exit 124") hangs=$((hangs + 1)); echo "hang: $f: $(head -n 3 "$f")" ;;
	"exit 137"|"exit 143") faulted=$((faulted + 1)) ;;	# killed here
	"exit 2")
		faulted=$((faulted + 1))
		grep -Eq 'failed: MCCL_ERR_[A-Z_]+: .{10,}|init|buffers' "$f" ||
		    { unnamed=$((unnamed + 1)); echo "no named error: $f: $(cat "$f")"; } ;;
	*) [ "$(tail -n 1 "$f")" = "exit 1" ] || {
		unnamed=$((unnamed + 1)); echo "unexpected end: $f: $(tail -n 3 "$f")"; } ;;
	esac
done
jobs=$(ls "$T"/soak/*.r0 2>/dev/null | wc -l)
echo "soak: $jobs jobs, $ops rank-operations verified ($elems elements)," \
    "$wrong wrong, $hangs hangs; ranks: $clean ended well, $faulted failed" \
    "by a fault"
[ "$wrong" = 0 ] && ok "soak: no wrong result in $ops rank-operations" ||
    bad "soak: $wrong wrong results"
[ "$hangs" = 0 ] && ok "soak: no rank hung" || bad "soak: $hangs ranks hung"
[ "$unnamed" = 0 ] && ok "soak: every failure came with a named error" ||
    bad "soak: $unnamed ranks ended without a named error"
[ "$ops" -gt 0 ] && [ "$clean" -gt 0 ] &&
    ok "soak: jobs ran to the end beside the faults ($clean ranks)" ||
    bad "soak: no job ran to its end"

# The daemons after: every one up, no job left, memory and descriptors.
wait_cluster $NODES s || bad "soak: the cluster did not come back together"
sleep 3.5	# failed jobs' links linger 3 s; the memory trim comes at 2 s
for i in $(seq 0 $((NODES - 1))); do
	p=${DAEMON_PIDS[$i]}
	j=$("$B/mcclctl" -s "$T/s$i.sock" -j status 2>/dev/null |
	    sed -n 's/.*"jobs": \([0-9]*\).*/\1/p')
	m=$(anon_kb "$p")
	f=$(fds "$p")
	echo "daemon s$i: anonymous memory ${mem0[$i]} -> $m kB," \
	    "descriptors ${fd0[$i]} -> $f, jobs left ${j:-?}"
	[ "${j:-1}" = 0 ] && ok "soak: s$i has no job left" ||
	    bad "soak: s$i has ${j:-?} jobs left"
	[ "$f" -le $((fd0[i] + 2)) ] &&
	    ok "soak: s$i holds its starting descriptors (${fd0[$i]} -> $f)" ||
	    bad "soak: s$i holds $f descriptors, ${fd0[$i]} at start"
	[ "$m" -le $((mem0[i] + 32768)) ] &&
	    ok "soak: s$i gave its jobs' memory back (${mem0[$i]} -> $m kB)" ||
	    bad "soak: s$i holds $m kB, ${mem0[$i]} at start"
done
summary
