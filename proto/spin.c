/*
 * spin.c: the spin-then-sleep policy of spin.h.
 *
 * Waking a sleeping thread costs a futex or poll wake-up: a few
 * microseconds on an idle machine, 50-200 on a virtual one whose wake-ups
 * go through the hypervisor.  A waiter that spins instead sees the event
 * within a cache miss, but only if the thread it waits for has a CPU of
 * its own: on an oversubscribed machine spinning steals that CPU and slows
 * everyone.  So "auto" spins for at most SPIN_AUTO_US while the kernel
 * counts fewer runnable threads than online CPUs (procs_running in
 * /proc/stat, read at most every SAMPLE_NS by whichever waiter finds the
 * sample stale), and not at all otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

#define SAMPLE_NS	100000000ULL	/* 100 ms */

static uint64_t	sampled_ns;		/* when idle_cpu was last read */
static int	idle_cpu;		/* 1: fewer runnable than CPUs */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* procs_running from /proc/stat, or -1. */
static long
procs_running(void)
{
	char buf[8192], *p;
	ssize_t n;
	int fd;

	if ((fd = open("/proc/stat", O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if ((p = strstr(buf, "\nprocs_running ")) == NULL)
		return -1;
	return strtol(p + 15, NULL, 10);
}

static int
machine_has_idle_cpu(void)
{
	uint64_t now = mono_ns();
	long running, cpus;

	if (now - __atomic_load_n(&sampled_ns, __ATOMIC_RELAXED) < SAMPLE_NS)
		return __atomic_load_n(&idle_cpu, __ATOMIC_RELAXED);
	__atomic_store_n(&sampled_ns, now, __ATOMIC_RELAXED);
	running = procs_running();
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* The reader itself is running: an idle CPU means running < cpus. */
	__atomic_store_n(&idle_cpu, running > 0 && running < cpus,
	    __ATOMIC_RELAXED);
	return __atomic_load_n(&idle_cpu, __ATOMIC_RELAXED);
}

/* "auto", or microseconds from 0 (never spin) to SPIN_MAX_US. */
int
spin_parse(const char *s, int32_t *us, char *err, size_t errlen)
{
	char *end;
	long v;

	if (strcmp(s, "auto") == 0) {
		*us = SPIN_AUTO;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 ||
	    v > SPIN_MAX_US) {
		snprintf(err, errlen, "\"%.32s\": expected auto or microseconds "
		    "from 0 to %d", s, SPIN_MAX_US);
		return -1;
	}
	*us = (int32_t)v;
	return 0;
}

/* How long to spin now, for a setting of spin_us (SPIN_AUTO or >= 0). */
uint64_t
spin_budget_ns(int32_t spin_us)
{
	if (spin_us == SPIN_AUTO)
		return machine_has_idle_cpu() ? SPIN_AUTO_US * 1000ULL : 0;
	return (uint64_t)spin_us * 1000;
}

/* One turn of a spin loop: tell the CPU, and a sibling hyperthread. */
void
spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}
