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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_burst_then_silence_then_the_count),
		cmocka_unit_test(test_a_kind_that_fell_silent_is_said_by_the_flush),
		cmocka_unit_test(test_kinds_are_registered_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
