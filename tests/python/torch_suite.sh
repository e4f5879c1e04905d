#!/usr/bin/env bash
# torch_suite.sh BUILD_DIR BACKEND WORLD_SIZE [-g] [-k PATTERN]...: PyTorch's
# own distributed tests (torch_suite.py) on 2 daemons on loopback, ranks
# spread over them.  -g opens the gates that name gloo; SUITE_SHARD=I/N
# runs every N-th test from the I-th (torch_suite.py).  Prints a line per
# test ("ok", "FAIL", "skip" and its name; a skip, its reason), then "N
# passed, N failed, N skipped"; exits 1 if one failed.  SUITE_TIMEOUT
# (seconds, default 3000) bounds the run; the tests that ended by then are
# still reported.  Cleans up as the other tests do (tests/integration/lib.sh).
set -u
B=$(cd "${1:-build}" && pwd)
BACKEND_ARG=$2 WS=$3
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
. "$TOP/tests/integration/lib.sh"
OPEN=0
if [ "${1:-}" = -g ]; then
	OPEN=1
	shift
fi
export PYTHONPATH="$TOP/libclient/python:$HERE/shim"
export MCCL_LIBRARY="$B/libmccl.so.0" GLOO_SOCKET_IFNAME=lo
LOG_LEVEL=warning cluster_up 2 >/dev/null || { echo "FAIL cluster"; exit 1; }
mkdir -p "$T/torch"
(cd "$T" && BACKEND=$BACKEND_ARG WORLD_SIZE=$WS TEMP_DIR="$T/torch" \
    OPEN_GATES=$OPEN MCCL_SOCKETS="$T/n0.sock,$T/n1.sock" \
    timeout "${SUITE_TIMEOUT:-3000}" "$PY" "$HERE/torch_suite.py" -v "$@") >"$T/suite.out" 2>&1
rc=$?
# unittest -v: "test_x (__main__.Class.test_x) ... ok|FAIL|ERROR|skipped"
awk '
/^test_[A-Za-z0-9_]+ \(/ { name = $1 }
name != "" && / \.\.\. |^(ok|FAIL|ERROR|skipped)/ {
	if ($0 ~ /\.\.\. ok$|^ok$/) { print "ok   " name; p++; name = "" }
	else if ($0 ~ /\.\.\. (FAIL|ERROR)$|^(FAIL|ERROR)$/) {
		print "FAIL " name; f++; name = "" }
	else if ($0 ~ /skipped/) {	# with its reason, where torch gives one
		r = $0; sub(/.*skipped */, "", r)
		print "skip " name (r == "" ? "" : " " r); s++; name = "" }
}
END { printf "%d passed, %d failed, %d skipped\n", p, f, s }
' "$T/suite.out" >"$T/summary"
cat "$T/summary"
if [ $rc -ne 0 ] && ! grep -q "^FAIL " "$T/summary"; then
	echo "FAIL the suite itself: exit $rc"
	tail -n 30 "$T/suite.out"
	exit 1
fi
grep -q "^FAIL " "$T/summary" && { grep -B2 -A60 "^ERROR: \|^FAIL: " \
    "$T/suite.out" | head -n 120; exit 1; }
exit 0
