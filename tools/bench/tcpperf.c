/*
 * tcpperf.c: the benchmark harness's measure of the raw link, so that MCCL
 * can be compared with what TCP itself gets between two simulated hosts in
 * the same run.  "serve" accepts one connection (or STREAMS) and answers
 * each; "bw" sends for a number of seconds on one connection (or STREAMS
 * at once, as MCCL's lanes do) and reports the bandwidth of them all up to
 * the server's acknowledgement of the last byte; "pingpong" times round trips of a small
 * message and reports the median and p99 of the round trip and of half of it
 * (the one-way latency).  IPv4 only: the harness uses 198.18.0.0/15 and
 * 127.0.0.0/8 addresses and nothing else.  "bw ... zerocopy" sends with
 * MSG_ZEROCOPY and reports how many of its sends the kernel still copied
 * (SO_EE_CODE_ZEROCOPY_COPIED): what such sends save on the path measured.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
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
#define STREAMS_MAX	64

static const char usage_text[] =
"usage: tcpperf serve ADDR PORT [STREAMS]\n"
"       tcpperf bw ADDR PORT SECONDS [STREAMS [zerocopy]]\n"
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

static void *
tcp_serve_one(void *arg)
{
	int	 fd = (int)(intptr_t)arg;
	char	 mode;

	if (!tcp_read_all(fd, &mode, 1))
		return NULL;
	if (mode == MODE_BULK)
		tcp_serve_bulk(fd);
	else if (mode == MODE_PING)
		tcp_serve_ping(fd);
	close(fd);
	return NULL;
}

static int
tcp_serve(const char *addr, const char *port, int streams)
{
	struct sockaddr_in	 sin;
	pthread_t		 th[STREAMS_MAX];
	int			 lfd, fd, one = 1;

	tcp_addr(&sin, addr, port);
	if ((lfd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		tcp_die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		tcp_die("setsockopt SO_REUSEADDR");
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		tcp_die("bind");
	if (listen(lfd, streams) == -1)
		tcp_die("listen");
	alarm(SERVE_LIMIT_S);
	printf("listening %s:%s\n", addr, port);
	fflush(stdout);
	for (int i = 0; i < streams; i++) {
		if ((fd = accept(lfd, NULL, NULL)) == -1)
			tcp_die("accept");
		if (pthread_create(&th[i], NULL, tcp_serve_one,
		    (void *)(intptr_t)fd) != 0)
			tcp_die("pthread_create");
	}
	close(lfd);
	for (int i = 0; i < streams; i++)
		pthread_join(th[i], NULL);
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

/* One stream of "bw": connected before the clock starts. */
struct bw_stream {
	pthread_t	 th;
	int		 fd;
	int		 zerocopy;
	double		 t0, seconds, end;
	uint64_t	 sent, acked;
	uint64_t	 zc_done, zc_copied;	/* sends completed, of them copied */
};

/* Take the zerocopy completions queued so far; wait for one if asked. */
static void
tcp_zc_reap(struct bw_stream *b, int wait)
{
	char			 ctl[128];
	struct msghdr		 m;
	struct cmsghdr		*c;
	struct sock_extended_err *e;
	struct pollfd		 pfd = { b->fd, 0, 0 };
	uint64_t		 n;

	if (wait && poll(&pfd, 1, 1000) == -1 && errno != EINTR)
		tcp_die("poll");
	for (;;) {
		m = (struct msghdr){ .msg_control = ctl,
		    .msg_controllen = sizeof(ctl) };
		if (recvmsg(b->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			tcp_die("recvmsg MSG_ERRQUEUE");
		}
		for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
			e = (struct sock_extended_err *)(void *)CMSG_DATA(c);
			if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY)
				continue;
			n = (uint64_t)e->ee_data - e->ee_info + 1;
			b->zc_done += n;
			if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
				b->zc_copied += n;
		}
	}
}

/* One bulk send of len bytes, MSG_ZEROCOPY; the buffer is never written. */
static void
tcp_zc_send(struct bw_stream *b, const char *buf, size_t len)
{
	ssize_t	 n;

	while (len > 0) {
		if ((n = send(b->fd, buf, len, MSG_ZEROCOPY)) == -1) {
			if (errno == ENOBUFS) {	/* too many sends pinned */
				tcp_zc_reap(b, 1);
				continue;
			}
			if (errno == EINTR)
				continue;
			tcp_die("send MSG_ZEROCOPY");
		}
		buf += n;
		len -= (size_t)n;
	}
	tcp_zc_reap(b, 0);
}

static void *
tcp_bw_one(void *arg)
{
	static char	 buf[BULK_BYTES];	/* read only: shared */
	struct bw_stream *b = arg;
	char		 mode = MODE_BULK;
	int		 one = 1;

	tcp_write_all(b->fd, &mode, 1);
	if (b->zerocopy && setsockopt(b->fd, SOL_SOCKET, SO_ZEROCOPY, &one,
	    sizeof(one)) == -1)
		tcp_die("setsockopt SO_ZEROCOPY");
	while (tcp_now() - b->t0 < b->seconds) {
		if (b->zerocopy)
			tcp_zc_send(b, buf, sizeof(buf));
		else
			tcp_write_all(b->fd, buf, sizeof(buf));
		b->sent += sizeof(buf);
	}
	if (shutdown(b->fd, SHUT_WR) == -1)
		tcp_die("shutdown");
	if (!tcp_read_all(b->fd, &b->acked, sizeof(b->acked)))
		tcp_die("no acknowledgement");
	b->end = tcp_now();
	close(b->fd);
	return NULL;
}

static int
tcp_bw(const char *addr, const char *port, double seconds, int streams,
    int zerocopy)
{
	struct bw_stream b[STREAMS_MAX];
	uint64_t	 sent = 0, zc_done = 0, zc_copied = 0;
	double		 t0, t1 = 0;

	for (int i = 0; i < streams; i++)
		b[i] = (struct bw_stream){ .fd = tcp_connect(addr, port),
		    .seconds = seconds, .zerocopy = zerocopy };
	t0 = tcp_now();
	for (int i = 0; i < streams; i++) {
		b[i].t0 = t0;
		if (pthread_create(&b[i].th, NULL, tcp_bw_one, &b[i]) != 0)
			tcp_die("pthread_create");
	}
	for (int i = 0; i < streams; i++) {
		pthread_join(b[i].th, NULL);
		if (b[i].acked != b[i].sent) {
			fprintf(stderr, "tcpperf: stream %d sent %llu bytes, "
			    "server got %llu\n", i,
			    (unsigned long long)b[i].sent,
			    (unsigned long long)b[i].acked);
			return 1;
		}
		sent += b[i].sent;
		zc_done += b[i].zc_done;
		zc_copied += b[i].zc_copied;
		t1 = b[i].end > t1 ? b[i].end : t1;
	}
	printf("bw bytes=%llu seconds=%.3f gbit_s=%.4f GB_s=%.5f streams=%d",
	    (unsigned long long)sent, t1 - t0, sent * 8 / (t1 - t0) / 1e9,
	    sent / (t1 - t0) / 1e9, streams);
	if (zerocopy)
		printf(" zerocopy_sends=%llu copied=%llu",
		    (unsigned long long)zc_done, (unsigned long long)zc_copied);
	printf("\n");
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

/* STREAMS, 1 by default. */
static int
tcp_streams(int argc, char **argv, int at)
{
	int	 n = argc > at ? atoi(argv[at]) : 1;

	if (n < 1 || n > STREAMS_MAX) {
		fprintf(stderr, "tcpperf: streams: 1 to %d\n", STREAMS_MAX);
		exit(2);
	}
	return n;
}

int
main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "serve") == 0)
		return tcp_serve(argv[2], argv[3], tcp_streams(argc, argv, 4));
	if ((argc == 5 || argc == 6 || (argc == 7 &&
	    strcmp(argv[6], "zerocopy") == 0)) && strcmp(argv[1], "bw") == 0)
		return tcp_bw(argv[2], argv[3], atof(argv[4]),
		    tcp_streams(argc, argv, 5), argc == 7);
	if (argc == 5 && strcmp(argv[1], "pingpong") == 0 && atoi(argv[4]) > 0)
		return tcp_pingpong(argv[2], argv[3], atoi(argv[4]));
	tcp_usage();
}
