/* SPDX-License-Identifier: Apache-2.0 */
/* The error log: one line per event worth an operator's eye, on stderr,
 * prefixed with a level so journald and grep can sort them. */
#ifndef TOKENTAP_LOG_H
#define TOKENTAP_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

/*
 * A kind of line that a client or a peer can cause (a malformed request, a
 * collector that fails) must not flood the log: at most `burst` lines of
 * the kind per `interval_ms`, the others counted. The first line written
 * after some were suppressed says how many; log_limits_flush() says it for
 * a kind that fell silent. Any thread may log through one limit (atomics);
 * a limit is a static of the module that logs, registered at its first use
 * so that /metrics can count what each kind suppressed.
 */
struct log_limit {
	const char *kind;               /* a metric label: [a-z_]+ */
	unsigned burst;                 /* below 2^24 */
	uint64_t interval_ms;
	/* the current interval's number (above) and the lines asked for in
	 * it (the low LOG_LIMIT_COUNT_BITS, at most burst + 1): one word,
	 * so that an interval's count starts at its first line, exactly */
	_Atomic uint64_t state;
	_Atomic uint64_t pending;       /* suppressed, not yet said in the log */
	_Atomic uint64_t suppressed;    /* suppressed since the start */
	atomic_flag registered;
};

#define LOG_LIMIT_COUNT_BITS 24

#define LOG_LIMIT_INIT(kind, burst, interval_ms) \
	{ (kind), (burst), (interval_ms), 0, 0, 0, ATOMIC_FLAG_INIT }

/* At most LOG_LIMITS kinds in a program. */
#define LOG_LIMITS 64

void log_limited(struct log_limit *lim, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A kind registered before its first line, so that /metrics shows it from
 * 0 (an alert on its increase sees the first flood); log_limited
 * registers the others at their first line. Once each. */
void log_limit_register(struct log_limit *lim);

/* Each registered kind in turn (i from 0; NULL past the last). */
const struct log_limit *log_limit_at(size_t i);

/* Lines suppressed of one kind since the start. */
uint64_t log_limit_suppressed(const struct log_limit *lim);

/* One line for each kind whose suppressed lines were not said yet and whose
 * interval has passed (a timer calls it, once a second or so). */
void log_limits_flush(void);

/* The same line for each kind with suppressed lines not said yet, its
 * interval over or not: at exit, so that the log's count is whole. */
void log_limits_flush_all(void);

/* The clock the limits read: tests set theirs; NULL restores the real one. */
void log_limit_clock(uint64_t (*now_ms)(void));

#endif
