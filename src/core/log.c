/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

static enum log_level current = LOG_LVL_INFO;

/* the caller's format and its arguments: checked where they are written */
__attribute__((format(printf, 3, 0)))
static void log_write(enum log_level level, const char *suffix, const char *fmt, va_list ap)
{
	/* sd-daemon(3) priority prefixes: journald reads them, people read the word. */
	static const char *const prefix[] = {
		"<3>error: ", "<4>warning: ", "<6>", "<7>debug: "
	};
	/* The "<N>" priority is for journald only (it sets JOURNAL_STREAM). */
	static int skip = -1;
	char line[2048];
	int n;

	if (skip < 0)
		skip = getenv("JOURNAL_STREAM") ? 0 : 3;
	n = snprintf(line, sizeof line, "%s", prefix[level] + skip);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	if (suffix != NULL) {
		n += snprintf(line + n, sizeof line - (size_t)n - 1, "%s", suffix);
		if (n > (int)sizeof line - 2)
			n = (int)sizeof line - 2;
	}
	line[n++] = '\n';
	/* One write(2) per line so lines from worker threads never interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > current)
		return;
	va_start(ap, fmt);
	log_write(level, NULL, fmt, ap);
	va_end(ap);
}

/* ---- Rate-limited kinds ---------------------------------------------------- */

static struct log_limit *_Atomic limits[LOG_LIMITS];
static _Atomic size_t n_limits;
static atomic_flag registering = ATOMIC_FLAG_INIT;

static uint64_t real_now_ms(void)
{
	return util_now_us() / 1000;
}

static uint64_t (*_Atomic clock_ms)(void) = real_now_ms;

void log_limit_clock(uint64_t (*now_ms)(void))
{
	clock_ms = now_ms != NULL ? now_ms : real_now_ms;
}

/* A kind is published (n_limits) only once its slot holds it, so that a
 * reader never meets an empty slot below n_limits. */
void log_limit_register(struct log_limit *lim)
{
	size_t n;

	if (atomic_flag_test_and_set(&lim->registered))
		return;
	while (atomic_flag_test_and_set_explicit(&registering, memory_order_acquire))
		;
	n = atomic_load_explicit(&n_limits, memory_order_relaxed);
	if (n < LOG_LIMITS) {
		atomic_store_explicit(&limits[n], lim, memory_order_relaxed);
		atomic_store_explicit(&n_limits, n + 1, memory_order_release);
	}
	atomic_flag_clear_explicit(&registering, memory_order_release);
}

const struct log_limit *log_limit_at(size_t i)
{
	size_t n = atomic_load_explicit(&n_limits, memory_order_acquire);

	return i < n ? atomic_load_explicit(&limits[i], memory_order_relaxed) : NULL;
}

uint64_t log_limit_suppressed(const struct log_limit *lim)
{
	return atomic_load_explicit(&lim->suppressed, memory_order_relaxed);
}

#define COUNT_MASK ((UINT64_C(1) << LOG_LIMIT_COUNT_BITS) - 1)

static uint64_t window_now(const struct log_limit *lim)
{
	return clock_ms() / (lim->interval_ms ? lim->interval_ms : 1);
}

/* Whether this line may be written: the first `burst` of an interval are.
 * The interval's number and its count change together (one word), so a
 * new interval's count starts at its first line whichever thread sees it
 * first, and a clock read before another thread's (a stale, earlier
 * interval) counts in the current one rather than turning it back. */
static int limit_admit(struct log_limit *lim)
{
	uint64_t w = window_now(lim);
	uint64_t cur = atomic_load(&lim->state), next;

	do {
		uint64_t seen = cur >> LOG_LIMIT_COUNT_BITS, n = cur & COUNT_MASK;

		if (w > seen)
			next = w << LOG_LIMIT_COUNT_BITS | 1;
		else if (n < lim->burst)
			next = cur + 1;
		else
			break;
	} while (!atomic_compare_exchange_weak(&lim->state, &cur, next));
	if (cur >> LOG_LIMIT_COUNT_BITS < w || (cur & COUNT_MASK) < lim->burst)
		return 1;
	atomic_fetch_add_explicit(&lim->pending, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&lim->suppressed, 1, memory_order_relaxed);
	return 0;
}

void log_limited(struct log_limit *lim, enum log_level level, const char *fmt, ...)
{
	char suffix[96];
	uint64_t pending;
	va_list ap;

	if (level > current)
		return;
	log_limit_register(lim);
	if (!limit_admit(lim))
		return;
	pending = atomic_exchange(&lim->pending, 0);
	if (pending > 0)
		snprintf(suffix, sizeof suffix, " (%llu more such line(s) suppressed before this)",
		    (unsigned long long)pending);
	va_start(ap, fmt);
	log_write(level, pending > 0 ? suffix : NULL, fmt, ap);
	va_end(ap);
}

static void flush(int all)
{
	const struct log_limit *c;

	for (size_t i = 0; (c = log_limit_at(i)) != NULL; i++) {
		struct log_limit *lim = (struct log_limit *)c;
		uint64_t pending;

		/* said by the kind's next line while its interval lasts */
		if (atomic_load(&lim->pending) == 0 || (!all &&
		    window_now(lim) <= atomic_load(&lim->state) >> LOG_LIMIT_COUNT_BITS))
			continue;
		pending = atomic_exchange(&lim->pending, 0);
		if (pending > 0)
			log_msg(LOG_LVL_WARN, "%llu %s line(s) suppressed (at most %u every %g s)",
			    (unsigned long long)pending, lim->kind, lim->burst,
			    (double)lim->interval_ms / 1000);
	}
}

void log_limits_flush(void)
{
	flush(0);
}

void log_limits_flush_all(void)
{
	flush(1);
}
