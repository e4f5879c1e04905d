#!/usr/bin/env bash
# private-build.sh BUILD_DIR: the cross-user tests (the ctl and security
# sections of the integration suite) with the build in a directory only its
# owner may enter, as a clone in a private home or under mktemp -d is: the
# test users must still run what they run.  Root only; cleans up on exit.
set -u
B=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then
	echo "(not root: the private-build test is skipped)"
	exit 0
fi
P=$(mktemp -d /tmp/mccl-private.XXXXXX)	# mode 0700
trap 'rm -rf "$P"' EXIT
mkdir "$P/build"
cp "$B/mccld" "$B/mcclctl" "$B/mccl-test" "$B/mccl-hostile" "$P/build/"
out=$("$here/../integration/run.sh" "$P/build" ctl security 2>&1)
rc=$?
line=$(tail -n 1 <<<"$out")
if [ $rc -eq 0 ] && [[ $line == *" passed, 0 failed" ]]; then
	echo "ok   the cross-user tests from a build in a mode $(stat -c %a \
"$P") directory ($line)"
else
	grep '^FAIL' <<<"$out"
	echo "FAIL the cross-user tests from a build in a private directory: $line"
	exit 1
fi
