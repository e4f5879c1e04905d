# lazylinks.sh: a job starts with the links of its ring neighbours and of
# recursive doubling's partners; lane 0's others are made on first use
# (daemon/engine/engine.c, engine_links_on_use), inside the op whose
# algorithm first talks over them (sourced by run.sh, section matrix).
# Its own 6 daemons z0..z5 (DAEMON_PIDS 90 to 95; not l0..: liveness.sh's
# l0..l2 append to the same logs and look there for peers gone down), one
# lane a pair: z0 starts with 4 links (z1 and z5, z2 and z4); recursive
# doubling adds none, the direct exchange every node; every algorithm and
# collective gives the right results over them.

echo "== data links made on first use (6 nodes, one lane)"
cluster_up 6 z 90 '"streams_per_peer": 1,' || bad "the z cluster did not come up"

# lane_links NODE: z<NODE>'s lane links open.
lane_links() {
	"$B/mcclctl" -s "$T/z$1.sock" metrics |
	    awk '$1 == "mccl_data_links{kind=\"lane\"}" { print $2 }'
}

# hold_links NAME JOB ALGO [allreduce]: run a job of one rank on each
# node that does one barrier (or allreduce, by ALGO) and stays 1.5 s;
# z0's lane links once the op was over in SEEN.
hold_links() {
	local job=$2 algo=$3 i pids=() rc=0
	for i in 0 1 2 3 4 5; do
		MCCL_ALGO=$algo NODE_PREFIX=z spawn "$i" "$job" 6 "$i" hold 1500 \
		    ${4:+"$4"}
		pids+=("$LAST_PID")
	done
	sleep 0.8
	SEEN=$(lane_links 0)
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	[ $rc = 0 ] || { bad "$1: a rank failed"; cat "$T/$job".r*.out; }
}

hold_links "a barrier" lzb auto
[ "$SEEN" = 4 ] && ok "a job's start: z0 links its ring neighbours and \
doubling's partners (4 links)" ||
    bad "a job's start: z0 has $SEEN lane links, not 4"
hold_links "doubling" lzd doubling allreduce
[ "$SEEN" = 4 ] &&
    ok "recursive doubling adds no link: its partners came at the start" ||
    bad "recursive doubling: z0 has $SEEN lane links, not 4"
hold_links "direct" lzx direct allreduce
[ "$SEEN" = 5 ] && ok "the direct exchange links z0 to every node (5 links)" ||
    bad "the direct exchange: z0 has $SEEN lane links, not 5"

for algo in ring doubling rabenseifner direct tree; do
	MCCL_ALGO=$algo NODE_PREFIX=z run_job "6 nodes by $algo, links made \
on first use: every collective right" "jlz$algo" "0 1 2 3 4 5" collectives
done
daemons_stop 90 6
