# heartbeats.sh: the sparse heartbeat overlay of a cluster larger than
# heartbeat_mesh_max_nodes (daemon/control/liveness.c; sourced by run.sh,
# section faults).  Its own 10 daemons h0..h9 (DAEMON_PIDS 60 to 69) with
# heartbeat_mesh_max_nodes 4: each node heartbeats the 6 at ring distances
# 1, 2 and 4, and the nodes of its jobs; a frozen node is called down by
# its watchers, and by every other node once it does not answer them.

hbase=$(free_ports 10)
hnodes=""
for i in $(seq 0 9); do
	hnodes="$hnodes{\"name\": \"h$i\", \"address\": \"127.0.0.1:$((hbase + i))\"}"
	[ "$i" = 9 ] || hnodes="$hnodes, "
done
for i in $(seq 0 9); do
	cat >"$T/h$i.conf" <<EOC
{ $TRANSPORT_KEY "node": "h$i", "socket": "$T/h$i.sock", "log_level": "debug",
  "nodes": [$hnodes], "init_timeout_ms": 10000, "connect_timeout_ms": 3000,
  "heartbeat_interval_ms": 300, "heartbeat_timeout_ms": 1500,
  "heartbeat_mesh_max_nodes": 4 }
EOC
	"$B/mccld" -c "$T/h$i.conf" >>"$T/h$i.log" 2>&1 &
	DAEMON_PIDS[$((60 + i))]=$!
done

# hb_peers NODE FIELD VALUE: the names of NODE's peers whose FIELD is
# VALUE (JSON: true, "up", ...), in index order.
hb_peers() {
	"$B/mcclctl" -s "$T/h$1.sock" -j peers 2>/dev/null | python3 -c '
import json, sys
want = json.loads(sys.argv[2])
print(" ".join(p["name"] for p in json.load(sys.stdin)["peers"]
    if not p["self"] and p[sys.argv[1]] == want))' "$2" "$3"
}

# hb_up_all N [SKIP]: every h daemon but SKIP sees N peers up (15 s).
hb_up_all() {
	local i deadline=$((SECONDS + 15))
	for i in $(seq 0 9); do
		[ "$i" != "${2:-}" ] || continue
		until "$B/mcclctl" -s "$T/h$i.sock" -j status 2>/dev/null |
		    grep -q "\"peers_up\": $1,"; do
			[ $SECONDS -lt $deadline ] || return 1
			sleep 0.1
		done
	done
}

# hb_tx NODE PEER: control bytes NODE has sent PEER.
hb_tx() {
	"$B/mcclctl" -s "$T/h$1.sock" -j peers | python3 -c '
import json, sys
print([p["tx_bytes"] for p in json.load(sys.stdin)["peers"]
    if p["name"] == sys.argv[1]][0])' "h$2"
}

echo "== heartbeats past heartbeat_mesh_max_nodes: the sparse overlay"
if hb_up_all 9; then
	ok "10 daemons meshed, heartbeat_mesh_max_nodes 4"
else
	bad "the h cluster did not come up"
fi
got=$(hb_peers 0 heartbeats true)
expect_output "h0 heartbeats the nodes at ring distances 1, 2 and 4" \
    "h1 h2 h4 h6 h8 h9" "$got"
tx3=$(hb_tx 0 3)
tx1=$(hb_tx 0 1)
sleep 1.5
[ "$(hb_tx 0 3)" = "$tx3" ] && [ "$(hb_tx 0 1)" -gt "$tx1" ] &&
    ok "idle, h0 sends h3 nothing and h1 its heartbeats" ||
    bad "h0 sent h3 $tx3 -> $(hb_tx 0 3) bytes, h1 $tx1 -> $(hb_tx 0 1)"

# A job over h0 and h3, which do not heartbeat each other idle: while it
# runs they do, and h3 frozen fails it on h0.
NODE_PREFIX=h spawn 0 hbjob 2 0 late 6000 MCCL_ERR_PEER_FAILED "node h3"
hj0=$LAST_PID
NODE_PREFIX=h spawn 3 hbjob 2 1 idle 20000
hj1=$LAST_PID
deadline=$((SECONDS + 10))
until case " $(hb_peers 0 heartbeats true) " in *" h3 "*) true ;;
    *) false ;; esac; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
[ $SECONDS -lt $deadline ] &&
    ok "h0 heartbeats h3 while their job runs" ||
    bad "h0 does not heartbeat h3 during their job: $(hb_peers 0 heartbeats true)"

kill -STOP "${DAEMON_PIDS[63]}"
t0=$(date +%s%N)
if hb_up_all 8 3; then
	ok "every node calls h3 down ($((($(date +%s%N) - t0) / 1000000)) ms \
after it froze; heartbeat timeout 1500 ms), and no other"
else
	bad "h3 frozen: the others' peers up:"
	for i in 0 1 2 4 5 6 7 8 9; do echo "h$i: $(hb_peers $i state '"up"')"; done
fi
wait "$hj0" && ok "h3 frozen: the job fails on h0 naming h3" ||
    { bad "the h0-h3 job"; cat "$T"/hbjob.r*.out; }
# h6 and h8 do not watch h3 and share no job with it: a watcher told them.
grep -q "node h3 is down: node h[0-9] heard nothing from it for" "$T/h6.log" &&
    grep -q "node h3 is down: node h[0-9] heard nothing from it for" \
    "$T/h8.log" &&
    ok "h6 and h8, which do not heartbeat h3, called it down on a \
watcher's word and their own unanswered pings" ||
    { bad "h6 or h8: why h3 is down"; grep -h "h3" "$T/h6.log" \
    "$T/h8.log" | tail -n 6; }
grep -q "node h3 is down: no heartbeat for" "$T/h4.log" &&
    ok "h4, a watcher of h3, found it silent itself" ||
    { bad "h4: why h3 is down"; grep "h3" "$T/h4.log" | tail -n 4; }

# h3 thaws and comes back; then h1 freezes past the timeout and thaws:
# whatever h1 finds silent on waking, no node but h1 goes down.
kill -CONT "${DAEMON_PIDS[63]}"
kill "$hj1" 2>/dev/null
wait "$hj1" 2>/dev/null
hb_up_all 9 && ok "h3 thawed, back in the cluster" || bad "h3 back"
for i in $(seq 0 9); do
	lines[$i]=$(wc -l <"$T/h$i.log")
done
kill -STOP "${DAEMON_PIDS[61]}"
sleep 3
kill -CONT "${DAEMON_PIDS[61]}"
hb_up_all 9 && ok "h1 frozen for 3 s and thawed, back in the cluster" ||
    bad "h1 back"
others=""
for i in 0 2 3 4 5 6 7 8 9; do
	others="$others$(tail -n +$((lines[i] + 1)) "$T/h$i.log" |
	    grep -o "node h[0-9] is down" | grep -v "node h1 " | sort -u)"
done
[ -z "$others" ] && ok "only h1 went down meanwhile" ||
    bad "h1's freeze took down others: $others"
for i in $(seq 0 9); do
	kill -0 "${DAEMON_PIDS[$((60 + i))]}" 2>/dev/null || bad "h$i died"
	kill -TERM "${DAEMON_PIDS[$((60 + i))]}" 2>/dev/null
done
