/*
 * test_scrape.c: the metrics port (control/scrape.c) on loopback, driven
 * by the test's own event loop: GET /metrics answered with the samples'
 * text (metrics.c's, faked here), other methods, paths and malformed or
 * oversized requests refused by status, the bearer token when one is set,
 * the cap on connections and the deadline of a slow one.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "ctltest.h"
#include "testlib.h"

#define BODY	"mccl_clients 3\n"
#define WAIT_MS	5000		/* an answer, at the latest */

/* ---- metrics.c, faked: one sample and its text ---- */

json_t *
metrics_samples(void)
{
	return json_array();
}

void
metrics_text(struct evbuffer *b, const json_t *samples)
{
	(void)samples;
	evbuffer_add_printf(b, BODY);
}

/* ---- the daemon's side ---- */

static struct config settings;

/* scrape_init on a free port of the tests' range. */
static void
port_up(const char *token_file)
{
	char err[ERR_MAX] = "";
	int rc = -1;

	ctltest_init(&settings, NULL);
	snprintf(settings.metrics_listen.host,
	    sizeof(settings.metrics_listen.host), "127.0.0.1");
	snprintf(settings.metrics_token_file,
	    sizeof(settings.metrics_token_file), "%s", token_file);
	for (int i = 0; i < 50 && rc == -1; i++) {
		settings.metrics_listen.port = test_port(i);
		rc = scrape_init(err, sizeof(err));
	}
	ck_assert_msg(rc == 0, "%s", err);
}

static void
port_down(void)
{
	scrape_close();
	ctltest_end();
}

/* ---- a scraper ---- */

static int
dial(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_port = htons(settings.metrics_listen.port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* The loop turns until fd's peer closes it (1) or ms pass (0); what came
 * is in out. */
static int
drain(int fd, char *out, size_t outlen, int ms)
{
	size_t len = 0;
	uint64_t until = ms_from_now((uint64_t)ms);

	out[0] = '\0';
	while (now_ns() < until) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t n;

		event_base_loop(ctl_base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 5) != 1)
			continue;
		if ((n = read(fd, out + len, outlen - 1 - len)) <= 0)
			return n == 0 || errno == ECONNRESET;
		len += (size_t)n;
		out[len] = '\0';
	}
	return 0;
}

/* Send req on a new connection; the whole answer into out. */
static void
http(const char *req, char *out, size_t outlen)
{
	int fd = dial();

	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	ck_assert_msg(drain(fd, out, outlen, WAIT_MS), "no answer to %s", req);
	close(fd);
}

/* ---- the cases ---- */

START_TEST(get_metrics_is_the_samples_text)
{
	char out[4096], want[128];

	port_up("");
	http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", out, sizeof(out));
	ck_assert_msg(strncmp(out, "HTTP/1.0 200 OK\r\n", 17) == 0, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "Content-Type: text/plain; "
	    "version=0.0.4\r\n"));
	snprintf(want, sizeof(want), "Content-Length: %zu\r\n", strlen(BODY));
	ck_assert_ptr_nonnull(strstr(out, want));
	ck_assert_str_eq(strstr(out, "\r\n\r\n") + 4, BODY);
	/* a query string is the same page; a bare \n\n ends a request too */
	http("GET /metrics?x=1 HTTP/1.0\n\n", out, sizeof(out));
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 200 OK\r\n", 17), 0);
	port_down();
}
END_TEST

START_TEST(other_requests_are_refused_by_status)
{
	char out[4096], big[8192 + 1];	/* the most it reads, all read */

	port_up("");
	http("POST /metrics HTTP/1.1\r\n\r\n", out, sizeof(out));
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 405 Method Not Allowed\r\n",
	    33), 0);
	ck_assert_ptr_nonnull(strstr(out, "Allow: GET\r\n"));
	http("GET /debug HTTP/1.1\r\n\r\n", out, sizeof(out));
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 404 Not Found\r\n", 24), 0);
	http("hello\r\n\r\n", out, sizeof(out));
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 400 Bad Request\r\n", 26), 0);
	memset(big, 'a', sizeof(big) - 1);	/* no end of headers */
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	http(big, out, sizeof(out));
	ck_assert_msg(strncmp(out, "HTTP/1.0 431 ", 13) == 0, "%s", out);
	port_down();
}
END_TEST

/* With metrics_token_file, only "Authorization: Bearer TOKEN" scrapes. */
START_TEST(the_token_is_asked_for)
{
	char out[4096], path[128];
	const char *token = "s3cret-token-0123456789";
	int fd;

	snprintf(path, sizeof(path), "%s/token", test_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dprintf(fd, "%s\n", token), (int)strlen(token) + 1);
	close(fd);
	port_up(path);
	http("GET /metrics HTTP/1.1\r\n\r\n", out, sizeof(out));
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 401 Unauthorized\r\n", 27), 0);
	ck_assert_ptr_nonnull(strstr(out, "WWW-Authenticate: Bearer "
	    "realm=\"mccld\"\r\n"));
	ck_assert_ptr_null(strstr(out, BODY));
	http("GET /metrics HTTP/1.1\r\nAuthorization: Bearer wrong-token-"
	    "0123456789\r\n\r\n", out, sizeof(out));
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 401 ", 13), 0);
	http("GET /metrics HTTP/1.1\r\nauthorization: bearer s3cret-token-"
	    "0123456789\r\n\r\n", out, sizeof(out));
	ck_assert_msg(strncmp(out, "HTTP/1.0 200 OK\r\n", 17) == 0, "%s", out);
	port_down();
}
END_TEST

START_TEST(a_short_token_is_refused)
{
	char path[128], err[ERR_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/short", test_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dprintf(fd, "short\n%s\n", "x-long-second-line-xxxx"),
	    30);
	close(fd);
	ck_assert_int_eq(scrape_token_load(path, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "the token (its first line) is shorter "
	    "than 16 bytes") != NULL, "%s", err);
	chmod(path, 0644);		/* and one others may read */
	ck_assert_int_eq(scrape_token_load(path, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, path));
}
END_TEST

/*
 * Past metrics_max_connections the port rests: the next scraper waits in
 * the kernel until a slow one is ended by metrics_timeout_ms, then is
 * served.
 */
START_TEST(connections_are_capped_and_slow_ones_end)
{
	char out[4096];
	const char *req = "GET /metrics HTTP/1.1\r\n\r\n";
	int slow[2], next;

	settings.metrics_max_connections = 2;
	settings.metrics_timeout_ms = 400;
	port_up("");
	slow[0] = dial();
	slow[1] = dial();
	ck_assert_int_eq(write(slow[0], "GET /met", 8), 8);	/* half */
	next = dial();
	ck_assert_int_eq(write(next, req, strlen(req)), (ssize_t)strlen(req));
	/* not served while the two hold the port */
	ck_assert_int_eq(drain(next, out, sizeof(out), 200), 0);
	ck_assert_str_eq(out, "");
	/* the slow ones end at their deadline, and then it is served */
	ck_assert_int_eq(drain(slow[0], out, sizeof(out), WAIT_MS), 1);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(drain(slow[1], out, sizeof(out), WAIT_MS), 1);
	ck_assert_int_eq(drain(next, out, sizeof(out), WAIT_MS), 1);
	ck_assert_int_eq(strncmp(out, "HTTP/1.0 200 OK\r\n", 17), 0);
	close(slow[0]);
	close(slow[1]);
	close(next);
	port_down();
}
END_TEST

static void
setup(void)
{
	memset(&settings, 0, sizeof(settings));
	settings.metrics_max_connections = 16;
	settings.metrics_timeout_ms = 5000;
}

int
main(void)
{
	Suite *s = suite_create("scrape");
	TCase *tc = tcase_create("scrape");

	log_init(LOG_ERR, "test_scrape");
	test_dir_fixture(tc, "test_scrape");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, get_metrics_is_the_samples_text);
	tcase_add_test(tc, other_requests_are_refused_by_status);
	tcase_add_test(tc, the_token_is_asked_for);
	tcase_add_test(tc, a_short_token_is_refused);
	tcase_add_test(tc, connections_are_capped_and_slow_ones_end);
	suite_add_tcase(s, tc);
	return test_run(s);
}
