/*
 * log.h: the daemon's log (stderr or the journal, by level) and its clock
 * (log.c), for every layer: the one part of the process the layers below
 * may call.
 */
#ifndef MCCLD_LOG_H
#define MCCLD_LOG_H

#include <stdint.h>

#define LOG_ERR		3
#define LOG_WARNING	4
#define LOG_INFO	6
#define LOG_DEBUG	7

#define ERR_MAX		256	/* an error message handed up, with its NUL */

void		log_init(int, const char *);
void		log_setlevel(int);
int		log_getlevel(void);
int		log_level_parse(const char *);
const char	*log_level_name(int);
void		log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void		log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void		log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void		log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void		fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
void		fatalx(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

uint64_t	now_ns(void);		/* CLOCK_MONOTONIC, in ns (log.c) */
uint64_t	ms_from_now(uint64_t);	/* now_ns() that many ms on */

#endif
