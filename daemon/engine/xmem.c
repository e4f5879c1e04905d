/*
 * xmem.c: a client's own memory, read and written by the daemon through
 * the kernel (cross-memory attach: process_vm_readv and writev), so that a
 * large allreduce of ordinary memory costs one copy each way instead of the
 * library's staging copy plus the daemon's.
 *
 * The daemon does this only where the kernel itself vouches for each
 * access: the daemon and the client run as the same user (or both as
 * root), so the daemon holds no privilege over the client, and the
 * kernel's ptrace check, made at each call and safe against an exec,
 * refuses a client that turned setuid or undumpable.  A daemon run as its
 * own user (mccld.service's mccl) stages everyone's buffers, as before.
 * The client's pid comes from SO_PEERCRED; a pidfd tells the daemon when
 * that process has gone, so that it never writes to a process that took
 * its pid.
 *
 * A call can block in the kernel for as long as the client wants: pages
 * registered with userfaultfd and never served hold it in
 * handle_userfault, where no signal but the process's death reaches it.
 * Each call is counted while it runs, so that the main thread sees one
 * stuck (xmem_stuck_ns) and fails the job at the operation's deadline;
 * the thread itself is left where it is, and the daemon's exit ends it.
 */
#include <sys/syscall.h>
#include <sys/uio.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"

static int
pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* 1 while the process the pidfd names runs (the pidfd polls readable
   once it has exited). */
static int
pidfd_alive(int pidfd)
{
	struct pollfd p = { pidfd, POLLIN, 0 };

	return poll(&p, 1, 0) == 0;
}

/*
 * Open x to the client pid of uid, if the kernel lets this daemon read it:
 * it must find probe_val at probe_addr.  0, or -1 with why.
 */
int
xmem_open(struct xmem *x, pid_t pid, uid_t uid, uint64_t probe_addr,
    uint64_t probe_val, char *why, size_t whylen)
{
	uint64_t v = 0;
	struct iovec local = { &v, sizeof(v) };
	struct iovec remote = { (void *)(uintptr_t)probe_addr, sizeof(v) };
	ssize_t n;
	int fd;

	*x = (struct xmem){ .pid = 0, .pidfd = -1 };
	if (probe_addr == 0) {
		snprintf(why, whylen, "the client did not offer its memory");
		return -1;
	}
	if (geteuid() != uid) {
		snprintf(why, whylen, "the daemon runs as uid %u and the "
		    "client as uid %u; it reads only its own user's processes",
		    (unsigned)geteuid(), (unsigned)uid);
		return -1;
	}
	if ((fd = pidfd_of(pid)) == -1) {
		snprintf(why, whylen, "pidfd_open of pid %d: %s", (int)pid,
		    strerror(errno));
		return -1;
	}
	if ((n = process_vm_readv(pid, &local, 1, &remote, 1, 0)) !=
	    (ssize_t)sizeof(v) || v != probe_val) {
		if (n == -1)
			snprintf(why, whylen, "the kernel refused to let it "
			    "read pid %d: %s", (int)pid, strerror(errno));
		else
			snprintf(why, whylen, "its probe of pid %d at 0x%llx "
			    "read %zd bytes, not the value the client wrote",
			    (int)pid, (unsigned long long)probe_addr, n);
		close(fd);
		return -1;
	}
	x->pid = pid;
	x->pidfd = fd;
	return 0;
}

void
xmem_close(struct xmem *x)
{
	if (x->pidfd != -1)
		close(x->pidfd);
	x->pid = 0;
	x->pidfd = -1;
}

/* 0, or ECANCELED once refused. */
static int
xmem_enter(struct xmem *x)
{
	if (__atomic_load_n(&x->refused, __ATOMIC_ACQUIRE))
		return ECANCELED;
	__atomic_add_fetch(&x->inflight, 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&x->moved_ns, now_ns(), __ATOMIC_RELEASE);
	return 0;
}

/*
 * No call into this client's memory from now on (its job failed while one
 * was stuck there): its ranks are told at once, and must find their
 * buffers left alone.
 */
void
xmem_refuse(struct xmem *x)
{
	__atomic_store_n(&x->refused, 1, __ATOMIC_RELEASE);
}

static void
xmem_leave(struct xmem *x)
{
	__atomic_store_n(&x->moved_ns, now_ns(), __ATOMIC_RELEASE);
	__atomic_sub_fetch(&x->inflight, 1, __ATOMIC_ACQ_REL);
}

/*
 * How long calls into x's client have been under way without one
 * starting or ending; 0 if none is (any thread, the main one's watch).
 */
uint64_t
xmem_stuck_ns(struct xmem *x)
{
	uint64_t moved = __atomic_load_n(&x->moved_ns, __ATOMIC_ACQUIRE);
	uint64_t now = now_ns();

	if (__atomic_load_n(&x->inflight, __ATOMIC_ACQUIRE) == 0 || now < moved)
		return 0;
	return now - moved;
}

/* len bytes at the client's addr into dst: 0, or an errno. */
int
xmem_read(struct xmem *x, void *dst, uint64_t addr, size_t len)
{
	struct iovec local = { dst, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (xmem_enter(x) != 0)
		return ECANCELED;
	n = process_vm_readv(x->pid, &local, 1, &remote, 1, 0);
	xmem_leave(x);
	if (n == -1)
		return errno;
	if ((size_t)n != len)		/* it stopped at a page it could not
					   reach */
		return EFAULT;
	return pidfd_alive(x->pidfd) ? 0 : ESRCH;
}

/* len bytes from src to the client's addr: 0, or an errno. */
int
xmem_write(struct xmem *x, uint64_t addr, const void *src, size_t len)
{
	struct iovec local = { (void *)(uintptr_t)src, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (!pidfd_alive(x->pidfd))
		return ESRCH;
	if (xmem_enter(x) != 0)
		return ECANCELED;
	n = process_vm_writev(x->pid, &local, 1, &remote, 1, 0);
	xmem_leave(x);
	if (n == -1)
		return errno;
	return (size_t)n == len ? 0 : EFAULT;
}
