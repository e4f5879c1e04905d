#!/usr/bin/env bash
# layers.sh BUILD_DIR: the daemon's calls go down only.  The layers, top
# down: the process (daemon/*.c: mccld.c, config.c; log.c serves all),
# control/, engine/, transport/.  No object of a layer uses a symbol that
# an object of a layer above it defines, and no source of it includes a
# header of a layer above; struct engine is the engine's own: no source
# outside engine/ includes engine/engine_state.h; struct job is the control
# plane's: no source outside control/ includes control/job.h, and none
# under engine/ or transport/ names struct job.  Inside control/, its
# files are in tiers (below) that call down only too.  No layer below the
# process uses what mccld.c and config.c define: control/ is given the
# settings and the loop (control_init), engine/ and transport/ arguments.
set -u
B=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
obj=$B/obj/daemon
layers="control engine transport"
fail=0

# The global symbols objects define (the objects of daemon/SUBDIR/*.c, or
# files named).
defined_by() {
	for o in "$@"; do
		nm --defined-only "$o" | awk '$2 ~ /^[TDBRC]$/ { print $3 }'
	done | sort -u
}
objects() {
	for f in "$top/daemon/$1"/*.c; do
		echo "$obj/$1/$(basename "${f%.c}").o"
	done
}

# uses LAYER SYMS WHAT: each object of LAYER that uses one of SYMS fails,
# named with WHAT.
uses() {
	local o calls
	for o in $(objects "$1"); do
		calls=$(nm -u "$o" | awk '{ print $2 }' | grep -Fx "$2" |
		    tr '\n' ' ')
		if [ -n "$calls" ]; then
			echo "FAIL $1/$(basename "${o%.o}").c $3: $calls"
			fail=1
		fi
	done
}

# The process layer: what mccld.c, config.c and reload.c define (its state, the
# settings' functions), which the layers below get from it instead.
process=$(defined_by "$obj/mccld.o" "$obj/config.o" "$obj/reload.o")
[ -n "$process" ] || { echo "FAIL layers: no mccld.o in $obj"; exit 1; }
for layer in $layers; do
	uses "$layer" "$process" "uses the process's"
done

above=""
n=0
for layer in $layers; do
	for up in $above; do
		syms=$(defined_by $(objects "$up"))
		[ -n "$syms" ] || { echo "FAIL layers: no $up/ object in $obj"; exit 1; }
		uses "$layer" "$syms" "calls up into $up/"
		for f in $(grep -l "#include \"$up/" "$top/daemon/$layer"/*.[ch]); do
			echo "FAIL $layer/$(basename "$f") includes a header of $up/"
			fail=1
		done
	done
	n=$((n + $(ls "$top/daemon/$layer"/*.c | wc -l)))
	above="$above $layer"
done
outside=$(grep -l '#include "engine/engine_state.h"' "$top"/daemon/*.c \
    "$top"/daemon/control/*.[ch] "$top"/daemon/transport/*.[ch] 2>/dev/null |
    tr '\n' ' ')
if [ -n "$outside" ]; then
	echo "FAIL struct engine seen outside engine/: $outside"
	fail=1
fi
outside=$(grep -l '#include "control/job.h"' "$top"/daemon/*.c \
    "$top"/daemon/engine/*.[ch] "$top"/daemon/transport/*.[ch] 2>/dev/null |
    tr '\n' ' ')
named=$(grep -l 'struct job\b' "$top"/daemon/engine/*.[ch] \
    "$top"/daemon/transport/*.[ch] 2>/dev/null | tr '\n' ' ')
if [ -n "$outside$named" ]; then
	echo "FAIL struct job seen outside control/: $outside$named"
	fail=1
fi
# Inside control/, tiers top down; a file may call its own tier's and the
# ones below.  Clients and mcclctl; the check; the jobs (life, formation,
# what mcclctl sees of them); the link cost; the peers; the counters, the
# liveness rule and the loop control/ runs on.  Every control/ file is in
# one tier.
tiers=("control command scrape metrics" "check" "job form jobctl"
    "linkcost" "peer" "counters liveness loop")
tiered=$(printf '%s ' "${tiers[@]}")
for f in "$top"/daemon/control/*.c; do
	case " $tiered" in *" $(basename "${f%.c}") "*) ;;
	*) echo "FAIL control/$(basename "$f") is in no tier of layers.sh"
	   fail=1 ;;
	esac
done
for ((t = 1; t < ${#tiers[@]}; t++)); do
	higher=""
	for ((u = 0; u < t; u++)); do
		for f in ${tiers[$u]}; do higher="$higher $obj/control/$f.o"; done
	done
	syms=$(defined_by $higher)
	for f in ${tiers[$t]}; do
		calls=$(nm -u "$obj/control/$f.o" | awk '{ print $2 }' |
		    grep -Fx "$syms" | tr '\n' ' ')
		if [ -n "$calls" ]; then
			echo "FAIL control/$f.c calls up its layer: $calls"
			fail=1
		fi
	done
done
[ $fail = 0 ] && echo "ok   the $n files of control/, engine/ and transport/ call down only (control/ in ${#tiers[@]} tiers) and use nothing of the process's, struct engine is engine/'s own and struct job control/'s"
exit $fail
