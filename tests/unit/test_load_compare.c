/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_compare.c: the --fail-on syntax (each form, each
 * mistake named), the figures' names, levels matched by what they set
 * (the others listed), a 20 % TPOT rise failing its rule where an A/A
 * pair and a fall pass it, warm-up and cool-down requests in no figure,
 * and a document without samples judged by the limit alone. */
#include <math.h>

#include "load_compare.h"
#include "load_summary.h"
#include "rng.h"

#include "unit.h"

static void rules_parse(void **state)
{
	struct load_cmp_opts o;
	char err[200];

	(void)state;
	load_cmp_opts_init(&o);
	assert_int_equal(load_cmp_parse_rules(&o, "tpot_p50>+10%, ttft_p95>+20ms "
	    "output_throughput<-5% error_rate>+1% e2el_p99>0.5s itl_mean>+300us", err,
	    sizeof err), 0);
	assert_int_equal(o.nrules, 6);
	assert_string_equal(o.rules[0].metric, "tpot_p50");
	assert_true(o.rules[0].up && o.rules[0].relative && fabs(o.rules[0].limit - 0.1) < 1e-12);
	assert_true(!o.rules[1].relative && o.rules[1].limit == 20);
	assert_string_equal(o.rules[2].metric, "output_tokens_per_s");
	assert_true(!o.rules[2].up && o.rules[2].relative && fabs(o.rules[2].limit - 0.05) < 1e-12);
	/* the error rate's change is in points, A's rate may be 0 */
	assert_true(!o.rules[3].relative && fabs(o.rules[3].limit - 0.01) < 1e-12);
	assert_string_equal(o.rules[4].metric, "e2e_p99");
	assert_true(o.rules[4].limit == 500);
	assert_true(fabs(o.rules[5].limit - 0.3) < 1e-12);
	assert_string_equal(o.rules[0].text, "tpot_p50>+10%");
}

static void rule_errors(void **state)
{
	static const struct { const char *rule, *says; } bad[] = {
		{"tpot_p50", "expected FIGURE>+X%"},
		{">+10%", "expected FIGURE>+X%"},
		{"tpot_p42x>+10%", "unknown figure"},
		{"tpot_p0>+10%", "unknown figure"},
		{"latency>+10%", "unknown figure"},
		{"tpot_p50>=+10%", "> or < alone"},
		{"tpot_p50>-10%", "a rise is >+X"},
		{"output_tokens_per_s<+5%", "a rise is >+X"},
		{"tpot_p50>+%", "a limit above 0"},
		{"tpot_p50>+0%", "a limit above 0"},
		{"tpot_p50>+10", "the limit takes %"},
		{"output_tokens_per_s<-5ms", "the limit takes %"},
		{"", "no rule"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct load_cmp_opts o;
		char err[200] = "";
		load_cmp_opts_init(&o);
		if (load_cmp_parse_rules(&o, bad[i].rule, err, sizeof err) != -1)
			fail_msg("'%s' accepted", bad[i].rule);
		if (strstr(err, bad[i].says) == NULL)
			fail_msg("'%s': \"%s\" does not say \"%s\"", bad[i].rule, err, bad[i].says);
	}
	{
		struct load_cmp_opts o;
		char err[200];
		load_cmp_opts_init(&o);
		assert_int_equal(load_cmp_parse_metrics(&o, "ttft_p99.9,e2el_mean", err,
		    sizeof err), 0);
		assert_int_equal(o.nmetrics, 2);
		assert_string_equal(o.metrics[1], "e2e_mean");
		assert_int_equal(load_cmp_parse_metrics(&o, "ttft_p99,bogus", err, sizeof err), -1);
		assert_non_null(strstr(err, "'bogus'"));
	}
}

/* A level of 300 requests with TPOT around tpot_ms, but warm_ms for the
 * first 20 (warm-up) and the last 10 (cool-down). */
static void level(struct load_result *r, enum load_key key, double value, double tpot_ms,
    double warm_ms, uint64_t seed, int samples)
{
	struct load_level *lv = load_result_add(r, key, value, r->conf);
	struct load_sum_in in;

	assert_non_null(lv);
	for (uint64_t i = 0; i < 300; i++) {
		struct load_sample s;
		double jitter = 1 + 0.02 * (rng_unit(&seed) - 0.5);
		memset(&s, 0, sizeof(s));
		s.seq = i;
		s.start_us = i * 10000;
		s.outcome = OUTCOME_OK;
		s.warmup = i < 20;
		s.cooldown = i >= 290;
		s.tpot_us = (s.warmup || s.cooldown ? warm_ms : tpot_ms) * 1000 * jitter;
		s.ttft_us = s.ttfo_us = 20000 + (int64_t)(rng_unit(&seed) * 1000);
		s.duration_us = s.ttft_us + (int64_t)(9 * s.tpot_us);
		s.first_token_us = (int64_t)s.start_us + s.ttft_us;
		s.last_token_us = (int64_t)s.start_us + s.duration_us;
		s.output_tokens = 10;
		s.input_tokens = s.first_chunk_tokens = -1;
		s.output_speed = -1;
		assert_int_equal(loadstats_record(&lv->st, &s, NULL, 0), 0);
	}
	lv->info.window_end_us = 3000000;
	memset(&in, 0, sizeof(in));
	in.st = &lv->st;
	in.pcts = &r->pcts;
	in.window_end_us = lv->info.window_end_us;
	assert_int_equal(load_summary(&in, &lv->sum), 0);
	if (!samples)
		lv->st.n = 0;            /* a document written with --no-samples */
}

struct pair {
	struct load_conf c;
	struct load_result a, b;
};

static void pair_init(struct pair *p)
{
	assert_int_equal(load_conf_init(&p->c), 0);
	p->c.url = strdup("http://x/");
	load_result_init(&p->a, LOAD_KIND_SWEEP, &p->c, 0, NULL);
	load_result_init(&p->b, LOAD_KIND_SWEEP, &p->c, 0, NULL);
}

static void pair_free(struct pair *p)
{
	load_result_free(&p->a);
	load_result_free(&p->b);
	load_conf_free(&p->c);
}

/* compare's exit and text, with rules. */
static int run(struct pair *p, const char *rules, char **text)
{
	struct load_cmp_opts o;
	char err[200], *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc;

	load_cmp_opts_init(&o);
	o.resamples = 500;
	if (rules != NULL)
		assert_int_equal(load_cmp_parse_rules(&o, rules, err, sizeof err), 0);
	rc = load_compare(f, &p->a, "A.json", &p->b, "B.json", &o);
	fclose(f);
	*text = buf;
	return rc;
}

static void regression_and_aa(void **state)
{
	struct pair p;
	char *t;

	(void)state;
	pair_init(&p);
	level(&p.a, LOAD_KEY_CONCURRENCY, 1, 20, 20, 1, 1);
	level(&p.a, LOAD_KEY_CONCURRENCY, 2, 20, 20, 2, 1);
	level(&p.a, LOAD_KEY_CONCURRENCY, 4, 20, 20, 3, 1);
	level(&p.b, LOAD_KEY_CONCURRENCY, 2, 24, 24, 4, 1);
	level(&p.b, LOAD_KEY_CONCURRENCY, 4, 20, 400, 5, 1);
	level(&p.b, LOAD_KEY_CONCURRENCY, 8, 20, 20, 6, 1);
	assert_int_equal(run(&p, "tpot_p50>+10%", &t), 1);
	assert_non_null(strstr(t, "only in A: concurrency 1"));
	assert_non_null(strstr(t, "only in B: concurrency 8"));
	assert_non_null(strstr(t, "FAIL tpot_p50>+10%"));
	assert_non_null(strstr(t, "fail-on tpot_p50>+10%: FAILED at concurrency 2 (+20."));
	/* level 4 is A/A: it fails nothing */
	{
		const char *line = strstr(t, "fail-on tpot_p50>+10%: FAILED at ");
		const char *end = strchr(line, '\n');
		const char *four = strstr(line, "concurrency 4");
		assert_true(four == NULL || four > end);
	}
	free(t);
	/* B's warm-up and cool-down at 20 times the TPOT are in no figure */
	assert_int_equal(run(&p, "tpot_p95>+25% tpot_mean>+25%", &t), 0);
	assert_non_null(strstr(t, "passed at 2 levels"));
	free(t);
	/* a fall: the rule of a fall fails, the rule of a rise does not */
	assert_int_equal(run(&p, "e2e_p50<-5%", &t), 0);
	free(t);
	{
		struct load_result x = p.a;
		p.a = p.b;
		p.b = x;
	}
	assert_int_equal(run(&p, "tpot_p50<-10%", &t), 1);
	free(t);
	assert_int_equal(run(&p, "tpot_p50>+10%", &t), 0);
	free(t);
	pair_free(&p);
}

static void nothing_in_common(void **state)
{
	struct pair p;
	char *t;

	(void)state;
	pair_init(&p);
	level(&p.a, LOAD_KEY_CONCURRENCY, 1, 20, 20, 1, 1);
	level(&p.b, LOAD_KEY_RATE, 1, 20, 20, 2, 1);
	assert_int_equal(run(&p, NULL, &t), -1);
	assert_non_null(strstr(t, "no level of A matches a level of B"));
	free(t);
	pair_free(&p);
}

/* Without samples no interval: the limit alone judges (a CI job must not
 * pass for want of samples). */
static void without_samples(void **state)
{
	struct pair p;
	char *t;

	(void)state;
	pair_init(&p);
	level(&p.a, LOAD_KEY_NONE, 0, 20, 20, 1, 0);
	level(&p.b, LOAD_KEY_NONE, 0, 24, 24, 2, 0);
	assert_int_equal(run(&p, "tpot_p50>+10%", &t), 1);
	assert_non_null(strstr(t, "(no samples)"));
	free(t);
	assert_int_equal(run(&p, "tpot_p50>+25%", &t), 0);
	free(t);
	pair_free(&p);
}

/* A level that ran twice is compared by its first run: the samples
 * before a request number comes again. */
static void first_run_of_repeats(void **state)
{
	struct load_level lv;
	struct load_sample s;

	(void)state;
	memset(&lv, 0, sizeof(lv));
	loadstats_init(&lv.st);
	memset(&s, 0, sizeof(s));
	for (uint64_t k = 0; k < 2; k++)
		for (uint64_t i = 0; i < 5; i++) {
			s.seq = (i * 3) % 5;       /* ended out of order */
			assert_int_equal(loadstats_record(&lv.st, &s, NULL, 0), 0);
		}
	lv.runs = 1;
	assert_int_equal(load_cmp_first_run(&lv), 10);
	lv.runs = 2;
	assert_int_equal(load_cmp_first_run(&lv), 5);
	loadstats_free(&lv.st);
}

/* Unlike workloads: named, and refused unless allowed. */
static void unlike_workloads(void **state)
{
	struct pair p;
	struct load_cmp_opts o;
	char *t;
	size_t len;
	FILE *f;

	(void)state;
	pair_init(&p);
	level(&p.a, LOAD_KEY_CONCURRENCY, 8, 20, 20, 1, 1);
	level(&p.b, LOAD_KEY_CONCURRENCY, 8, 20, 20, 2, 1);
	p.b.levels[0].conf.seed = 7;
	p.b.levels[0].conf.max_tokens.min = p.b.levels[0].conf.max_tokens.max = 16;
	load_cmp_opts_init(&o);
	f = open_memstream(&t, &len);
	assert_int_equal(load_compare(f, &p.a, "A", &p.b, "B", &o), LOAD_CMP_DIFFERENT);
	fclose(f);
	assert_non_null(strstr(t, "workload differs at concurrency 8: seed 1 in A, 7 in B"));
	assert_non_null(strstr(t, "max tokens 100 in A, 16 in B"));
	assert_null(strstr(t, "ttft_p50"));
	free(t);
	o.allow_different = 1;
	f = open_memstream(&t, &len);
	assert_int_equal(load_compare(f, &p.a, "A", &p.b, "B", &o), 0);
	fclose(f);
	assert_non_null(strstr(t, "ttft_p50"));
	free(t);
	pair_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rules_parse),
		cmocka_unit_test(rule_errors),
		cmocka_unit_test(regression_and_aa),
		cmocka_unit_test(nothing_in_common),
		cmocka_unit_test(without_samples),
		cmocka_unit_test(first_run_of_repeats),
		cmocka_unit_test(unlike_workloads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
