# ports.sh: free_ports, for the tests (tests/integration/lib.sh) and the
# benchmark (tools/bench/bench.sh); sourced by both.

# free_ports N: a base port with N free consecutive TCP ports.  Below the
# kernel's ephemeral range, since outgoing connections take their local
# ports from it and one could sit on a port between this check and the
# daemon's bind; and used by no TCP socket, listening or not.
# MCCL_TEST_PORTS=LO-HI narrows the range: parts of `make check` that run
# at once each get their own (tests/check.sh), so no two pick one port.
free_ports() {
	local n=$1 base lo=10000 hi tries=0 used
	read -r hi _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null ||
	    hi=32768
	if [[ ${MCCL_TEST_PORTS:-} =~ ^([0-9]+)-([0-9]+)$ ]]; then
		lo=${BASH_REMATCH[1]}
		[ "${BASH_REMATCH[2]}" -ge "$hi" ] || hi=${BASH_REMATCH[2]}
	fi
	[ "$hi" -gt $((lo + 2 * n)) ] || { lo=10000; hi=32768; }
	used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
	while :; do
		base=$((lo + RANDOM % (hi - lo - n)))
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
