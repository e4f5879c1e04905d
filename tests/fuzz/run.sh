#!/bin/sh
# run.sh: build the libFuzzer targets of tests/fuzz/ with ASan and UBSan,
# then run each for SECONDS seconds on a scratch copy of its seed corpus.
#
#	tests/fuzz/run.sh SECONDS [BUILD_DIR]
#
# Binaries, logs and crash reproducers go to BUILD_DIR/fuzz (default
# build/fuzz); the repository is never written.  Prints "ok TARGET: N runs"
# per target, or what crashed; exits non-zero if any target crashed,
# leaked, timed out or ran out of memory.  FUZZ_CC picks the compiler
# (default: clang, else clang-14); FUZZ_CFLAGS adds compiler flags
# (-DFUZZ_IPC_NO_CONN, say).

set -eu

usage() {
	echo "usage: $0 SECONDS [BUILD_DIR]" >&2
	exit 2
}

[ $# -ge 1 ] && [ $# -le 2 ] || usage
case $1 in
''|*[!0-9]*) usage ;;
esac
secs=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-build}
case $build in
/*) ;;
*) build=$top/$build ;;
esac
out=$build/fuzz
cd "$top"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mccl-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SAN="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
FLAGS="-std=c11 -D_GNU_SOURCE -g -O1 $SAN -Iproto -Ilibclient -Idaemon"
WARN="-Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes
    -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla -Wcast-qual
    -Wundef"
if pkg-config --exists jansson 2>/dev/null; then
	JSON_CFLAGS=$(pkg-config --cflags jansson)
	JSON_LIBS=$(pkg-config --libs jansson)
else
	JSON_CFLAGS=
	JSON_LIBS=-ljansson
fi

# The first compiler that links a libFuzzer program with the sanitizers.
pick_cc() {
	cat >"$tmp/probe.c" <<-EOF
	int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long);
	int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)
	{ (void)d; (void)n; return 0; }
	EOF
	for c in ${FUZZ_CC:-} clang clang-14; do
		if command -v "$c" >/dev/null 2>&1 &&
		    "$c" $SAN -o "$tmp/probe" "$tmp/probe.c" >/dev/null 2>&1; then
			echo "$c"
			return 0
		fi
	done
	echo "$0: no compiler builds libFuzzer programs with ASan and" \
	    "UBSan (install clang)" >&2
	return 1
}

# compile SRC OBJ STRICT: our files with -Werror, the project's without.
compile() {
	werror=
	[ "$3" = strict ] && werror=-Werror
	"$cc" $FLAGS $WARN $werror $JSON_CFLAGS ${FUZZ_CFLAGS:-} \
	    -c -o "$2" "$1"
}

build_all() {
	mkdir -p "$out/obj" "$out/logs" "$out/artifacts"
	for s in proto/proto.c proto/spin.c daemon/config.c daemon/log.c; do
		compile "$s" "$out/obj/$(basename "$s" .c).o" lax
	done
	for t in fuzz_wire fuzz_ipc fuzz_peer fuzz_config; do
		compile "tests/fuzz/$t.c" "$out/obj/$t.o" strict
	done
	o=$out/obj
	"$cc" $SAN -o "$out/fuzz_ipc" "$o/fuzz_ipc.o" "$o/fuzz_wire.o" \
	    "$o/proto.o"
	"$cc" $SAN -o "$out/fuzz_peer" "$o/fuzz_peer.o" "$o/fuzz_wire.o" \
	    "$o/proto.o"
	"$cc" $SAN -o "$out/fuzz_config" "$o/fuzz_config.o" "$o/config.o" "$o/proto.o" \
	    "$o/spin.o" "$o/log.o" $JSON_LIBS
}

# run TARGET CORPUS MAX_LEN [libFuzzer options]: 0 if it found nothing.
run() {
	name=$1 corpus=$2 maxlen=$3
	shift 3
	log=$out/logs/$name.log
	mkdir -p "$tmp/$name"
	cp tests/fuzz/corpus/"$corpus"/* "$tmp/$name/"
	rc=0
	"$out/$name" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix="$out/artifacts/$name-" "$@" "$tmp/$name" \
	    >"$log" 2>&1 || rc=$?
	if [ "$rc" -eq 0 ]; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "ok $name: ${runs:-?} runs"
		return 0
	fi
	echo "FAIL $name (exit $rc), log in $log:"
	grep -E 'ERROR|SUMMARY|of size|invariant failed|Test unit written|^    #[0-3] ' \
	    "$log" | head -20 | sed 's/^/    /'
	return 1
}

cc=$(pick_cc)
echo "building fuzz targets with $cc in $out"
build_all
failed=0
run fuzz_ipc ipc 4096 || failed=1
run fuzz_peer peer 8192 || failed=1
run fuzz_config config 4096 -dict=tests/fuzz/config.dict || failed=1
exit $failed
