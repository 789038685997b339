/* SPDX-License-Identifier: Apache-2.0 */
/* goodput.c: the rule that calls a request good, bad or not counted. */
#include "goodput.h"

#include "unit.h"

#define MS 1000

static const struct goodput_targets both = { { 300 * MS, 50 * MS } };

static enum goodput_verdict judge(const struct goodput_targets *t,
    enum meter_outcome o, int64_t ttft, int64_t tpot, int64_t duration)
{
	struct goodput_request r = { o, { ttft, tpot }, duration };
	return goodput_judge(t, &r);
}

static void test_ok_meets_every_target(void **state)
{
	(void)state;
	assert_int_equal(judge(&both, OUTCOME_OK, 299 * MS, 49 * MS, 900 * MS), GOODPUT_GOOD);
	assert_int_equal(judge(&both, OUTCOME_OK, 300 * MS, 50 * MS, 900 * MS), GOODPUT_GOOD);
	assert_int_equal(judge(&both, OUTCOME_OK, 301 * MS, 10 * MS, 900 * MS), GOODPUT_BAD);
	assert_int_equal(judge(&both, OUTCOME_OK, 10 * MS, 51 * MS, 900 * MS), GOODPUT_BAD);
}

static void test_undefined_tpot_meets_its_target(void **state)
{
	(void)state;
	assert_int_equal(judge(&both, OUTCOME_OK, 100 * MS, -1, 100 * MS), GOODPUT_GOOD);
}

static void test_an_answer_without_tokens_took_its_duration(void **state)
{
	(void)state;
	/* not a stream: the first output comes with the whole body */
	assert_int_equal(judge(&both, OUTCOME_OK, -1, -1, 250 * MS), GOODPUT_GOOD);
	assert_int_equal(judge(&both, OUTCOME_OK, -1, -1, 350 * MS), GOODPUT_BAD);
}

static void test_other_outcomes_are_bad(void **state)
{
	(void)state;
	for (int o = OUTCOME_UPSTREAM_ABORT; o < OUTCOME_COUNT; o++)
		assert_int_equal(judge(&both, (enum meter_outcome)o, 10 * MS, 10 * MS, 20 * MS),
		    GOODPUT_BAD);
}

/* A client too slow to send its request (timeouts.client_header,
 * client_body) or to take its answer (timeouts.send): its own wait is no
 * missed target; a figure measured before it was let go still counts. */
static void test_client_timeout(void **state)
{
	(void)state;
	/* a stalled upload, a minute long, no token: not counted */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_TIMEOUT, -1, -1, 60000 * MS),
	    GOODPUT_UNCOUNTED);
	/* stopped reading a good stream: not counted */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_TIMEOUT, 100 * MS, 20 * MS, 60000 * MS),
	    GOODPUT_UNCOUNTED);
	/* the model was already late when the client stopped reading */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_TIMEOUT, 500 * MS, -1, 60000 * MS),
	    GOODPUT_BAD);
	assert_int_equal(judge(&both, OUTCOME_CLIENT_TIMEOUT, 100 * MS, 80 * MS, 60000 * MS),
	    GOODPUT_BAD);
	assert_true(meter_outcome_client(OUTCOME_CLIENT_TIMEOUT));
	assert_true(meter_outcome_client(OUTCOME_CLIENT_ABORT));
	assert_false(meter_outcome_client(OUTCOME_TIMEOUT));
	assert_string_equal(meter_outcome_name(OUTCOME_CLIENT_TIMEOUT), "client_timeout");
}

static void test_client_abort(void **state)
{
	(void)state;
	/* left before the TTFT target passed: not counted */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_ABORT, -1, -1, 200 * MS),
	    GOODPUT_UNCOUNTED);
	/* waited past it without a token: gave up waiting */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_ABORT, -1, -1, 400 * MS), GOODPUT_BAD);
	/* tokens came in time and at pace, then the client left: not counted */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_ABORT, 100 * MS, 20 * MS, 2000 * MS),
	    GOODPUT_UNCOUNTED);
	/* already failed them when they left */
	assert_int_equal(judge(&both, OUTCOME_CLIENT_ABORT, 500 * MS, 20 * MS, 2000 * MS),
	    GOODPUT_BAD);
	assert_int_equal(judge(&both, OUTCOME_CLIENT_ABORT, 100 * MS, 80 * MS, 2000 * MS),
	    GOODPUT_BAD);
}

static void test_only_the_targets_given_count(void **state)
{
	const struct goodput_targets tpot_only = { { 0, 50 * MS } };
	(void)state;
	assert_int_equal(judge(&tpot_only, OUTCOME_OK, 5000 * MS, 40 * MS, 9000 * MS),
	    GOODPUT_GOOD);
	assert_int_equal(judge(&tpot_only, OUTCOME_CLIENT_ABORT, -1, -1, 9000 * MS),
	    GOODPUT_UNCOUNTED);
	assert_true(goodput_any(&tpot_only));
	assert_string_equal(goodput_target_name(GOODPUT_TTFT), "ttft");
	assert_string_equal(goodput_target_name(GOODPUT_TPOT), "tpot");
}

/* TTFO: the first token that is not reasoning. A fast first reasoning
 * token does not make a late answer good; a client that left while the
 * model was still thinking past the target had waited too long. */
static void test_ttfo_target(void **state)
{
	const struct goodput_targets t = { { 300 * MS, 0, 2000 * MS } };
	struct goodput_request r = { OUTCOME_OK, { 100 * MS, 20 * MS, 1500 * MS }, 4000 * MS };
	(void)state;
	assert_int_equal(goodput_judge(&t, &r), GOODPUT_GOOD);
	r.value_us[GOODPUT_TTFO] = 2500 * MS;              /* thought too long */
	assert_int_equal(goodput_judge(&t, &r), GOODPUT_BAD);
	r.value_us[GOODPUT_TTFO] = -1;                      /* reasoning only */
	assert_int_equal(goodput_judge(&t, &r), GOODPUT_BAD);
	r.duration_us = 1800 * MS;                         /* ...but ended in time */
	assert_int_equal(goodput_judge(&t, &r), GOODPUT_GOOD);
	r.outcome = OUTCOME_CLIENT_ABORT;
	r.duration_us = 2400 * MS;                         /* left while it thought */
	assert_int_equal(goodput_judge(&t, &r), GOODPUT_BAD);
	r.duration_us = 1200 * MS;
	assert_int_equal(goodput_judge(&t, &r), GOODPUT_UNCOUNTED);
	assert_string_equal(goodput_target_name(GOODPUT_TTFO), "ttfo");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok_meets_every_target),
		cmocka_unit_test(test_undefined_tpot_meets_its_target),
		cmocka_unit_test(test_an_answer_without_tokens_took_its_duration),
		cmocka_unit_test(test_other_outcomes_are_bad),
		cmocka_unit_test(test_client_abort),
		cmocka_unit_test(test_client_timeout),
		cmocka_unit_test(test_only_the_targets_given_count),
		cmocka_unit_test(test_ttfo_target),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
