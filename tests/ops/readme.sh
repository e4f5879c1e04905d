#!/usr/bin/env bash
# readme.sh BUILD_DIR: the README's commands run as typed.  Every block the
# README marks "<!-- runs: tests/ops/readme.sh -->" runs, in the README's
# order, in one shell at the top of the tree, with nothing set that the
# README does not set (env -i: the system's PATH, HOME a folder of ours for
# its ~, no PYTHONPATH or LD_LIBRARY_PATH), under set -e; what it started
# in the background is stopped at the end, whatever happens.  Then the
# README itself: no dates, no "session", under 500 lines.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
readme=$top/README.md
work=$(mktemp -d "${TMPDIR:-/tmp}/mccl-readme.XXXXXX")
fail=0
bad() { echo "FAIL $*"; fail=1; }

# The user's own daemon's folder (build/mccld's default socket): made and
# removed here, unless a daemon already uses it.
if [ "$(id -u)" = 0 ]; then own=/run/mccl; else own=/tmp/mccl-$(id -u); fi
own_made=0
[ -e "$own" ] || own_made=1
cleanup() {
	# the blocks' session (their background daemon), and cluster.sh's
	# daemons, which have sessions of their own
	[ -z "${runner:-}" ] || kill -TERM -- -"$runner" 2>/dev/null
	[ -d "$work/home/mccl-try" ] &&
	    BUILD="$top/build" "$top/tools/cluster.sh" stop "$work/home/mccl-try"
	sleep 0.5
	if [ $own_made = 1 ]; then
		rm -rf "$own"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The marked blocks: the indented lines after each marker.
awk '
	/^<!-- runs: tests\/ops\/readme.sh -->$/ { on = 1; seen = 0; next }
	on && /^    / { sub(/^    /, ""); print; seen = 1; next }
	on && /^$/ { if (seen) on = 0; next }
	on { on = 0 }
' "$readme" >"$work/blocks.sh"
n=$(grep -c . "$work/blocks.sh")
if [ -S "$own/mccld.sock" ]; then
	echo "(a daemon listens at $own/mccld.sock: the README's own daemon would meet it; not run)"
elif [ "$n" -lt 5 ]; then
	bad "README: only $n marked command lines"
else
	mkdir -p "$work/home"
	{ echo "set -e"; echo "trap 'kill \$(jobs -p) 2>/dev/null' EXIT"
	  cat "$work/blocks.sh"; } >"$work/run.sh"
	( cd "$top" && exec setsid env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	    HOME="$work/home" LANG=C.UTF-8 timeout 600 bash "$work/run.sh" \
	    >"$work/out" 2>&1 ) &
	runner=$!
	wait "$runner"
	rc=$?
	if [ $rc = 0 ] && [ "$(grep -c 'of 4: 10 (expected 10)' "$work/out")" -ge 8 ]; then
		ok_line="ok   the README's $n marked command lines run as typed (exit 0)"
		echo "$ok_line"
	else
		bad "the README's commands: exit $rc; the end of their output:"
		tail -n 25 "$work/out" | sed 's/^/     /'
	fi
fi

lines=$(wc -l <"$readme")
dated=$(grep -cE '20[0-9]{2}-[01][0-9]-[0-3][0-9]|[Ss]ession' "$readme")
[ "$dated" = 0 ] && echo "ok   README.md has no dates and no \"session\"" ||
    bad "README.md has $dated lines with a date or \"session\": $(grep -nE '20[0-9]{2}-[01][0-9]-[0-3][0-9]|[Ss]ession' "$readme" | head -n 3)"
[ "$lines" -lt 500 ] && echo "ok   README.md has $lines lines (under 500)" ||
    bad "README.md has $lines lines (500 at most)"
exit $fail
