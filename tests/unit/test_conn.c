/*
 * test_conn.c: the library's side of a control reply in pieces
 * (conn_recv_doc, protocol 8), against a "daemon" at the other end of a
 * SOCK_SEQPACKET socketpair.  The pieces are joined in order into one
 * document; an error before any piece is handed back as a record; an
 * error in the middle, a document past CTL_DOC_MAX and a piece that never
 * comes are errors that say so.
 */

#include <sys/socket.h>
#include <sys/wait.h>

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mccl.h"
#include "conn.h"

static int sv[2];		/* [0] the library's, [1] the daemon's */
static uint8_t rec[IPC_MSG_MAX];

static void
pair_open(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
}

static void
pair_close(void)
{
	close(sv[0]);
	close(sv[1]);
}

static int
send_piece(const char *text, size_t len, uint32_t more)
{
	struct ipc_ctl_reply r = { 0, more };
	size_t n = wire_encode(&ipc_proto, IPC_CTL_REPLY, &r, text, len, rec,
	    sizeof(rec));

	return n > 0 && send(sv[1], rec, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 :
	    -1;
}

static void
send_error(const char *text)
{
	struct ipc_error e = { MCCL_ERR_PERMISSION, IPC_CTL };
	size_t n = wire_encode(&ipc_proto, IPC_ERROR, &e, text, strlen(text),
	    rec, sizeof(rec));

	ck_assert_int_eq(send(sv[1], rec, n, 0), (ssize_t)n);
}

START_TEST(pieces_are_joined_in_order)
{
	static struct ipc_msg m;
	size_t len, total = 3 * CTL_PIECE_MAX - 100;
	char *want = malloc(total), *doc, err[256];
	pid_t pid;
	int st;

	pair_open();
	for (size_t i = 0; i < total; i++)
		want[i] = (char)('a' + i % 23);
	/* written by a child: three records do not fit the socket at once */
	if ((pid = fork()) == 0) {
		int rc = send_piece(want, CTL_PIECE_MAX, 1) ||
		    send_piece(want + CTL_PIECE_MAX, CTL_PIECE_MAX, 1) ||
		    send_piece(want + 2 * CTL_PIECE_MAX, total - 2 *
		    CTL_PIECE_MAX, 0);

		_exit(rc);
	}
	ck_assert_int_eq(conn_recv_doc(sv[0], 5000, &m, &doc, &len, err,
	    sizeof(err)), MCCL_SUCCESS);
	ck_assert_ptr_nonnull(doc);
	ck_assert_uint_eq(len, total);
	ck_assert_int_eq(memcmp(doc, want, total), 0);
	ck_assert_int_eq(doc[len], '\0');
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(doc);
	free(want);
	pair_close();
}
END_TEST

START_TEST(an_error_first_is_handed_back)
{
	static struct ipc_msg m;
	char *doc, err[256];
	size_t len;

	pair_open();
	send_error("not yours");
	ck_assert_int_eq(conn_recv_doc(sv[0], 1000, &m, &doc, &len, err,
	    sizeof(err)), MCCL_SUCCESS);
	ck_assert_ptr_null(doc);
	ck_assert_uint_eq(m.hdr.type, IPC_ERROR);
	ck_assert_uint_eq(m.u.error.code, MCCL_ERR_PERMISSION);
	pair_close();
}
END_TEST

START_TEST(an_error_midway_is_a_protocol_error)
{
	static struct ipc_msg m;
	char *doc, err[256];
	size_t len;

	pair_open();
	ck_assert_int_eq(send_piece("{\"a\": ", 6, 1), 0);
	send_error("late");
	ck_assert_int_eq(conn_recv_doc(sv[0], 1000, &m, &doc, &len, err,
	    sizeof(err)), MCCL_ERR_PROTOCOL);
	ck_assert_ptr_null(doc);
	ck_assert_ptr_nonnull(strstr(err, "IPC_ERROR in the middle of a reply"));
	pair_close();
}
END_TEST

START_TEST(a_missing_piece_times_out)
{
	static struct ipc_msg m;
	char *doc, err[256];
	size_t len;

	pair_open();
	ck_assert_int_eq(send_piece("{\"a\": ", 6, 1), 0);
	ck_assert_int_eq(conn_recv_doc(sv[0], 200, &m, &doc, &len, err,
	    sizeof(err)), MCCL_ERR_TIMEOUT);
	ck_assert_ptr_null(doc);
	pair_close();
}
END_TEST

START_TEST(a_document_past_the_limit_is_refused)
{
	static struct ipc_msg m;
	static char piece[CTL_PIECE_MAX];
	char *doc, err[256];
	size_t len;
	pid_t pid;
	int st;

	pair_open();
	memset(piece, 'x', sizeof(piece));
	if ((pid = fork()) == 0) {	/* pieces, more and more, until closed */
		close(sv[0]);
		while (send_piece(piece, sizeof(piece), 1) == 0)
			;
		_exit(0);
	}
	close(sv[1]);
	ck_assert_int_eq(conn_recv_doc(sv[0], 5000, &m, &doc, &len, err,
	    sizeof(err)), MCCL_ERR_PROTOCOL);
	ck_assert_ptr_null(doc);
	ck_assert_ptr_nonnull(strstr(err, "goes past"));
	close(sv[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("conn");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, pieces_are_joined_in_order);
	tcase_add_test(tc, an_error_first_is_handed_back);
	tcase_add_test(tc, an_error_midway_is_a_protocol_error);
	tcase_add_test(tc, a_missing_piece_times_out);
	tcase_add_test(tc, a_document_past_the_limit_is_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
