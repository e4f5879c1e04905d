#!/usr/bin/env bash
# install-test.sh [BUILD_DIR]: `make install` into a temporary DESTDIR, then
# check what it installed: every file, the library's soname and symlinks,
# pkg-config, a program built against the installed library and run against
# the installed daemon, the man pages, the units and the sysusers file.
# Also installs with another PREFIX to check the paths that embed it.
# Set MAKE to use another make or Makefile ("make -f Makefile.test").
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd) || exit 1
MAKE=${MAKE:-make}
PREFIX=/usr/local

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mccl-install.XXXXXX") || exit 1
PIDS=()
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASS=0
FAIL=0
ok()  { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
check() {	# check DESCRIPTION COMMAND...: ok when the command succeeds
	local what=$1
	shift
	if "$@" >"$tmp/out" 2>&1; then
		ok "$what"
	else
		bad "$what"
		sed 's/^/     /' "$tmp/out" | head -n 20
	fi
}
summary() {
	echo "$PASS passed, $FAIL failed"
	[ "$FAIL" -eq 0 ]
	exit
}

# Build directory to pass to make, when it is not the default one.
bflag=()
[ "$build" = "$top/build" ] || bflag=(B="$build")

# make_install DESTDIR PREFIX
make_install() {
	# shellcheck disable=SC2086 # MAKE may hold arguments
	$MAKE -C "$top" "${bflag[@]}" install DESTDIR="$1" PREFIX="$2"
}

# ---- another prefix (first, so that build/ ends with the default) ----

d2=$tmp/root2
if make_install "$d2" /opt/mccl >"$tmp/install2.log" 2>&1 &&
    grep -q '^ExecStart=/opt/mccl/sbin/mccld ' \
    "$d2/opt/mccl/lib/systemd/system/mccld.service" &&
    grep -qx 'prefix=/opt/mccl' "$d2/opt/mccl/lib/pkgconfig/mccl.pc" &&
    grep -qx 'libdir=/opt/mccl/lib' "$d2/opt/mccl/lib/pkgconfig/mccl.pc"; then
	ok "PREFIX=/opt/mccl: unit and mccl.pc follow the prefix"
else
	bad "PREFIX=/opt/mccl"
	tail -n 10 "$tmp/install2.log" | sed 's/^/     /'
fi

# ---- install ----

d=$tmp/root
p=$d$PREFIX
pydir=lib/python$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
if make_install "$d" "$PREFIX" >"$tmp/install.log" 2>&1; then
	ok "make install DESTDIR=\$tmp PREFIX=$PREFIX"
else
	bad "make install DESTDIR=\$tmp PREFIX=$PREFIX"
	tail -n 20 "$tmp/install.log" | sed 's/^/     /'
	summary
fi

files=(
	sbin/mccld bin/mcclctl bin/mccl-perf
	lib/libmccl.so.0.1.0 lib/libmccl.so.0 lib/libmccl.so lib/libmccl.a
	include/mccl.h lib/pkgconfig/mccl.pc
	share/man/man1/mccl-perf.1 share/man/man3/libmccl.3
	share/man/man3/mccl_allreduce.3 share/man/man5/mccld.conf.5
	share/man/man8/mccld.8 share/man/man8/mcclctl.8
	lib/systemd/system/mccld.service lib/systemd/system/mccld.socket
	lib/sysusers.d/mccl.conf
	share/doc/mccl/mccld.conf.example share/doc/mccl/mccld.conf.keys
	bin/mcclrun share/man/man1/mcclrun.1 share/man/man3/mccl-python.3
	"$pydir/mccl/__init__.py" "$pydir/mccl/torch.py"
	share/doc/mccl/examples/allreduce.py share/doc/mccl/examples/ddp.py
)
missing=""
for f in "${files[@]}"; do
	[ -e "$p/$f" ] || missing="$missing $PREFIX/$f"
done
[ -e "$d/etc/mccl/mccld.conf.example" ] ||
	missing="$missing /etc/mccl/mccld.conf.example"
if [ -z "$missing" ]; then
	ok "all ${#files[@]} files under $PREFIX and /etc/mccl/mccld.conf.example"
else
	bad "missing:$missing"
fi
[ -e "$d/etc/mccl/mccld.conf" ] && bad "install wrote /etc/mccl/mccld.conf"

modes=""
for f in sbin/mccld bin/mcclctl bin/mccl-perf bin/mcclrun lib/libmccl.so.0.1.0; do
	[ "$(stat -c %a "$p/$f" 2>/dev/null)" = 755 ] || modes="$modes $f"
done
for f in include/mccl.h lib/libmccl.a lib/pkgconfig/mccl.pc \
    lib/systemd/system/mccld.service share/man/man8/mccld.8; do
	[ "$(stat -c %a "$p/$f" 2>/dev/null)" = 644 ] || modes="$modes $f"
done
if [ -z "$modes" ]; then
	ok "modes: programs and library 0755, data 0644"
else
	bad "wrong modes:$modes"
fi

# ---- the shared library ----

l0=$(readlink "$p/lib/libmccl.so.0")
l1=$(readlink "$p/lib/libmccl.so")
if [ "$l0" = libmccl.so.0.1.0 ] && [ "$l1" = libmccl.so.0 ] &&
    [ -f "$p/lib/libmccl.so.0.1.0" ] && [ ! -L "$p/lib/libmccl.so.0.1.0" ]; then
	ok "libmccl.so -> libmccl.so.0 -> libmccl.so.0.1.0"
else
	bad "symlinks: libmccl.so -> '$l1', libmccl.so.0 -> '$l0'"
fi
soname=$(readelf -d "$p/lib/libmccl.so.0.1.0" 2>/dev/null |
    sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = libmccl.so.0 ]; then
	ok "readelf -d: SONAME libmccl.so.0"
else
	bad "readelf -d: SONAME '$soname', expected libmccl.so.0"
fi
undef=$(nm -D --defined-only "$p/lib/libmccl.so.0.1.0" 2>/dev/null |
    awk '$2 == "T" { print $3 }' | grep '^mccl_' | sort)
want=$(sed -n 's/^[[:alpha:]][[:alnum:]_[:space:]*]*\(mccl_[a-z_0-9]*\)(.*/\1/p' \
    "$p/include/mccl.h" |
    sort -u)
if [ -n "$want" ] && [ "$(comm -23 <(echo "$want") <(echo "$undef"))" = "" ]; then
	ok "every function of mccl.h is exported ($(echo "$want" | wc -l))"
else
	bad "not exported: $(comm -23 <(echo "$want") <(echo "$undef") | tr '\n' ' ')"
fi

# ---- pkg-config and a program built against the installed files ----

pc() {
	PKG_CONFIG_PATH=$p/lib/pkgconfig PKG_CONFIG_LIBDIR=$p/lib/pkgconfig \
	    PKG_CONFIG_SYSROOT_DIR=$d pkg-config "$@"
}
flags=$(pc --cflags --libs mccl 2>&1 | sed 's/ *$//')
if [ "$(pc --modversion mccl 2>&1)" = 0.1.0 ] &&
    [ "$flags" = "-I$p/include -L$p/lib -lmccl" ]; then
	ok "pkg-config mccl: 0.1.0, $flags"
else
	bad "pkg-config mccl: $(pc --modversion mccl 2>&1), '$flags'"
fi
sflags=$(pc --static --libs mccl 2>&1 | sed 's/ *$//')
case $sflags in
*-lpthread*) ok "pkg-config --static --libs mccl: $sflags" ;;
*) bad "pkg-config --static --libs mccl: '$sflags' lacks -lpthread" ;;
esac

# The README's example program.
cat >"$tmp/prog.c" <<'EOF'
#include <mccl.h>
#include <stdio.h>

int
main(void)
{
	mccl_comm_t *comm;
	float *buf;

	/* MCCL_JOB, MCCL_RANK, MCCL_NRANKS; or torchrun, Slurm, mpirun */
	if (mccl_comm_init_env(&comm) != MCCL_SUCCESS) {
		fprintf(stderr, "init: %s\n", mccl_last_error(NULL));
		return 1;
	}
	buf = mccl_alloc(comm, 1024 * sizeof(float));	/* zero copy */
	for (int i = 0; i < 1024; i++)
		buf[i] = (float)mccl_comm_rank(comm);
	if (mccl_allreduce(buf, buf, 1024, MCCL_FLOAT32, MCCL_SUM, comm,
	    NULL) != MCCL_SUCCESS)
		fprintf(stderr, "allreduce: %s\n", mccl_last_error(comm));
	else
		printf("rank %d: %g\n", mccl_comm_rank(comm), buf[0]);
	mccl_free(comm, buf);
	mccl_comm_destroy(comm);
	return 0;
}
EOF
# shellcheck disable=SC2086 # flags are words
check "cc prog.c \$(pkg-config --cflags --libs mccl) -Wl,-rpath" \
    cc -std=c11 -Wall -Werror -o "$tmp/prog" "$tmp/prog.c" $flags \
    -Wl,-rpath,"$p/lib"
needed=$(readelf -d "$tmp/prog" 2>/dev/null |
    sed -n 's/.*(NEEDED).*\[\(libmccl[^]]*\)\]/\1/p')
if [ "$needed" = libmccl.so.0 ]; then
	ok "prog needs libmccl.so.0"
else
	bad "prog needs '$needed', expected libmccl.so.0"
fi
# shellcheck disable=SC2046 # flags are words
check "static: cc prog.c libmccl.a \$(pkg-config --static --libs-only-l)" \
    cc -std=c11 -Wall -Werror -o "$tmp/prog-static" "$tmp/prog.c" \
    $(pc --cflags mccl) "$p/lib/libmccl.a" \
    $(pc --static --libs-only-l mccl | sed 's/-lmccl//')

# Without a job in the environment the program must fail cleanly: this
# shows it loaded the installed library.
env -u MCCL_JOB -u MCCL_RANK -u MCCL_NRANKS -u RANK -u WORLD_SIZE \
    -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK \
    -u OMPI_COMM_WORLD_SIZE LD_LIBRARY_PATH= "$tmp/prog" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q '^init: no job' "$tmp/out"; then
	ok "prog runs with the installed library, fails without a job"
else
	bad "prog without a job: exit $rc: $(head -c 300 "$tmp/out")"
fi

# ---- the installed daemon, mcclctl and the program together ----

. "$top/tools/ports.sh"
port=$(free_ports 1)
sock=$tmp/mccld.sock
cat >"$tmp/mccld.conf" <<EOF
{ "node": "n0", "socket": "$sock",
  "nodes": [ { "name": "n0", "address": "127.0.0.1:$port" } ] }
EOF
check "installed mccld -n accepts a configuration" \
    "$p/sbin/mccld" -n -c "$tmp/mccld.conf"
"$p/sbin/mccld" -c "$tmp/mccld.conf" >"$tmp/mccld.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do		# 20 s: a loaded machine starts it slowly
	"$p/bin/mcclctl" -s "$sock" status >/dev/null 2>&1 && break
	sleep 0.1
done
check "installed mcclctl status talks to the installed mccld" \
    "$p/bin/mcclctl" -s "$sock" status
rpids=()
for r in 0 1; do
	MCCL_SOCKET=$sock MCCL_JOB=install-test MCCL_RANK=$r MCCL_NRANKS=2 \
	    MCCL_INIT_TIMEOUT_MS=10000 timeout 30 "$tmp/prog" \
	    >"$tmp/prog$r.out" 2>&1 &
	rpids+=($!)
done
rc=0
for pid in "${rpids[@]}"; do
	wait "$pid" || rc=1
done
if [ $rc -eq 0 ] && grep -qx 'rank 0: 1' "$tmp/prog0.out" &&
    grep -qx 'rank 1: 1' "$tmp/prog1.out"; then
	ok "README example, 2 ranks on the installed daemon: sum 1 on each"
else
	bad "README example, 2 ranks: $(cat "$tmp"/prog?.out | head -c 400)"
	tail -n 5 "$tmp/mccld.log" | sed 's/^/     /'
fi

# The README's Python example: the installed package (through the
# dynamic linker's search, given the installed lib directory) under the
# installed mcclrun, 2 ranks on the installed daemon.
out=$(PYTHONPATH="$p/$pydir" LD_LIBRARY_PATH="$p/lib" timeout 60 \
    /usr/bin/python3 "$p/bin/mcclrun" --mcclctl "$p/bin/mcclctl" \
    --socket "$sock" -n 2 /usr/bin/python3 \
    "$p/share/doc/mccl/examples/allreduce.py" 2>&1)
if [ "$(grep -c 'of 2: 3 (expected 3)' <<<"$out")" = 2 ]; then
	ok "the installed Python package under the installed mcclrun"
else
	bad "installed Python package: $out"
fi

# ---- man pages ----

for f in man1/mccl-perf.1 man1/mcclrun.1 man3/mccl-python.3 \
    man3/libmccl.3 man3/mccl_allreduce.3 man3/mccl_gather.3 \
    man3/mccl_comm_stats.3 \
    man5/mccld.conf.5 man8/mccld.8 man8/mcclctl.8; do
	page=$p/share/man/$f
	if [ ! -e "$page" ]; then
		bad "man -l $f: not installed"
		continue
	fi
	out=$(MANWIDTH=80 man -l "$page" 2>&1 >"$tmp/man.txt")
	if [ -z "$out" ] && [ "$(wc -l <"$tmp/man.txt")" -gt 10 ]; then
		ok "man -l $f renders ($(wc -l <"$tmp/man.txt") lines)"
	else
		bad "man -l $f: $out"
	fi
done

# ---- units and sysusers ----

unit=$p/lib/systemd/system/mccld.service
if grep -q "^ExecStart=$PREFIX/sbin/mccld " "$unit" && ! grep -q "$tmp" "$unit"; then
	ok "mccld.service runs $PREFIX/sbin/mccld"
else
	bad "mccld.service: $(grep '^ExecStart' "$unit")"
fi
if command -v systemd-sysusers >/dev/null; then
	mkdir -p "$tmp/sysroot/etc"
	if systemd-sysusers --root="$tmp/sysroot" \
	    "$p/lib/sysusers.d/mccl.conf" >"$tmp/out" 2>&1 &&
	    grep -q '^mccl:x:[0-9]*:[0-9]*:MCCL daemon:/:' \
	    "$tmp/sysroot/etc/passwd" && grep -q '^mccl:x:' \
	    "$tmp/sysroot/etc/group"; then
		ok "systemd-sysusers creates user and group mccl"
	else
		bad "systemd-sysusers: $(cat "$tmp/out")"
	fi
fi

summary
