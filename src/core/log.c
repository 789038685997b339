/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

static enum log_level current = LOG_LVL_INFO;

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

static uint64_t real_now_ms(void)
{
	return util_now_us() / 1000;
}

static uint64_t (*_Atomic clock_ms)(void) = real_now_ms;

void log_limit_clock(uint64_t (*now_ms)(void))
{
	clock_ms = now_ms != NULL ? now_ms : real_now_ms;
}

static void limit_register(struct log_limit *lim)
{
	size_t i;

	if (atomic_flag_test_and_set(&lim->registered))
		return;
	i = atomic_fetch_add(&n_limits, 1);
	if (i < LOG_LIMITS)
		atomic_store(&limits[i], lim);
}

const struct log_limit *log_limit_at(size_t i)
{
	size_t n = atomic_load(&n_limits);

	return i < n && i < LOG_LIMITS ? atomic_load(&limits[i]) : NULL;
}

uint64_t log_limit_suppressed(const struct log_limit *lim)
{
	return atomic_load_explicit(&lim->suppressed, memory_order_relaxed);
}

/* Whether this line may be written: the first `burst` of an interval are.
 * A new interval is claimed by one thread (the exchange), which resets the
 * count; a line that races it may be counted in either interval. */
static int limit_admit(struct log_limit *lim)
{
	uint64_t w = clock_ms() / (lim->interval_ms ? lim->interval_ms : 1);
	uint64_t seen = atomic_load(&lim->window);

	if (w != seen && atomic_compare_exchange_strong(&lim->window, &seen, w))
		atomic_store(&lim->in_window, 0);
	if (atomic_fetch_add(&lim->in_window, 1) < lim->burst)
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
	limit_register(lim);
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

void log_limits_flush(void)
{
	const struct log_limit *c;

	for (size_t i = 0; (c = log_limit_at(i)) != NULL; i++) {
		struct log_limit *lim = (struct log_limit *)c;
		uint64_t w = clock_ms() / (lim->interval_ms ? lim->interval_ms : 1);
		uint64_t pending;

		/* said by the kind's next line while its interval lasts */
		if (w == atomic_load(&lim->window) || atomic_load(&lim->pending) == 0)
			continue;
		pending = atomic_exchange(&lim->pending, 0);
		if (pending > 0)
			log_msg(LOG_LVL_WARN, "%llu %s line(s) suppressed (at most %u a %llu s)",
			    (unsigned long long)pending, lim->kind, lim->burst,
			    (unsigned long long)(lim->interval_ms / 1000));
	}
}
