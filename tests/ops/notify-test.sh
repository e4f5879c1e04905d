#!/usr/bin/env bash
# notify-test.sh BUILD_DIR: mccld's messages to systemd (READY=1, STATUS=,
# WATCHDOG=1, RELOADING=1 on SIGHUP, STOPPING=1 on SIGTERM), received by a
# socket that plays systemd; and socket activation with
# systemd-socket-activate.  Cleans up on any exit.
set -u
B=$(cd "${1:-build}" && pwd)
T=$(mktemp -d /tmp/mccl-notify.XXXXXX)
PIDS=()
cleanup() { kill -9 "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }

. "$(dirname "$0")/../../tools/ports.sh"
port=$(free_ports 1)
cat >"$T/n0.conf" <<EOC
{ "node": "n0", "socket": "$T/n0.sock", "log_level": "warning",
  "nodes": [{ "name": "n0", "address": "127.0.0.1:$port" }] }
EOC

"$B/notify-sink" "$T/notify" 4 >"$T/messages" &
PIDS+=($!)
sleep 0.2
NOTIFY_SOCKET="$T/notify" WATCHDOG_USEC=400000 "$B/mccld" -v -c "$T/n0.conf" \
    2>"$T/log" &
daemon=$!
PIDS+=($daemon)
sleep 1.2
kill -HUP "$daemon"
sleep 0.5
kill -TERM "$daemon"
wait "$daemon" && ok "mccld exits 0 on SIGTERM" || bad "mccld exit status"
wait "${PIDS[0]}"
for m in READY=1 "STATUS=0 of 0 peers up, 0 jobs, 0 clients" WATCHDOG=1 \
    RELOADING=1 STOPPING=1; do
	grep -qxF "$m" "$T/messages" && ok "systemd told: $m" ||
	    bad "systemd never told: $m"
done
n=$(grep -c '^WATCHDOG=1$' "$T/messages")
[ "$n" -ge 4 ] && ok "watchdog pinged $n times in 1.7 s (period 0.4 s)" ||
    bad "watchdog pinged $n times"
grep -q "reload: configuration applied" "$T/log" &&
    ok "SIGHUP re-read the configuration" || bad "SIGHUP: no reload logged"

# Socket activation: systemd-socket-activate holds the socket and starts
# the daemon at the first connection; mcclctl must get its answer.
if command -v systemd-socket-activate >/dev/null; then
	systemd-socket-activate --seqpacket -l "$T/act.sock" \
	    "$B/mccld" -v -c "$T/n0.conf" -s "$T/act.sock" 2>"$T/act.log" &
	PIDS+=($!)
	sleep 0.5
	out=$("$B/mcclctl" -s "$T/act.sock" -t 5000 status 2>&1)
	case $out in
	*"node:         n0"*) ok "socket activation: mcclctl answered" ;;
	*) bad "socket activation: $out"; cat "$T/act.log" ;;
	esac
	grep -q "socket systemd passed" "$T/act.log" &&
	    ok "socket activation: the daemon used the passed socket" ||
	    bad "socket activation: not the passed socket"
else
	bad "systemd-socket-activate is not installed"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
