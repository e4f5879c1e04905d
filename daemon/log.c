/*
 * log.c: leveled logging to stderr, and the daemon's clock.  Under
 * systemd, whose journal reads stderr (JOURNAL_STREAM names it), a line is
 * "<N>mccld: message": the journal takes the priority from the prefix and
 * stamps the time itself.  Anywhere else (a terminal, a file) it is
 * "2026-11-28 17:20:01.123 mccld: warning: message".
 * Every function saves errno, so logging never disturbs the caller.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

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

/* Whether stderr is the journal's stream (systemd.exec(5): JOURNAL_STREAM
   is "DEVICE:INODE" of it; a process it forked may have moved stderr). */
static int
log_to_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev ==
	    dev && (unsigned long long)st.st_ino == ino;
}

/* "<4>mccld: " for the journal, else "2026-11-28 17:20:01.123 mccld: warning: ". */
static void
log_head(char *buf, size_t len, int level)
{
	struct timespec ts;
	struct tm tm;
	char when[32];

	if (log_to_journal()) {
		snprintf(buf, len, "%s%s: ", log_prefix(level), log_procname);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03ld %s: %s: ", when, ts.tv_nsec / 1000000,
	    log_procname, log_level_name(level));
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
	char raw[2048], msg[4 * sizeof(raw)], head[96];
	int saved_errno = errno;

	if (level > log_level)
		return;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	log_escape(msg, sizeof(msg), raw);
	log_head(head, sizeof(head), level);
	if (with_errno)
		fprintf(stderr, "%s%s: %s\n", head, msg, strerror(saved_errno));
	else
		fprintf(stderr, "%s%s\n", head, msg);
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

/* A deadline ms milliseconds from now. */
uint64_t
ms_from_now(uint64_t ms)
{
	return now_ns() + ms * 1000000;
}
