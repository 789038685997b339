/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_lag.c: stamps found in the mock's event format, split
 * at every byte, with every line ending, and the lines that look like a
 * stamp but are not one. */

#include "load_lag.h"

#include "unit.h"

#define MAX_LAGS 16

struct seen {
	uint64_t lag[MAX_LAGS];
	size_t n;
};

static void record(void *arg, uint64_t lag_us)
{
	struct seen *s = arg;

	assert_true(s->n < MAX_LAGS);
	s->lag[s->n++] = lag_us;
}

/* Feeds text whole at time now; returns how many lags were reported. */
static size_t feed_all(struct seen *s, const char *text, uint64_t now)
{
	struct load_lag l;

	memset(s, 0, sizeof(*s));
	load_lag_init(&l, record, s);
	load_lag_feed(&l, text, strlen(text), now);
	return s->n;
}

static void test_one_event(void **state)
{
	struct seen s;

	(void)state;
	assert_int_equal(feed_all(&s, ": ts=1000\ndata: {\"x\":1}\n\n", 1234), 1);
	assert_int_equal(s.lag[0], 234);
}

static void test_each_event_its_own_stamp(void **state)
{
	struct seen s;
	const char *text =
	    "data: {\"role\":\"assistant\"}\n\n"       /* no stamp: no report */
	    ": ts=100\ndata: a\n\n"
	    ": ts=250\nevent: delta\ndata: b\n\n"
	    "data: [DONE]\n\n";                       /* no stamp: no report */

	(void)state;
	assert_int_equal(feed_all(&s, text, 1000), 2);
	assert_int_equal(s.lag[0], 900);
	assert_int_equal(s.lag[1], 750);
}

/* The lag is taken at the read holding the event's blank line. */
static void test_split_anywhere(void **state)
{
	const char *text = ": ts=5000\ndata: {\"t\":\"hi\"}\n\n";
	size_t len = strlen(text);

	(void)state;
	for (size_t cut = 0; cut <= len; cut++) {
		struct load_lag l;
		struct seen s = {{0}, 0};

		load_lag_init(&l, record, &s);
		load_lag_feed(&l, text, cut, 6000);
		load_lag_feed(&l, text + cut, len - cut, 7000);
		assert_int_equal(s.n, 1);
		assert_int_equal(s.lag[0], cut == len ? 1000 : 2000);
	}
}

static void test_line_endings(void **state)
{
	struct seen s;

	(void)state;
	assert_int_equal(feed_all(&s, ": ts=10\r\ndata: x\r\n\r\n", 50), 1);
	assert_int_equal(s.lag[0], 40);
	assert_int_equal(feed_all(&s, ": ts=10\rdata: x\r\r", 50), 1);
	assert_int_equal(s.lag[0], 40);
	/* the mock's LF stamp before a Gemini CRLF event */
	assert_int_equal(feed_all(&s, ": ts=10\ndata: x\r\n\r\n", 50), 1);
}

/* A CR ending one read and its LF opening the next are one line end, not
 * two: the event must not end early. */
static void test_crlf_split(void **state)
{
	struct load_lag l;
	struct seen s = {{0}, 0};

	(void)state;
	load_lag_init(&l, record, &s);
	load_lag_feed(&l, ": ts=10\r", 8, 20);
	load_lag_feed(&l, "\ndata: x\r", 9, 30);
	assert_int_equal(s.n, 0);
	load_lag_feed(&l, "\n\r\n", 3, 40);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.lag[0], 30);
}

static void test_not_stamps(void **state)
{
	static const char *const texts[] = {
		": keep-alive\n\n",
		": ts=\ndata: x\n\n",
		": ts=12x\ndata: x\n\n",
		":ts=12\ndata: x\n\n",
		": ts =12\ndata: x\n\n",
		"data: : ts=12\n\n",
		"x ts=12\ndata: x\n\n",
		"data: x\n: ts=12",                     /* no blank line yet */
		": ts=123456789012345678901\ndata: x\n\n",  /* 21 digits */
	};
	struct seen s;

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		assert_int_equal(feed_all(&s, texts[i], 1000000), 0);
	}
}

static void test_stamp_ahead_of_now(void **state)
{
	struct seen s;

	(void)state;
	assert_int_equal(feed_all(&s, ": ts=900\ndata: x\n\n", 800), 1);
	assert_int_equal(s.lag[0], 0);
}

/* A stamp belongs to its event: an event without one that follows does
 * not reuse it. */
static void test_stamp_used_once(void **state)
{
	struct seen s;

	(void)state;
	assert_int_equal(feed_all(&s, ": ts=1\ndata: a\n\ndata: b\n\n\n\n", 3), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_event),
		cmocka_unit_test(test_each_event_its_own_stamp),
		cmocka_unit_test(test_split_anywhere),
		cmocka_unit_test(test_line_endings),
		cmocka_unit_test(test_crlf_split),
		cmocka_unit_test(test_not_stamps),
		cmocka_unit_test(test_stamp_ahead_of_now),
		cmocka_unit_test(test_stamp_used_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
