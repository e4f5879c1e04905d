/*
 * testlib.h: what several unit tests need alike (testlib.c): a loopback
 * TCP connection, a sleep that finishes, an anonymous mapping.
 */
#ifndef MCCL_TESTLIB_H
#define MCCL_TESTLIB_H

#include <stddef.h>

int	 tcp_pair(int *, int *);
void	 msleep(unsigned);
void	*map(size_t);

#endif
