/*
 * costmodel.c: what the daemon's cost model (daemon/engine/algo.c, the
 * code itself) predicts, for the bench's model-against-measurement table:
 * for each size, every candidate's time and AUTO's choice.
 * Usage: costmodel -n NODES -a ALPHA_NS -b BETA_PS [-p BETA_PAIR_PS]
 *                  -g GAMMA_PS [-c allreduce|broadcast] SIZE...
 * Prints "size algo predicted_us" lines, AUTO's as algo "auto:NAME".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/algo.h"

static void
usage(void)
{
	fprintf(stderr, "usage: costmodel -n NODES -a ALPHA_NS -b BETA_PS "
	    "[-p BETA_PAIR_PS] -g GAMMA_PS [-c allreduce|broadcast] "
	    "SIZE...\n");
	exit(2);
}

static unsigned long
number(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (*s == '\0' || *end != '\0')
		usage();
	return v;
}

int
main(int argc, char **argv)
{
	struct link_cost c = { 0, 0, 0, 0 };
	unsigned long n = 0;
	int ch, coll = COLL_ALLREDUCE;

	while ((ch = getopt(argc, argv, "a:b:c:g:n:p:")) != -1) {
		switch (ch) {
		case 'a': c.alpha_ns = (uint32_t)number(optarg); break;
		case 'b': c.beta_ps = (uint32_t)number(optarg); break;
		case 'g': c.gamma_ps = (uint32_t)number(optarg); break;
		case 'n': n = number(optarg); break;
		case 'p': c.beta_pair_ps = (uint32_t)number(optarg); break;
		case 'c':
			if (strcmp(optarg, "broadcast") == 0)
				coll = COLL_BROADCAST;
			else if (strcmp(optarg, "allreduce") != 0)
				usage();
			break;
		default: usage();
		}
	}
	if (n < 2 || n > UINT32_MAX || c.beta_ps == 0 || optind == argc)
		usage();
	for (int i = optind; i < argc; i++) {
		size_t bytes = number(argv[i]);

		for (int a = ALGO_AUTO + 1; a <= ALGO_MAX; a++)
			if (algo_runs_for(coll, a))
				printf("%zu %s %.1f\n", bytes,
				    proto_algo_name(a), algo_predict_ns(coll,
				    a, (uint32_t)n, bytes, 0, &c) / 1e3);
		printf("%zu auto:%s\n", bytes, proto_algo_name(algo_choose(coll,
		    ALGO_AUTO, (uint32_t)n, bytes, 0, &c)));
	}
	return 0;
}
