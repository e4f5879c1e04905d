# security.sh: the trust boundaries (sourced by run.sh while its 3-node
# cluster runs).  Who a client hands its memory to, who may pose as a node,
# what one user sees of another's jobs, what reaches the log, and what the
# daemon deletes.  The cross-user cases run as root: they create two users
# of their own (an attacker and a victim) and remove them at exit.

# sec_conf FILE NAME SOCKET PORT [EXTRA]: a 1-node configuration.
sec_conf() {
	cat >"$1" <<EOC
{ "node": "$2", "socket": "$3",
  "nodes": [{"name": "$2", "address": "127.0.0.1:$4"}],
  ${5:-} "log_level": "debug" }
EOC
}

# sec_wait_socket PATH: until a daemon listens there (5 s).
sec_wait_socket() {
	local deadline=$((SECONDS + 5))
	until [ -S "$1" ]; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05
	done
}

# sec_fails_start NAME TEXT ARGS...: mccld exits non-zero saying TEXT.
sec_fails_start() {
	local name=$1 text=$2 out rc
	shift 2
	out=$(timeout 10 "$@" 2>&1)
	rc=$?
	case "$rc $out" in
	124*) bad "$name: mccld started" ;;
	0*) bad "$name: mccld exited 0" ;;
	*"$text"*) ok "$name" ;;
	*) bad "$name: exit $rc: $out" ;;
	esac
}

echo "== the socket path: only sockets are replaced"
sport=$(free_ports 5)
echo "precious" >"$T/reg.sock"
sec_conf "$T/reg.conf" s0 "$T/reg.sock" "$sport"
sec_fails_start "a regular file at the socket path: refused, named" \
    "$T/reg.sock exists and is not a socket (a regular file)" \
    "$B/mccld" -c "$T/reg.conf"
[ "$(cat "$T/reg.sock" 2>/dev/null)" = precious ] &&
    ok "the regular file is left as it was" ||
    bad "the regular file at the socket path was changed or deleted"
mkdir "$T/dir.sock"
sec_conf "$T/dir.conf" s0 "$T/dir.sock" "$sport"
sec_fails_start "a directory at the socket path: refused, named" \
    "$T/dir.sock exists and is not a socket (a directory)" \
    "$B/mccld" -c "$T/dir.conf"

sec_conf "$T/grp.conf" s0 "$T/grp.sock" "$sport" \
    '"admin_group": "mccl-no-such-group",'
out=$("$B/mccld" -n -c "$T/grp.conf" 2>&1)
case $out in
*'admin_group "mccl-no-such-group" does not exist: only root may run'*)
	ok "an admin_group that does not exist is said so" ;;
*) bad "a missing admin_group: $out" ;;
esac
out=$("$B/mccld" -h 2>/dev/null)
[ $? = 0 ] && grep -q "^usage: mccld" <<<"$out" &&
    ok "mccld -h: its usage on standard output, exit 0" ||
    bad "mccld -h: $out"
"$B/mccld" -Z >/dev/null 2>&1
[ $? = 2 ] && ok "mccld with an unknown option exits 2" ||
    bad "mccld -Z did not exit 2"
out=$("$B/mccld" -n -c "$T/grp.conf" 2>/dev/null)
grep -q "^op_timeout_ms  *60000$" <<<"$out" &&
    grep -q "^admin_group  *mccl-no-such-group$" <<<"$out" &&
    ok "mccld -n prints every key's value, defaults included" ||
    bad "mccld -n: $out"
sec_conf "$T/rel.conf" s0 "rel/mccld.sock" "$sport"
sec_fails_start "a relative socket path is refused" \
    '"rel/mccld.sock" is not an absolute path' "$B/mccld" -c "$T/rel.conf"

echo "== job names reach the log escaped"
MCCL_SOCKET="$T/n0.sock" MCCL_JOB=$'x\n<3>mccld: FORGED' MCCL_RANK=0 \
    MCCL_NRANKS=1 "$B/mccl-test" expect-init MCCL_ERR_INVALID_ARGUMENT \
    "control character (0x0a) at byte 1" >"$T/sec-name.out" 2>&1 &&
    ok "a job name with a newline fails mccl_comm_init, named" ||
    { bad "a job name with a newline"; cat "$T/sec-name.out"; }
MCCL_SOCKET="$T/n0.sock" MCCL_JOB=$'x\xff\xfe' MCCL_RANK=0 MCCL_NRANKS=1 \
    "$B/mccl-test" expect-init MCCL_ERR_INVALID_ARGUMENT \
    "job name is not UTF-8 (byte 0xff at 1)" >"$T/sec-utf8.out" 2>&1 &&
    ok "a job name that is not UTF-8 fails mccl_comm_init, named" ||
    { bad "a job name that is not UTF-8"; cat "$T/sec-utf8.out"; }
if grep -q '^<3>mccld: FORGED' "$T"/n*.log; then
	bad "a forged line reached a daemon's log"
else
	ok "no forged line in the daemons' logs"
fi

echo "== peers without a key_file authenticate with the host key"
# The test cluster has no key_file: a stranger on loopback gets nothing.
hostile_run "keyless n1" unauth 127.0.0.1 $((METRICS_PORT - 3 + 1)) \
    "$T/n1.sock"
[ "$(stat -c '%a %s' "$T/host.key" 2>/dev/null)" = "600 32" ] &&
    ok "the host key is beside the sockets, 32 bytes, mode 0600" ||
    bad "host key: $(stat -c '%a %s %U' "$T/host.key" 2>&1)"

echo "== per-user caps: messages not yet received, replies not yet read"
# A 1-node daemon with small caps: 1 MiB of unreceived messages per uid,
# 3 MiB in all, 1 MiB of unread replies per uid.
uport=$(free_ports 1)
sec_conf "$T/u0.conf" u0 "$T/u0.sock" "$uport" \
    '"max_unreceived_bytes_per_uid": 1048576, "max_unreceived_bytes": 3145728,
  "max_reply_bytes_per_uid": 1048576, "max_connections_per_uid": 64,
  "max_scratch_bytes_per_uid": 8388608, "max_scratch_bytes": 12582912,'
"$B/mccld" -c "$T/u0.conf" >>"$T/u0.log" 2>&1 &
DAEMON_PIDS[25]=$!
sec_wait_socket "$T/u0.sock" || bad "u0 did not start"
u_rank() {	# JOB RANK ARGS...: a rank of a 2-rank job on u0
	local job=$1 rank=$2
	shift 2
	MCCL_SOCKET="$T/u0.sock" MCCL_JOB=$job MCCL_NRANKS=2 MCCL_RANK=$rank \
	    timeout 30 "$B/mccl-test" "$@" >>"$T/$job.r$rank.out" 2>&1 &
	CHILD_PIDS+=($!)
	LAST_PID=$!
}
# Job A keeps 700 KiB unreceived for 3 s; job B of the same uid cannot
# add 700 KiB more, though each job alone is far under its own limit.
u_rank ua 0 send-hold 716800 3000; ua0=$LAST_PID
u_rank ua 1 send-hold 716800 3000; ua1=$LAST_PID
sleep 1
u_rank ub 0 send-refused 716800 MCCL_ERR_NO_MEMORY \
    "max_unreceived_bytes_per_uid"; ub0=$LAST_PID
u_rank ub 1 send-refused 716800 MCCL_ERR_NO_MEMORY ""; ub1=$LAST_PID
wait "$ub0" && ok "a second job of the uid over max_unreceived_bytes_per_uid: \
the send fails, named" || { bad "max_unreceived_bytes_per_uid"; \
cat "$T"/ub.r*.out; }
wait "$ub1"
wait "$ua0" && wait "$ua1" &&
    ok "the first job's message is still delivered" ||
    { bad "the first job"; cat "$T"/ua.r*.out; }
u_rank uc 0 send-hold 716800 10; uc0=$LAST_PID
u_rank uc 1 send-hold 716800 10; uc1=$LAST_PID
wait "$uc0" && wait "$uc1" &&
    ok "the uid's bytes are given back: a new job sends 700 KiB again" ||
    { bad "after the caps"; cat "$T"/uc.r*.out; }

# Eight connections of one uid that never read their replies: each is
# stopped once the uid's queued replies pass 1 MiB, not at 4 MiB apiece.
"$B/mccl-hostile" unread "$T/u0.sock" 8 >"$T/unread.out" 2>&1
grep -q "on 8 connections, 8 stopped" "$T/unread.out" &&
    ok "eight connections that never read are all stopped" ||
    { bad "unread replies"; cat "$T/unread.out"; }
uid_max=$(sed -n 's/.*bytes queued, \([0-9]*\) for uid .*/\1/p' "$T/u0.log" |
    sort -n | tail -n 1)
if [ -n "$uid_max" ] && [ "$uid_max" -le $((1048576 + 65536)) ]; then
	ok "the uid's queued replies stay under max_reply_bytes_per_uid \
($uid_max bytes at most)"
else
	bad "the uid's queued replies reached ${uid_max:-?} bytes"
fi

# The engines' working memory: bounded per uid, given back when idle.
u_scratch() {	# the daemon's mccl_scratch_bytes
	"$B/mcclctl" -s "$T/u0.sock" metrics 2>/dev/null |
	    awk '$1 == "mccl_scratch_bytes" { print $2 }'
}
u_scratch_until() {	# BYTES: wait (4 s) until the daemon holds BYTES
	local deadline=$((SECONDS + 4))
	until [ "$(u_scratch)" = "$1" ]; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05
	done
}
MCCL_SOCKET="$T/u0.sock" MCCL_JOB=usa MCCL_NRANKS=1 MCCL_RANK=0 \
    "$B/mccl-test" scratch 16777216 MCCL_ERR_NO_MEMORY \
    "limit of 8388608 for uid $(id -u) on node u0 (max_scratch_bytes_per_uid" \
    0 >"$T/usa.out" 2>&1 &&
    ok "a reduce_scatter needing more than max_scratch_bytes_per_uid: \
NO_MEMORY, named" || { bad "max_scratch_bytes_per_uid"; cat "$T/usa.out"; }
u_rank usb 0 scratch 4194304 MCCL_SUCCESS "" 3000; usb0=$LAST_PID
u_rank usb 1 scratch 4194304 MCCL_SUCCESS "" 3000; usb1=$LAST_PID
if u_scratch_until 4194304; then
	u_scratch_until 0 &&
	    ok "the job's 4 MiB of scratch is given back while it idles" ||
	    bad "scratch still held while the job idles: $(u_scratch) bytes"
else
	bad "scratch of a 4 MiB reduce_scatter: $(u_scratch) bytes"
fi
wait "$usb0" && wait "$usb1" && ok "a reduce_scatter within the limit: right \
sums" || { bad "a reduce_scatter within the limit"; cat "$T"/usb.r*.out; }
kill -0 "${DAEMON_PIDS[25]}" && ok "u0 still running" || bad "u0 died"
kill -TERM "${DAEMON_PIDS[25]}" 2>/dev/null
wait "${DAEMON_PIDS[25]}" 2>/dev/null

echo "== a rank the daemon may not read: staged, the reason logged once"
# Ranks that are not dumpable (MCCL_TEST_NODUMP) on daemons without
# CAP_SYS_PTRACE (dropped, from the ranks too, when we are root: the
# kernel also wants a tracer's capabilities to cover its tracee's): the
# kernel refuses the daemons' probe, so their large allreduces are
# staged, with right sums.  The same daemons read ranks that are dumpable
# in place, unless Yama forbids it to every process but an ancestor.
xm_bytes() {	# NODE: mccl_xmem_bytes_total of daemon xmNODE
	"$B/mcclctl" -s "$T/xm$1.sock" metrics |
	    awk '$1 == "mccl_xmem_bytes_total" { print $2 }'
}
DAEMON_WRAP=()
[ "$(id -u)" != 0 ] || DAEMON_WRAP=(setpriv --inh-caps=-sys_ptrace
    --bounding-set=-sys_ptrace)
SPAWN_WRAP=(${DAEMON_WRAP[@]+"${DAEMON_WRAP[@]}"})
if cluster_up 2 xm 26; then
	MCCL_TEST_NODUMP=1 NODE_PREFIX=xm run_job "2 nodes x 2 ranks the \
daemons may not read: 20 MiB collectives, right sums" jxmn "0 0 1 1" large
	for i in 0 1; do
		n=$(grep -c "its large allreduces of its own memory are staged \
through shared memory: the kernel refused to let it read pid [0-9]*: \
Operation not permitted" "$T/xm$i.log")
		[ "$n" = 2 ] && [ "$(xm_bytes $i)" = 0 ] &&
		    ok "xm$i: staged, the kernel's refusal logged once per rank" ||
		    bad "xm$i: $n refusals logged, $(xm_bytes $i) bytes in place"
	done
	NODE_PREFIX=xm run_job "the same daemons, ranks they may read" jxmy \
	    "0 0 1 1" large
	yama=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
	if [ "$yama" != 0 ]; then
		echo "(Yama ptrace_scope $yama: the daemons read no rank in place)"
	elif [ "$(xm_bytes 0)" -gt 0 ] 2>/dev/null &&
	    [ "$(xm_bytes 1)" -gt 0 ] 2>/dev/null; then
		ok "those allreduces were read and written in place"
	else
		bad "xmem bytes: $(xm_bytes 0), $(xm_bytes 1)"
	fi
else
	bad "the cluster without CAP_SYS_PTRACE did not start"
fi
for i in 0 1; do
	kill "${DAEMON_PIDS[$((26 + i))]}" 2>/dev/null
	wait "${DAEMON_PIDS[$((26 + i))]}" 2>/dev/null
done
DAEMON_WRAP=()
SPAWN_WRAP=()

echo "== a client whose memory the daemon cannot copy"
# A rank's 4 MiB buffer registered with userfaultfd and never served: the
# daemon's copy of it (MCCL_XMEM=2) blocks in the kernel.  The job must
# fail at the op's deadline naming that rank, on every rank, and SIGTERM
# must still stop the daemon while the rank holds its buffer.
uport=$(free_ports 1)
sec_conf "$T/uf.conf" uf0 "$T/uf0.sock" "$uport" '"op_timeout_ms": 2000,'
"$B/mccld" -c "$T/uf.conf" >>"$T/uf.log" 2>&1 &
DAEMON_PIDS[24]=$!
sec_wait_socket "$T/uf0.sock" || bad "uf0 did not start"
uf_pids=()
for r in 0 1; do
	MCCL_XMEM=2 MCCL_SOCKET="$T/uf0.sock" MCCL_JOB=uf MCCL_NRANKS=2 \
	    MCCL_RANK=$r timeout 60 "$B/mccl-test" uffd 8000 \
	    >"$T/uf.r$r.out" 2>&1 &
	uf_pids+=($!)
	CHILD_PIDS+=($!)
done
wait "${uf_pids[1]}"
rc=$?
if grep -q "no userfaultfd here" "$T/uf.r0.out"; then
	echo "(no userfaultfd for this user: $(cat "$T/uf.r0.out"))"
	kill "${uf_pids[0]}" 2>/dev/null
elif [ $rc = 0 ] && grep -q "rank 0 (pid [0-9]* uid [0-9]*): the daemon's copy of its memory has not returned" "$T/uf.r1.out"; then
	ok "a rank's memory the daemon cannot copy: the job fails at the deadline, naming it"
else
	bad "a rank's memory the daemon cannot copy: rank 1 exit $rc: $(cat "$T/uf.r1.out")"
fi
kill -TERM "${DAEMON_PIDS[24]}"
for i in $(seq 50); do
	kill -0 "${DAEMON_PIDS[24]}" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "${DAEMON_PIDS[24]}" 2>/dev/null; then
	bad "SIGTERM did not stop the daemon in 5 s while a thread is stuck in a client"
else
	ok "SIGTERM stops the daemon while a thread is stuck in a client's memory"
fi
wait "${DAEMON_PIDS[24]}" 2>/dev/null
unset "DAEMON_PIDS[24]"
kill "${uf_pids[0]}" 2>/dev/null
wait "${uf_pids[0]}" 2>/dev/null

if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null ||
    ! command -v setpriv >/dev/null; then
	echo "(not root, or no useradd/setpriv: the cross-user tests are skipped)"
	return 0
fi

echo "== another user's daemon is never handed our memory"
xbin || { bad "copying the programs for the test users"; return 0; }
test_user mcclatk$$ && test_user mcclvic$$ &&
    atk=$(id -u mcclatk$$) && vic=$(id -u mcclvic$$) || {
	bad "creating test users"
	return 0
}
as_user() {	# UID CMD...: run as that user, no runtime dir
	local u=$1
	shift
	env -u XDG_RUNTIME_DIR -u MCCL_SOCKET setpriv --reuid="$u" \
	    --regid="$u" --clear-groups "$@"
}
# as_user_bg UID LOG CMD...: the same in the background, its pid in
# LAST_PID (the command's own, so that kill reaches it).
as_user_bg() {
	local u=$1 log=$2
	shift 2
	env -u XDG_RUNTIME_DIR -u MCCL_SOCKET setpriv --reuid="$u" \
	    --regid="$u" --clear-groups "$@" >>"$log" 2>&1 &
	LAST_PID=$!
}
vdir=/tmp/mccl-$vic
sec_rm_vdir() { rm -rf "$vdir"; }
CLEANUP_HOOKS+=(sec_rm_vdir)

# The attacker makes the victim's default directory first and listens there.
as_user "$atk" mkdir -m 0755 "$vdir"
sec_conf "$T/atk.conf" a0 "$vdir/mccld.sock" "$sport"
as_user_bg "$atk" "$T/atk.log" "$XB/mccld" -c "$T/atk.conf"
DAEMON_PIDS[20]=$LAST_PID
if ! sec_wait_socket "$vdir/mccld.sock"; then
	bad "the attacker's daemon did not start"
	tail -n 5 "$T/atk.log"
elif [ -e /run/mccl/mccld.sock ]; then
	echo "(a system daemon listens at /run/mccl: the victim would use it)"
else
	MCCL_JOB=v MCCL_RANK=0 MCCL_NRANKS=1 as_user "$vic" "$XB/mccl-test" \
	    expect-init MCCL_ERR_PERMISSION \
	    "directory $vdir belongs to uid $atk, which is not trusted" \
	    >"$T/sec-vic.out" 2>&1 &&
	    ok "the default socket in a directory another user made: refused" ||
	    { bad "victim in the attacker's directory"; cat "$T/sec-vic.out"; }
fi
MCCL_SOCKET="$vdir/mccld.sock" MCCL_JOB=v MCCL_RANK=0 MCCL_NRANKS=1 \
    setpriv --reuid="$vic" --regid="$vic" --clear-groups "$XB/mccl-test" \
    expect-init MCCL_ERR_PERMISSION "belongs to uid $atk" \
    >"$T/sec-vic2.out" 2>&1 &&
    ok "MCCL_SOCKET into that directory: refused too" ||
    { bad "MCCL_SOCKET into the attacker's directory"; cat "$T/sec-vic2.out"; }
# The daemon's own user is privileged on it (a daemon from the build tree
# is its user's): the attacker's metrics and reload on the attacker's.
out=$(as_user "$atk" "$XB/mcclctl" -s "$vdir/mccld.sock" metrics 2>&1)
out2=$(as_user "$atk" "$XB/mcclctl" -s "$vdir/mccld.sock" reload 2>&1)
[ $? = 0 ] && grep -q '^mccl_uptime_seconds' <<<"$out" &&
    grep -q 'reloaded' <<<"$out2" &&
    ok "the daemon's own user may run metrics and reload on it" ||
    bad "the daemon's own user: metrics: $out / reload: $out2"
if grep -q "uid $vic" "$T/atk.log"; then
	bad "the attacker's daemon heard from the victim"
	grep "uid $vic" "$T/atk.log" | head -n 3
else
	ok "the attacker's daemon got nothing from the victim"
fi
kill "${DAEMON_PIDS[20]}" 2>/dev/null
wait "${DAEMON_PIDS[20]}" 2>/dev/null

# A socket in a sticky public directory: the directory passes, the
# daemon's uid does not.
mkdir -m 1777 "$T/pub"
sec_conf "$T/atk2.conf" a1 "$T/pub/atk.sock" $((sport + 1))
as_user_bg "$atk" "$T/atk2.log" "$XB/mccld" -c "$T/atk2.conf"
DAEMON_PIDS[21]=$LAST_PID
if sec_wait_socket "$T/pub/atk.sock"; then
	MCCL_SOCKET="$T/pub/atk.sock" MCCL_JOB=v MCCL_RANK=0 MCCL_NRANKS=1 \
	    setpriv --reuid="$vic" --regid="$vic" --clear-groups \
	    "$XB/mccl-test" expect-init MCCL_ERR_PERMISSION \
	    "it runs as uid $atk" >"$T/sec-vic3.out" 2>&1 &&
	    ok "a daemon of another uid (SO_PEERCRED): refused, named" ||
	    { bad "a daemon of another uid"; cat "$T/sec-vic3.out"; }
else
	bad "the attacker's second daemon did not start"
	tail -n 5 "$T/atk2.log"
fi
kill "${DAEMON_PIDS[21]}" 2>/dev/null
wait "${DAEMON_PIDS[21]}" 2>/dev/null

# The victim's own daemon will not bind in the attacker's directory.
sec_conf "$T/vic.conf" v0 "$vdir/mccld.sock" "$sport"
sec_fails_start "mccld refuses a socket directory another user made" \
    "directory $vdir belongs to uid $atk" \
    setpriv --reuid="$vic" --regid="$vic" --clear-groups "$XB/mccld" \
    -c "$T/vic.conf"

# With the system daemon running, clients go there before /tmp.
if [ ! -e /run/mccl ]; then
	sec_rm_run() { rm -rf /run/mccl; }
	CLEANUP_HOOKS+=(sec_rm_run)
	sec_conf "$T/sys.conf" sys /run/mccl/mccld.sock $((sport + 2))
	"$B/mccld" -c "$T/sys.conf" >>"$T/sys.log" 2>&1 &
	DAEMON_PIDS[22]=$!
	if sec_wait_socket /run/mccl/mccld.sock; then
		MCCL_JOB=v MCCL_RANK=0 MCCL_NRANKS=1 as_user "$vic" \
		    "$XB/mccl-test" hold 10 >"$T/sec-sys.out" 2>&1 &&
		    grep -q "uid $vic" "$T/sys.log" &&
		    ok "the system daemon comes before a directory in /tmp" ||
		    { bad "system daemon first"; cat "$T/sec-sys.out"; \
		    tail -n 5 "$T/sys.log"; }
	else
		bad "the system daemon did not start"
		tail -n 5 "$T/sys.log"
	fi
	grep -q "staged through shared memory: the daemon runs as uid 0 and \
the client as uid $vic; it reads only its own user's processes" "$T/sys.log" &&
	    ok "a daemon of another uid does not read the client's memory" ||
	    bad "the root daemon did not say why it staged uid $vic's buffers"
	kill "${DAEMON_PIDS[22]}" 2>/dev/null
	wait "${DAEMON_PIDS[22]}" 2>/dev/null
	rm -rf /run/mccl
else
	echo "(/run/mccl exists: the system-daemon order is not tested here)"
fi

echo "== another user's keyless daemon cannot pose as a node"
# Root runs node s0 of a 2-node cluster; the attacker starts node s1 with
# the same configuration.  Its host key is its own: s0 refuses it.
sbase=$(free_ports 2)
for i in 0 1; do
	cat >"$T/s$i.conf" <<EOC
{ $TRANSPORT_KEY "node": "s$i", "socket": "$T/s$i/s.sock", "log_level": "debug",
  "nodes": [{"name": "s0", "address": "127.0.0.1:$sbase"},
            {"name": "s1", "address": "127.0.0.1:$((sbase + 1))"}] }
EOC
done
mkdir -m 0755 "$T/s0" "$T/s1"
chown "$atk" "$T/s1"
"$B/mccld" -c "$T/s0.conf" >>"$T/s0.log" 2>&1 &
DAEMON_PIDS[23]=$!
as_user_bg "$atk" "$T/s1.log" "$XB/mccld" -c "$T/s1.conf"
DAEMON_PIDS[24]=$LAST_PID
sleep 2
if grep -q "failed authentication" "$T/s0.log" "$T/s1.log" &&
    ! "$B/mcclctl" -s "$T/s0/s.sock" -j status | grep -q '"peers_up": 1'; then
	ok "the attacker's node is refused (failed authentication)"
else
	bad "the attacker's keyless node"
	tail -n 5 "$T/s0.log" "$T/s1.log"
fi
kill "${DAEMON_PIDS[23]}" "${DAEMON_PIDS[24]}" 2>/dev/null
wait "${DAEMON_PIDS[23]}" "${DAEMON_PIDS[24]}" 2>/dev/null

echo "== key files another user made are refused"
# In a sticky public directory another user can create the host key first,
# with content they know: the daemon must refuse it, not authenticate with it.
mkdir -m 1777 "$T/pubk"
sec_conf "$T/pk.conf" pk "$T/pubk/pk.sock" $((sport + 3))
head -c 32 /dev/urandom >"$T/known.key"
as_user "$atk" sh -c "umask 077; cat >'$T/pubk/host.key'" <"$T/known.key"
sec_fails_start "a host.key planted by another user: refused, named" \
    "key file $T/pubk/host.key belongs to uid $atk" "$B/mccld" -c "$T/pk.conf"
if cmp -s "$T/known.key" "$T/pubk/host.key"; then
	ok "the planted host.key is left as it was"
else
	bad "the planted host.key was changed"
fi
rm -f "$T/pubk/host.key" "$T/pubk/pk.sock"
# The host key is written aside first: a file another user puts under the
# name the daemon would have used (host.key.PID, its pid before) is no
# obstacle.  The shell's pid is the daemon's once it execs.
sh -c 'setpriv --reuid="$1" --regid="$1" --clear-groups sh -c \
    "umask 077; : >\"$2.$$\"" && exec "$3" -c "$4"' sh "$atk" \
    "$T/pubk/host.key" "$XB/mccld" "$T/pk.conf" >>"$T/pk.log" 2>&1 &
DAEMON_PIDS[26]=$!
sec_deadline=$((SECONDS + 5))
until grep -q "ready on" "$T/pk.log" 2>/dev/null ||
    [ $SECONDS -ge $sec_deadline ]; do
	sleep 0.05
done
daemons_stop 26 1
if [ "$(stat -c '%u %a %s' "$T/pubk/host.key" 2>/dev/null)" = "0 600 32" ]
then
	ok "a file at the old temporary name does not stop the host key"
else
	bad "host key next to a planted host.key.PID: $(stat -c '%u %a %s' \
"$T/pubk/host.key" 2>&1); $(tail -n 3 "$T/pk.log")"
fi
cp "$T/known.key" "$T/atk.key"
chmod 600 "$T/atk.key"
chown "$atk" "$T/atk.key"
sec_conf "$T/ak.conf" ak "$T/ak.sock" $((sport + 4)) \
    "\"key_file\": \"$T/atk.key\","
sec_fails_start "a key_file of another user: refused, named" \
    "key file $T/atk.key belongs to uid $atk" "$B/mccld" -n -c "$T/ak.conf"

echo "== what another user sees"
spawn 0 secseen 1 0 hold 4000
sec_holder=$LAST_PID
as_user_bg "$vic" "$T/sec-mon.out" timeout 3 "$XB/mcclctl" -s "$T/n0.sock" \
    -j monitor
sec_mon=$LAST_PID
sleep 0.5
spawn 0 secev 1 0 hold 10
wait "$LAST_PID"
seen=$(as_user "$vic" "$XB/mcclctl" -s "$T/n0.sock" -j status 2>&1)
case $seen in
*'"jobs": 0'*) ok "status counts only the caller's jobs" ;;
*) bad "status shows another user's jobs: $seen" ;;
esac
wait "$sec_mon"
if grep -q secev "$T/sec-mon.out"; then
	bad "monitor shows another user's job events"
	cat "$T/sec-mon.out"
elif grep -q monitoring "$T/sec-mon.out"; then
	ok "monitor shows no job events of another user"
else
	bad "monitor printed nothing: $(cat "$T/sec-mon.out")"
fi
spawn 0 secfail 1 0 loop MCCL_ERR_ABORTED mcclctl
a=$LAST_PID
for i in $(seq 200); do
	grep -q looping "$T/secfail.r0.out" 2>/dev/null && break
	sleep 0.05
done
"$B/mcclctl" -s "$T/n0.sock" abort secfail >/dev/null
wait "$a"
for i in $(seq 50); do
	"$B/mcclctl" -s "$T/n0.sock" jobs --failed | grep -q '^secfail ' && break
	sleep 0.1
done
"$B/mcclctl" -s "$T/n0.sock" jobs --failed | grep -q '^secfail ' &&
    ok "root sees its failed job" || bad "root's failed job is not kept"
out=$(as_user "$vic" "$XB/mcclctl" -s "$T/n0.sock" -j jobs --failed 2>&1)
case $out in
*secfail*) bad "jobs --failed shows another user's failed job: $out" ;;
*'"failed_jobs": []'*) ok "jobs --failed shows no other user's failed job" ;;
*) bad "jobs --failed as another user: $out" ;;
esac
out=$(as_user "$vic" "$XB/mcclctl" -s "$T/n0.sock" job secfail 2>&1)
case "$?:$out" in
1:*'no job named "secfail"'*) ok "job NAME of another user's failed job: none" ;;
*) bad "job NAME of another user's failed job: $out" ;;
esac
out=$(as_user "$vic" "$XB/mcclctl" -s "$T/n0.sock" metrics 2>&1)
case "$?:$out" in
1:*"metrics is for root, the daemon's own user and the admin group"*)
	ok "metrics are for root, the daemon's own user and the admin group" ;;
*) bad "metrics for another user: $out" ;;
esac
out=$(as_user "$vic" "$XB/mcclctl" -s "$T/n0.sock" check --force 2>&1)
case "$?:$out" in
1:*"check is for root, the daemon's own user and the admin group"*)
	ok "check (it loads every link) is not for another user" ;;
*) bad "check for another user: $out" ;;
esac
kill "$sec_holder" 2>/dev/null
wait "$sec_holder" 2>/dev/null

echo "== one user's late ranks do not steer another user's jobs"
# The link cost a job starts from is fitted to earlier ops' times, which
# hold any wait for a late rank: the attacker's ranks come 300 ms late to
# 24 small allreduces between n0 and n1; the victim's next job must start
# from the cost its own ops measured, not 300 ms a message.
# sec_alpha JOB: the job's "us a message" while it holds (mcclctl job).
sec_alpha() {
	local i out
	for i in $(seq 50); do
		out=$("$B/mcclctl" -s "$T/n0.sock" job "$1" 2>/dev/null |
		    sed -n "s/^link cost (the worst of the job's nodes): \([0-9.]*\) us a message.*/\1/p")
		[ -n "$out" ] && break
		sleep 0.1
	done
	echo "$out"
}
# sec_user_job UID JOB ARGS...: a 2-rank job of that user on n0 and n1.
sec_user_job() {
	local u=$1 job=$2 r pids=()
	shift 2
	for r in 0 1; do
		as_user_bg "$u" "$T/$job.r$r.out" env MCCL_SOCKET="$T/n$r.sock" \
		    MCCL_JOB="$job" MCCL_NRANKS=2 MCCL_RANK=$r timeout 60 \
		    "$XB/mccl-test" "$@"
		pids+=("$LAST_PID")
		CHILD_PIDS+=("$LAST_PID")
	done
	SEC_JOB_PIDS=("${pids[@]}")
}
sec_user_job "$vic" vsteady steady 500
wait "${SEC_JOB_PIDS[@]}"
sec_user_job "$vic" vbefore hold 2000
a0=$(sec_alpha vbefore)
wait "${SEC_JOB_PIDS[@]}"
sec_user_job "$atk" astraggle straggle 24 300
wait "${SEC_JOB_PIDS[@]}" && ok "the attacker's straggling job ran" ||
    bad "the attacker's job: $(cat "$T"/astraggle.r*.out)"
sec_user_job "$vic" vafter hold 2000
a1=$(sec_alpha vafter)
wait "${SEC_JOB_PIDS[@]}"
awk -v a="$a0" -v b="$a1" 'BEGIN { exit !(a > 0 && b > 0 && b <= 1.5 * a) }' &&
    ok "the victim's next job starts from its own link cost ($a0 -> $a1 us a message)" ||
    bad "the victim's link cost moved with the attacker's late ranks: $a0 -> $a1 us a message"
