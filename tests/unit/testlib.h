/*
 * testlib.h: what several unit tests need alike (testlib.c): a loopback
 * TCP connection, a sleep that finishes, an anonymous mapping, a private
 * directory, a port of the tests' range, and running a suite.
 */
#ifndef MCCL_TESTLIB_H
#define MCCL_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include <check.h>

int	 tcp_pair(int *, int *);
void	 msleep(unsigned);
void	*map(size_t);
void	 test_dir_make(char *, size_t, const char *);
void	 test_dir_remove(const char *);
extern char test_dir[64];	/* the test's directory (test_dir_fixture) */
void	 test_dir_fixture(TCase *, const char *);
uint16_t test_port(int);
int	 test_run(Suite *);

#endif
