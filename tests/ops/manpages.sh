#!/usr/bin/env bash
# manpages.sh: every function mccl.h declares is named in libmccl(3)'s NAME
# section (so `man FUNCTION` finds the page through the links `make
# install` makes from the same list) and has its synopsis line there.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
man=$top/man/libmccl.3
fail=0 n=0
for f in $(grep -oE '\bmccl_[a-z0-9_]+\(' "$top/libclient/mccl.h" | tr -d '(' |
    sort -u); do
	n=$((n + 1))
	grep -qE "^\.Nm $f( ,)?$" "$man" ||
	    { echo "FAIL libmccl(3): NAME lacks $f"; fail=1; }
	grep -qE "^\.(Fn $f |Fo $f$)" "$man" ||
	    { echo "FAIL libmccl(3): no synopsis of $f"; fail=1; }
done
[ $fail = 0 ] && echo "ok   libmccl(3) names and shows all $n functions of mccl.h"
exit $fail
