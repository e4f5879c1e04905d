#!/usr/bin/env bash
# demo.sh BUILD_DIR: a 3-node MCCL cluster on loopback, mccl-perf with two
# ranks on each node, the result table, `mcclctl jobs`, `peers` and
# `check`, then shutdown.
set -u
B=$(cd "${1:-build}" && pwd)
LOG_LEVEL=warning
. "$(dirname "$0")/../tests/integration/lib.sh"

echo "Starting 3 daemons (n0, n1, n2) on 127.0.0.1 in $T ..."
cluster_up 3 n 0 '"streams_per_peer": "auto",' || exit 1	# the default
for i in 0 1 2; do
	"$B/mcclctl" -s "$T/n$i.sock" status | sed -n '1,2p'
done
echo
echo "Running mccl-perf: 6 ranks, 2 on each node, allreduce float32 sum ..."
perf_pids=()
for i in 0 1 2; do
	MCCL_SOCKET="$T/n$i.sock" timeout 300 "$B/mccl-perf" --nprocs 2 \
	    --total 6 --first $((2 * i)) --job demo -b 8 -e 64M -f 4 -n 10 -w 3 -c 1 \
	    >"$T/perf$i.out" 2>&1 &
	perf_pids+=($!)
	CHILD_PIDS+=($!)
done
# Show the job while it runs.
deadline=$((SECONDS + 30))
until "$B/mcclctl" -s "$T/n0.sock" jobs 2>/dev/null | grep -q ready; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.2
done
echo
echo "\$ mcclctl jobs   (on n0, while the benchmark runs)"
"$B/mcclctl" -s "$T/n0.sock" jobs
rc=0
for p in "${perf_pids[@]}"; do
	wait "$p" || rc=1
done
echo
cat "$T/perf0.out"
if [ $rc -ne 0 ]; then
	echo "mccl-perf failed:"
	cat "$T"/perf1.out "$T"/perf2.out
	tail -n 20 "$T"/n*.log
fi
echo
echo "\$ mcclctl peers   (on n0)"
"$B/mcclctl" -s "$T/n0.sock" peers
echo
echo "\$ mcclctl check   (from n0: every pair of nodes, over data links)"
"$B/mcclctl" -s "$T/n0.sock" check || rc=1
cluster_down
echo "Daemons stopped."
exit $rc
