/*
 * log.c: leveled logging to stderr, where systemd's journal picks it up,
 * and the daemon's clock.
 * Every function saves errno, so logging never disturbs the caller.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "mccld.h"

static int		 log_level = LOG_INFO;
static const char	*log_procname = "mccld";

static const struct {
	int		 level;
	const char	*name;
	const char	*prefix;	/* sd-daemon(3) priority prefix */
} log_levels[] = {
	{ LOG_ERR, "error", "<3>" },
	{ LOG_WARNING, "warning", "<4>" },
	{ LOG_INFO, "info", "<6>" },
	{ LOG_DEBUG, "debug", "<7>" },
};

void
log_init(int level, const char *procname)
{
	log_level = level;
	log_procname = procname;
}

void
log_setlevel(int level)
{
	log_level = level;
}

int
log_getlevel(void)
{
	return log_level;
}

int
log_level_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(log_levels) / sizeof(log_levels[0]); i++)
		if (strcasecmp(name, log_levels[i].name) == 0)
			return log_levels[i].level;
	return -1;
}

const char *
log_level_name(int level)
{
	for (size_t i = 0; i < sizeof(log_levels) / sizeof(log_levels[0]); i++)
		if (log_levels[i].level == level)
			return log_levels[i].name;
	return "unknown";
}

static const char *
log_prefix(int level)
{
	for (size_t i = 0; i < sizeof(log_levels) / sizeof(log_levels[0]); i++)
		if (log_levels[i].level == level)
			return log_levels[i].prefix;
	return "";
}

/*
 * Control characters become \xNN: a job name, error text or address from
 * a client or peer must not start a forged line or priority prefix.
 */
static void
log_escape(char *dst, size_t dstlen, const char *src)
{
	size_t o = 0;

	for (; *src != '\0' && o + 5 < dstlen; src++) {
		unsigned char ch = (unsigned char)*src;

		if (ch < 0x20 || ch == 0x7f)
			o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02x", ch);
		else
			dst[o++] = (char)ch;
	}
	dst[o] = '\0';
}

static void
vlog(int level, int with_errno, const char *fmt, va_list ap)
{
	char raw[2048], msg[4 * sizeof(raw)];
	int saved_errno = errno;

	if (level > log_level)
		return;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	log_escape(msg, sizeof(msg), raw);
	if (with_errno)
		fprintf(stderr, "%s%s: %s: %s\n", log_prefix(level),
		    log_procname, msg, strerror(saved_errno));
	else
		fprintf(stderr, "%s%s: %s\n", log_prefix(level), log_procname,
		    msg);
	errno = saved_errno;
}

#define LOG_FN(name, level, with_errno)			\
void							\
name(const char *fmt, ...)				\
{							\
	va_list ap;					\
							\
	va_start(ap, fmt);				\
	vlog(level, with_errno, fmt, ap);		\
	va_end(ap);					\
}

LOG_FN(log_warn, LOG_WARNING, 1)
LOG_FN(log_warnx, LOG_WARNING, 0)
LOG_FN(log_info, LOG_INFO, 0)
LOG_FN(log_debug, LOG_DEBUG, 0)

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}

/* The daemon's one clock, for deadlines and durations (any thread). */
uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
