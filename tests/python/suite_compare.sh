#!/usr/bin/env bash
# suite_compare.sh BUILD_DIR [-k PATTERN]...: PyTorch's distributed suite
# (torch_suite.sh) on gloo and on mccl at world sizes 2 and 4, in turn;
# every test that passes on gloo must pass on mccl, but those that torch
# itself runs for named backends only (EXCLUDED, each with its reason).
# Prints each world size's tally and the tests gloo passes and mccl does
# not, then one "N passed, N failed" line (a test counts once per world
# size); exits 1 if mccl misses one not excluded.  `make check-torch-suite` runs it whole (hours on 2
# cores; SUITE_TIMEOUT bounds each run); -k narrows it to some tests.
set -u
B=${1:-build}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
# Tests torch passes on gloo only, whatever the other backend does: a glob
# of names, then why.
EXCLUDED='
test_monitored_barrier_* torch runs monitored_barrier on gloo alone ("monitored_barrier is only implemented for GLOO backend")
test_accumulate_gradients_no_sync* the test builds its model only when the backend is gloo, mpi or nccl (UnboundLocalError otherwise)
test_ddp_logging_data_cpu torch 2 logs every third-party backend as "custom" (ProcessGroup::getBackendName) where get_backend names it
'
# The reason a test is excluded for, or nothing.
excluded() {
	local glob why
	while read -r glob why; do
		[ -n "$glob" ] || continue
		# shellcheck disable=SC2053
		[[ $1 == $glob ]] && { echo "$why"; return; }
	done <<<"$EXCLUDED"
}
out=$(mktemp -d /tmp/mccl-suite.XXXXXX)
trap 'rm -rf "$out"' EXIT
pass=0 fail=0
tally() { grep -E '^[0-9]+ passed' "$1" | tail -n 1; }
for ws in 2 4; do
	"$HERE/torch_suite.sh" "$B" gloo "$ws" "$@" >"$out/gloo.$ws" 2>&1
	"$HERE/torch_suite.sh" "$B" mccl "$ws" -g "$@" >"$out/mccl.$ws" 2>&1
	grep '^ok ' "$out/gloo.$ws" | awk '{ print $2 }' | sort >"$out/g"
	grep '^ok ' "$out/mccl.$ws" | awk '{ print $2 }' | sort >"$out/m"
	echo "== world size $ws: gloo $(tally "$out/gloo.$ws"); mccl $(tally "$out/mccl.$ws")"
	missed=""
	for t in $(comm -23 "$out/g" "$out/m"); do
		why=$(excluded "$t")
		if [ -n "$why" ]; then
			echo "excluded: $t: $why"
		else
			missed="$missed$t"$'\n'
		fi
	done
	missed=${missed%$'\n'}
	both=$(comm -12 "$out/g" "$out/m" | wc -l)
	if [ -n "$missed" ]; then
		echo "passes on gloo, not on mccl:"
		sed 's/^/    /' <<<"$missed"
	fi
	pass=$((pass + both))
	fail=$((fail + $(grep -c . <<<"$missed")))
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
