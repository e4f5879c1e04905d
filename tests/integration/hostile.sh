# hostile.sh: hostile clients and peers (sourced by run.sh while its 3-node
# cluster runs).  mccl-hostile sends every kind of bad message; each must
# close only its own connection (or get an error reply), with one log line
# saying why, and every daemon must keep serving.  Peers authenticate only
# with a key, and the test cluster has none, so the peer cases run on a
# keyed 2-node cluster started here (DAEMON_PIDS 10 and 11), and a flood
# of connections on a daemon short of descriptors (DAEMON_PIDS 12).

# hostile_count LOG PATTERN: lines of LOG matching the extended regex.
hostile_count() {
	grep -cE -- "$2" "$1" 2>/dev/null
}

# hostile_logged NAME LOG TEXT...: every TEXT appears in LOG.
hostile_logged() {
	local name=$1 log=$2 s missing=""
	shift 2
	for s in "$@"; do
		grep -qF -- "$s" "$log" || missing="$missing \"$s\""
	done
	if [ -z "$missing" ]; then
		ok "$name"
	else
		bad "$name: nothing logged for$missing"
	fi
}

hostile_alive() {	# NAME PID LOG
	if kill -0 "$2" 2>/dev/null; then
		ok "$1 still running"
	else
		bad "$1 died"
		tail -n 20 "$3"
	fi
}

# hostile_daemon SLOT CONF SOCKET LOG [FDS]: mccld -c CONF in the
# background as DAEMON_PIDS[SLOT] (with at most FDS descriptors), waited
# for until SOCKET answers (10 s).
hostile_daemon() {
	local slot=$1 conf=$2 sock=$3 log=$4 fds=${5:-} deadline
	if [ -n "$fds" ]; then
		(ulimit -n "$fds"; exec "$B/mccld" -c "$conf" >>"$log" 2>&1) &
	else
		"$B/mccld" -c "$conf" >>"$log" 2>&1 &
	fi
	DAEMON_PIDS[$slot]=$!
	deadline=$((SECONDS + 10))
	until "$B/mcclctl" -s "$sock" status >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || break
		sleep 0.1
	done
}

echo "== hostile clients on n0"
# A pool of huge pages while the clients run (as root), so that a hugetlbfs
# segment is one the daemon could map: it must refuse it all the same.
hostile_pool=/proc/sys/vm/nr_hugepages
hostile_pool_was=$(cat "$hostile_pool" 2>/dev/null)
hostile_pool_restore() {
	[ -z "$hostile_pool_was" ] || echo "$hostile_pool_was" >"$hostile_pool"
}
if [ "$(id -u)" = 0 ] && [ -n "$hostile_pool_was" ] &&
    [ "$hostile_pool_was" -lt 4 ]; then
	CLEANUP_HOOKS+=(hostile_pool_restore)
	echo 4 >"$hostile_pool" 2>/dev/null
fi
# With the log, each closed connection must add exactly one line.
hostile_run "client" client "$T/n0.sock" "$T/n0.log"
hostile_pool_restore
ipc_v=$(awk '$2 == "IPC_VERSION" { print $3 }' \
    "$(dirname "${BASH_SOURCE[0]}")/../../proto/ipc.h")
hostile_logged "each client refusal is logged with its reason" "$T/n0.log" \
    "bad ipc magic" "ipc version $((ipc_v + 1)), expected $ipc_v" \
    "unknown ipc message type" \
    "record shorter than a header" "header says 19 bytes, record has 9" \
    "header says 6 bytes, record has 14" "length 4294967295" \
    "longer than max_message_bytes" "first message is not HELLO" \
    "second HELLO" \
    "message type not accepted from clients" "unterminated string" \
    "IPC_HELLO: 1 descriptors, expected 0" \
    "IPC_SEG_ADD: 0 descriptors, expected 1" \
    "more descriptors than max_fds_per_message"
for i in 0 1 2; do
	hostile_alive "n$i" "${DAEMON_PIDS[$i]}" "$T/n$i.log"
done

echo "== hostile peers on a keyed 2-node cluster"

# hostile_conf I KEYFILE: the config of node kI ("" KEYFILE: no key).
hostile_conf() {
	local key=""
	[ -z "$2" ] || key="\"key_file\": \"$2\","
	cat >"$T/k$1.conf" <<EOC
{
$TRANSPORT_KEY
  "node": "k$1",
  "socket": "$T/k$1.sock",
  "nodes": [{"name": "k0", "address": "127.0.0.1:$kbase"},
            {"name": "k1", "address": "127.0.0.1:$((kbase + 1))"}],
  $key
  "log_level": "debug",
  "connect_timeout_ms": 3000,
  "heartbeat_interval_ms": 300,
  "heartbeat_timeout_ms": 1500
}
EOC
}

hostile_start() {	# I
	"$B/mccld" -c "$T/k$1.conf" >>"$T/k$1.log" 2>&1 &
	DAEMON_PIDS[$((10 + $1))]=$!
}

hostile_stop() {	# I
	local p=${DAEMON_PIDS[$((10 + $1))]:-}
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	unset "DAEMON_PIDS[$((10 + $1))]"
}

# hostile_peers_up I N: node kI sees N peers up (within 10 s).
hostile_peers_up() {
	local deadline=$((SECONDS + 10))
	while ! "$B/mcclctl" -s "$T/k$1.sock" -j status 2>/dev/null |
	    grep -q "\"peers_up\": $2"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

hostile_fds() {		# PID: descriptors the process holds
	ls "/proc/$1/fd" 2>/dev/null | wc -l
}

kbase=$(free_ports 3)
head -c 64 /dev/urandom >"$T/cluster.key"
head -c 64 /dev/urandom >"$T/wrong.key"
chmod 600 "$T/cluster.key" "$T/wrong.key"
hostile_conf 0 "$T/cluster.key"
hostile_conf 1 "$T/cluster.key"
hostile_start 0
hostile_start 1
if hostile_peers_up 0 1 && hostile_peers_up 1 1; then
	ok "keyed cluster up"
else
	bad "keyed cluster up"
	tail -n 20 "$T"/k*.log
fi

# Every refusal on the peer port names the address it came from.
pr_re='peer: 127\.0\.0\.1(:| \(says node)'
for i in 1 0; do
	h_pid=${DAEMON_PIDS[$((10 + i))]}
	fds_before=$(hostile_fds "$h_pid")
	pr_before=$(hostile_count "$T/k$i.log" "$pr_re")
	hostile_run "peer k$i" peer 127.0.0.1 $((kbase + i)) "$T/k$i.sock" 3000
	pr_cases=$(grep -cE '^(ok|FAIL) ' <<<"$HOSTILE_OUT")
	pr_logged=$(($(hostile_count "$T/k$i.log" "$pr_re") - pr_before))
	if [ "$pr_cases" -gt 0 ] && [ "$pr_logged" -eq "$pr_cases" ]; then
		ok "k$i: one log line with a reason per refused peer ($pr_logged)"
	else
		bad "k$i: $pr_logged refusal log lines for $pr_cases refused peers"
		grep -E "$pr_re" "$T/k$i.log" | tail -n 30
	fi
	fds_after=$(hostile_fds "$h_pid")
	if [ "$fds_after" -le "$fds_before" ]; then
		ok "k$i: no descriptor leaked ($fds_after, $fds_before before)"
	else
		bad "k$i: $fds_after descriptors, $fds_before before"
	fi
done
pv=$(awk '$2 == "PEER_VERSION" { print $3 }' "$(dirname "$0")/../../proto/peer.h")
hostile_logged "each peer refusal is logged with its reason" "$T/k1.log" \
    "refused: bad peer magic" "refused: peer version $((pv + 1)), expected $pv" \
    "refused: unknown peer message type 999" "length 4294967295" \
    "refused: it did not authenticate" "AUTH_HELLO claims node index 1" \
    "AUTH_HELLO claims node index 2" "AUTH_HELLO claims node index 4294967295" \
    "failed authentication" "refused: unexpected message" \
    "did not authenticate within 2000 ms"

# links_kept MODE N WHAT: mccl-hostile sends N links of MODE claiming node
# k0 to k1; k1 must keep some, at most 64; prints an ok or bad naming WHAT.
links_kept() {
	local mode=$1 n=$2 what=$3 out kept
	out=$(timeout 60 "$B/mccl-hostile" "$mode" 127.0.0.1 $((kbase + 1)) \
	    "$T/cluster.key" 0 "$n" 2>&1)
	kept=$(sed -n "s/^$n data links sent, \([0-9]*\) kept\$/\1/p" <<<"$out")
	if [ -n "$kept" ] && [ "$kept" -gt 0 ] && [ "$kept" -le 64 ]; then
		ok "k1 keeps $kept of $n $what (at most 64)"
	else
		bad "$what: $out"
	fi
}

echo "== an authenticated peer's data links of jobs that never form"
# 100 links claiming node k0, each of a job k1 never heard of: k1 keeps
# them for the job to form (connect_timeout_ms), 64 at most per node.
links_kept early 100 "early data links"
hostile_logged "the refused early links are logged" "$T/k1.log" \
    "node k0 already has 64 data links of jobs not formed here"

echo "== an authenticated peer's check links that never set up"
# 80 links claiming node k0 as mcclctl check's: k1 serves 64 at once, each
# until its set-up times out, refuses the rest, and stays up.
links_kept checklinks 80 "check links"
hostile_logged "the refused check links are logged, with why" \
    "$T/k1.log" "check: a link from node k0: 64 check links are served already"

echo "== unauthenticated peers"
hostile_run "unauth" unauth 127.0.0.1 $((kbase + 1)) "$T/k1.sock"

# A real daemon of the cluster with another key: k0 connects to k1, finds
# k1's proof wrong and drops the connection; neither comes up.
hostile_stop 0
hostile_conf 0 "$T/wrong.key"
hostile_start 0
sleep 2
if hostile_peers_up 1 0 && hostile_peers_up 0 0 &&
    grep -q "k1 .*failed authentication" "$T/k0.log"; then
	ok "daemon with another key: refused, k0 logs why"
else
	bad "daemon with another key"
	tail -n 10 "$T/k0.log" "$T/k1.log"
fi

# A real daemon without a key: it authenticates with its host key, which
# is not the cluster's; it finds k1's proof wrong, and neither comes up.
hostile_stop 0
hostile_conf 0 ""
h_before=$(hostile_count "$T/k0.log" "k1 .*failed authentication")
hostile_start 0
sleep 2
h_after=$(hostile_count "$T/k0.log" "k1 .*failed authentication")
if [ "$h_after" -gt "$h_before" ] && hostile_peers_up 1 0; then
	ok "daemon without a key: refused, k0 logs why ($((h_after - h_before))x)"
else
	bad "daemon without a key"
	tail -n 10 "$T/k0.log" "$T/k1.log"
fi
if "$B/mcclctl" -s "$T/k0.sock" -j peers 2>/dev/null |
    grep -q '"state": "up"'; then
	bad "daemon without a key thinks k1 is up"
else
	ok "daemon without a key does not see k1 up"
fi

hostile_stop 0
hostile_conf 0 "$T/cluster.key"
hostile_start 0
if hostile_peers_up 0 1 && hostile_peers_up 1 1; then
	ok "keyed cluster back up with the right key"
else
	bad "keyed cluster back up with the right key"
	tail -n 20 "$T"/k*.log
fi

echo "== a flood of idle connections on the peer port"
# More connections than the daemon has descriptors (ulimit -n 64): it must
# neither spin nor flood its log while it waits for descriptors, and must
# serve again once the flood is gone.
cat >"$T/f1.conf" <<EOC
{
  "node": "f1",
  "socket": "$T/f1.sock",
  "nodes": [{"name": "f0", "address": "127.0.0.1:$kbase"},
            {"name": "f1", "address": "127.0.0.1:$((kbase + 2))"}],
  "key_file": "$T/cluster.key",
  "log_level": "debug",
  "connect_timeout_ms": 3000
}
EOC
hostile_daemon 12 "$T/f1.conf" "$T/f1.sock" "$T/f1.log" 64
"$B/mccl-hostile" flood 127.0.0.1 $((kbase + 2)) 150 2500 \
    >"$T/flood.out" 2>&1 &
h_flooder=$!
sleep 0.5
lines0=$(wc -l <"$T/f1.log")
cpu0=$(cpu_ticks "${DAEMON_PIDS[12]}")
# A client waiting in the backlog while descriptors are short.
timeout 10 "$B/mcclctl" -s "$T/f1.sock" status >"$T/flood-ctl.out" 2>&1 &
h_waiter=$!
sleep 1.5
cpu1=$(cpu_ticks "${DAEMON_PIDS[12]}")
lines1=$(wc -l <"$T/f1.log")
wait "$h_flooder"
pct=$(( (cpu1 - cpu0) * 100 * 10 / ($(getconf CLK_TCK) * 15) ))
if [ "$pct" -lt 10 ]; then
	ok "flood: the daemon does not spin (${pct}% CPU)"
else
	bad "flood: the daemon spins at ${pct}% CPU while descriptors are short"
fi
if [ $((lines1 - lines0)) -lt 100 ]; then
	ok "flood: the log is not flooded ($((lines1 - lines0)) lines in 1.5 s)"
else
	bad "flood: $((lines1 - lines0)) log lines in 1.5 s:" \
	    "$(sed -n "$((lines0 + 1))p" "$T/f1.log")"
fi
if wait "$h_waiter"; then
	ok "flood: the waiting client is served"
else
	bad "flood: the waiting client: $(cat "$T/flood-ctl.out")"
fi
if "$B/mcclctl" -s "$T/f1.sock" status >/dev/null 2>&1; then
	ok "flood: the daemon serves after the flood"
else
	bad "flood: the daemon does not serve after the flood"
fi
hostile_alive "f1" "${DAEMON_PIDS[12]}" "$T/f1.log"
daemons_stop 12 1

echo "== a flood on the metrics port"
# A daemon short of descriptors (ulimit -n 64) serving /metrics: 300 idle
# connections held and reopened, then request lines that never end.  It
# must keep its descriptors for clients and jobs, neither spin nor flood
# its log, not keep the junk, and serve scrapes again afterwards.
mbase=$(free_ports 2)
cat >"$T/mf.conf" <<EOC
{ "node": "mf0", "socket": "$T/mf0.sock",
  "nodes": [{"name": "mf0", "address": "127.0.0.1:$mbase"}],
  "metrics_listen": "127.0.0.1:$((mbase + 1))", "metrics_timeout_ms": 1000,
  "log_level": "debug" }
EOC
hostile_daemon 13 "$T/mf.conf" "$T/mf0.sock" "$T/mf.log" 64
# mf_scrape [HEADER]: the status line of a GET /metrics.
mf_scrape() {
	curl -s -o /dev/null -w '%{http_code}' --max-time 5 ${1:+-H "$1"} \
	    "http://127.0.0.1:$((mbase + 1))/metrics"
}
mf_fds() { ls "/proc/${DAEMON_PIDS[13]}/fd" 2>/dev/null | wc -l; }
mf_rss() { awk '/^VmRSS/ { print $2 }' "/proc/${DAEMON_PIDS[13]}/status"; }
[ "$(mf_scrape)" = 200 ] && ok "metrics port: a scrape is served" ||
    bad "metrics port: a scrape got $(mf_scrape)"
fds0=$(mf_fds)
rss0=$(mf_rss)
"$B/mccl-hostile" flood 127.0.0.1 $((mbase + 1)) 300 4000 reopen \
    >"$T/mflood.out" 2>&1 &
h_flooder=$!
sleep 1
lines0=$(grep -c metrics "$T/mf.log")
timeout 10 "$B/mcclctl" -s "$T/mf0.sock" status >"$T/mflood-ctl.out" 2>&1 &&
    ok "metrics flood: mcclctl status is served meanwhile" ||
    bad "metrics flood: mcclctl status: $(cat "$T/mflood-ctl.out")"
NODE_PREFIX=mf run_job "metrics flood: a 2-rank job runs meanwhile" mfjob \
    "0 0" collectives
lines1=$(grep -c metrics "$T/mf.log")
wait "$h_flooder"
grep -q "connections reopened" "$T/mflood.out" &&
    ok "metrics flood: held and reopened ($(tr '\n' ' ' <"$T/mflood.out"))" ||
    bad "metrics flood: the flooder: $(cat "$T/mflood.out")"
[ $((lines1 - lines0)) -lt 100 ] &&
    ok "metrics flood: the log is not flooded ($((lines1 - lines0)) lines)" ||
    bad "metrics flood: $((lines1 - lines0)) log lines:" \
    "$(grep metrics "$T/mf.log" | sed -n "$((lines0 + 1))p")"
out=$("$B/mccl-hostile" junk 127.0.0.1 $((mbase + 1)) 40 8388608 2>&1)
case $out in
"40 connections, 40 closed by the daemon mid-request")
	ok "metrics port: 40 request lines of 8 MiB each are cut off" ;;
*)	bad "metrics port: endless request lines: $out" ;;
esac
sleep 1.2		# the flood's last connections meet their deadline
rss1=$(mf_rss)
[ $((rss1 - rss0)) -lt 32768 ] &&
    ok "metrics flood: the daemon kept none of it (RSS $rss0 -> $rss1 kB)" ||
    bad "metrics flood: RSS grew $rss0 -> $rss1 kB"
fds1=$(mf_fds)
[ "$fds1" -le "$fds0" ] &&
    ok "metrics flood: descriptors back to their count ($fds0 -> $fds1)" ||
    bad "metrics flood: descriptors $fds0 -> $fds1"
[ "$(mf_scrape)" = 200 ] && ok "metrics flood: scrapes are served after it" ||
    bad "metrics flood: a scrape after it got $(mf_scrape)"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --max-time 5 \
    "http://127.0.0.1:$((mbase + 1))/metrics")
[ "$code" = 405 ] && ok "metrics port: PUT is refused (405)" ||
    bad "metrics port: PUT got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
    "http://127.0.0.1:$((mbase + 1))/jobs")
[ "$code" = 404 ] && ok "metrics port: another path is 404" ||
    bad "metrics port: /jobs got $code"
hostile_alive "mf0" "${DAEMON_PIDS[13]}" "$T/mf.log"
daemons_stop 13 1

echo "== the metrics port with a bearer token"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/mtoken"
chmod 600 "$T/mtoken"
sed 's#"metrics_timeout_ms": 1000,#"metrics_token_file": "'"$T/mtoken"'",#' \
    "$T/mf.conf" >"$T/mt.conf"
hostile_daemon 13 "$T/mt.conf" "$T/mf0.sock" "$T/mt.log"
[ "$(mf_scrape)" = 401 ] && ok "metrics token: a scrape without it gets 401" ||
    bad "metrics token: a scrape without it got $(mf_scrape)"
[ "$(mf_scrape "Authorization: Bearer wrong-token-0123456789")" = 401 ] &&
    ok "metrics token: a wrong token gets 401" ||
    bad "metrics token: a wrong token got through"
[ "$(mf_scrape "Authorization: Bearer $(cat "$T/mtoken")")" = 200 ] &&
    ok "metrics token: the token's scrape is served" ||
    bad "metrics token: the token's scrape got $(mf_scrape "Authorization: Bearer $(cat "$T/mtoken")")"
daemons_stop 13 1
chmod 644 "$T/mtoken"
out=$("$B/mccld" -n -c "$T/mt.conf" 2>&1)
case $out in
*"metrics_token_file $T/mtoken has mode 0644: it must be readable by its owner only"*)
	ok "metrics token: a file others can read is refused" ;;
*)	bad "metrics token: a readable file: $out" ;;
esac

echo "== key file checks"
# hostile_badkey NAME TEXT: mccld -n on k0.conf fails, saying TEXT.
hostile_badkey() {
	local out rc
	out=$("$B/mccld" -n -c "$T/k0.conf" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && grep -qF -- "$2" <<<"$out"; then
		ok "$1 (exit $rc)"
	else
		bad "$1: exit $rc: $out"
	fi
}
cp "$T/cluster.key" "$T/open.key"
chmod 644 "$T/open.key"
hostile_conf 0 "$T/open.key"
hostile_badkey "key file of mode 0644 is refused" "chmod 600"
chmod 640 "$T/open.key"
hostile_badkey "key file of mode 0640 is refused" "chmod 600"
head -c 16 /dev/urandom >"$T/short.key"
chmod 600 "$T/short.key"
hostile_conf 0 "$T/short.key"
hostile_badkey "key file shorter than 32 bytes is refused" "shorter than 32"
hostile_conf 0 "$T/missing.key"
hostile_badkey "missing key file is refused" "$T/missing.key"
hostile_conf 0 "$T"
hostile_badkey "a directory as key file is refused" "not a regular file"
hostile_conf 0 "$T/cluster.key"
if out=$("$B/mccld" -n -c "$T/k0.conf" 2>&1); then
	ok "key file of mode 0600 is accepted"
else
	bad "key file of mode 0600: $out"
fi

echo "== daemons after the hostile tests"
for i in 0 1 2; do
	hostile_alive "n$i" "${DAEMON_PIDS[$i]}" "$T/n$i.log"
done
for i in 0 1; do
	hostile_alive "k$i" "${DAEMON_PIDS[$((10 + i))]}" "$T/k$i.log"
done
hostile_stop 0
hostile_stop 1
