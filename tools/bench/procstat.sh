# procstat.sh: what a running process costs, for bench.sh and mesh.sh
# (sourced by both).

# proc_ticks PID: its CPU time so far (user and system), in clock ticks.
proc_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null
}

# proc_line PID TICKS SECONDS: "rss_kb=R fds=F sockets=S cpu_pct=C", its
# memory, descriptors and sockets now, and its CPU since proc_ticks gave
# TICKS, SECONDS ago, in percent of a core.
proc_line() {
	local pid=$1 t0=$2 s=$3
	printf 'rss_kb=%s fds=%s sockets=%s cpu_pct=%s\n' \
	    "$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status")" \
	    "$(find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l)" \
	    "$(find "/proc/$pid/fd" -mindepth 1 -lname 'socket:*' 2>/dev/null |
	    wc -l)" \
	    "$(awk -v t0="$t0" -v hz="$(getconf CLK_TCK)" -v s="$s" \
	    '{ printf "%.3f", ($14 + $15 - t0) / hz / s * 100 }' \
	    "/proc/$pid/stat")"
}
