#!/usr/bin/env bash
# mesh.sh: the control plane at scale: N daemons on this host's loopback
# (tools/cluster.sh), one rank each, and what they cost.  Measures, into
# DIR/mesh.txt (one "key=value" line each):
#   formation   from the first daemon's start until every daemon sees the
#               N - 1 others (mcclctl status, polled one daemon at a time),
#               and last_peer_up_s: until the last peer came up by the
#               daemons' own clocks (whole seconds)
#   idle        each daemon's CPU over 10 s with no job, its memory,
#               descriptors and sockets
#   job         a job over all N: launch to the last rank's exit, a few
#               small checked allreduces (mccl-perf), the sizes' times
#   ctl         mcclctl status, peers, jobs, job (while the job runs) and
#               metrics on node 0: exit status, reply bytes, seconds
# Usage: mesh.sh [-n N] [-s STREAMS] [-o DIR]   (default 512, auto, a new
#        directory under /tmp)
# Every daemon and rank is stopped on exit, also on INT and TERM.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/procstat.sh"
top=$here/../..
B=${BUILD:-$top/build}
N=512 STREAMS= OUT=

usage() {
	echo "usage: mesh.sh [-n N] [-s STREAMS] [-o DIR]" >&2
	exit 2
}

while getopts "n:s:o:" ch; do
	case $ch in
	n) N=$OPTARG; [[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 2 ] || usage ;;
	s) STREAMS=$OPTARG; [[ $STREAMS =~ ^[1-8]$ ]] || usage ;;
	o) OUT=$OPTARG ;;
	*) usage ;;
	esac
done
D=$(mktemp -d /tmp/mccl-mesh.XXXXXX) || exit 2
OUT=${OUT:-$D/out}
mkdir -p "$OUT" || exit 2
RES=$OUT/mesh.txt
: >"$RES"
RANKS=()

cleanup() {
	local p
	for p in "${RANKS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	"$top/tools/cluster.sh" stop "$D" >/dev/null 2>&1
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
ctl() { "$B/mcclctl" -s "$D/n$1.sock" "${@:2}"; }

# stats NAME: every daemon's CPU over 10 s, memory, descriptors and
# sockets (procstat.sh): the largest of each, and the mean CPU.
stats() {
	local i t0=()
	for ((i = 0; i < N; i++)); do
		t0+=("$(proc_ticks "$(cat "$D/n$i.pid")")")
	done
	sleep 10
	for ((i = 0; i < N; i++)); do
		proc_line "$(cat "$D/n$i.pid")" "${t0[$i]}" 10
	done | tr '=' ' ' | awk -v name="$1" -v n="$N" '
	    { for (k = 1; k < NF; k += 2) if ($(k + 1) > max[$k])
		max[$k] = $(k + 1); cpu += $8 }
	    END { printf "%s daemons=%d cpu_pct_max=%s cpu_pct_mean=%.3f " \
		"rss_kb_max=%s fds_max=%s sockets_max=%s\n", name, n,
		max["cpu_pct"], cpu / NR, max["rss_kb"], max["fds"],
		max["sockets"] }' | tee -a "$RES"
}

# ctl_probe WHAT ARGS...: mcclctl ARGS on node 0, its exit status, reply
# size and time.
ctl_probe() {
	local what=$1 t0 rc
	shift
	t0=$(now)
	ctl 0 "$@" >"$OUT/ctl.$what.out" 2>&1
	rc=$?
	printf 'ctl what=%s rc=%d bytes=%d seconds=%s\n' "$what" "$rc" \
	    "$(wc -c <"$OUT/ctl.$what.out")" "$(since "$t0")" | tee -a "$RES"
}

ulimit -n "$(ulimit -Hn)" 2>/dev/null
t0=$(now)
CLUSTER_WAIT_S=300 CLUSTER_CONF="${STREAMS:+\"streams_per_peer\": $STREAMS, }\"log_level\": \"warning\", \"heartbeat_timeout_ms\": 15000" \
    "$top/tools/cluster.sh" start "$N" "$D" >"$OUT/start.log" 2>&1 || {
	echo "mesh.sh: the $N daemons did not form their mesh: see $OUT" >&2
	cp "$D"/n0.log "$OUT/" 2>/dev/null
	exit 1
}
# The wait above polls the daemons one by one, which on a loaded host
# takes long itself: the daemons' own clocks say when the last peer came
# up (mcclctl peers "since", whole seconds).
# Each daemon's latest as one short line: 8 replies of 47 KB written to
# one pipe at once interleave, and a number cut by another's bytes read as
# 10^17 seconds.
last_up=$(for ((i = 0; i < N; i++)); do echo "$D/n$i.sock"; done |
    xargs -P 8 -I{} sh -c '"$0" -s "$1" -j peers 2>/dev/null | awk \
    -F"[:,]" "/\"since\"/ { v = \$2 + 0; if (v > m) m = v } END { print m + 0 }"' \
    "$B/mcclctl" {} | awk '$1 > m { m = $1 } END { print m + 0 }')
echo "formation daemons=$N seconds=$(since "$t0") last_peer_up_s=$(awk \
    -v a="$t0" -v b="${last_up:-0}" 'BEGIN { printf "%.0f", b - a }')" |
    tee -a "$RES"
stats idle

# The job: N ranks, one per daemon, in the background; ctl while it runs.
t0=$(now)
for ((i = 0; i < N; i++)); do
	MCCL_SOCKET="$D/n$i.sock" "$B/mccl-perf" --nprocs 1 \
	    --total "$N" --first "$i" --job mesh -b 8 -e 64K -f 8 -n 20 -w 2 >"$D/rank$i.log" 2>&1 &
	RANKS+=("$!")
done
for _ in $(seq 600); do
	ctl 0 -j job mesh >/dev/null 2>&1 && break
	sleep 0.1
done
ctl_probe job job mesh
rc=0
for p in "${RANKS[@]}"; do
	wait "$p" || rc=1
done
RANKS=()
echo "job ranks=$N rc=$rc seconds=$(since "$t0")" | tee -a "$RES"
cp "$D/rank0.log" "$OUT/job.rank0.log"
grep -h "wrong\|rror" "$D"/rank*.log | grep -v "#wrong\|Out of bounds" |
    head -n 5 >"$OUT/job.errors"
ctl_probe status status
ctl_probe peers peers
ctl_probe jobs jobs
ctl_probe metrics metrics
stats after-job
# Warnings and errors (syslog priorities 0-4), node names and numbers
# masked so that alike lines count together.
grep -h '^<[0-4]>' "$D"/n*.log | sed -E 's/\bn[0-9]+\b/nN/g; s/[0-9]+/#/g' |
    sort | uniq -c | sort -rn | head -n 20 >"$OUT/daemon-warnings.txt"
exit $rc
