/*
 * fuzz.h: what the fuzz targets share: the libFuzzer entry point (also
 * called by standalone.c's main), an invariant check that survives NDEBUG,
 * and the wire-codec checks of fuzz_wire.c.
 */
#ifndef MCCL_FUZZ_H
#define MCCL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wire.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A broken invariant is a bug: say which, then crash for the fuzzer. */
#define FUZZ_CHECK(cond) do {						\
	if (!(cond))							\
		fuzz_fail(__FILE__, __LINE__, #cond);			\
} while (0)

static inline void __attribute__((noreturn))
fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, what);
	abort();
}

/* One decoded frame, as the daemon and the library see it. */
struct fuzz_frame {
	struct wire_hdr		 hdr;
	const struct wire_type	*type;
	const uint8_t		*trailer;
	size_t			 trailer_len;
};

/* fuzz_wire.c */
size_t	fuzz_max_host_size(const struct wire_proto *);
int	fuzz_hdr_check(const struct wire_proto *, const uint8_t *,
	    struct fuzz_frame *);
int	fuzz_decode(const struct wire_proto *, const uint8_t *, size_t,
	    struct fuzz_frame *, void *, size_t);
void	fuzz_check_decoded(const struct wire_proto *, const uint8_t *, size_t,
	    const struct fuzz_frame *, const void *);

#endif
