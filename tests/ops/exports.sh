#!/usr/bin/env bash
# exports.sh BUILD_DIR: libmccl.so exports exactly the functions mccl.h
# declares, nothing of its internals (proto_*, conn_*, spin_*...).
set -u
B=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
# Declarations start at column 0 with their type; comments do not.
declared=$(grep -E '^[a-z].*\<mccl_[a-z_]+\(' "$top/libclient/mccl.h" |
    grep -oE '\<mccl_[a-z_]+\(' | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$B/libmccl.so.0" | awk '{ print $3 }' |
    sort -u)
if [ -z "$declared" ]; then
	echo "FAIL exports: no function found in mccl.h"
	exit 1
fi
if [ "$declared" = "$exported" ]; then
	echo "ok   libmccl.so exports the $(wc -l <<<"$declared") functions of mccl.h, nothing else"
	exit 0
fi
echo "FAIL libmccl.so's exports differ from mccl.h's functions:"
diff <(echo "$declared") <(echo "$exported") | sed -n 's/^[<>] /    /p;s/^[0-9].*//p'
diff <(echo "$declared") <(echo "$exported") | grep '^>' | sed 's/^> /    exported, not declared: /'
diff <(echo "$declared") <(echo "$exported") | grep '^<' | sed 's/^< /    declared, not exported: /'
exit 1
