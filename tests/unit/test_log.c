/* SPDX-License-Identifier: Apache-2.0 */
/* The error log's rate-limited kinds: a burst a interval, the rest counted
 * and said later, on a clock the test turns. */
#include "unit.h"

#include <unistd.h>

#include "log.h"

static uint64_t fake_ms;

static uint64_t fake_now(void)
{
	return fake_ms;
}

/* What log lines fn writes to stderr. */
static char *captured(void (*fn)(void))
{
	static char out[8192];
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof out - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	return out;
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static struct log_limit lim = LOG_LIMIT_INIT("test_kind", 3, 1000);

static void ten_lines(void)
{
	for (int i = 0; i < 10; i++)
		log_limited(&lim, LOG_LVL_WARN, "line %d", i);
}

static void one_line(void)
{
	log_limited(&lim, LOG_LVL_WARN, "later");
}

static void flush(void)
{
	log_limits_flush();
}

static void test_a_burst_then_silence_then_the_count(void **state)
{
	char *out;

	(void)state;
	log_limit_clock(fake_now);
	fake_ms = 5000;
	out = captured(ten_lines);
	assert_int_equal(count_lines(out), 3);
	assert_non_null(strstr(out, "line 2"));
	assert_null(strstr(out, "line 3"));
	assert_int_equal(log_limit_suppressed(&lim), 7);
	/* the same interval: still suppressed, and a flush says nothing yet */
	fake_ms = 5999;
	assert_string_equal(captured(one_line), "");
	assert_string_equal(captured(flush), "");
	assert_int_equal(log_limit_suppressed(&lim), 8);
	/* the next interval: the line carries the count */
	fake_ms = 6000;
	out = captured(one_line);
	assert_non_null(strstr(out, "later (8 more such line(s) suppressed before this)"));
	assert_int_equal(count_lines(out), 1);
	assert_int_equal(log_limit_suppressed(&lim), 8);
	log_limit_clock(NULL);
}

static void test_a_kind_that_fell_silent_is_said_by_the_flush(void **state)
{
	char *out;

	(void)state;
	log_limit_clock(fake_now);
	fake_ms = 100000;
	captured(ten_lines);
	fake_ms = 101500;
	out = captured(flush);
	assert_non_null(strstr(out, "7 test_kind line(s) suppressed"));
	/* said once */
	assert_string_equal(captured(flush), "");
	assert_int_equal(log_limit_suppressed(&lim), 15);
	log_limit_clock(NULL);
}

static void test_kinds_are_registered_once(void **state)
{
	size_t n = 0;

	(void)state;
	log_limit_clock(fake_now);
	captured(one_line);
	captured(one_line);
	while (log_limit_at(n) != NULL)
		n++;
	assert_int_equal(n, 1);
	assert_ptr_equal(log_limit_at(0), &lim);
	log_limit_clock(NULL);
}

static struct log_limit stale = LOG_LIMIT_INIT("stale_kind", 3, 1000);

static void five_stale(void)
{
	for (int i = 0; i < 5; i++)
		log_limited(&stale, LOG_LVL_WARN, "stale %d", i);
}

static void one_stale(void)
{
	log_limited(&stale, LOG_LVL_WARN, "stale later");
}

/* A thread that read the clock just before another one began the next
 * interval must not take the interval back (and its count with it). */
static void test_a_stale_clock_reading_does_not_restart_the_burst(void **state)
{
	char *out;

	(void)state;
	log_limit_clock(fake_now);
	fake_ms = 200000;
	out = captured(five_stale);
	assert_int_equal(count_lines(out), 3);
	fake_ms = 199999;
	assert_string_equal(captured(one_stale), "");
	fake_ms = 200500;
	assert_string_equal(captured(one_stale), "");
	assert_int_equal(log_limit_suppressed(&stale), 4);
	fake_ms = 201000;
	out = captured(one_stale);
	assert_non_null(strstr(out, "stale later (4 more such line(s) suppressed before this)"));
	log_limit_clock(NULL);
}

static struct log_limit early = LOG_LIMIT_INIT("early_kind", 2, 10000);

static void three_early(void)
{
	for (int i = 0; i < 3; i++)
		log_limited(&early, LOG_LVL_WARN, "early %d", i);
}

static void flush_all(void)
{
	log_limits_flush_all();
}

/* Registered before its first line: listed (for /metrics, from 0), once. */
static void test_a_kind_registered_before_its_first_line(void **state)
{
	size_t n = 0;
	const struct log_limit *c;
	int seen = 0;

	(void)state;
	log_limit_register(&early);
	log_limit_register(&early);
	for (; (c = log_limit_at(n)) != NULL; n++)
		seen += c == &early;
	assert_int_equal(seen, 1);
	assert_int_equal(log_limit_suppressed(&early), 0);
	/* the first line registers it no more */
	log_limit_clock(fake_now);
	fake_ms = 300000;
	captured(three_early);
	assert_ptr_equal(log_limit_at(n - 1), &early);
	assert_null(log_limit_at(n));
	log_limit_clock(NULL);
}

/* At exit, the counts not said yet are said, their interval over or not. */
static void test_flush_all_says_what_the_interval_still_holds(void **state)
{
	char *out;

	(void)state;
	log_limit_clock(fake_now);
	fake_ms = 400000;
	captured(three_early);
	assert_string_equal(captured(flush), "");
	out = captured(flush_all);
	assert_non_null(strstr(out, "1 early_kind line(s) suppressed (at most 2 every 10 s)"));
	assert_int_equal(count_lines(out), 1);
	assert_string_equal(captured(flush_all), "");
	assert_int_equal(log_limit_suppressed(&early), 2);
	log_limit_clock(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_burst_then_silence_then_the_count),
		cmocka_unit_test(test_a_kind_that_fell_silent_is_said_by_the_flush),
		cmocka_unit_test(test_kinds_are_registered_once),
		cmocka_unit_test(test_a_stale_clock_reading_does_not_restart_the_burst),
		cmocka_unit_test(test_a_kind_registered_before_its_first_line),
		cmocka_unit_test(test_flush_all_says_what_the_interval_still_holds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
