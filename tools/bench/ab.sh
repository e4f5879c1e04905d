#!/usr/bin/env bash
# ab.sh [-r rounds] [-b min] [-e max] [-n iters] [-p ranks] [-m memory]
# [-P partbytes] BUILD_A BUILD_B: one build's mccl-perf against another's,
# on a 2-node loopback cluster (-p ranks per node, default 1; -m shared or
# host, as mccl-perf -M; -P: each buffer as parts in flight together, as
# mccl-perf -P and the torch backend; allreduce float32 sum, out of
# place), in alternating rounds (A B, B A, ...) so that drift on a shared
# machine falls on both.
# Prints, per size, the median time of each build over the rounds and
# B / A.  Uses the test harness's cluster (tests/integration/lib.sh):
# everything it starts is stopped, and its directory removed, at exit.
set -u
ROUNDS=4
MIN=1K
MAX=64M
ITERS=20
PER_NODE=1
MEMORY=shared
PARTS=()
while getopts "r:b:e:n:p:m:P:" o; do
	case $o in
	r) ROUNDS=$OPTARG ;;
	b) MIN=$OPTARG ;;
	e) MAX=$OPTARG ;;
	n) ITERS=$OPTARG ;;
	p) PER_NODE=$OPTARG ;;
	m) MEMORY=$OPTARG ;;
	P) PARTS=(-P "$OPTARG") ;;
	*) echo "usage: ab.sh [-r rounds] [-b min] [-e max] [-n iters]" \
	    "[-p ranks] [-m memory] [-P partbytes] BUILD_A BUILD_B" >&2
	   exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 2 ] || { echo "usage: ab.sh [options] BUILD_A BUILD_B" >&2; exit 2; }
BUILDS=("$(cd "$1" && pwd)" "$(cd "$2" && pwd)")
LOG_LEVEL=warning
. "$(dirname "$0")/../../tests/integration/lib.sh"

# one_run BUILD_INDEX ROUND: times (us) by size into $T/times.I.
one_run() {
	local i=$1 round=$2 r pids=()
	B=${BUILDS[$i]}
	# the daemons' own lanes (auto), not the tests' two
	cluster_up 2 n 0 '"streams_per_peer": "auto",' >/dev/null ||
	    { echo "ab: cluster $i did not start" >&2; exit 1; }
	for r in 0 1; do
		MCCL_SOCKET="$T/n$r.sock" timeout 600 "$B/mccl-perf" \
		    --nprocs "$PER_NODE" --total $((2 * PER_NODE)) \
		    --first $((r * PER_NODE)) --job "ab$i.$round" \
		    -b "$MIN" -e "$MAX" -f 4 --memory "$MEMORY" \
		    ${PARTS[@]+"${PARTS[@]}"} \
		    -n "$ITERS" -w 5 -c 0 >"$T/perf.$i.$round.$r" 2>&1 &
		pids+=($!)
		CHILD_PIDS+=($!)
	done
	wait "${pids[@]}" || { echo "ab: mccl-perf of build $i failed" >&2;
	    cat "$T/perf.$i.$round.0" >&2; exit 1; }
	awk '$1 ~ /^[0-9]+$/ { print $1, $6 }' "$T/perf.$i.$round.0" \
	    >>"$T/times.$i"
	cluster_down
}

for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
	for i in $order; do
		one_run "$i" "$round"
	done
done

echo "# ab.sh: ${BUILDS[0]} (A) against ${BUILDS[1]} (B), $ROUNDS rounds," \
    "2 nodes x $PER_NODE ranks, $MEMORY memory${PARTS[1]+, parts of ${PARTS[1]}}"
echo "# bytes    A_median_us    B_median_us    B/A"
awk '
FNR == 1 { f++ }
{ t[f, $1, ++n[f, $1]] = $2; sizes[$1] = 1 }
function median(f, s,   k, i, j, v, m) {
	m = n[f, s]
	for (i = 1; i <= m; i++) v[i] = t[f, s, i]
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			k = v[j]; v[j] = v[j - 1]; v[j - 1] = k
		}
	return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
END {
	for (s in sizes) order[++ns] = s + 0
	for (i = 2; i <= ns; i++)
		for (j = i; j > 1 && order[j - 1] > order[j]; j--) {
			k = order[j]; order[j] = order[j - 1]; order[j - 1] = k
		}
	for (i = 1; i <= ns; i++) {
		a = median(1, order[i]); b = median(2, order[i])
		printf "%10d %14.1f %14.1f %6.3f\n", order[i], a, b, b / a
	}
}' "$T/times.0" "$T/times.1"
