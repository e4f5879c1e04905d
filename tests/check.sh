#!/usr/bin/env bash
# check.sh [-j N] PART...: `make check`.  Runs the parts (make targets of
# the Makefile), up to N at once (1 by default), in the order given: the
# longest first, so the others fill the time beside it.  A part's output
# is kept in its own log and shown whole when it ends, with its result:
# a line "ok ..." passes, "FAIL ..." fails, check's "N%: Checks: N,
# Failures: F, Errors: E" adds N - F - E and F + E, and a part that fails
# without saying what counts one failure of its own.  Each part that runs
# beside others gets its own range of test ports (MCCL_TEST_PORTS,
# tools/ports.sh).  Ends with each part's count and time, and one grand
# total line, "N passed, N failed"; exits 1 if anything failed.
set -u
MAKE_CMD=${MAKE:-make}
JOBS=1
if [ "${1:-}" = -j ]; then
	JOBS=$2
	shift 2
fi
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "check.sh: -j wants a count" >&2; exit 2; }
PORT_LO=10000 PORT_SPAN=$(( (32000 - 10000) / JOBS ))
# The parts share the source tree, and some check that it stays as it was:
# no part leaves Python's byte code in it.
export PYTHONDONTWRITEBYTECODE=1
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/mccl-check.XXXXXX")
# Each part in a process group of its own (set -m): stopped whole, with
# what it started, if check.sh is.
set -m
stop_parts() {
	local pid
	for pid in "${!part_of[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
	wait
	rm -rf "$LOGDIR"
}
trap stop_parts EXIT
trap 'exit 130' INT TERM
total_ok=0 total_bad=0
summary=""
declare -A part_of=() slot_of=() start_of=()
free_slots=()
for ((i = 0; i < JOBS; i++)); do free_slots+=("$i"); done

tally() {	# LOG: "OK BAD" of its lines
	awk '
	/^ok / { ok++ }
	/^FAIL / { bad++ }
	/^[0-9]+%: Checks: / {
		gsub(",", ""); n = $3; f = $5; e = $7
		ok += n - f - e; bad += f + e
	}
	END { print ok + 0, bad + 0 }' "$1"
}

# count PART LOG RC TOOK: PART's results from its LOG into the totals and
# the summary (a part that failed without saying what counts one failure).
count() {
	local part=$1 log=$2 rc=$3 took=$4 ok bad
	read -r ok bad <<<"$(tally "$log")"
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		echo "FAIL make $part exited $rc"
		bad=1
	fi
	total_ok=$((total_ok + ok))
	total_bad=$((total_bad + bad))
	summary="$summary$(printf '  %-16s %6d passed, %d failed, %4d s' \
	    "$part" "$ok" "$bad" "$took")
"
}

# start PART: runs it in the background on the first free slot, its
# output to its log (and as it comes when parts run one at a time).
start() {
	local part=$1 slot=${free_slots[0]} log=$LOGDIR/$1.log pid
	free_slots=("${free_slots[@]:1}")
	export MCCL_TEST_PORTS="$((PORT_LO + slot * PORT_SPAN))-$((PORT_LO + \
	    (slot + 1) * PORT_SPAN - 1))"
	if [ "$JOBS" -eq 1 ]; then
		echo "==== make $part"
		( $MAKE_CMD --no-print-directory "$part" 2>&1 | tee "$log"
		  exit "${PIPESTATUS[0]}" ) &
	else
		echo "==== started make $part"
		$MAKE_CMD --no-print-directory "$part" >"$log" 2>&1 &
	fi
	pid=$!
	part_of[$pid]=$part
	slot_of[$pid]=$slot
	start_of[$pid]=$SECONDS
}

# reap: waits for a part to end, shows its output and counts it.
reap() {
	local pid rc part
	wait -n -p pid
	rc=$?
	part=${part_of[$pid]}
	if [ "$JOBS" -gt 1 ]; then
		echo "==== make $part"
		cat "$LOGDIR/$part.log"
	fi
	count "$part" "$LOGDIR/$part.log" "$rc" $((SECONDS - start_of[$pid]))
	free_slots+=("${slot_of[$pid]}")
	unset "part_of[$pid]" "slot_of[$pid]" "start_of[$pid]"
}

for part in "$@"; do
	[ "${#free_slots[@]}" -gt 0 ] || reap
	start "$part"
done
while [ "${#part_of[@]}" -gt 0 ]; do
	reap
done
echo "==== make check ($SECONDS s, $JOBS at once)"
printf '%s' "$summary"
echo "$total_ok passed, $total_bad failed"
[ "$total_bad" -eq 0 ]
