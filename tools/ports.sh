# ports.sh: free_ports, for the tests (tests/integration/lib.sh) and the
# benchmark (tools/bench/bench.sh); sourced by both.

# free_ports N: a base port with N free consecutive TCP ports.  Below the
# kernel's ephemeral range, since outgoing connections take their local
# ports from it and one could sit on a port between this check and the
# daemon's bind; and used by no TCP socket, listening or not.
free_ports() {
	local n=$1 base lo tries=0 used
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null ||
	    lo=32768
	[ "$lo" -gt $((10000 + 2 * n)) ] || lo=32768
	used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
	while :; do
		base=$((10000 + RANDOM % (lo - 10000 - n)))
		# shellcheck disable=SC2086
		if ! printf '%s\n' $used | awk -v b="$base" -v n="$n" \
		    '$1 >= b && $1 < b + n { f = 1 } END { exit !f }'; then
			echo "$base"
			return
		fi
		tries=$((tries + 1))
		[ $tries -lt 50 ] || { echo "$base"; return; }
	done
}
