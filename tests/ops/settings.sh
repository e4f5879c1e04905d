#!/usr/bin/env bash
# settings.sh BUILD_DIR: the daemon's table of keys is the one source: the
# committed config/mccld.conf.keys is what `mccld -k` prints from it, and
# mccld.conf(5) documents every key of it, of the same type, with its
# default (numbers), and no key it lacks.
set -u
B=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
man=$top/man/mccld.conf.5
fail=0
bad() { echo "FAIL $*"; fail=1; }

if diff <("$B/mccld" -k) "$top/config/mccld.conf.keys" >/dev/null; then
	echo "ok   config/mccld.conf.keys is what mccld -k prints"
else
	bad "config/mccld.conf.keys differs from mccld -k (run: build/mccld -k >config/mccld.conf.keys):"
	diff <("$B/mccld" -k) "$top/config/mccld.conf.keys" | head -n 10
fi
# Each key: ".It Cm KEY Pq TYPE", and a number's "Default: N" before the
# next key.
keys=$("$B/mccld" -k | grep -v '^#' | awk '{ print $1 }')
n=0
while IFS= read -r line; do
	# mccld -k's columns: "%-28s %-17s %-25s %s"
	key=$(cut -c1-28 <<<"$line" | sed 's/ *$//')
	type=$(cut -c30-46 <<<"$line" | sed 's/ *$//')
	dflt=$(cut -c48-72 <<<"$line" | sed 's/ *$//')
	para=$(awk -v k="$key" '
	    /^\.It Cm / { on = ($3 == k) }
	    on' "$man")
	head=$(head -n 1 <<<"$para")
	n=$((n + 1))
	if [ "$head" != ".It Cm $key Pq $type" ]; then
		bad "mccld.conf(5): \"$key\" is \"${head:-missing}\", not \".It Cm $key Pq $type\""
	elif [ "$type" = integer ] && ! grep -q "^Default: $dflt\b" <<<"$para"; then
		bad "mccld.conf(5): \"$key\" does not say \"Default: $dflt\""
	fi
done < <("$B/mccld" -k | grep -v '^#')
for k in $(sed -n 's/^\.It Cm \([a-z_]*\) Pq .*/\1/p' "$man"); do
	grep -qx "$k" <<<"$keys" || bad "mccld.conf(5) documents \"$k\", which mccld does not know"
done
[ $fail = 0 ] && echo "ok   mccld.conf(5) documents the $n keys of the table, with their types and defaults"
exit $fail
