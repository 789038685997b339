/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_psize.c: a synthetic text's bytes at a ratio (and
 * the body that sends it), the ratio calibrated from a target's counts
 * with its spread, what no count or a count no tokenizer gives leaves,
 * and a level's tokens asked beside the target's. */
#include <math.h>

#include <event2/buffer.h>

#include "load_body.h"
#include "load_psize.h"

#include "unit.h"

static void near(double a, double b, double tol)
{
	if (!(fabs(a - b) <= tol))
		fail_msg("%.9g is not %.9g within %g", a, b, tol);
}

/* A request of asked prompt tokens the target counted as reported (-1:
 * no count). */
static void add(struct loadstats *st, uint32_t asked, int64_t reported, int warmup)
{
	struct load_sample s;

	memset(&s, 0, sizeof(s));
	s.prompt_tokens = asked;
	s.input_tokens = reported;
	s.warmup = (uint8_t)warmup;
	assert_int_equal(loadstats_record(st, &s, NULL, 0), 0);
}

static void test_bytes(void **state)
{
	(void)state;
	assert_int_equal(load_psize_bytes(100, 4), 400);
	assert_int_equal(load_psize_bytes(100, 3.0769), 308);
	assert_int_equal(load_psize_bytes(0, 3.1), 0);
	assert_int_equal(load_psize_tokens(400, 4), 100);
	assert_int_equal(load_psize_tokens(308, 3.0769), 100);
	assert_int_equal(load_psize_tokens(1, 4), 1);      /* at least one */
	assert_int_equal(load_psize_tokens((size_t)1 << 40, 0.5), LOAD_CONF_MAX_TOKENS);
}

/* What a tokenizer of 3.1 bytes a token counts (rounded up, as the mock's
 * --prompt-bytes-per-token): the ratio of the sums, and the per-request
 * ratios' standard deviation. */
static void test_fit(void **state)
{
	struct loadstats st;
	struct load_psize p;
	char buf[80];

	(void)state;
	loadstats_init(&st);
	add(&st, 100, 130, 0);        /* 400 bytes: ceil(400 / 3.1) */
	add(&st, 200, 259, 0);        /* 800 bytes */
	add(&st, 150, -1, 0);         /* no count: not a sample */
	load_psize_init(&p);
	assert_int_equal(load_psize_fit(&st, 4, &p), 0);
	near(p.bytes_per_token, 1200.0 / 389, 1e-12);
	/* 400/130 and 800/259: their sample standard deviation */
	near(p.spread, fabs(400.0 / 130 - 800.0 / 259) / sqrt(2), 1e-9);
	assert_int_equal(p.requests, 3);
	assert_int_equal(p.reported, 2);
	p.rule = LOAD_PSIZE_RULE_CALIBRATED;
	load_psize_format(&p, buf, sizeof buf);
	assert_string_equal(buf, "3.08 bytes/token (±0.01, 2 requests)");
	/* sized at that ratio, the same prompt is 100 of the target's tokens */
	assert_int_equal((int)ceil((double)load_psize_bytes(100, p.bytes_per_token) / 3.1),
	    100);
	loadstats_free(&st);

	/* one request: no spread */
	add(&st, 100, 130, 0);
	assert_int_equal(load_psize_fit(&st, 4, &p), 0);
	assert_true(isnan(p.spread));
	load_psize_format(&p, buf, sizeof buf);
	assert_string_equal(buf, "3.08 bytes/token (1 request)");
	loadstats_free(&st);

	/* no count at all, or one no tokenizer gives: no ratio */
	add(&st, 100, -1, 0);
	add(&st, 100, 0, 0);
	assert_int_equal(load_psize_fit(&st, 4, &p), -1);
	assert_int_equal(p.reported, 0);
	add(&st, 100, 1, 0);          /* 400 bytes a token */
	assert_int_equal(load_psize_fit(&st, 4, &p), -1);
	assert_int_equal(p.reported, 1);
	loadstats_free(&st);

	load_psize_init(&p);
	assert_int_equal(p.estimate, 1);
	load_psize_format(&p, buf, sizeof buf);
	assert_string_equal(buf, "4 bytes/token");
}

static void test_check(void **state)
{
	struct loadstats st;
	struct load_psize_check k;

	(void)state;
	loadstats_init(&st);
	load_psize_check_of(&st, &k);
	assert_int_equal(k.requests, 0);
	assert_true(isnan(k.ratio_mean));
	add(&st, 100, 150, 1);        /* warm-up: in no figure */
	add(&st, 100, 110, 0);
	add(&st, 300, 270, 0);
	add(&st, 300, -1, 0);
	load_psize_check_of(&st, &k);
	assert_int_equal(k.requests, 2);
	near(k.asked_mean, 200, 1e-12);
	near(k.reported_mean, 190, 1e-12);
	near(k.ratio_mean, (1.1 + 0.9) / 2, 1e-12);
	loadstats_free(&st);
}

static void test_rule_names(void **state)
{
	enum load_psize_rule r;

	(void)state;
	for (int i = LOAD_PSIZE_RULE_DEFAULT; i <= LOAD_PSIZE_RULE_CALIBRATED; i++) {
		assert_int_equal(load_psize_rule_of(load_psize_rule_name(i), &r), 0);
		assert_int_equal(r, i);
	}
	assert_int_equal(load_psize_rule_of("tokenizer", &r), -1);
}

/* The body sends round(tokens x the ratio) bytes of words. */
static void test_body(void **state)
{
	struct load_conf c;
	struct evbuffer *b = evbuffer_new();
	const char *err;
	char *json, *p;
	uint64_t seed = 5;
	struct load_req rq = { .prompt_tokens = 100, .max_tokens = 1 };

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	assert_int_equal(load_conf_set_url(&c, "http://h:1/v1/chat/completions", &err), 0);
	for (int i = 0; i < 3; i++) {
		double bpt = i == 0 ? 0 : i == 1 ? 4 : 3.0769;
		rq.bytes_per_token = bpt;
		assert_int_equal(load_body_json(b, &c, &rq, &seed), 0);
		json = unit_take(b);
		p = strstr(json, "\"content\":\"");
		assert_non_null(p);
		assert_int_equal(strcspn(p + 11, "\""), i < 2 ? 400 : 308);
		free(json);
	}
	evbuffer_free(b);
	load_conf_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_fit),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_rule_names),
		cmocka_unit_test(test_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
