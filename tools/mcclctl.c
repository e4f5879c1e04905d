/*
 * mcclctl.c: the MCCL status tool, modelled on OpenBGPD's bgpctl.  Sends one
 * control request to mccld over its Unix socket, checks the JSON reply
 * against the command's schema, and prints it through the command's text or
 * JSON renderer (output.c).  Nothing here knows what a command prints.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "clusterconf.h"
#include "conn.h"
#include "output.h"

#define EXIT_ERROR		1	/* the daemon said no, or made no sense */
#define EXIT_UNREACHABLE	2	/* no daemon; also usage errors */
#define TIMEOUT_MS_DEFAULT	5000
#define ERR_LEN			(IPC_TEXT_MAX + 256)

static void	ctl_warn(const char *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

/* "mcclctl: what: why", the one error format. */
static void
ctl_warn(const char *what, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mcclctl: ");
	if (what != NULL)
		fprintf(stderr, "%s: ", what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "jobs [--failed]": a row picked by an option follows its plain one. */
static void
usage(FILE *f)
{
	fprintf(f, "usage: mcclctl [-hj] [-s socket] [-t timeout_ms] "
	    "command [argument]\ncommands:");
	for (const struct command *c = commands; c->name != NULL; c++)
		if (c->option != NULL)
			fprintf(f, " [--%s]", c->option);
		else
			fprintf(f, "%s %s%s%s", c == commands ? "" : ",",
			    c->name, c->arg != NULL ? " " : "",
			    c->arg != NULL ? c->arg : "");
	fprintf(f, "\n       mcclctl check --write-config [-o file] "
	    "[NAME=]HOST[:PORT]...\n");
}

static int
parse_timeout(const char *s, int *ms)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < 1 || v > INT_MAX)
		return -1;
	*ms = (int)v;
	return 0;
}

/*
 * -o FILE: the configuration written beside FILE and renamed over it once
 * whole, so that a host that does not resolve leaves FILE as it was (a
 * shell's > would have emptied it first).
 */
static int
write_config_file(const char *file, char *const hosts[], int n, char *err,
    size_t errlen)
{
	char tmp[PATH_MAX];
	FILE *f = NULL;
	int fd, rc = -1;

	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", file);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1 ||
	    (f = fdopen(fd, "w")) == NULL) {
		snprintf(err, errlen, "%s: %s", file, strerror(errno));
		if (fd != -1) {
			close(fd);
			unlink(tmp);
		}
		return -1;
	}
	if (cluster_conf_write(f, hosts, n, err, errlen) == 0) {
		if (fchmod(fd, 0644) == 0 && fsync(fd) == 0 &&
		    rename(tmp, file) == 0)
			rc = 0;
		else
			snprintf(err, errlen, "%s: %s", file, strerror(errno));
	}
	fclose(f);
	if (rc == -1)
		unlink(tmp);
	return rc;
}

/* check --write-config HOST...: no daemon asked; the file on stdout. */
static int
write_config(const char *command, const char *file, char *const hosts[],
    int n)
{
	char err[ERR_LEN];

	if (strcmp(command, "check") != 0) {
		ctl_warn(command, "takes no --write-config (check does)");
		usage(stderr);
		return EXIT_UNREACHABLE;
	}
	if ((file != NULL ? write_config_file(file, hosts, n, err,
	    sizeof(err)) : cluster_conf_write(stdout, hosts, n, err,
	    sizeof(err))) == -1) {
		ctl_warn("check --write-config", "%s", err);
		return EXIT_ERROR;
	}
	return 0;
}

static int	stream_json;	/* -j, for ctl_stream */

/*
 * The reply to c: a JSON document, or an exit status with the reason said.
 * reply, len: the document conn_recv_doc joined, or NULL where m, the last
 * record, is not a reply.
 */
static int
ctl_reply(const struct command *c, const struct ipc_msg *m,
    const char *reply, size_t len, json_t **doc)
{
	char text[ERR_LEN];
	json_error_t jerr;

	if (reply == NULL && m->hdr.type == IPC_ERROR) {
		output_clean(text, sizeof(text), (const char *)m->trailer,
		    m->trailer_len);
		if (*text != '\0')
			ctl_warn(c->name, "mccld: %s", text);
		else
			ctl_warn(c->name, "mccld: error %u", m->u.error.code);
		return EXIT_ERROR;
	}
	if (reply == NULL) {
		ctl_warn(c->name, "bad reply from mccld: %s", m->type->name);
		return EXIT_ERROR;
	}
	if (m->u.ctl_reply.code != 0) {
		ctl_warn(c->name, "mccld: error %u", m->u.ctl_reply.code);
		return EXIT_ERROR;
	}
	if ((*doc = json_loadb(reply, len, JSON_REJECT_DUPLICATES, &jerr)) ==
	    NULL) {
		output_clean(text, sizeof(text), jerr.text, sizeof(jerr.text));
		ctl_warn(c->name, "bad reply from mccld: not JSON: line %d "
		    "column %d: %s", jerr.line, jerr.column, text);
		return EXIT_ERROR;
	}
	if (reply_check(*doc, c->schema, text, sizeof(text)) == -1) {
		ctl_warn(c->name, "bad reply from mccld: %s", text);
		json_decref(*doc);
		*doc = NULL;
		return EXIT_ERROR;
	}
	return 0;
}

/*
 * A command that streams (monitor): show each reply as it comes, until the
 * daemon closes the connection (an error: it stopped) or we are killed.
 */
static int
ctl_stream(int fd, const struct command *c, struct ipc_msg *m, json_t *first)
{
	char err[ERR_LEN], *reply;
	json_t *doc = first;
	size_t len;
	int rc;

	for (;;) {
		(stream_json ? c->json : c->text)(stdout, doc);
		json_decref(doc);
		doc = NULL;
		if (ferror(stdout))
			return EXIT_ERROR;
		if (conn_recv_doc(fd, -1, m, &reply, &len, err,
		    sizeof(err)) != 0) {
			ctl_warn(c->name, "%s", err);
			return EXIT_ERROR;
		}
		rc = ctl_reply(c, m, reply, len, &doc);
		free(reply);
		if (rc != 0)
			return rc;
	}
}

/*
 * Ask mccld at path (the handshake within open_ms, the answer within
 * timeout_ms); on success *doc is its checked reply.
 */
static int
ctl_request(const char *path, int open_ms, int timeout_ms,
    const struct command *c, const char *arg, json_t **doc)
{
	struct ipc_ctl req = { c->cmd };
	struct ipc_hello_ok ok;
	struct ipc_msg *m;
	char err[ERR_LEN], *reply = NULL;
	size_t len = 0;
	int fd, rc;

	if ((fd = conn_open(path, open_ms, 0, &ok, NULL, err, sizeof(err))) == -1) {
		ctl_warn(NULL, "%s", err);
		return EXIT_UNREACHABLE;
	}
	if ((m = malloc(sizeof(*m))) == NULL) {
		ctl_warn(NULL, "%s", strerror(errno));
		close(fd);
		return EXIT_ERROR;
	}
	if (conn_send(fd, IPC_CTL, &req, arg, arg != NULL ? strlen(arg) : 0,
	    -1, err, sizeof(err)) != 0 ||
	    conn_recv_doc(fd, timeout_ms, m, &reply, &len, err,
	    sizeof(err)) != 0) {
		ctl_warn(c->name, "%s", err);
		rc = EXIT_ERROR;
	} else if ((rc = ctl_reply(c, m, reply, len, doc)) == 0 && c->stream)
		rc = ctl_stream(fd, c, m, *doc);
	free(reply);
	free(m);
	close(fd);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "failed", no_argument, NULL, 'F' },
		{ "force", no_argument, NULL, 'O' },
		{ "write-config", no_argument, NULL, 'W' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const struct command *c;
	const char *path = NULL, *arg = NULL, *option = NULL, *output = NULL;
	char defpath[PATH_MAX];
	int ch, json = 0, open_ms, timeout_ms = 0, rc;
	json_t *doc = NULL;

	/* Options before or after the command (a job named "-x": "--" first). */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":hjo:s:t:", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'o':
			output = optarg;
			break;
		case 'F':
			option = "failed";
			break;
		case 'O':
			option = "force";
			break;
		case 'W':
			option = "write-config";
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'j':
			json = 1;
			break;
		case 's':
			path = optarg;
			break;
		case 't':
			if (parse_timeout(optarg, &timeout_ms) == -1) {
				ctl_warn("-t", "%s: not a number of "
				    "milliseconds from 1 to %d", optarg,
				    INT_MAX);
				return EXIT_UNREACHABLE;
			}
			break;
		case ':':
			ctl_warn(NULL, "%s needs an argument", argv[optind - 1]);
			usage(stderr);
			return EXIT_UNREACHABLE;
		default:
			ctl_warn(NULL, "%s: unknown option", argv[optind - 1]);
			usage(stderr);
			return EXIT_UNREACHABLE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return EXIT_UNREACHABLE;
	}
	if (option != NULL && strcmp(option, "write-config") == 0)
		return write_config(argv[0], output, argv + 1, argc - 1);
	if (output != NULL) {
		ctl_warn("-o", "is for check --write-config only");
		return EXIT_UNREACHABLE;
	}
	if ((c = command_find(argv[0], option)) == NULL) {
		if (command_find(argv[0], NULL) != NULL)
			ctl_warn(argv[0], "takes no --%s", option);
		else
			ctl_warn(argv[0], "unknown command");
		usage(stderr);
		return EXIT_UNREACHABLE;
	}
	if (argc != (c->arg != NULL ? 2 : 1)) {
		ctl_warn(c->name, c->arg != NULL ? "takes one argument, %s" :
		    "takes no argument%s", c->arg != NULL ? c->arg : "");
		usage(stderr);
		return EXIT_UNREACHABLE;
	}
	open_ms = timeout_ms != 0 ? timeout_ms : TIMEOUT_MS_DEFAULT;
	if (timeout_ms == 0)
		timeout_ms = c->wait_ms != 0 ? c->wait_ms : TIMEOUT_MS_DEFAULT;
	if (c->arg == NULL)
		arg = option;	/* "force", "failed": what the row asks */
	else {
		arg = argv[1];
		if (*arg == '\0' || strlen(arg) >= JOB_NAME_MAX) {
			ctl_warn(c->name, "%s must be 1 to %d bytes", c->arg,
			    JOB_NAME_MAX - 1);
			return EXIT_UNREACHABLE;
		}
	}
	if (path == NULL) {
		conn_socket_path(defpath, sizeof(defpath));
		path = defpath;
	}
	stream_json = json;
	if ((rc = ctl_request(path, open_ms, timeout_ms, c, arg, &doc)) != 0)
		return rc;
	if (c->cmd == CTL_STATUS)	/* which daemon this was, and why */
		json_object_set_new(doc, "reached_by", json_string(
		    conn_socket_origin(path, path != defpath)));
	(json ? c->json : c->text)(stdout, doc);
	json_decref(doc);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		ctl_warn("stdout", "%s", strerror(errno));
		return EXIT_ERROR;
	}
	return 0;
}
