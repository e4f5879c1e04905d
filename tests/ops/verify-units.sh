#!/bin/sh
# verify-units.sh [BUILD_DIR]: check config/mccld.service and mccld.socket
# with systemd-analyze verify, in a temporary directory where ExecStart
# names the built daemon (verify wants an executable) and the man pages of
# Documentation= are found in man/.  Any warning or error fails.  Then
# prints the unit's exposure figure from systemd-analyze security.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd) || exit 1
[ -x "$build/mccld" ] || { echo "FAIL no $build/mccld; run make"; exit 1; }
command -v systemd-analyze >/dev/null ||
	{ echo "FAIL systemd-analyze not found (apt-get install systemd)"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mccl-units.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

sed "s#/usr/local/sbin/mccld#$build/mccld#" "$top/config/mccld.service" \
    >"$tmp/mccld.service"
cp "$top/config/mccld.socket" "$tmp/mccld.socket"
for s in 1 3 5 8; do
	mkdir -p "$tmp/man/man$s"
	for p in "$top"/man/*."$s"; do
		[ -e "$p" ] && cp "$p" "$tmp/man/man$s/"
	done
done

rc=0
cd "$tmp" || exit 1
# Verify prints nothing when all is well: every line is a finding.
MANPATH="$tmp/man" systemd-analyze verify ./mccld.service ./mccld.socket \
    >"$tmp/verify.out" 2>&1 || rc=1
if [ -s "$tmp/verify.out" ]; then
	sed 's/^/  /' "$tmp/verify.out"
	rc=1
fi
if [ $rc -eq 0 ]; then
	echo "ok   systemd-analyze verify mccld.service mccld.socket"
else
	echo "FAIL systemd-analyze verify mccld.service mccld.socket"
fi

if systemd-analyze security --offline=yes ./mccld.service \
    >"$tmp/security.out" 2>&1; then
	grep 'Overall exposure level' "$tmp/security.out" |
	    sed 's/^[^O]*/     /'
else
	echo "FAIL systemd-analyze security mccld.service"
	sed 's/^/  /' "$tmp/security.out"
	rc=1
fi
exit $rc
