#!/usr/bin/env bash
# exports.sh BUILD_DIR: libmccl.so exports exactly the functions mccl.h
# declares, nothing of its internals (proto_*, conn_*, spin_*...), and
# libmccl.a's global symbols are the same.
set -u
B=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
# Declarations start at column 0 with their type; comments do not.
declared=$(grep -E '^[a-z].*\<mccl_[a-z_]+\(' "$top/libclient/mccl.h" |
    grep -oE '\<mccl_[a-z_]+\(' | tr -d '(' | sort -u)
if [ -z "$declared" ]; then
	echo "FAIL exports: no function found in mccl.h"
	exit 1
fi
fail=0
# same LABEL SYMBOLS: one ok, or a FAIL naming each difference.
same() {
	if [ "$declared" = "$2" ]; then
		echo "ok   $1 exports the $(wc -l <<<"$declared") functions of mccl.h, nothing else"
		return
	fi
	fail=1
	echo "FAIL $1's exports differ from mccl.h's functions:"
	diff <(echo "$declared") <(echo "$2") | grep '^>' |
	    sed 's/^> /    exported, not declared: /'
	diff <(echo "$declared") <(echo "$2") | grep '^<' |
	    sed 's/^< /    declared, not exported: /'
}
same libmccl.so "$(nm -D --defined-only "$B/libmccl.so.0" |
    awk '{ print $3 }' | sort -u)"
same libmccl.a "$(nm -g --defined-only "$B/libmccl.a" |
    awk 'NF == 3 { print $3 }' | sort -u)"
exit $fail
