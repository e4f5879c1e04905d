# liveness.sh: one stuck node or one abusive stranger must not stall the
# other daemons' main loops or fail jobs that do not involve it (sourced by
# run.sh, section faults).  Its own 3-node cluster l0..l2 (DAEMON_PIDS 50
# to 32), with a connect timeout well past the heartbeat timeout, so that
# a main loop waiting out a blocked connect would lose its peers.

lbase=$(free_ports 3)
for i in 0 1 2; do
	cat >"$T/l$i.conf" <<EOC
{ $TRANSPORT_KEY "node": "l$i", "socket": "$T/l$i.sock", "log_level": "debug",
  "nodes": [{"name": "l0", "address": "127.0.0.1:$lbase"},
            {"name": "l1", "address": "127.0.0.1:$((lbase + 1))"},
            {"name": "l2", "address": "127.0.0.1:$((lbase + 2))"}],
  "init_timeout_ms": 10000, "connect_timeout_ms": 6000,
  "heartbeat_interval_ms": 300, "heartbeat_timeout_ms": 1500 }
EOC
	"$B/mccld" -c "$T/l$i.conf" >>"$T/l$i.log" 2>&1 &
	DAEMON_PIDS[$((50 + i))]=$!
done

# lv_up N: every l daemon sees N peers up (10 s).
lv_up() {
	local i deadline=$((SECONDS + 10))
	for i in 0 1 2; do
		until "$B/mcclctl" -s "$T/l$i.sock" -j status 2>/dev/null |
		    grep -q "\"peers_up\": $1"; do
			[ $SECONDS -lt $deadline ] || return 1
			sleep 0.1
		done
	done
}

# lv_spawn NODE JOB NRANKS RANK ARGS...: spawn, on an l daemon.
lv_spawn() {
	NODE_PREFIX=l spawn "$@"
}

# lv_coordinator NAME: the node index that coordinates root's job NAME
# (job.c coordinator_of: FNV-1a over the name, seeded with the uid).
lv_coordinator() {
	local h=$((1469598103934665603 ^ $(id -u))) i c hi lo
	for ((i = 0; i < ${#1}; i++)); do
		printf -v c '%d' "'${1:i:1}"
		h=$(((h ^ c) * 1099511628211))
	done
	hi=$(((h >> 32) & 0xffffffff))
	lo=$((h & 0xffffffff))
	echo $(((hi % 3 * (4294967296 % 3) + lo) % 3))
}

echo "== liveness: a node frozen while a job opens its links"
lv_up 2 || bad "the l cluster did not come up"
# A job over l0 and l1 alone runs throughout and must not notice.
lv_spawn 0 lvsteady 2 0 steady 9000; st0=$LAST_PID
lv_spawn 1 lvsteady 2 1 steady 9000; st1=$LAST_PID
# A job over all three, coordinated by l0 or l1, whose last rank joins
# once l2 is frozen: l0 and l1 form it and connect to l2, whose kernel
# accepts but which never answers.  Their threads wait in the handshake.
for name in lvfrozen lvfrozen1 lvfrozen2 lvfrozen3 lvfrozen4; do
	[ "$(lv_coordinator "$name")" = 2 ] || break
done
lv_spawn 2 "$name" 3 0 idle 20000; fz0=$LAST_PID
lv_spawn 1 "$name" 3 1 expect-init MCCL_ERR_PEER_FAILED "l2"; fz1=$LAST_PID
sleep 1
kill -STOP "${DAEMON_PIDS[52]}"
lv_spawn 0 "$name" 3 2 expect-init MCCL_ERR_PEER_FAILED "l2"; fz2=$LAST_PID
t0=$SECONDS
wait "$fz1" && wait "$fz2" &&
    ok "the frozen job fails on l0 and l1, naming l2 ($((SECONDS - t0)) s)" ||
    { bad "the frozen job"; cat "$T/$name".r*.out; }
# Both ranks are gone: the job is torn down while the connects to l2 may
# still be pending.  The main loops must answer at once.
t1=$(date +%s%N)
"$B/mcclctl" -s "$T/l0.sock" -t 1000 status >/dev/null 2>&1 &&
    "$B/mcclctl" -s "$T/l1.sock" -t 1000 status >/dev/null 2>&1 &&
    ok "l0 and l1 answer mcclctl during the teardown ($((($(date +%s%N) - \
t1) / 1000000)) ms)" || bad "l0 or l1 did not answer within 1 s"
wait "$st0" && wait "$st1" &&
    ok "a job over l0 and l1 ran on undisturbed" ||
    { bad "the l0-l1 job was disturbed"; cat "$T"/lvsteady.*.out; \
    grep -h "down\|failed" "$T/l0.log" "$T/l1.log" | tail -n 5; }
if grep -q "node l[01] is down" "$T/l0.log" "$T/l1.log"; then
	bad "l0 and l1 lost each other's heartbeats"
	grep -h -B3 "node l[01] is down" "$T/l0.log" "$T/l1.log" | tail -n 12
else
	ok "l0 and l1 never lost each other's heartbeats"
fi
kill -CONT "${DAEMON_PIDS[52]}"
kill "$fz0" 2>/dev/null
wait "$fz0" 2>/dev/null
lv_up 2 && ok "l2 thawed, back in the cluster" || bad "l2 back"

echo "== liveness: a flood of idle strangers on the peer ports"
# 300 unauthenticated connections held on l0 and on l1 (more than the 256
# they keep), reopened as the daemons drop them: jobs between the two
# honest nodes still form, and the log stays short.
lines0=$(cat "$T/l0.log" "$T/l1.log" | wc -l)
"$B/mccl-hostile" flood 127.0.0.1 "$lbase" 300 7000 reopen \
    >"$T/lvflood0.out" 2>&1 &
fl0=$!
"$B/mccl-hostile" flood 127.0.0.1 $((lbase + 1)) 300 7000 reopen \
    >"$T/lvflood1.out" 2>&1 &
fl1=$!
sleep 1.5
for k in 1 2 3; do
	lv_spawn 0 "lvflood$k" 2 0 hold 10; a=$LAST_PID
	lv_spawn 1 "lvflood$k" 2 1 hold 10
	wait "$a" && wait "$LAST_PID" &&
	    ok "job $k of 3 between l0 and l1 forms during the flood" ||
	    { bad "job $k during the flood"; cat "$T/lvflood$k".r*.out; }
done
wait "$fl0" "$fl1"
grep -q "300 connections open" "$T/lvflood0.out" &&
    grep -q "300 connections open" "$T/lvflood1.out" &&
    ok "the flooders held 300 connections each ($(sed -n \
's/ connections reopened//p' "$T/lvflood0.out") reopened on l0)" ||
    { bad "the flood"; cat "$T"/lvflood[01].out; }
lines=$(($(cat "$T/l0.log" "$T/l1.log" | wc -l) - lines0))
warned=$(cat "$T/l0.log" "$T/l1.log" | grep -c "refusals not logged")
[ "$lines" -lt 400 ] && [ "$warned" -gt 0 ] &&
    ok "the log stays short: $lines lines, refusals counted not logged" ||
    bad "the flood wrote $lines log lines ($warned summaries)"

echo "== liveness: the coordinator of a forming job dies"
# Rank 0 of 2 waits on l0 for a rank that never comes; l2 coordinates
# the job and is killed: l0 fails the job at once, not at the init
# timeout (20 s here).
for name in lvcoord lvcoord1 lvcoord2 lvcoord3 lvcoord4 lvcoord5 lvcoord6; do
	[ "$(lv_coordinator "$name")" != 2 ] || break
done
MCCL_INIT_TIMEOUT_MS=20000 lv_spawn 0 "$name" 2 0 expect-init \
    MCCL_ERR_PEER_FAILED "node l2, which coordinates its formation, is down"
co=$LAST_PID
sleep 1
t0=$SECONDS
kill -9 "${DAEMON_PIDS[52]}"
wait "${DAEMON_PIDS[52]}" 2>/dev/null
wait "$co" && [ $((SECONDS - t0)) -le 3 ] &&
    ok "the forming job fails at once, naming its coordinator \
($((SECONDS - t0)) s)" ||
    { bad "coordinator death during formation ($((SECONDS - t0)) s)"; \
    cat "$T/$name".r*.out; }

daemons_stop 50 3

echo "== reload applies every key it names, without failing a running job"
# r0 and r1 start with slow heartbeats (2000/6000 ms); the reload makes
# them 300/900: a timeout shorter than the old interval, which fails the
# peers unless the new interval is applied too.
rbase=$(free_ports 3)
rl_conf() {	# I HB_INTERVAL HB_TIMEOUT EXTRA
	cat >"$T/r$1.conf" <<EOC
{ $TRANSPORT_KEY "node": "r$1", "socket": "$T/r$1.sock", "log_level": "debug",
  "nodes": [{"name": "r0", "address": "127.0.0.1:$rbase"},
            {"name": "r1", "address": "127.0.0.1:$((rbase + 1))"}],
  $4 "heartbeat_interval_ms": $2, "heartbeat_timeout_ms": $3 }
EOC
}
for i in 0 1; do
	rl_conf "$i" 2000 6000 ""
	"$B/mccld" -c "$T/r$i.conf" >>"$T/r$i.log" 2>&1 &
	DAEMON_PIDS[$((55 + i))]=$!
done
deadline=$((SECONDS + 10))
until "$B/mcclctl" -s "$T/r0.sock" -j status 2>/dev/null |
    grep -q '"peers_up": 1'; do
	[ $SECONDS -lt $deadline ] || break
	sleep 0.1
done
NODE_PREFIX=r spawn 0 rlsteady 2 0 steady 5000; rs0=$LAST_PID
NODE_PREFIX=r spawn 1 rlsteady 2 1 steady 5000; rs1=$LAST_PID
sleep 1
for i in 0 1; do
	rl_conf "$i" 300 900 "\"max_jobs_per_uid\": 1, \"max_connections_per_uid\": 9,
  \"listen\": [\"127.0.0.1:$((rbase + 2))\"],"
	out=$("$B/mcclctl" -s "$T/r$i.sock" reload 2>&1) ||
	    bad "mcclctl reload of r$i: $out"
done
MCCL_SOCKET="$T/r0.sock" MCCL_JOB=rlsecond MCCL_NRANKS=1 MCCL_RANK=0 \
    "$B/mccl-test" expect-init MCCL_ERR_NO_MEMORY "max_jobs_per_uid" \
    >"$T/rlsecond.out" 2>&1 &&
    ok "reload: max_jobs_per_uid applied (a second job is refused)" ||
    { bad "reload: max_jobs_per_uid"; cat "$T/rlsecond.out"; }
wait "$rs0" && wait "$rs1" &&
    ok "reload to heartbeats of 300/900 ms: the running job went on" ||
    { bad "the job across the reload"; cat "$T"/rlsteady.*.out; }
if grep -q "is down" "$T/r0.log" "$T/r1.log"; then
	bad "reload: a peer went down"
	grep -h "is down" "$T/r0.log" "$T/r1.log" | head -n 3
else
	ok "reload: no peer went down"
fi
grep -q 'reload: "listen" changed: restart mccld' "$T/r0.log" &&
    ok "reload: a changed listen address is named as needing a restart" ||
    bad "reload: nothing logged for the listen address"
grep -q "heartbeat 300/900 ms, max_jobs_per_uid 1, max_connections_per_uid 9" \
    "$T/r0.log" && ok "reload: the applied values are logged" ||
    bad "reload: applied values not logged"
daemons_stop 55 2
