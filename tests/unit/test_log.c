/*
 * test_log.c: unit tests of daemon/log.c: what a client or peer puts in a
 * message cannot forge a log line or a journal priority.
 */
#include <sys/stat.h>

#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/*
 * What one log call writes to stderr, as the journal's stream (its
 * JOURNAL_STREAM set, as systemd does) or not.
 */
static void
logged_to(int journal, const char *name, char *out, size_t outlen)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	char js[64];
	struct stat st;
	size_t n;

	ck_assert_ptr_nonnull(tmp);
	ck_assert_int_eq(fstat(fileno(tmp), &st), 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	if (journal)
		setenv("JOURNAL_STREAM", js, 1);
	else
		unsetenv("JOURNAL_STREAM");
	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	log_warnx("job %s: refused", name);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, outlen - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

static void
logged(const char *name, char *out, size_t outlen)
{
	logged_to(1, name, out, outlen);
}

/* Not the journal's: a local time stamp to the millisecond, the priority
   as a word. */
START_TEST(test_terminal_has_time_and_level_word)
{
	char out[512];
	regex_t re;

	logged_to(0, "x\n<3>mccld: FORGED", out, sizeof(out));
	ck_assert_int_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2} "
	    "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} mccld: warning: job "
	    "x\\\\x0a<3>mccld: FORGED: refused\n$", REG_EXTENDED), 0);
	ck_assert_msg(regexec(&re, out, 0, NULL, 0) == 0, "%s", out);
	regfree(&re);
}
END_TEST

START_TEST(test_newline_escaped)
{
	char out[512];

	logged("x\n<3>mccld: FORGED", out, sizeof(out));
	ck_assert_str_eq(out, "<4>mccld: job x\\x0a<3>mccld: FORGED: refused\n");
}
END_TEST

START_TEST(test_controls_escaped)
{
	char out[512];

	logged("a\rb\tc\x1b[31md\x7f", out, sizeof(out));
	ck_assert_str_eq(out,
	    "<4>mccld: job a\\x0db\\x09c\\x1b[31md\\x7f: refused\n");
}
END_TEST

START_TEST(test_plain_unchanged)
{
	char out[512];

	logged("train-42 (épique)", out, sizeof(out));
	ck_assert_str_eq(out, "<4>mccld: job train-42 (épique): refused\n");
}
END_TEST

/* A message of nothing but control characters still ends in one line. */
START_TEST(test_long_escaped_one_line)
{
	char name[1500], out[8192];
	char *nl;

	memset(name, '\n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	logged(name, out, sizeof(out));
	nl = strchr(out, '\n');
	ck_assert_ptr_nonnull(nl);
	ck_assert_msg(nl[1] == '\0', "more than one line written");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("escape");
	SRunner *sr;
	int failed;

	log_init(LOG_DEBUG, "mccld");
	tcase_add_test(tc, test_newline_escaped);
	tcase_add_test(tc, test_controls_escaped);
	tcase_add_test(tc, test_plain_unchanged);
	tcase_add_test(tc, test_long_escaped_one_line);
	tcase_add_test(tc, test_terminal_has_time_and_level_word);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
