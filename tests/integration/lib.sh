# lib.sh: helpers for tests that drive real mccld daemons on loopback.
# Everything lives in $T (a fresh temporary directory); cleanup kills every
# process started here and removes $T, also when a test fails or is killed.

T=$(mktemp -d "${TMPDIR:-/tmp}/mccl-test.XXXXXX")

# The daemons' data transport (their "transport" key): tcp or rdma in the
# tests (run.sh; make check-rdma runs the daemons on the tests' verbs
# provider, whose queue pairs meet in $T/verbs), the default elsewhere.
TRANSPORT=${MCCL_TEST_TRANSPORT:-${TRANSPORT:-}}
TRANSPORT_KEY=${TRANSPORT:+"\"transport\": \"$TRANSPORT\","}
export MCCL_FAKEVERBS_DIR="$T/verbs"
mkdir -p "$MCCL_FAKEVERBS_DIR"
DAEMON_PIDS=()
CHILD_PIDS=()
CLEANUP_HOOKS=()	# commands run at exit, after the processes are gone
PASS=0
FAIL=0

cleanup() {
	local p
	for p in "${CHILD_PIDS[@]}" "${DAEMON_PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	for p in "${CLEANUP_HOOKS[@]}"; do
		$p
	done
	if [ "$FAIL" -gt 0 ] && [ -n "${KEEP_LOGS:-}" ]; then
		echo "logs kept in $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# test_user NAME: a system user without a home, for tests that need
# several users (as root); removed at exit.
TEST_USERS=()
test_users_del() {
	local u
	for u in "${TEST_USERS[@]}"; do
		userdel "$u" 2>/dev/null
	done
}
CLEANUP_HOOKS+=(test_users_del)
test_user() {
	useradd --system --no-create-home --shell /usr/sbin/nologin "$1" &&
	    TEST_USERS+=("$1")
}

ok()  { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }

# free_ports N: a base port with N free consecutive ports.
. "$(dirname "${BASH_SOURCE[0]}")/../../tools/ports.sh"

# cluster_up N [PREFIX PIDBASE [KEYS]]: N daemons PREFIX0..PREFIX(N-1)
# (PREFIX n, the main cluster, by default) on 127.0.0.1, sockets
# $T/PREFIXi.sock, pids in DAEMON_PIDS from PIDBASE (0), KEYS (JSON, each
# followed by a comma) added to their configuration.  Node n0 alone
# serves /metrics.  DAEMON_WRAP (an array), when set: the command each
# daemon runs under.
cluster_up() {
	local n=$1 pre=${2:-n} pid0=${3:-0} keys=${4:-} base i nodes="" sep="" metrics
	# Two lanes unless the test sets them: auto follows the link the
	# daemons measure, which a slow build (ThreadSanitizer, fake verbs)
	# may read as one lane's worth, and the faults on lanes running on
	# several threads need two.
	case $keys in
	*streams_per_peer*) ;;
	*) keys="\"streams_per_peer\": 2, $keys" ;;
	esac
	base=$(free_ports $((n + 1)))
	[ "$pre" != n ] || METRICS_PORT=$((base + n))
	for i in $(seq 0 $((n - 1))); do
		nodes="$nodes$sep{\"name\": \"$pre$i\", \"address\": \"127.0.0.1:$((base + i))\"}"
		sep=", "
	done
	for i in $(seq 0 $((n - 1))); do
		metrics=""
		[ "$pre$i" != n0 ] ||
		    metrics="\"metrics_listen\": \"127.0.0.1:$METRICS_PORT\","
		cat >"$T/$pre$i.conf" <<EOC
{
  $metrics $keys $TRANSPORT_KEY
  "node": "$pre$i",
  "socket": "$T/$pre$i.sock",
  "nodes": [$nodes],
  "log_level": "${LOG_LEVEL:-debug}",
  "init_timeout_ms": 10000,
  "op_timeout_ms": 20000,
  "connect_timeout_ms": 3000,
  "heartbeat_interval_ms": 300,
  "heartbeat_timeout_ms": 1500
}
EOC
		${DAEMON_WRAP[@]+"${DAEMON_WRAP[@]}"} "$B/mccld" \
		    -c "$T/$pre$i.conf" >>"$T/$pre$i.log" 2>&1 &
		DAEMON_PIDS[$((pid0 + i))]=$!
	done
	wait_cluster "$n" "$pre"
}

# wait_cluster N [PREFIX]: wait (at most 10 s) until every daemon sees
# every other one up.
wait_cluster() {
	local n=$1 pre=${2:-n} i deadline=$((SECONDS + 10))
	for i in $(seq 0 $((n - 1))); do
		while ! "$B/mcclctl" -s "$T/$pre$i.sock" -j status 2>/dev/null |
		    grep -q "\"peers_up\": $((n - 1))"; do
			if [ $SECONDS -ge $deadline ]; then
				echo "cluster of $n did not come up; logs:"
				tail -n 20 "$T/$pre"*.log
				return 1
			fi
			sleep 0.1
		done
	done
}

cluster_down() {
	local p
	for p in "${DAEMON_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${DAEMON_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	DAEMON_PIDS=()
}

# spawn NODE JOB NRANKS RANK ARGS...: one rank in the background, on the
# daemon $T/${NODE_PREFIX}NODE.sock (NODE_PREFIX: n, the cluster's).
# cpu_ticks PID: the process's user + system clock ticks so far.
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

spawn() {
	local node=$1 job=$2 nranks=$3 rank=$4
	shift 4
	MCCL_SOCKET="$T/${NODE_PREFIX:-n}$node.sock" MCCL_JOB=$job \
	    MCCL_NRANKS=$nranks \
	    MCCL_RANK=$rank timeout 120 \
	    ${SPAWN_WRAP[@]+"${SPAWN_WRAP[@]}"} "$B/mccl-test" "$@" \
	    >>"$T/$job.r$rank.out" 2>&1 &
	CHILD_PIDS+=($!)
	LAST_PID=$!
}

# run_job NAME JOB "NODE NODE ..." ARGS...: rank i on the i-th node listed;
# passes when every rank exits 0.
run_job() {
	local name=$1 job=$2 placement=($3) pids=() rank=0 node rc=0 p
	shift 3
	for node in "${placement[@]}"; do
		spawn "$node" "$job" "${#placement[@]}" "$rank" "$@"
		pids+=("$LAST_PID")
		rank=$((rank + 1))
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	if [ $rc -eq 0 ]; then
		ok "$name"
	else
		bad "$name"
		cat "$T/$job".r*.out | grep -v '^rank' | head -n 20
	fi
}

# hostile_run LABEL ARGS...: run mccl-hostile (hostile.c), one ok/bad per
# case; its whole output is left in HOSTILE_OUT.
hostile_run() {
	local label=$1 out rc line
	shift
	out=$(timeout 300 "$B/mccl-hostile" "$@" 2>&1)
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "$label: ${line#ok }" ;;
		"FAIL "*) bad "$label: ${line#FAIL }" ;;
		esac
	done <<<"$out"
	if [ $rc -gt 1 ]; then
		bad "$label: mccl-hostile exited with status $rc"
		echo "$out" | tail -n 5
	fi
	HOSTILE_OUT=$out
}

# xbin: XB, a folder of the programs that the cross-user tests run as
# other users, copied where those users can reach them: the build may lie
# in a directory only its owner may enter (a private home, mktemp -d).
xbin() {
	[ -z "${XB:-}" ] || return 0
	XB=$T/xbin
	mkdir -p "$XB" &&
	    cp "$B/mccld" "$B/mcclctl" "$B/mccl-test" "$XB/" &&
	    chmod 755 "$T" "$XB"
}

# daemons_stop FIRST N: SIGTERM the daemons DAEMON_PIDS[FIRST..FIRST+N-1]
# of a test's own cluster, wait for them, and forget them.
daemons_stop() {
	local i
	for ((i = $1; i < $1 + $2; i++)); do
		kill -TERM "${DAEMON_PIDS[$i]:-}" 2>/dev/null
		wait "${DAEMON_PIDS[$i]:-}" 2>/dev/null
		unset "DAEMON_PIDS[$i]"
	done
}

# expect_output NAME EXPECTED ACTUAL: ok when equal, else the difference.
expect_output() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		bad "$1"
		diff <(echo "$2") <(echo "$3") | head -n 20
	fi
}

# ctl I ARGS...: mcclctl ARGS against the cluster's node nI.
ctl() { "$B/mcclctl" -s "$T/n$1.sock" "${@:2}"; }

# job_ready JOB: wait (10 s at most) until n0 shows JOB formed.
job_ready() {	# JOB [NODE]: the job is ready on nNODE (n0)
	local deadline=$((SECONDS + 10))
	until ctl "${2:-0}" jobs | grep -q "^$1 .* ready"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05
	done
}

summary() {
	echo "$PASS passed, $FAIL failed"
	[ "$FAIL" -eq 0 ]
}

# Hosts in network namespaces, for the tests that need a network (root):
# host I of the set TAG is namespace $(host_ns TAG I), 198.18.NET.(10 + I)
# on its eth0, every host of the set on one bridge.  hosts_down TAG N
# removes the set and kills what still runs in it.
host_ns() { echo "mccl-$1$$-h$2"; }

hosts_up() {	# TAG NET N
	local tag=$1 net=$2 i ns br="mb$1$$"
	ip link add "$br" type bridge && ip link set "$br" up || return 1
	for ((i = 0; i < $3; i++)); do
		ns=$(host_ns "$tag" "$i")
		ip netns add "$ns" &&
		ip link add "$tag$$$i" type veth peer name eth0 netns "$ns" &&
		ip link set "$tag$$$i" master "$br" up &&
		ip -n "$ns" addr add "198.18.$net.$((10 + i))/24" dev eth0 &&
		ip -n "$ns" link set lo up &&
		ip -n "$ns" link set eth0 up || return 1
	done
}

hosts_down() {	# TAG N
	local i ns
	for ((i = 0; i < $2; i++)); do
		ns=$(host_ns "$1" "$i")
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	ip link del "mb$1$$" 2>/dev/null
}
