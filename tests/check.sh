#!/usr/bin/env bash
# check.sh PART...: `make check`.  Runs each part (a make target of the
# Makefile) in turn, shows its output, and counts its results: a line
# "ok ..." passes, "FAIL ..." fails, check's "N%: Checks: N, Failures: F,
# Errors: E" adds N - F - E and F + E, and a part that fails without saying
# what counts one failure of its own.  Ends with each part's count and time,
# and one grand total line, "N passed, N failed"; exits 1 if anything failed.
set -u
MAKE_CMD=${MAKE:-make}
total_ok=0 total_bad=0
summary=""

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

# run PART: its output as it comes, then its count.
run() {
	local log start rc
	log=$(mktemp "${TMPDIR:-/tmp}/mccl-check.XXXXXX")
	echo "==== make $1"
	start=$SECONDS
	$MAKE_CMD --no-print-directory "$1" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	count "$1" "$log" "$rc" $((SECONDS - start))
	rm -f "$log"
}

for part in "$@"; do
	run "$part"
done
echo "==== make check"
printf '%s' "$summary"
echo "$total_ok passed, $total_bad failed"
[ "$total_bad" -eq 0 ]
