#!/usr/bin/env bash
# help.sh BUILD_DIR: every program answers --help (and -h) with its usage
# on standard output and exit 0.
set -u
B=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
fail=0
for prog in "$B/mccld" "$B/mcclctl" "$B/mccl-perf" "$top/tools/mcclrun"; do
	for opt in --help -h; do
		out=$("$prog" "$opt" 2>/dev/null)
		rc=$?
		if [ $rc = 0 ] && grep -qi "^usage: $(basename "$prog")" <<<"$out"; then
			echo "ok   $(basename "$prog") $opt: its usage, exit 0"
		else
			echo "FAIL $(basename "$prog") $opt: exit $rc: $(head -n 1 <<<"$out")"
			fail=1
		fi
	done
done
exit $fail
