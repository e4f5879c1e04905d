/*
 * report.c: mccl-perf's output: the table on stdout as nccl-tests prints
 * it, and JSON or CSV to a file (-j).
 */
#include <inttypes.h>
#include <string.h>

#include "perf.h"

static const char *const variant_key[2] = { "oop", "ip" };

/* ---- text output, as nccl-tests prints it ---- */

static const char *
dtype_label(const struct dtype_info *d)
{
	return d->n.alias != NULL ? d->n.alias : d->n.name;
}

static void
text_begin(FILE *f, const struct bench *b)
{
	const struct opts	*o = b->o;
	int			 r;

	fprintf(f, "# mccl-perf: %s, job %s, nRanks %d\n", o->coll->n.name,
	    b->job != NULL ? b->job : "?", b->nranks);
	fprintf(f, "# minBytes %zu maxBytes %zu step: ", o->minbytes,
	    o->maxbytes);
	if (o->stepbytes != 0)
		fprintf(f, "%zu(bytes)", o->stepbytes);
	else
		fprintf(f, "%lu(factor)", o->factor);
	fprintf(f, " warmup iters: %d iters: %d validation: %d wire: %s "
	    "memory: %s parts: %zu blocking: %d time: %s (%s) timeout: ",
	    o->warmup, o->iters, o->check, o->wire->n.name, o->memory->n.name,
	    o->partbytes, o->blocking, o->cputime ? "cpu" : "wall",
	    (const char *[]){ "rank 0", "mean", "min", "max" }[o->average]);
	if (o->timeout_ms < 0)
		fputs("default\n", f);
	else
		fprintf(f, "%d ms\n", o->timeout_ms);
	fputs("#\n# Using ranks\n", f);
	for (r = 0; r < b->nranks; r++)
		fprintf(f, "#  Rank %3d %s\n", r, b->peers + r * PEER_LEN);
	fputs("#\n"
"#                                                              out-of-place                       in-place\n"
"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
	    f);
	fflush(f);
}

static void
text_result(FILE *f, const struct bench *b, const struct result *r)
{
	char	 wrong[24];
	int	 prec;

	if (!r->ran) {
		fprintf(f, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
		return;
	}
	if (b->checked)
		snprintf(wrong, sizeof(wrong), "%" PRIu64, r->wrong);
	else
		snprintf(wrong, sizeof(wrong), "N/A");
	prec = r->time_us >= 10000 ? 0 : r->time_us >= 100 ? 1 : 2;
	fprintf(f, "  %7.*f  %6.2f  %6.2f  %5s", prec, r->time_us, r->algbw,
	    r->busbw, wrong);
}

static void
text_row(FILE *f, const struct bench *b, const struct row *row)
{
	const struct coll_info	*c = b->o->coll;
	int			 v;

	fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count,
	    dtype_label(b->o->dtype), c->has_op ? b->o->op->n.name : "-",
	    b->root);
	for (v = 0; v < 2; v++)
		text_result(f, b, &row->res[v]);
	fputc('\n', f);
	fflush(f);
}

static void
text_end(FILE *f, const struct bench *b, const struct summary *s)
{
	if (b->checked)
		fprintf(f, "# Out of bounds values : %" PRIu64 " %s\n",
		    s->wrong, s->wrong != 0 ? "FAILED" : "OK");
	else
		fputs("# Out of bounds values : N/A (not checked)\n", f);
	fprintf(f, "# Avg bus bandwidth    : %g\n#\n",
	    s->nbusbw != 0 ? s->busbw / s->nbusbw : 0);
	fflush(f);
}

/* ---- JSON and CSV output (-j) ---- */

static void
json_begin(FILE *f, const struct bench *b)
{
	const struct opts	*o = b->o;

	fprintf(f, "{\"collective\":\"%s\",\"dtype\":\"%s\",\"wire\":\"%s\","
	    "\"memory\":\"%s\",\"part_bytes\":%zu,\"op\":", o->coll->n.name,
	    o->dtype->n.name, o->wire->n.name, o->memory->n.name,
	    o->partbytes);
	if (o->coll->has_op)
		fprintf(f, "\"%s\"", o->op->n.name);
	else
		fputs("null", f);
	fprintf(f, ",\"nranks\":%d,\"results\":[", b->nranks);
}

static void
json_result(FILE *f, const struct bench *b, int v, const struct result *r)
{
	fprintf(f, ",\"%s\":", variant_key[v]);
	if (!r->ran) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"time_us\":%.6g,\"algbw\":%.6g,\"busbw\":%.6g,"
	    "\"wrong\":", r->time_us, r->algbw, r->busbw);
	if (b->checked)
		fprintf(f, "%" PRIu64 "}", r->wrong);
	else
		fputs("null}", f);
}

static void
json_row(FILE *f, const struct bench *b, const struct row *row)
{
	int	 v;

	fprintf(f, "%s\n{\"size\":%zu,\"count\":%zu", row->index ? "," : "",
	    row->bytes, row->count);
	for (v = 0; v < 2; v++)
		json_result(f, b, v, &row->res[v]);
	fputc('}', f);
}

static void
json_end(FILE *f, const struct bench *b, const struct summary *s)
{
	(void)b;
	fprintf(f, "\n],\"avg_busbw\":%.6g}\n",
	    s->nbusbw != 0 ? s->busbw / s->nbusbw : 0);
}

static void
csv_begin(FILE *f, const struct bench *b)
{
	int	 v;

	(void)b;
	fputs("collective,dtype,op,nranks,size,count", f);
	for (v = 0; v < 2; v++)
		fprintf(f, ",%s_time_us,%s_algbw,%s_busbw,%s_wrong",
		    variant_key[v], variant_key[v], variant_key[v],
		    variant_key[v]);
	fputc('\n', f);
}

static void
csv_row(FILE *f, const struct bench *b, const struct row *row)
{
	const struct opts	*o = b->o;
	const struct result	*r;
	int			 v;

	fprintf(f, "%s,%s,%s,%d,%zu,%zu", o->coll->n.name, o->dtype->n.name,
	    o->coll->has_op ? o->op->n.name : "", b->nranks, row->bytes,
	    row->count);
	for (v = 0; v < 2; v++) {
		r = &row->res[v];
		if (!r->ran) {
			fputs(",,,,", f);
			continue;
		}
		fprintf(f, ",%.6g,%.6g,%.6g,", r->time_us, r->algbw, r->busbw);
		if (b->checked)
			fprintf(f, "%" PRIu64, r->wrong);
	}
	fputc('\n', f);
}

/* Rank 0 prints the text table and writes the -j file; others nothing. */
static const struct output out_text = { text_begin, text_row, text_end };
const struct output out_json = { json_begin, json_row, json_end };
const struct output out_csv = { csv_begin, csv_row, NULL };

void
output_begin(const struct bench *b)
{
	if (b->rank != 0)
		return;
	out_text.begin(stdout, b);
	if (b->file != NULL)
		b->o->format->out->begin(b->file, b);
}

void
output_row(const struct bench *b, const struct row *row)
{
	if (b->rank != 0)
		return;
	out_text.row(stdout, b, row);
	if (b->file != NULL)
		b->o->format->out->row(b->file, b, row);
}

void
output_end(const struct bench *b, const struct summary *s)
{
	if (b->rank != 0)
		return;
	out_text.end(stdout, b, s);
	if (b->file != NULL && b->o->format->out->end != NULL)
		b->o->format->out->end(b->file, b, s);
}

