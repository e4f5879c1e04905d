/*
 * tcpperf.c: the benchmark harness's measure of the raw link, so that MCCL
 * can be compared with what TCP itself gets between two simulated hosts in
 * the same run.  "serve" accepts one connection and answers it; "bw" sends
 * for a number of seconds and reports the bandwidth up to the server's
 * acknowledgement of the last byte; "pingpong" times round trips of a small
 * message and reports the median and p99 of the round trip and of half of it
 * (the one-way latency).  IPv4 only: the harness uses 198.18.0.0/15 and
 * 127.0.0.0/8 addresses and nothing else.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BULK_BYTES	(1 << 20)	/* one send() of the bulk transfer */
#define PING_BYTES	8
#define SERVE_LIMIT_S	120		/* the server gives up after this */
#define MODE_BULK	'B'
#define MODE_PING	'P'

static const char usage_text[] =
"usage: tcpperf serve ADDR PORT\n"
"       tcpperf bw ADDR PORT SECONDS\n"
"       tcpperf pingpong ADDR PORT COUNT\n";

static void __attribute__((noreturn))
tcp_die(const char *what)
{
	fprintf(stderr, "tcpperf: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void __attribute__((noreturn))
tcp_usage(void)
{
	fputs(usage_text, stderr);
	exit(2);
}

static double
tcp_now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
tcp_addr(struct sockaddr_in *sin, const char *addr, const char *port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1) {
		fprintf(stderr, "tcpperf: %s: not an IPv4 address\n", addr);
		exit(2);
	}
}

static void
tcp_nodelay(int fd)
{
	int	 one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1)
		tcp_die("setsockopt TCP_NODELAY");
}

static void
tcp_write_all(int fd, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			tcp_die("write");
		}
		p += n;
		len -= (size_t)n;
	}
}

/* Returns 0 at end of file before any byte, else 1. */
static int
tcp_read_all(int fd, void *buf, size_t len)
{
	char	*p = buf;
	size_t	 got = 0;
	ssize_t	 n;

	while (got < len) {
		if ((n = read(fd, p + got, len - got)) == -1) {
			if (errno == EINTR)
				continue;
			tcp_die("read");
		}
		if (n == 0) {
			if (got == 0)
				return 0;
			fprintf(stderr, "tcpperf: short read\n");
			exit(1);
		}
		got += (size_t)n;
	}
	return 1;
}

/* Bulk: count everything until end of file, then acknowledge the count. */
static void
tcp_serve_bulk(int fd)
{
	static char	 buf[BULK_BYTES];
	uint64_t	 total = 0;
	ssize_t		 n;

	for (;;) {
		if ((n = read(fd, buf, sizeof(buf))) == -1) {
			if (errno == EINTR)
				continue;
			tcp_die("read");
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
	}
	tcp_write_all(fd, &total, sizeof(total));
}

static void
tcp_serve_ping(int fd)
{
	char	 buf[PING_BYTES];

	tcp_nodelay(fd);
	while (tcp_read_all(fd, buf, sizeof(buf)))
		tcp_write_all(fd, buf, sizeof(buf));
}

static int
tcp_serve(const char *addr, const char *port)
{
	struct sockaddr_in	 sin;
	int			 lfd, fd, one = 1;
	char			 mode;

	tcp_addr(&sin, addr, port);
	if ((lfd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		tcp_die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		tcp_die("setsockopt SO_REUSEADDR");
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		tcp_die("bind");
	if (listen(lfd, 1) == -1)
		tcp_die("listen");
	alarm(SERVE_LIMIT_S);
	printf("listening %s:%s\n", addr, port);
	fflush(stdout);
	if ((fd = accept(lfd, NULL, NULL)) == -1)
		tcp_die("accept");
	close(lfd);
	if (!tcp_read_all(fd, &mode, 1))
		return 1;
	if (mode == MODE_BULK)
		tcp_serve_bulk(fd);
	else if (mode == MODE_PING)
		tcp_serve_ping(fd);
	close(fd);
	return 0;
}

/* Connect, retrying for a few seconds while the server starts. */
static int
tcp_connect(const char *addr, const char *port)
{
	struct sockaddr_in	 sin;
	double			 deadline = tcp_now() + 10;
	int			 fd;

	tcp_addr(&sin, addr, port);
	for (;;) {
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
			tcp_die("socket");
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
			return fd;
		if (tcp_now() > deadline)
			tcp_die("connect");
		close(fd);
		usleep(50000);
	}
}

static int
tcp_bw(const char *addr, const char *port, double seconds)
{
	static char	 buf[BULK_BYTES];
	uint64_t	 sent = 0, acked = 0;
	double		 t0, t1;
	char		 mode = MODE_BULK;
	int		 fd;

	memset(buf, 0xa5, sizeof(buf));
	fd = tcp_connect(addr, port);
	tcp_write_all(fd, &mode, 1);
	t0 = tcp_now();
	while (tcp_now() - t0 < seconds) {
		tcp_write_all(fd, buf, sizeof(buf));
		sent += sizeof(buf);
	}
	if (shutdown(fd, SHUT_WR) == -1)
		tcp_die("shutdown");
	if (!tcp_read_all(fd, &acked, sizeof(acked)))
		tcp_die("no acknowledgement");
	t1 = tcp_now();
	close(fd);
	if (acked != sent) {
		fprintf(stderr, "tcpperf: sent %llu bytes, server got %llu\n",
		    (unsigned long long)sent, (unsigned long long)acked);
		return 1;
	}
	printf("bw bytes=%llu seconds=%.3f gbit_s=%.4f GB_s=%.5f\n",
	    (unsigned long long)sent, t1 - t0, sent * 8 / (t1 - t0) / 1e9,
	    sent / (t1 - t0) / 1e9);
	return 0;
}

static int
tcp_cmp_double(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The p-th percentile (0..100), nearest rank, of a sorted array. */
static double
tcp_percentile(const double *v, int n, double p)
{
	int	 k = (int)(p / 100 * n + 0.999999) - 1;

	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static int
tcp_pingpong(const char *addr, const char *port, int count)
{
	char	 buf[PING_BYTES] = "mcclping", mode = MODE_PING;
	double	*rtt, t0, med, p99;
	int	 fd, i, warm = count / 10;

	if ((rtt = calloc((size_t)count, sizeof(*rtt))) == NULL)
		tcp_die("calloc");
	fd = tcp_connect(addr, port);
	tcp_nodelay(fd);
	tcp_write_all(fd, &mode, 1);
	for (i = -warm; i < count; i++) {
		t0 = tcp_now();
		tcp_write_all(fd, buf, sizeof(buf));
		if (!tcp_read_all(fd, buf, sizeof(buf)))
			tcp_die("server closed");
		if (i >= 0)
			rtt[i] = (tcp_now() - t0) * 1e6;
	}
	close(fd);
	qsort(rtt, (size_t)count, sizeof(*rtt), tcp_cmp_double);
	med = tcp_percentile(rtt, count, 50);
	p99 = tcp_percentile(rtt, count, 99);
	printf("pingpong n=%d bytes=%d rtt_median_us=%.2f rtt_p99_us=%.2f "
	    "oneway_median_us=%.2f oneway_p99_us=%.2f\n", count, PING_BYTES,
	    med, p99, med / 2, p99 / 2);
	free(rtt);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "serve") == 0)
		return tcp_serve(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "bw") == 0)
		return tcp_bw(argv[2], argv[3], atof(argv[4]));
	if (argc == 5 && strcmp(argv[1], "pingpong") == 0 && atoi(argv[4]) > 0)
		return tcp_pingpong(argv[2], argv[3], atoi(argv[4]));
	tcp_usage();
}
