#!/usr/bin/env bash
# layers.sh BUILD_DIR: the daemon's calls go down only.  No object of the
# data plane (engine/, transport/) uses a symbol that an object of the
# control plane (control/) defines, and no source of theirs includes a
# control/ header.
set -u
B=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
obj=$B/obj/daemon
fail=0
ctl=$(for f in "$top"/daemon/control/*.c; do
	o=$obj/control/$(basename "${f%.c}").o
	nm --defined-only "$o" | awk '$2 ~ /^[TDBRC]$/ { print $3 }'
done | sort -u)
[ -n "$ctl" ] || { echo "FAIL layers: no control/ object in $obj"; exit 1; }
n=0
for f in "$top"/daemon/engine/*.c "$top"/daemon/transport/*.c; do
	layer=$(basename "$(dirname "$f")")
	o=$obj/$layer/$(basename "${f%.c}").o
	n=$((n + 1))
	up=$(nm -u "$o" | awk '{ print $2 }' | grep -Fx "$ctl" | tr '\n' ' ')
	if [ -n "$up" ]; then
		echo "FAIL $layer/$(basename "$f") calls up into control/: $up"
		fail=1
	fi
	if grep -q '#include "control/' "$f"; then
		echo "FAIL $layer/$(basename "$f") includes a control/ header"
		fail=1
	fi
done
[ $fail = 0 ] && echo "ok   the $n files of engine/ and transport/ call nothing of control/ and include none of its headers"
exit $fail
