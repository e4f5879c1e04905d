/*
 * wirebw.c: how fast the daemon converts float32 for a 16-bit wire
 * (reduce.c's wire_narrow, wire_widen and wire_add_narrow, the kernel set
 * the daemon picks), against memcpy of the same float32 buffer, one
 * thread, buffers of COUNT floats touched first; the best of REPS runs
 * counts.  Prints each as memory traffic per second (bytes read and
 * written) and as elements per second, and its traffic rate over memcpy's:
 * near 1 means the conversion runs at memory speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/reduce.h"

#define COUNT	(16u << 20)		/* 64 MiB of float32 */
#define REPS	7

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

enum kind { COPY, NARROW, WIDEN, ADD_NARROW };

static const struct {
	const char	*name;
	int		 bytes;		/* of memory traffic per element */
} kinds[] = {
	{ "memcpy float32", 8 },	/* read 4, write 4 */
	{ "wire_narrow", 6 },		/* read 4, write 2 */
	{ "wire_widen", 6 },		/* read 2, write 4 */
	{ "wire_add_narrow", 12 },	/* in place, as the ring runs it:
					   read 4 + 2, write 4 + 2 */
};

static double
best_of(enum kind k, int wire, float *a, float *b, uint16_t *h)
{
	double best = 1e9, t;

	for (int r = 0; r < REPS; r++) {
		t = now_s();
		switch (k) {
		case COPY: memcpy(b, a, COUNT * sizeof(float)); break;
		case NARROW: wire_narrow(h, a, COUNT, wire); break;
		case WIDEN: wire_widen(b, h, COUNT, wire); break;
		case ADD_NARROW: wire_add_narrow(b, b, h, h, COUNT, wire, 0);
			break;
		}
		t = now_s() - t;
		if (t < best)
			best = t;
	}
	return best;
}

int
main(void)
{
	float *a = malloc(COUNT * sizeof(float)), *b = malloc(COUNT *
	    sizeof(float));
	uint16_t *h = malloc(COUNT * sizeof(uint16_t));
	double copy_rate = 0;

	if (a == NULL || b == NULL || h == NULL) {
		fprintf(stderr, "wirebw: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < COUNT; i++)
		a[i] = b[i] = (float)i * 0x1p-10f;
	memset(h, 0, COUNT * sizeof(uint16_t));
	printf("# wirebw: %u float32, best of %d, one thread, kernel set %s\n",
	    COUNT, REPS, reduce_isa());
	printf("# %-26s %10s %12s %8s\n", "kernel", "GB/s", "Gelem/s",
	    "x memcpy");
	for (int w = 0; w < 2; w++) {
		int wire = w ? MCCL_BFLOAT16 : MCCL_FLOAT16;

		for (enum kind k = w ? NARROW : COPY; k <= ADD_NARROW; k++) {
			double t = best_of(k, wire, a, b, h);
			double rate = kinds[k].bytes * (double)COUNT / t / 1e9;
			char name[64];

			if (k == COPY)
				copy_rate = rate;
			snprintf(name, sizeof(name), "%s%s%s", kinds[k].name,
			    k == COPY ? "" : " ", k == COPY ? "" :
			    dtype_name(wire));
			printf("  %-26s %10.2f %12.3f %8.2f\n", name, rate,
			    COUNT / t / 1e9, rate / copy_rate);
		}
	}
	free(a);
	free(b);
	free(h);
	return 0;
}
