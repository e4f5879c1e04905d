/*
 * output.c: what mcclctl prints.  The command table, the schema each reply
 * is checked against, and the renderers: text tables for people, and the
 * daemon's document re-serialised with sorted keys for programs.  Columns
 * and keys are documented in mcclctl(8); change both together.
 */
#include <err.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "ipc.h"
#include "output.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

#define TABLE_COLS	10
#define CELL_MAX	512	/* longest cell a renderer formats */
#define PATH_LEN	256	/* "jobs[3].op_in_flight.seq" in errors */

/* ---- helpers ---- */

/* Copy a string from the daemon, control characters made visible as '?'. */
void
output_clean(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	size_t i;

	if (dstlen == 0)
		return;
	for (i = 0; i < srclen && i < dstlen - 1 && src[i] != '\0'; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ?
		    '?' : src[i];
	dst[i] = '\0';
}

static char *
clean_dup(const char *s)
{
	size_t len = strlen(s);
	char *d;

	if ((d = malloc(len + 1)) == NULL)
		err(1, NULL);
	output_clean(d, len + 1, s, len);
	return d;
}

/* Columns a string takes on a terminal: UTF-8 continuation bytes take none. */
static size_t
str_width(const char *s)
{
	size_t w = 0;

	for (; *s != '\0'; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

/* Valid after reply_check: the schema promises the key and its type. */
static const char *
str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

static long long
num(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

/* 45s, 5m12s, 1h2m3s, 2d1h2m3s. */
static void
fmt_duration(char *buf, size_t len, long long s)
{
	if (s < 0)
		s = 0;
	if (s < 60)
		snprintf(buf, len, "%llds", s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%lldh%lldm%llds", s / 3600, s / 60 % 60,
		    s % 60);
	else
		snprintf(buf, len, "%lldd%lldh%lldm%llds", s / 86400,
		    s / 3600 % 24, s / 60 % 60, s % 60);
}

/* 512, 1.2K, 34M: binary units, one decimal below ten. */
static void
fmt_bytes(char *buf, size_t len, long long n)
{
	static const char units[] = "KMGTPE";
	double v = (double)n;
	int u = -1;

	if (n < 1024) {
		snprintf(buf, len, "%lld", n);
		return;
	}
	while (v >= 1024 && u < (int)sizeof(units) - 2) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

/* ---- aligned tables ---- */

struct row {
	char	*cell[TABLE_COLS];
	char	*note;		/* printed indented under the row */
};

struct table {
	size_t		 ncols;
	size_t		 width[TABLE_COLS];
	struct row	*rows;		/* rows[0] is the header */
	size_t		 nrows;
};

static void
table_add(struct table *t, const char *const *cells)
{
	struct row *r;

	if ((t->rows = reallocarray(t->rows, t->nrows + 1,
	    sizeof(*t->rows))) == NULL)
		err(1, NULL);
	r = &t->rows[t->nrows++];
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < t->ncols; i++) {
		r->cell[i] = clean_dup(cells[i]);
		if (str_width(r->cell[i]) > t->width[i])
			t->width[i] = str_width(r->cell[i]);
	}
}

static void
table_init(struct table *t, const char *const *header, size_t ncols)
{
	if (ncols > TABLE_COLS)
		errx(1, "table of %zu columns, at most %d", ncols, TABLE_COLS);
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	table_add(t, header);
}

/* A line under the last row, "  label: text". */
static void
table_note(struct table *t, const char *label, const char *text)
{
	char buf[CELL_MAX];

	snprintf(buf, sizeof(buf), "  %s: %s", label, text);
	t->rows[t->nrows - 1].note = clean_dup(buf);
}

/* Two spaces between columns, none after the last. */
static void
table_print(FILE *out, struct table *t)
{
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t i = 0; i < t->ncols; i++) {
			const char *c = t->rows[r].cell[i];

			if (i + 1 < t->ncols)
				fprintf(out, "%s%*s", c,
				    (int)(t->width[i] - str_width(c) + 2), "");
			else
				fprintf(out, "%s\n", c);
			free(t->rows[r].cell[i]);
		}
		if (t->rows[r].note != NULL)
			fprintf(out, "%s\n", t->rows[r].note);
		free(t->rows[r].note);
	}
	free(t->rows);
	t->rows = NULL;
	t->nrows = 0;
}

/* ---- JSON: every command ---- */

/* Sorted keys and fixed indentation, so output can be compared verbatim. */
static void
json_render(FILE *out, const json_t *doc)
{
	json_dumpf(doc, out, JSON_INDENT(2) | JSON_SORT_KEYS);
	fputc('\n', out);
}

/* ---- status ---- */

/* Lines of "key: value", the values in one column after the longest key. */
#define KV_MAX	16

struct kv {
	size_t		 n;
	const char	*key[KV_MAX];
	char		 val[KV_MAX][CELL_MAX];
};

static void	kv_add(struct kv *, const char *, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static void
kv_add(struct kv *kv, const char *key, const char *fmt, ...)
{
	char raw[CELL_MAX];
	va_list ap;

	if (kv->n == KV_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	kv->key[kv->n] = key;
	output_clean(kv->val[kv->n++], CELL_MAX, raw, sizeof(raw));
}

static void
kv_print(FILE *out, const struct kv *kv)
{
	int width = 0;

	for (size_t i = 0; i < kv->n; i++)
		if ((int)strlen(kv->key[i]) > width)
			width = (int)strlen(kv->key[i]);
	for (size_t i = 0; i < kv->n; i++)
		fprintf(out, "%-*s %s\n", width, kv->key[i], kv->val[i]);
}

static void
status_text(FILE *out, const json_t *doc)
{
	const json_t *listen = json_object_get(doc, "listen"), *v;
	char buf[CELL_MAX], up[32];
	struct kv kv = { 0 };
	size_t i, off = 0;
	long long size = num(doc, "cluster_size");

	buf[0] = '\0';
	json_array_foreach(listen, i, v)
		if (off < sizeof(buf))
			off += (size_t)snprintf(buf + off, sizeof(buf) - off,
			    "%s%s", i > 0 ? ", " : "", json_is_string(v) ?
			    json_string_value(v) : "");
	fmt_duration(up, sizeof(up), num(doc, "uptime_s"));
	kv_add(&kv, "node:", "%s (index %lld)", str(doc, "node"),
	    num(doc, "node_index"));
	kv_add(&kv, "version:", "%s", str(doc, "version"));
	kv_add(&kv, "pid:", "%lld", num(doc, "pid"));
	kv_add(&kv, "uptime:", "%s", up);
	kv_add(&kv, "socket:", "%s", str(doc, "socket"));
	if (json_is_string(json_object_get(doc, "reached_by")))
		kv_add(&kv, "reached:", "%s", json_string_value(
		    json_object_get(doc, "reached_by")));
	kv_add(&kv, "listen:", "%s", off > 0 ? buf : "-");
	kv_add(&kv, "cluster size:", "%lld", size);
	kv_add(&kv, "peers up:", "%lld/%lld", num(doc, "peers_up"),
	    size > 0 ? size - 1 : 0);
	kv_add(&kv, "clients:", "%lld", num(doc, "clients"));
	kv_add(&kv, "jobs:", "%lld", num(doc, "jobs"));
	kv_add(&kv, "log level:", "%s", str(doc, "log_level"));
	if ((v = json_object_get(doc, "link_cost")) != NULL)
		kv_add(&kv, "link cost:", "%.1f us a message (fitted to %lld "
		    "small allreduces), %.2f GB/s by the ring (to %lld large "
		    "ones), %.2f GB/s by the others (to %lld), reduction "
		    "%.2f GB/s", num(v, "alpha_ns") / 1e3,
		    num(v, "alpha_fits"), 1e3 / (double)num(v, "beta_ps"),
		    num(v, "beta_fits"), 1e3 / (double)num(v, "beta_pair_ps"),
		    num(v, "beta_pair_fits"), 1e3 / (double)num(v, "gamma_ps"));
	kv_print(out, &kv);
}

/* ---- peers ---- */

static void
peer_row(struct table *t, const json_t *p, time_t now)
{
	char idx[24], since[64], rtt[48], tx[32], rx[32], link[64];
	int self = json_is_true(json_object_get(p, "self"));
	int up = strcmp(str(p, "state"), "up") == 0;
	const char *hb = self || !up ? "-" :
	    json_is_true(json_object_get(p, "heartbeats")) ? "yes" : "no";
	const char *cells[] = { str(p, "name"), idx, str(p, "address"),
	    str(p, "state"), since, rtt, hb, link, tx, rx };
	long long us = num(p, "rtt_us");

	snprintf(idx, sizeof(idx), "%lld", num(p, "index"));
	if (self || num(p, "since") == 0)
		snprintf(since, sizeof(since), "-");
	else {
		fmt_duration(since, sizeof(since) - 4,
		    (long long)now - num(p, "since"));
		strcat(since, " ago");
	}
	if (self || !up || us == 0)
		snprintf(rtt, sizeof(rtt), "-");
	else
		snprintf(rtt, sizeof(rtt), "%lld.%03lldms", us / 1000,
		    us % 1000);
	if (*str(p, "transport") == '\0')
		snprintf(link, sizeof(link), "-");
	else
		snprintf(link, sizeof(link), "%s%s%s", str(p, "transport"),
		    *str(p, "device") != '\0' ? " " : "", str(p, "device"));
	if (self) {
		snprintf(tx, sizeof(tx), "-");
		snprintf(rx, sizeof(rx), "-");
	} else {
		fmt_bytes(tx, sizeof(tx), num(p, "tx_bytes"));
		fmt_bytes(rx, sizeof(rx), num(p, "rx_bytes"));
	}
	table_add(t, cells);
	if (!self && !up && *str(p, "last_error") != '\0')
		table_note(t, "last error", str(p, "last_error"));
}

static void
peers_text(FILE *out, const json_t *doc)
{
	static const char *const header[] = { "NODE", "INDEX", "ADDRESS",
	    "STATE", "SINCE", "RTT", "HEARTBEATS", "DATA LINKS", "TX", "RX" };
	const json_t *p;
	struct table t;
	time_t now = time(NULL);
	size_t i;

	table_init(&t, header, nitems(header));
	json_array_foreach(json_object_get(doc, "peers"), i, p)
		peer_row(&t, p, now);
	table_print(out, &t);
}

/* ---- jobs ---- */

static void
job_row(struct table *t, const json_t *j)
{
	const json_t *op = json_object_get(j, "op_in_flight");
	const json_t *e = json_object_get(j, "error");
	char ranks[48], nodes[24], ops[24], inflight[CELL_MAX];
	const char *cells[] = { str(j, "name"), str(j, "id"), str(j, "state"),
	    ranks, nodes, ops, inflight };

	snprintf(ranks, sizeof(ranks), "%lld/%lld", num(j, "nlocal"),
	    num(j, "nranks"));
	snprintf(nodes, sizeof(nodes), "%lld", num(j, "nnodes"));
	snprintf(ops, sizeof(ops), "%lld", num(j, "ops_completed"));
	if (json_is_object(op))
		snprintf(inflight, sizeof(inflight), "%s seq %lld count %lld, "
		    "%.1f s, times out in %.1f s%s%s", str(op, "coll"),
		    num(op, "seq"), num(op, "count"),
		    (double)num(op, "age_ms") / 1000,
		    (double)num(op, "timeout_in_ms") / 1000,
		    json_is_string(json_object_get(op, "waiting_for")) ?
		    ", waiting for " : "",
		    json_is_string(json_object_get(op, "waiting_for")) ?
		    str(op, "waiting_for") : "");
	else
		snprintf(inflight, sizeof(inflight), "-");
	table_add(t, cells);
	if (json_is_string(e))
		table_note(t, "error", json_string_value(e));
}

static void
jobs_text(FILE *out, const json_t *doc)
{
	static const char *const header[] = { "JOB", "ID", "STATE",
	    "RANKS(here/total)", "NODES", "OPS", "IN-FLIGHT" };
	const json_t *j;
	struct table t;
	size_t i;

	table_init(&t, header, nitems(header));
	json_array_foreach(json_object_get(doc, "jobs"), i, j)
		job_row(&t, j);
	table_print(out, &t);
}

/* mcclctl jobs --failed: one row each, its reason below it. */
static void
failed_text(FILE *out, const json_t *doc)
{
	static const char *const header[] = { "JOB", "ID", "FAILED AT",
	    "RANKS(here/total)", "NODES", "OPS", "OP", "CODE" };
	char ranks[48], nodes[24], ops[24], op[64];
	const json_t *f;
	struct table t;
	size_t i;

	table_init(&t, header, nitems(header));
	json_array_foreach(json_object_get(doc, "failed_jobs"), i, f) {
		const json_t *o = json_object_get(f, "op");
		const char *cells[] = { str(f, "name"), json_is_string(
		    json_object_get(f, "id")) ? str(f, "id") : "-",
		    str(f, "failed_at"), ranks, nodes, ops, op, str(f, "code") };

		snprintf(ranks, sizeof(ranks), "%lld/%lld", num(f, "nlocal"),
		    num(f, "nranks"));
		snprintf(nodes, sizeof(nodes), "%lld", num(f, "nnodes"));
		snprintf(ops, sizeof(ops), "%lld", num(f, "ops_completed"));
		if (json_is_object(o))
			snprintf(op, sizeof(op), "%s seq %lld", str(o, "coll"),
			    num(o, "seq"));
		else
			snprintf(op, sizeof(op), "-");
		table_add(&t, cells);
		table_note(&t, "error", str(f, "error"));
	}
	table_print(out, &t);
}

/* One row per rank, each node's ranks in turn; a node that did not answer
 * has a row of dashes. */
static void
job_detail_rows(struct table *t, const json_t *n)
{
	const json_t *ranks = json_object_get(n, "ranks"), *r;
	char rank[16], sub[24], done[24];
	const char *cells[] = { rank, str(n, "node"), sub, done, "" };
	size_t i;

	if (!json_is_array(ranks)) {
		const char *none[] = { "-", str(n, "node"), "-", "-",
		    "no answer" };

		table_add(t, none);
		return;
	}
	json_array_foreach(ranks, i, r) {
		snprintf(rank, sizeof(rank), "%lld", num(r, "rank"));
		snprintf(sub, sizeof(sub), "%lld", num(r, "submitted"));
		snprintf(done, sizeof(done), "%lld", num(r, "completed"));
		cells[4] = json_is_true(json_object_get(r, "connected")) ?
		    str(n, "state") : "gone";
		table_add(t, cells);
	}
}

/* 61.2 us, 12.3 ms, 1.05 s. */
static void
fmt_us(char *buf, size_t len, double us)
{
	if (us < 1000)
		snprintf(buf, len, "%.1f us", us);
	else if (us < 1e6)
		snprintf(buf, len, "%.1f ms", us / 1e3);
	else
		snprintf(buf, len, "%.2f s", us / 1e6);
}

/*
 * "allreduce between nodes: auto: direct up to 16384 B (61.2 us),
 * doubling up to 65536 B (210.0 us), ring above (1.0G: 1.72 s)", or the
 * algorithm the node is set to, where the collective has it.
 */
static void
job_algo_line(FILE *out, const json_t *doc, const char *coll,
    const char *key)
{
	const json_t *r, *ranges = json_object_get(doc, key);
	const char *set = str(doc, "algo");
	char at[32], t[32];
	size_t i;

	if (!json_is_string(json_object_get(doc, "algo")) ||
	    json_array_size(ranges) == 0)
		return;
	json_array_foreach(ranges, i, r)
		if (strcmp(set, str(r, "algo")) == 0) {
			fprintf(out, "%s between nodes: %s (the node's algo)\n",
			    coll, set);
			return;
		}
	fprintf(out, "%s between nodes: auto:", coll);
	json_array_foreach(ranges, i, r) {
		fmt_us(t, sizeof(t), json_number_value(json_object_get(r,
		    "predicted_us")));
		if (json_is_integer(json_object_get(r, "up_to_bytes"))) {
			fprintf(out, "%s %s up to %lld B (%s)", i > 0 ? "," : "",
			    str(r, "algo"), num(r, "up_to_bytes"), t);
		} else {
			fmt_bytes(at, sizeof(at), num(r, "at_bytes"));
			fprintf(out, "%s %s above (%s: %s)", i > 0 ? "," : "",
			    str(r, "algo"), at, t);
		}
	}
	fputc('\n', out);
}

/*
 * "link cost (the worst of the job's nodes): 25.0 us a message, 1.25 GB/s
 * by the ring, 0.90 GB/s by the others, reduction 4.00 GB/s".
 */
static void
job_cost_line(FILE *out, const json_t *doc)
{
	const json_t *c = json_object_get(doc, "link_cost");

	if (c == NULL)
		return;
	fprintf(out, "link cost (the worst of the job's nodes): %.1f us a "
	    "message, %.2f GB/s by the ring, %.2f GB/s by the others, "
	    "reduction %.2f GB/s\n", num(c, "alpha_ns") / 1e3,
	    1e3 / (double)num(c, "beta_ps"),
	    1e3 / (double)num(c, "beta_pair_ps"),
	    1e3 / (double)num(c, "gamma_ps"));
}

static void
job_text(FILE *out, const json_t *doc)
{
	static const char *const header[] = { "RANK", "NODE", "SUBMITTED",
	    "COMPLETED", "STATE" };
	const json_t *n, *d;
	struct table t;
	size_t i;

	fprintf(out, "job %s (id %s): %s, %lld ranks on %lld nodes",
	    str(doc, "name"), str(doc, "id"), str(doc, "state"),
	    num(doc, "nranks"), num(doc, "nnodes"));
	if (json_object_get(doc, "lanes") != NULL)
		fprintf(out, ", %lld lanes between neighbours",
		    num(doc, "lanes"));
	fputc('\n', out);
	job_cost_line(out, doc);
	job_algo_line(out, doc, "allreduce", "allreduce_auto");
	job_algo_line(out, doc, "broadcast", "broadcast_auto");
	if (json_array_size(json_object_get(doc, "nodes")) > 0) {
		table_init(&t, header, nitems(header));
		json_array_foreach(json_object_get(doc, "nodes"), i, n)
			job_detail_rows(&t, n);
		table_print(out, &t);
	}
	json_array_foreach(json_object_get(doc, "nodes"), i, n)
		if (num(n, "wire_ops") > 0)
			fprintf(out, "%s: %lld allreduces on a 16-bit wire, "
			    "%.1f MB not sent\n", str(n, "node"),
			    num(n, "wire_ops"), num(n, "wire_bytes_saved") / 1e6);
	fprintf(out, "diagnosis:\n");
	json_array_foreach(json_object_get(doc, "diagnosis"), i, d)
		fprintf(out, "  %s\n", json_string_value(d));
}

/* ---- reply schemas: the stable keys of mcclctl(8) ---- */

#define KEY(k, t, fl)		{ (k), (t), (fl), T_STR, NULL }
#define LIST(k, e, sub)		{ (k), T_LIST, 0, (e), (sub) }
#define OBJECT(k, fl, sub)	{ (k), T_OBJ, (fl), T_STR, (sub) }
#define END			{ NULL, T_STR, 0, T_STR, NULL }

static const struct field status_cost_schema[] = {
	KEY("alpha_ns", T_UINT, 0), KEY("beta_ps", T_UINT, 0),
	KEY("beta_pair_ps", T_UINT, 0), KEY("gamma_ps", T_UINT, 0),
	KEY("alpha_fits", T_UINT, 0), KEY("beta_fits", T_UINT, 0),
	KEY("beta_pair_fits", T_UINT, 0),
	END
};

static const struct field status_schema[] = {
	KEY("node", T_STR, 0), KEY("node_index", T_UINT, 0),
	KEY("version", T_STR, 0), KEY("pid", T_UINT, 0),
	KEY("uptime_s", T_UINT, 0), KEY("socket", T_STR, 0),
	LIST("listen", T_STR, NULL), KEY("cluster_size", T_UINT, 0),
	KEY("peers_up", T_UINT, 0), KEY("clients", T_UINT, 0),
	KEY("jobs", T_UINT, 0), KEY("log_level", T_STR, 0),
	OBJECT("link_cost", F_OPT, status_cost_schema),
	END
};

static const struct field peer_schema[] = {
	KEY("name", T_STR, 0), KEY("index", T_UINT, 0),
	KEY("address", T_STR, 0), KEY("state", T_STR, 0),
	KEY("self", T_BOOL, 0), KEY("since", T_UINT, 0),
	KEY("rtt_us", T_UINT, 0), KEY("heartbeats", T_BOOL, 0),
	KEY("tx_bytes", T_UINT, 0),
	KEY("rx_bytes", T_UINT, 0), KEY("last_error", T_STR, 0),
	KEY("transport", T_STR, 0), KEY("device", T_STR, 0),
	END
};

static const struct field peers_schema[] = {
	LIST("peers", T_OBJ, peer_schema),
	END
};

static const struct field op_schema[] = {
	KEY("seq", T_UINT, 0), KEY("coll", T_STR, 0), KEY("count", T_UINT, 0),
	KEY("age_ms", T_UINT, 0), KEY("timeout_in_ms", T_UINT, 0),
	KEY("waiting_for", T_STR, F_NULL | F_OPT),
	END
};

static const struct field waiting_schema[] = {
	KEY("seq", T_UINT, 0), KEY("for_ms", T_UINT, 0),
	LIST("ranks", T_UINT, NULL),
	END
};

static const struct field job_schema[] = {
	KEY("name", T_STR, 0), KEY("id", T_STR, 0), KEY("uid", T_UINT, 0),
	KEY("state", T_STR, 0), KEY("nranks", T_UINT, 0),
	LIST("local_ranks", T_UINT, NULL), KEY("nlocal", T_UINT, 0),
	KEY("nnodes", T_UINT, 0), KEY("ops_completed", T_UINT, 0),
	OBJECT("op_in_flight", F_NULL, op_schema),
	KEY("error", T_STR, F_NULL | F_OPT),
	END
};

static const struct field jobs_schema[] = {
	LIST("jobs", T_OBJ, job_schema),
	END
};

static const struct field failed_op_schema[] = {
	KEY("seq", T_UINT, 0), KEY("coll", T_STR, 0),
	END
};

static const struct field failed_job_schema[] = {
	KEY("name", T_STR, 0), KEY("id", T_STR, F_NULL), KEY("uid", T_UINT, 0),
	KEY("nranks", T_UINT, 0), KEY("nnodes", T_UINT, 0),
	KEY("nlocal", T_UINT, 0), KEY("ops_completed", T_UINT, 0),
	KEY("failed_at", T_STR, 0), KEY("code", T_STR, 0),
	KEY("error", T_STR, 0), OBJECT("op", F_NULL, failed_op_schema),
	END
};

static const struct field failed_schema[] = {
	LIST("failed_jobs", T_OBJ, failed_job_schema),
	END
};

/* ---- the command table ---- */

static const struct field rank_schema[] = {
	KEY("rank", T_UINT, 0), KEY("submitted", T_UINT, 0),
	KEY("completed", T_UINT, 0), KEY("connected", T_BOOL, 0),
	END
};

static const struct field node_view_schema[] = {
	KEY("node", T_STR, 0), KEY("state", T_STR, F_OPT),
	{ "ranks", T_LIST, F_OPT, T_OBJ, rank_schema },	/* absent: no answer */
	OBJECT("in_flight", F_NULL | F_OPT, op_schema),
	OBJECT("waiting", F_NULL | F_OPT, waiting_schema),
	KEY("wire_ops", T_UINT, F_OPT), KEY("wire_bytes_saved", T_UINT, F_OPT),
	KEY("error", T_STR, F_NULL | F_OPT),
	END
};

static const struct field auto_range_schema[] = {
	KEY("algo", T_STR, 0), KEY("up_to_bytes", T_UINT, F_NULL),
	KEY("at_bytes", T_UINT, 0), KEY("predicted_us", T_NUM, 0),
	END
};

static const struct field link_cost_schema[] = {
	KEY("alpha_ns", T_UINT, 0), KEY("beta_ps", T_UINT, 0),
	KEY("beta_pair_ps", T_UINT, 0), KEY("gamma_ps", T_UINT, 0),
	END
};

static const struct field job_schema_one[] = {
	KEY("name", T_STR, 0), KEY("id", T_STR, 0), KEY("state", T_STR, 0),
	KEY("nranks", T_UINT, 0), KEY("nnodes", T_UINT, 0),
	KEY("lanes", T_UINT, F_OPT),	/* absent: an ended job */
	KEY("algo", T_STR, F_OPT),	/* absent: an ended job */
	{ "allreduce_auto", T_LIST, F_OPT, T_OBJ, auto_range_schema },
	{ "broadcast_auto", T_LIST, F_OPT, T_OBJ, auto_range_schema },
	OBJECT("link_cost", F_OPT, link_cost_schema),
	LIST("nodes", T_OBJ, node_view_schema), KEY("behind_ms", T_UINT, 0),
	LIST("diagnosis", T_STR, NULL),
	OBJECT("failed", F_OPT, failed_job_schema),
	END
};

static const struct field check_pair_schema[] = {
	KEY("from", T_STR, 0), KEY("to", T_STR, 0),
	KEY("gbps", T_NUM, F_NULL), KEY("rtt_us", T_UINT, F_NULL),
	KEY("error", T_STR, F_NULL | F_OPT),
	END
};

static const struct field check_schema[] = {
	LIST("nodes", T_STR, NULL), KEY("lanes", T_UINT, 0),
	KEY("ms", T_UINT, 0), LIST("pairs", T_OBJ, check_pair_schema),
	KEY("median_gbps", T_NUM, 0), KEY("median_rtt_ms", T_NUM, 0),
	LIST("outliers", T_STR, NULL),
	END
};

static const struct field event_schema[] = {
	KEY("time", T_STR, 0), KEY("event", T_STR, 0), KEY("node", T_STR, 0),
	END
};

/* "2026-11-21T12:00:00Z n0 peer_down peer=n1 reason=..." */
static void
event_text(FILE *out, const json_t *doc)
{
	char clean[CELL_MAX];
	const char *k;
	json_t *v;

	fprintf(out, "%s %s %s", str(doc, "time"), str(doc, "node"),
	    str(doc, "event"));
	json_object_foreach((json_t *)(uintptr_t)doc, k, v) {
		if (strcmp(k, "time") == 0 || strcmp(k, "event") == 0 ||
		    strcmp(k, "node") == 0)
			continue;
		if (json_is_string(v))
			output_clean(clean, sizeof(clean), json_string_value(v),
			    strlen(json_string_value(v)) + 1);
		else
			snprintf(clean, sizeof(clean), "%lld",
			    (long long)json_integer_value(v));
		fprintf(out, " %s=%s", k, clean);
	}
	fputc('\n', out);
	fflush(out);
}

/* One compact JSON object per line: a stream a script can read. */
static void
event_json(FILE *out, const json_t *doc)
{
	json_dumpf(doc, out, JSON_COMPACT | JSON_SORT_KEYS);
	fputc('\n', out);
	fflush(out);
}

static const struct field abort_schema[] = {
	KEY("job", T_STR, 0), KEY("aborted", T_UINT, 0),
	END
};

static const struct field reload_schema[] = {
	KEY("reloaded", T_BOOL, 0), KEY("log_level", T_STR, 0),
	KEY("op_timeout_ms", T_UINT, 0), KEY("max_pending_ops", T_UINT, 0),
	KEY("cluster_size", T_UINT, 0),
	END
};

static const struct field sample_schema[] = {
	KEY("name", T_STR, 0), KEY("labels", T_OBJ, 0),
	END
};

static const struct field metrics_schema[] = {
	LIST("samples", T_OBJ, sample_schema), KEY("text", T_STR, 0),
	END
};

/* The daemon renders the Prometheus text once, for HTTP and for us. */
static void
metrics_text(FILE *out, const json_t *doc)
{
	fputs(str(doc, "text"), out);
}

static void
abort_text(FILE *out, const json_t *doc)
{
	fprintf(out, "aborted %lld job%s named %s\n", num(doc, "aborted"),
	    num(doc, "aborted") == 1 ? "" : "s", str(doc, "job"));
}

static void
reload_text(FILE *out, const json_t *doc)
{
	struct kv kv = { 0 };

	kv_add(&kv, "reloaded:", "%s", "yes");
	kv_add(&kv, "log level:", "%s", str(doc, "log_level"));
	kv_add(&kv, "op timeout:", "%lld ms", num(doc, "op_timeout_ms"));
	kv_add(&kv, "max pending ops:", "%lld", num(doc, "max_pending_ops"));
	kv_add(&kv, "cluster size:", "%lld", num(doc, "cluster_size"));
	kv_print(out, &kv);
}

/* ---- check ---- */

#define CHECK_WAIT_MS	(30 * 60 * 1000)	/* every pair, one after another */

/* The pair's entry from -> to, or NULL. */
static const json_t *
check_pair(const json_t *doc, const char *from, const char *to)
{
	const json_t *p;
	size_t i;

	json_array_foreach(json_object_get(doc, "pairs"), i, p)
		if (strcmp(str(p, "from"), from) == 0 &&
		    strcmp(str(p, "to"), to) == 0)
			return p;
	return NULL;
}

/* Marked: an outlier line names it ("n0 -> n2:", "n0 <-> n2:"). */
static int
check_marked(const json_t *doc, const char *from, const char *to)
{
	char one[2 * CELL_MAX], both[2][2 * CELL_MAX];
	const json_t *o;
	size_t i;

	snprintf(one, sizeof(one), "%s -> %s:", from, to);
	snprintf(both[0], sizeof(both[0]), "%s <-> %s:", from, to);
	snprintf(both[1], sizeof(both[1]), "%s <-> %s:", to, from);
	json_array_foreach(json_object_get(doc, "outliers"), i, o)
		if (json_is_string(o) && (strncmp(json_string_value(o), one,
		    strlen(one)) == 0 || strncmp(json_string_value(o), both[0],
		    strlen(both[0])) == 0 || strncmp(json_string_value(o),
		    both[1], strlen(both[1])) == 0))
			return 1;
	return 0;
}

/* A matrix of rates (row to column), the round trips, the outliers. */
static void
check_text(FILE *out, const json_t *doc)
{
	const json_t *nodes = json_object_get(doc, "nodes"), *o;
	size_t n = json_array_size(nodes), i, k;
	const char **header = calloc(n + 1, sizeof(*header));
	char (*cells)[32] = calloc(n + 1, sizeof(*cells));
	const char **row = calloc(n + 1, sizeof(*row));
	struct table t;

	if (header == NULL || cells == NULL || row == NULL) {
		fprintf(out, "out of memory\n");
		goto out;
	}
	if (n < 2) {
		fprintf(out, "a cluster of %zu node%s: no pair of nodes to "
		    "measure\n", n, n == 1 ? "" : "s");
		goto out;
	}
	fprintf(out, "Gbit/s from each row's node to each column's (%lld links, "
	    "%lld ms each way); * marks an outlier:\n", num(doc, "lanes"),
	    num(doc, "ms"));
	header[0] = "";
	for (i = 0; i < n; i++)
		header[i + 1] = json_string_value(json_array_get(nodes, i));
	table_init(&t, header, n + 1);
	for (i = 0; i < n; i++) {
		row[0] = header[i + 1];
		for (k = 0; k < n; k++) {
			const json_t *p = check_pair(doc, header[i + 1],
			    header[k + 1]);

			if (i == k || p == NULL)
				snprintf(cells[k + 1], sizeof(cells[0]), "-");
			else if (!json_is_number(json_object_get(p, "gbps")))
				snprintf(cells[k + 1], sizeof(cells[0]), "X*");
			else
				snprintf(cells[k + 1], sizeof(cells[0]), "%.3f%s",
				    json_number_value(json_object_get(p, "gbps")),
				    check_marked(doc, header[i + 1],
				    header[k + 1]) ? "*" : "");
			row[k + 1] = cells[k + 1];
		}
		table_add(&t, row);
	}
	table_print(out, &t);
	fprintf(out, "median %.3f Gbit/s, round trip %.3f ms\n",
	    json_number_value(json_object_get(doc, "median_gbps")),
	    json_number_value(json_object_get(doc, "median_rtt_ms")));
	if (json_array_size(json_object_get(doc, "outliers")) == 0)
		fprintf(out, "no outliers\n");
	else
		fprintf(out, "outliers:\n");
	json_array_foreach(json_object_get(doc, "outliers"), i, o)
		fprintf(out, "  %s\n", json_string_value(o));
out:
	free(header);
	free(cells);
	free(row);
}

/* name, request, argument, reply schema, text, JSON, streams, option,
   wait */
const struct command commands[] = {
	{ "status", CTL_STATUS, NULL, status_schema, status_text, json_render,
	    0, NULL, 0 },
	{ "peers", CTL_PEERS, NULL, peers_schema, peers_text, json_render, 0,
	    NULL, 0 },
	{ "jobs", CTL_JOBS, NULL, jobs_schema, jobs_text, json_render, 0,
	    NULL, 0 },
	{ "jobs", CTL_FAILED, NULL, failed_schema, failed_text, json_render, 0,
	    "failed", 0 },
	{ "job", CTL_JOB, "NAME", job_schema_one, job_text, json_render, 0,
	    NULL, 0 },
	{ "metrics", CTL_METRICS, NULL, metrics_schema, metrics_text,
	    json_render, 0, NULL, 0 },
	{ "monitor", CTL_MONITOR, NULL, event_schema, event_text, event_json,
	    1, NULL, 0 },
	{ "abort", CTL_ABORT, "JOB", abort_schema, abort_text, json_render,
	    0, NULL, 0 },
	{ "reload", CTL_RELOAD, NULL, reload_schema, reload_text, json_render,
	    0, NULL, 0 },
	{ "check", CTL_CHECK, NULL, check_schema, check_text, json_render, 0,
	    NULL, CHECK_WAIT_MS },
	{ "check", CTL_CHECK, NULL, check_schema, check_text, json_render, 0,
	    "force", CHECK_WAIT_MS },
	{ NULL, 0, NULL, NULL, NULL, NULL, 0, NULL, 0 }
};

/*
 * The row of name picked by option (NULL: none given).  Exact names only:
 * a prefix that is unique today may not be tomorrow.
 */
const struct command *
command_find(const char *name, const char *option)
{
	for (const struct command *c = commands; c->name != NULL; c++)
		if (strcmp(c->name, name) == 0 && (c->option == NULL ?
		    option == NULL : option != NULL &&
		    strcmp(c->option, option) == 0))
			return c;
	return NULL;
}

/* ---- checking a reply against its schema ---- */

static const char *
type_name(enum field_type t)
{
	switch (t) {
	case T_STR:	return "a string";
	case T_UINT:	return "a non-negative integer";
	case T_BOOL:	return "a boolean";
	case T_LIST:	return "an array";
	case T_OBJ:	return "an object";
	case T_NUM:	return "a non-negative number";
	}
	return "?";
}

static const char *
json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:	return "an object";
	case JSON_ARRAY:	return "an array";
	case JSON_STRING:	return "a string";
	case JSON_INTEGER:	return json_integer_value(v) < 0 ?
				    "a negative integer" : "an integer";
	case JSON_REAL:		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:	return "a boolean";
	case JSON_NULL:		return "null";
	}
	return "?";
}

static int	check_object(const json_t *, const struct field *, const char *,
		    char *, size_t);

static int
check_value(const json_t *v, enum field_type t, enum field_type elem,
    const struct field *sub, const char *path, char *errbuf, size_t errlen)
{
	char epath[PATH_LEN];
	const json_t *e;
	size_t i;
	int ok;

	switch (t) {
	case T_STR:	ok = json_is_string(v); break;
	case T_UINT:	ok = json_is_integer(v) && json_integer_value(v) >= 0;
			break;
	case T_NUM:	ok = json_is_number(v) && json_number_value(v) >= 0;
			break;
	case T_BOOL:	ok = json_is_boolean(v); break;
	case T_LIST:	ok = json_is_array(v); break;
	case T_OBJ:	return check_object(v, sub, path, errbuf, errlen);
	default:	ok = 0;
	}
	if (!ok) {
		snprintf(errbuf, errlen, "key \"%s\" is %s, expected %s", path,
		    json_type_name(v), type_name(t));
		return -1;
	}
	if (t != T_LIST)
		return 0;
	/* Lists of lists are not needed, and not supported. */
	json_array_foreach(v, i, e) {
		snprintf(epath, sizeof(epath), "%s[%zu]", path, i);
		if (check_value(e, elem, T_STR, sub, epath, errbuf,
		    errlen) == -1)
			return -1;
	}
	return 0;
}

static int
check_object(const json_t *o, const struct field *f, const char *path,
    char *errbuf, size_t errlen)
{
	char kpath[PATH_LEN];
	const json_t *v;

	if (!json_is_object(o)) {
		if (*path == '\0')
			snprintf(errbuf, errlen, "the reply is %s, expected an "
			    "object", json_type_name(o));
		else
			snprintf(errbuf, errlen, "key \"%s\" is %s, expected "
			    "an object", path, json_type_name(o));
		return -1;
	}
	/* No field list: any keys (metric labels, say). */
	for (; f != NULL && f->key != NULL; f++) {
		snprintf(kpath, sizeof(kpath), "%s%s%s", path,
		    *path != '\0' ? "." : "", f->key);
		if ((v = json_object_get(o, f->key)) == NULL) {
			if (f->flags & F_OPT)
				continue;
			snprintf(errbuf, errlen, "missing key \"%s\"", kpath);
			return -1;
		}
		if (json_is_null(v) && (f->flags & F_NULL))
			continue;
		if (check_value(v, f->type, f->elem, f->sub, kpath, errbuf,
		    errlen) == -1)
			return -1;
	}
	return 0;
}

/*
 * Check a reply against a command's schema.  Returns 0, or -1 with a
 * message naming the key: 'missing key "peers[1].rtt_us"'.
 */
int
reply_check(const json_t *doc, const struct field *schema, char *errbuf,
    size_t errlen)
{
	return check_object(doc, schema, "", errbuf, errlen);
}
