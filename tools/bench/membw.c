/*
 * membw.c: memcpy bandwidth of this machine, measured by the benchmark
 * harness in the same run as the single-host allreduce, to turn "as fast as
 * memory allows" into a number.  For 1 to THREADS threads, each thread
 * copies its own BYTES-byte buffer REPS times (buffers touched first, so no
 * page faults are timed); the best repetition counts.  A round lasts from
 * the first thread's start to the last one's end, each read by the thread
 * itself: a clock read by the parent after the start barrier may come after
 * a copy has run (2 busy cores), which once gave 60 TB/s.  Prints, per thread
 * count, the copy rate (bytes copied per second, all threads together) and
 * the memory traffic (twice that: every byte is read once and written once).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS_MAX	64

struct membw_thread {
	pthread_t		 tid;
	size_t			 bytes;
	char			*src;
	char			*dst;
	pthread_barrier_t	*start;
	double			 t_start, t_end;	/* CLOCK_MONOTONIC, s */
};

static double
membw_now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *
membw_copy(void *arg)
{
	struct membw_thread	*t = arg;

	pthread_barrier_wait(t->start);
	t->t_start = membw_now();
	memcpy(t->dst, t->src, t->bytes);
	t->t_end = membw_now();
	return NULL;
}

/* Seconds of one round in which each of n threads copies its buffer. */
static double
membw_round(struct membw_thread *t, int n)
{
	pthread_barrier_t	 start;
	double			 first, last;
	int			 i;

	pthread_barrier_init(&start, NULL, (unsigned)n + 1);
	for (i = 0; i < n; i++) {
		t[i].start = &start;
		if (pthread_create(&t[i].tid, NULL, membw_copy, &t[i]) != 0) {
			fprintf(stderr, "membw: pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < n; i++)
		pthread_join(t[i].tid, NULL);
	pthread_barrier_destroy(&start);
	first = t[0].t_start;
	last = t[0].t_end;
	for (i = 1; i < n; i++) {
		first = t[i].t_start < first ? t[i].t_start : first;
		last = t[i].t_end > last ? t[i].t_end : last;
	}
	return last - first;
}

int
main(int argc, char **argv)
{
	struct membw_thread	 t[THREADS_MAX];
	size_t			 bytes;
	double			 best, s;
	int			 reps, threads, n, i, r;

	if (argc != 4 || (bytes = strtoull(argv[1], NULL, 0)) == 0 ||
	    (reps = atoi(argv[2])) <= 0 || (threads = atoi(argv[3])) <= 0 ||
	    threads > THREADS_MAX) {
		fprintf(stderr, "usage: membw BYTES REPS THREADS\n");
		return 2;
	}
	for (i = 0; i < threads; i++) {
		t[i].bytes = bytes;
		if ((t[i].src = malloc(bytes)) == NULL ||
		    (t[i].dst = malloc(bytes)) == NULL) {
			fprintf(stderr, "membw: out of memory\n");
			return 1;
		}
		memset(t[i].src, i + 1, bytes);
		memset(t[i].dst, 0, bytes);
	}
	for (n = 1; n <= threads; n++) {
		best = 1e30;
		for (r = 0; r < reps; r++)
			if ((s = membw_round(t, n)) < best)
				best = s;
		printf("memcpy bytes=%zu threads=%d time_us=%.1f copy_GB_s=%.3f "
		    "traffic_GB_s=%.3f\n", bytes, n, best * 1e6,
		    (double)bytes * n / best / 1e9,
		    2.0 * bytes * n / best / 1e9);
	}
	return 0;
}
