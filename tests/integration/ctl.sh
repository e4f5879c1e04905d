# ctl.sh: mcclctl against the running test cluster (sourced by run.sh).
# Columns that change from run to run (ports, ids, times) are cut away;
# the rest is compared exactly.

expect_output() {	# NAME EXPECTED ACTUAL
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		bad "$1"
		diff <(echo "$2") <(echo "$3") | head -n 20
	fi
}

echo "== mcclctl"
ctl() { "$B/mcclctl" -s "$T/n$1.sock" "${@:2}"; }

expect_output "mcclctl status" "node:         n1 (index 1)
cluster size: 3
peers up:     2/2" "$(ctl 1 status | grep -E '^(node|cluster size|peers up):')"

expect_output "mcclctl peers" "NODE INDEX STATE
n0 0 up
n1 1 self
n2 2 up" "$(ctl 1 peers | awk '{ print $1, $2, $4 }')"

ctl 1 -j peers >"$T/peers.json"
n=$(grep -c '"state": "up"' "$T/peers.json")
expect_output "mcclctl -j peers: two peers up" 2 "$n"

# A job held open across two nodes, seen from n0 while it runs.
spawn 0 ctljob 2 0 hold 1500
h0=$LAST_PID
spawn 2 ctljob 2 1 hold 1500
h1=$LAST_PID
deadline=$((SECONDS + 10))
until ctl 0 jobs | grep -q '^ctljob .* ready'; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
expect_output "mcclctl jobs" "JOB STATE RANKS(here/total) NODES OPS
ctljob ready 1/2 2 1" "$(ctl 0 jobs | awk '{ print $1, $3, $4, $5, $6 }')"
expect_output "mcclctl -j jobs" '"name": "ctljob",
"nranks": 2,
"state": "ready",' "$(ctl 0 -j jobs | grep -E '"(name|nranks|state)"' | sed 's/^ *//')"
wait "$h0" && wait "$h1" || bad "held job"

out=$("$B/mcclctl" -s "$T/nobody.sock" status 2>&1)
rc=$?
expect_output "mcclctl: no daemon exits 2" 2 "$rc"
case "$out" in
*"$T/nobody.sock"*) ok "mcclctl: no daemon names the socket" ;;
*) bad "mcclctl: no daemon names the socket: $out" ;;
esac
"$B/mcclctl" -s "$T/n0.sock" frobnicate >/dev/null 2>&1
expect_output "mcclctl: unknown command exits 2" 2 "$?"
