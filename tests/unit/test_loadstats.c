/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of tokentap-load's pure parts: the raw measurements
 * (loadstats.c: every request and gap kept, the per-request sample derived
 * from a real meter fed real SSE bytes, TPOT over the tokens after the
 * first chunk), the outcomes, the scenario reader's FILE:LINE:COL errors
 * and its values (load_scen.c) with its targets computed exactly, the
 * option parsers (load_conf.c) and the request bodies (load_body.c). The
 * figures computed from the samples are test_load_summary.c's. */
#include <math.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "load_body.h"
#include "load_prompts.h"
#include "load_conf.h"
#include "load_scen.h"
#include "loadstats.h"
#include "meter.h"

#include "unit.h"

/* ---- helpers ----------------------------------------------------------- */

static struct load_sample ok_sample(int64_t ttft, double tpot)
{
	struct load_sample s;

	memset(&s, 0, sizeof(s));
	s.outcome = OUTCOME_OK;
	s.ttft_us = ttft;
	s.ttfo_us = ttft;
	s.tpot_us = tpot;
	s.itl_max_us = -1;
	s.duration_us = ttft;
	s.first_token_us = s.last_token_us = -1;
	s.output_tokens = 10;
	s.input_tokens = 5;
	s.first_chunk_tokens = -1;
	s.output_speed = -1;
	return s;
}

static void assert_near(double got, double want, double rel)
{
	if (fabs(got - want) > rel * fabs(want)) {
		fail_msg("got %.6f, want %.6f (within %.2f %%)", got, want, rel * 100);
	}
}

/* ---- statistics -------------------------------------------------------- */

/* Every request and every gap is kept, in order, each sample pointing at
 * its own gaps; warm-up requests are kept but not counted as measured. */
static void test_itl_recorded(void **state)
{
	struct loadstats st;
	struct load_sample s = ok_sample(1000, 20);
	uint32_t gaps[] = {10, 30, 20, 40, 50}, more[] = {7, 8};

	(void)state;
	loadstats_init(&st);
	assert_int_equal(loadstats_record(&st, &s, gaps, 5), 0);
	s.warmup = 1;
	assert_int_equal(loadstats_record(&st, &s, more, 2), 0);
	assert_int_equal(st.n, 2);
	assert_int_equal(st.nitl, 7);
	assert_int_equal(st.v[0].itl_off, 0);
	assert_int_equal(st.v[0].itl_n, 5);
	assert_int_equal(st.v[1].itl_off, 5);
	assert_int_equal(st.itl[st.v[1].itl_off + 1], 8);
	assert_int_equal(st.measured, 1);
	loadstats_free(&st);
}

/* Errors counted over the measured requests; a merge keeps each sample's
 * gaps its own. */
static void test_error_rate(void **state)
{
	struct loadstats st, b;
	uint32_t gap = 7;

	(void)state;
	loadstats_init(&st);
	loadstats_init(&b);
	for (int i = 0; i < 10; i++) {
		struct load_sample s = ok_sample(1000 + i, 50);
		if (i % 4 == 1)
			s.outcome = OUTCOME_UPSTREAM_ERROR;
		else if (i % 4 == 2)
			s.outcome = OUTCOME_TIMEOUT;
		loadstats_record(i < 6 ? &st : &b, &s, &gap, 1);
	}
	assert_int_equal(loadstats_merge(&st, &b), 0);
	assert_int_equal(b.n, 0);
	assert_int_equal(st.measured, 10);
	assert_int_equal(st.errors, 5);
	assert_int_equal(st.n, 10);
	assert_int_equal(st.v[9].ttft_us, 1009);
	assert_int_equal(st.v[9].itl_off, 9);
	assert_int_equal(st.v[1].outcome, OUTCOME_UPSTREAM_ERROR);
	assert_string_equal(meter_outcome_name(OUTCOME_CONNECT_ERROR), "connect_error");
	loadstats_free(&st);
}

/* ---- samples from a meter fed real streams ----------------------------- */

#define CT "text/event-stream"
#define TOK "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
#define DONE "data: [DONE]\n\n"

static void feed(struct meter *m, const char *s, uint64_t at)
{
	meter_body(m, s, strlen(s), at);
}

static void open_stream(struct meter *m, enum dialect_id d, unsigned status)
{
	meter_init(m, 1000, d);
	meter_response_head(m, status, CT, strlen(CT), NULL, 0, 1 << 20, 2000);
}

static void usage_event(struct meter *m, int n, uint64_t at)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "data: {\"choices\":[],\"usage\":"
	    "{\"prompt_tokens\":3,\"completion_tokens\":%d}}\n\n", n);
	feed(m, buf, at);
}

/* One token: TTFT defined, TPOT and output speed undefined, and a run of
 * such requests records no TPOT at all. */
static void test_tpot_undefined_one_token(void **state)
{
	struct meter m;
	struct load_sample s;
	struct loadstats st;

	(void)state;
	open_stream(&m, DIALECT_OPENAI, 200);
	feed(&m, TOK, 51000);
	usage_event(&m, 1, 52000);
	feed(&m, DONE, 52000);
	meter_end(&m, 53000);
	loadstats_sample(&s, &m, METER_END_COMPLETE, 0);
	assert_int_equal(s.outcome, OUTCOME_OK);
	assert_int_equal(s.ttft_us, 50000);
	assert_int_equal(s.output_tokens, 1);
	assert_true(s.tpot_us < 0);
	assert_int_equal(s.itl_max_us, -1);
	assert_true(s.output_speed < 0);
	assert_int_equal(s.duration_us, 52000);
	assert_int_equal(s.first_token_us, 51000);
	assert_int_equal(s.events, 3);
	assert_int_equal(s.token_chunks, 1);
	loadstats_init(&st);
	loadstats_record(&st, &s, NULL, 0);
	assert_int_equal(st.n, 1);
	loadstats_free(&st);
	meter_free(&m);
}

/* Three token events but usage says 1: N comes from usage, so TPOT is
 * still undefined. */
static void test_tpot_undefined_by_usage(void **state)
{
	struct meter m;
	struct load_sample s;

	(void)state;
	open_stream(&m, DIALECT_OPENAI, 200);
	feed(&m, TOK, 11000);
	feed(&m, TOK, 21000);
	feed(&m, TOK, 31000);
	usage_event(&m, 1, 31000);
	feed(&m, DONE, 31000);
	meter_end(&m, 32000);
	loadstats_sample(&s, &m, METER_END_COMPLETE, 0);
	assert_int_equal(s.output_tokens, 1);
	assert_true(s.tokens_from_usage);
	assert_true(s.tpot_us < 0);
	assert_int_equal(s.itl_max_us, 10000);
	meter_free(&m);
}

/* Two events 10 ms apart, usage 5: TPOT = 10 ms / 2.5 (see below), speed
 * = 2.5 / 10 ms; times relative to the level's start. */
static void test_tpot_defined(void **state)
{
	struct meter m;
	struct load_sample s;

	(void)state;
	open_stream(&m, DIALECT_OPENAI, 200);
	feed(&m, TOK, 101000);
	feed(&m, TOK, 111000);
	usage_event(&m, 5, 112000);
	feed(&m, DONE, 112000);
	meter_end(&m, 112000);
	loadstats_sample(&s, &m, METER_END_COMPLETE, 993);
	assert_int_equal(s.start_us, 7);
	assert_int_equal(s.ttft_us, 100000);
	/* 5 tokens in 2 events: the first event's share not told, it is
	 * taken as the mean (2.5), and 2.5 tokens came in the 10 ms after it */
	assert_near(s.tpot_us, 4000, 1e-9);
	assert_near(s.output_speed, 250.0, 1e-9);
	assert_int_equal(s.input_tokens, 3);
	assert_int_equal(s.first_token_us, 101000 - 993);
	assert_int_equal(s.last_token_us, 111000 - 993);
	/* TPOT is exact, not the meter's whole µs: 10 ms over 3 gaps (four
	 * events, four tokens: one an event) */
	meter_free(&m);
	open_stream(&m, DIALECT_OPENAI, 200);
	feed(&m, TOK, 101000);
	feed(&m, TOK, 104000);
	feed(&m, TOK, 107000);
	feed(&m, TOK, 111000);
	usage_event(&m, 4, 112000);
	feed(&m, DONE, 112000);
	meter_end(&m, 112000);
	loadstats_sample(&s, &m, METER_END_COMPLETE, 0);
	assert_near(s.tpot_us, 10000.0 / 3, 1e-12);
	meter_free(&m);
}

/* Chunks are not tokens: a first chunk of 8 tokens (told by a usage on
 * every chunk) then 12 more, one a chunk 20 ms apart: TPOT is the 20 ms
 * the tokens after the first chunk took, not 12 x 20 ms / 19. */
static void test_tpot_first_chunk(void **state)
{
	struct meter m;
	struct load_sample s;
	char buf[160];
	uint64_t t = 100000;

	(void)state;
	open_stream(&m, DIALECT_OPENAI, 200);
	for (int i = 0; i < 13; i++, t += 20000) {
		snprintf(buf, sizeof(buf), "data: {\"choices\":[{\"delta\":{\"content\":"
		    "\"x\"}}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%d}}\n\n",
		    8 + i);
		feed(&m, buf, t);
	}
	feed(&m, DONE, t);
	meter_end(&m, t);
	loadstats_sample(&s, &m, METER_END_COMPLETE, 0);
	assert_int_equal(s.output_tokens, 20);
	assert_int_equal(s.token_chunks, 13);
	assert_int_equal(s.first_chunk_tokens, 8);
	assert_near(s.tpot_us, 20000, 1e-12);
	assert_near(s.output_speed, 50, 1e-12);
	meter_free(&m);
}

static void test_outcomes(void **state)
{
	struct meter m;

	(void)state;
	open_stream(&m, DIALECT_OPENAI, 500);
	meter_end(&m, 3000);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_UPSTREAM_ERROR);
	meter_free(&m);

	open_stream(&m, DIALECT_OPENAI, 200);
	feed(&m, TOK, 3000);
	feed(&m, "data: {\"error\":{\"message\":\"boom\"}}\n\n", 4000);
	meter_end(&m, 5000);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_UPSTREAM_ERROR);
	meter_free(&m);

	/* complete body without [DONE]: cut short */
	open_stream(&m, DIALECT_OPENAI, 200);
	feed(&m, TOK, 3000);
	meter_end(&m, 5000);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_UPSTREAM_ABORT);
	assert_int_equal(meter_outcome(&m, METER_END_CLOSED), OUTCOME_UPSTREAM_ABORT);
	assert_int_equal(meter_outcome(&m, METER_END_TIMEOUT), OUTCOME_TIMEOUT);
	feed(&m, DONE, 5000);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_OK);
	meter_free(&m);

	/* Gemini has no end marker: the end of the body is the end */
	open_stream(&m, DIALECT_GEMINI, 200);
	feed(&m, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\n\n",
	    3000);
	meter_end(&m, 5000);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_OK);
	meter_free(&m);

	meter_init(&m, 1000, DIALECT_OPENAI);
	meter_end(&m, 2000);
	assert_int_equal(meter_outcome(&m, METER_END_CONNECT), OUTCOME_CONNECT_ERROR);
	assert_int_equal(meter_outcome(&m, METER_END_CLOSED), OUTCOME_UPSTREAM_ABORT);
	meter_free(&m);
}

/* ---- scenario files ---------------------------------------------------- */

static char *scen_path;

static int scen_setup(void **state)
{
	char tpl[] = "/tmp/test_loadstats_XXXXXX";
	int fd = mkstemp(tpl);

	(void)state;
	if (fd < 0)
		return -1;
	close(fd);
	scen_path = strdup(tpl);
	return scen_path != NULL ? 0 : -1;
}

static int scen_teardown(void **state)
{
	(void)state;
	unlink(scen_path);
	free(scen_path);
	return 0;
}

/* Writes text to the scenario file, reads it; returns the reader's result,
 * its error text in *errs (freed by the caller). */
static int read_text(const char *text, struct load_scen_file *f, char **errs,
    int url_fixed)
{
	FILE *w = fopen(scen_path, "w");
	struct load_conf base;
	size_t len;
	FILE *err = open_memstream(errs, &len);
	int rc;

	assert_non_null(w);
	assert_non_null(err);
	fputs(text, w);
	fclose(w);
	assert_int_equal(load_conf_init(&base), 0);
	if (url_fixed)
		assert_int_equal(load_conf_set_url(&base, "http://10.1.2.3:99/x",
		    &(const char *){NULL}), 0);
	rc = load_scen_read(scen_path, &base, url_fixed, f, err);
	fclose(err);
	load_conf_free(&base);
	return rc;
}

/* Asserts errs has the line "PATH:LINE:COL: " followed by want. */
static void assert_error(const char *errs, int line, int col, const char *want)
{
	char head[512];

	snprintf(head, sizeof(head), "%s:%d:%d: %s", scen_path, line, col, want);
	if (strstr(errs, head) == NULL)
		fail_msg("missing \"%s\" in:\n%s", head, errs);
}

static void test_scen_errors(void **state)
{
	struct load_scen_file f;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_text(
	    "target: http://127.0.0.1:8080/v1/chat/completions\n"
	    "concurency: 5\n"
	    "scenarios:\n"
	    "  - name: a\n"
	    "    duration: 0s\n"
	    "    prompt_tokens: 10-5\n"
	    "    targets: {ttft_p95: 500, tpot_p51: 30ms, error_rate: abc}\n"
	    "  - name: a\n"
	    "    baseline: zzz\n"
	    "  - concurrency: 3\n"
	    "  - name: c\n"
	    "    dialect: openia\n"
	    "    targets:\n"
	    "      tpot_degradation: 0.2\n"
	    "  - name: d\n"
	    "    targets: {ttft_p95: 1s, ttft_p95: 2s}\n"
	    "    tmeout: 5s\n"
	    "    arrivals: poison\n", &f, &errs, 0), -1);
	/* the messages of tokentap's config (the same reader, yconf.h): the
	 * key's path, a did-you-mean for keys and names */
	assert_error(errs, 2, 1, "unknown key 'concurency'; did you mean 'concurrency'?");
	assert_error(errs, 5, 15, "scenarios[0].duration: must be greater than 0");
	assert_error(errs, 6, 20, "scenarios[0].prompt_tokens: expected N or MIN-MAX");
	assert_error(errs, 7, 25, "scenarios[0].targets.ttft_p95: expected a duration with a unit");
	assert_error(errs, 7, 30, "unknown target \"tpot_p51\" in scenarios[0].targets");
	assert_error(errs, 7, 58, "scenarios[0].targets.error_rate: expected a fraction");
	assert_error(errs, 8, 11, "scenarios[1].name: scenario \"a\" already defined");
	assert_error(errs, 9, 15, "scenarios[1].baseline: no scenario \"zzz\" before this one");
	assert_error(errs, 10, 5, "missing required key 'name' in scenarios[2]");
	assert_error(errs, 12, 14, "scenarios[3].dialect: unknown dialect 'openia' (valid: auto, "
	    "openai, openai-responses, anthropic, dify, gemini, tgi, ollama, raw); did you "
	    "mean 'openai'?");
	assert_error(errs, 11, 5, "scenario \"c\": a degradation target needs a baseline");
	assert_error(errs, 16, 29, "duplicate key 'ttft_p95' in scenarios[4].targets (first "
	    "at line 16)");
	assert_error(errs, 17, 5, "unknown key 'tmeout' in scenarios[4]; did you mean 'timeout'?");
	assert_error(errs, 18, 15, "scenarios[4].arrivals: unknown arrivals 'poison' (valid: "
	    "poisson, uniform, constant, gamma); did you mean 'poisson'?");
	assert_int_equal(f.n, 0);
	assert_null(f.v);
	free(errs);
}

static void test_scen_syntax_error(void **state)
{
	struct load_scen_file f;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_text("scenarios:\n  - name: a\n    targets: {x: [1\n",
	    &f, &errs, 0), -1);
	assert_error(errs, 4, 1, "YAML syntax error: did not find expected ',' or ']'");
	free(errs);
	assert_int_equal(read_text("", &f, &errs, 0), -1);
	assert_error(errs, 1, 1, "empty file");
	free(errs);
	assert_int_equal(read_text("scenarios: []\n", &f, &errs, 0), -1);
	assert_error(errs, 1, 12, "scenarios: expected a list of at least one");
	free(errs);
	assert_int_equal(read_text("scenarios:\n  - name: a\n", &f, &errs, 0), -1);
	assert_error(errs, 2, 5, "no target URL");
	free(errs);
}

/* Goodput's targets: the largest TTFT and TPOT limits of the scenario's
 * targets (the judging is test_load_summary.c's). */
static void test_goodput(void **state)
{
	struct load_scen_file f;
	struct goodput_targets g;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_text("target: http://h:1/v1/chat/completions\nscenarios:\n  - name: a\n"
	    "    targets: {ttft_p50: 200ms, ttft_p99: 500ms, tpot_p50: 30ms,"
	    " error_rate: 0.01, itl_p99: 1ms}\n", &f, &errs, 0), 0);
	assert_string_equal(errs, "");
	free(errs);
	load_scen_goodput(&f.v[0], &g);
	assert_int_equal(g.us[GOODPUT_TTFT], 500000);
	assert_int_equal(g.us[GOODPUT_TPOT], 30000);
	load_scen_free(&f);
}

static void test_scen_values(void **state)
{
	struct load_scen_file f;
	char *errs = NULL;
	const struct load_scenario *a, *b;

	(void)state;
	assert_int_equal(read_text(
	    "target: http://127.0.0.1:8080/v1/messages\n"
	    "headers: {X-Team: blue, X-Mock-TPOT: 5ms}\n"
	    "max_tokens: 7\n"
	    "scenarios:\n"
	    "  - name: short-text\n"
	    "    concurrency: 5\n"
	    "    duration: 20s\n"
	    "    prompt_tokens: 50-100\n"
	    "    headers: {X-Mock-TTFT: 200ms, x-mock-tpot: 9ms}\n"
	    "    targets: {ttft_p95: 500ms, tpot_p50: 30ms, error_rate: 1%}\n"
	    "  - name: high\n"
	    "    baseline: short-text\n"
	    "    rate: 2.5\n"
	    "    arrivals: uniform\n"
	    "    requests: 40\n"
	    "    targets: {ttft_p95: 2s, tpot_degradation: 0.2}\n",
	    &f, &errs, 0), 0);
	assert_string_equal(errs, "");
	free(errs);
	assert_int_equal(f.n, 2);
	a = &f.v[0];
	b = &f.v[1];
	assert_string_equal(a->name, "short-text");
	assert_int_equal(a->baseline, -1);
	assert_string_equal(a->conf.host, "127.0.0.1");
	assert_int_equal(a->conf.port, 8080);
	assert_string_equal(a->conf.path, "/v1/messages");
	assert_int_equal(load_conf_dialect(&a->conf), DIALECT_ANTHROPIC);
	assert_int_equal(a->conf.concurrency, 5);
	assert_true(a->conf.concurrency_set);
	assert_int_equal(a->conf.duration_us, 20000000);
	assert_int_equal(a->conf.prompt_tokens.min, 50);
	assert_int_equal(a->conf.prompt_tokens.max, 100);
	assert_int_equal(a->conf.max_tokens.min, 7);
	assert_int_equal(a->conf.nheaders, 3);
	assert_string_equal(load_conf_header(&a->conf, "X-Team"), "blue");
	assert_string_equal(load_conf_header(&a->conf, "X-Mock-TPOT"), "9ms");
	assert_string_equal(load_conf_header(&a->conf, "x-mock-ttft"), "200ms");
	assert_int_equal(a->ntargets, 3);
	assert_string_equal(a->targets[0].name, "ttft_p95");
	assert_int_equal(a->targets[0].metric, LOAD_M_TTFT);
	assert_int_equal(a->targets[0].stat, LOAD_S_P95);
	assert_true(a->targets[0].limit == 500000);
	assert_true(a->targets[1].limit == 30000);
	assert_int_equal(a->targets[2].stat, LOAD_S_RATE);
	assert_near(a->targets[2].limit, 0.01, 1e-12);
	assert_int_equal(b->baseline, 0);
	assert_true(b->conf.rate == 2.5);
	assert_int_equal(b->conf.arrivals, LOAD_ARR_CONSTANT);
	assert_int_equal(b->conf.count, 40);
	/* a count without a duration runs to the count */
	assert_int_equal(b->conf.duration_us, 0);
	assert_int_equal(b->conf.concurrency_set, 0);
	assert_string_equal(load_conf_header(&b->conf, "X-Mock-TPOT"), "5ms");
	assert_int_equal(b->targets[1].stat, LOAD_S_DEGRADATION);
	assert_int_equal(b->targets[1].metric, LOAD_M_TPOT);
	assert_int_equal(load_scen_find(&f, "high"), 1);
	assert_int_equal(load_scen_find(&f, "nope"), -1);
	load_scen_free(&f);

	/* the top level's keys apply wherever they stand, after the list too */
	assert_int_equal(read_text("scenarios: [{name: x}, {name: y, duration: 3s}]\n"
	    "target: http://h:1/v1/messages\n"
	    "requests: 5\n", &f, &errs, 0), 0);
	assert_string_equal(errs, "");
	free(errs);
	assert_string_equal(f.v[0].conf.host, "h");
	assert_int_equal(f.v[0].conf.count, 5);
	assert_int_equal(f.v[0].conf.duration_us, 0);
	assert_int_equal(f.v[1].conf.duration_us, 3000000);
	load_scen_free(&f);

	/* the command line's URL wins over the file's target */
	assert_int_equal(read_text("target: http://127.0.0.1:8080/v1/messages\n"
	    "scenarios: [{name: x}]\n", &f, &errs, 1), 0);
	free(errs);
	assert_string_equal(f.v[0].conf.host, "10.1.2.3");
	assert_int_equal(f.v[0].conf.port, 99);
	load_scen_free(&f);
}

static void test_scen_targets_eval(void **state)
{
	struct loadstats cur, base;
	struct load_target t;
	double v;

	(void)state;
	loadstats_init(&cur);
	loadstats_init(&base);
	memset(&t, 0, sizeof(t));
	t.metric = LOAD_M_TPOT;
	t.stat = LOAD_S_DEGRADATION;
	t.limit = 0.2;
	assert_int_equal(load_scen_value(&t, &cur, &base, &v), -1);
	for (int i = 0; i < 10; i++) {
		struct load_sample s = ok_sample(40 + i, 50);
		struct load_sample b = ok_sample(40, 40);
		loadstats_record(&cur, &s, NULL, 0);
		loadstats_record(&base, &b, NULL, 0);
	}
	assert_int_equal(load_scen_value(&t, &cur, &base, &v), 0);
	assert_near(v, 0.25, 1e-12);       /* 50 µs against 40 µs */
	assert_false(load_scen_met(&t, v));
	assert_int_equal(load_scen_value(&t, &cur, NULL, &v), -1);
	t.limit = 0.3;
	assert_true(load_scen_met(&t, 0.25));

	t.metric = LOAD_M_TTFT;
	t.stat = LOAD_S_MAX;
	assert_int_equal(load_scen_value(&t, &cur, NULL, &v), 0);
	assert_true(v == 49);
	t.stat = LOAD_S_P50;
	assert_int_equal(load_scen_value(&t, &cur, NULL, &v), 0);
	assert_near(v, 44.5, 1e-12);       /* exact: between 44 and 45 */
	t.stat = LOAD_S_P90;
	assert_int_equal(load_scen_value(&t, &cur, NULL, &v), 0);
	assert_near(v, 48.1, 1e-12);
	t.metric = LOAD_M_ITL;
	assert_int_equal(load_scen_value(&t, &cur, NULL, &v), -1);
	t.metric = LOAD_M_ERROR_RATE;
	t.stat = LOAD_S_RATE;
	assert_int_equal(load_scen_value(&t, &cur, NULL, &v), 0);
	assert_true(v == 0);
	loadstats_free(&cur);
	loadstats_free(&base);
}

/* ---- options and bodies ------------------------------------------------ */

static void test_conf_parsers(void **state)
{
	struct load_conf c;
	struct load_range r;
	const char *err = NULL;

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	assert_int_equal(load_conf_set_url(&c, "http://example.com/v1/chat/completions?x=1",
	    &err), 0);
	assert_string_equal(c.host, "example.com");
	assert_int_equal(c.port, 80);
	assert_string_equal(c.path, "/v1/chat/completions?x=1");
	assert_int_equal(load_conf_set_url(&c, "http://[::1]:8081", &err), 0);
	assert_string_equal(c.host, "::1");
	assert_int_equal(c.port, 8081);
	assert_string_equal(c.path, "/");
	assert_int_equal(load_conf_set_url(&c, "https://example.com/", &err), 0);
	assert_true(c.tls);
	assert_int_equal(c.port, 443);
	assert_int_equal(load_conf_set_arrivals(&c, "gamma", &err), 0);
	assert_int_equal(c.arrivals, LOAD_ARR_GAMMA);
	assert_int_equal(load_conf_set_arrivals(&c, "bursty", &err), -1);
	assert_int_equal(load_conf_set_burstiness(&c, "0.25", &err), 0);
	assert_true(c.burstiness == 0.25);
	assert_int_equal(load_conf_set_burstiness(&c, "0", &err), -1);
	assert_int_equal(load_conf_set_burstiness(&c, "x", &err), -1);
	assert_int_equal(load_conf_set_url(&c, "ftp://x/", &err), -1);
	assert_int_equal(load_conf_set_url(&c, "http://x:0/", &err), -1);
	assert_int_equal(load_conf_set_url(&c, "http://x/a b", &err), -1);
	/* the one URL parser's rules (url.h); credentials go in a header */
	assert_int_equal(load_conf_set_url(&c, "http://u:p@x/", &err), -1);
	assert_non_null(strstr(err, "Authorization"));
	assert_int_equal(load_conf_set_url(&c, "http://x/#top", &err), -1);
	assert_int_equal(load_conf_set_url(&c, "http://x/a%zz", &err), -1);
	assert_int_equal(load_conf_set_url(&c, "HTTP://x?q=1", &err), 0);
	assert_string_equal(c.path, "/?q=1");
	assert_int_equal(c.port, 80);
	assert_int_equal(load_conf_set_url(&c, "http://[fe80::1%25lo]:81/v1/", &err), 0);
	assert_string_equal(c.host, "fe80::1%lo");
	assert_string_equal(c.path, "/v1/");
	assert_int_equal(load_conf_parse_range("50-100", &r, &err), 0);
	assert_int_equal(r.min, 50);
	assert_int_equal(r.max, 100);
	assert_int_equal(load_conf_parse_range("7", &r, &err), 0);
	assert_int_equal(r.min, 7);
	assert_int_equal(r.max, 7);
	assert_int_equal(load_conf_parse_range("9-3", &r, &err), -1);
	assert_int_equal(load_conf_parse_range("0", &r, &err), -1);
	assert_int_equal(load_conf_parse_range("5-", &r, &err), -1);
	assert_int_equal(load_conf_add_header_line(&c, "X-A:  1", &err), 0);
	assert_int_equal(load_conf_add_header_line(&c, "x-a: 2", &err), 0);
	assert_int_equal(c.nheaders, 1);
	assert_string_equal(load_conf_header(&c, "X-A"), "2");
	assert_int_equal(load_conf_add_header_line(&c, "no colon", &err), -1);
	assert_int_equal(load_conf_set_model(&c, "a\"b", &err), -1);
	for (int i = 0; i < 1000; i++) {
		r.min = 3;
		r.max = 5;
		uint32_t d = load_conf_draw(&r, &c.seed);
		assert_true(d >= 3 && d <= 5);
	}
	load_conf_free(&c);
}

/* The body names the output limit as the dialect's API does (which is
 * what tokentap-mock reads) and holds a prompt of 4 characters a token. */
static void test_bodies(void **state)
{
	static const struct {
		const char *path;
		const char *limit;
		int stream_field;
	} cases[] = {
		{"/v1/chat/completions", "\"max_tokens\":42", 1},
		{"/v1/completions", "\"max_tokens\":42", 1},
		{"/v1/responses", "\"max_output_tokens\":42", 1},
		{"/v1/messages", "\"max_tokens\":42", 1},
		{"/v1/chat-messages", "\"max_tokens\":42", 0},
		{"/v1beta/models/g:streamGenerateContent?alt=sse", "\"maxOutputTokens\":42", 0},
		{"/generate_stream", "\"max_new_tokens\":42", 1},
		{"/api/chat", "\"num_predict\":42", 1},
	};
	struct load_conf c;
	const char *err;

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct evbuffer *b = evbuffer_new();
		char url[128], *json;
		size_t len;
		uint64_t seed = 9;

		snprintf(url, sizeof(url), "http://h:1%s", cases[i].path);
		assert_int_equal(load_conf_set_url(&c, url, &err), 0);
		struct load_req rq = { .prompt_tokens = 25, .max_tokens = 42 };
		assert_int_equal(load_body_json(b, &c, &rq, &seed), 0);
		len = evbuffer_get_length(b);
		json = malloc(len + 1);
		evbuffer_remove(b, json, len);
		json[len] = '\0';
		if (strstr(json, cases[i].limit) == NULL)
			fail_msg("%s: no %s in %s", cases[i].path, cases[i].limit, json);
		assert_int_equal(strstr(json, "\"stream\":true") != NULL,
		    cases[i].stream_field);
		free(json);
		evbuffer_free(b);
	}
	load_conf_free(&c);
}

static void test_request_head(void **state)
{
	struct load_conf c;
	struct evbuffer *b = evbuffer_new();
	const char *err;
	char *req, *body, *p;
	size_t len, clen;
	uint64_t seed = 3;
	struct load_header own = { (char *)"X-Mock-TTFT", (char *)"9ms" };
	struct load_req rq = { .prompt_tokens = 10, .max_tokens = 3,
	    .request_id = "tl1-0-7" };

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	assert_int_equal(load_conf_set_url(&c, "http://h:81/v1/chat/completions", &err), 0);
	assert_int_equal(load_conf_add_header_line(&c, "X-Mock-TTFT: 5ms", &err), 0);
	assert_int_equal(load_conf_add_header_line(&c, "Content-Length: 1", &err), 0);
	assert_int_equal(load_body_request(b, &c, &rq, &seed), 0);
	len = evbuffer_get_length(b);
	req = malloc(len + 1);
	evbuffer_remove(b, req, len);
	req[len] = '\0';
	assert_true(strncmp(req, "POST /v1/chat/completions HTTP/1.1\r\n", 36) == 0);
	assert_non_null(strstr(req, "\r\nHost: h:81\r\n"));
	assert_non_null(strstr(req, "\r\nX-Mock-TTFT: 5ms\r\n"));
	assert_non_null(strstr(req, "\r\nX-Request-Id: tl1-0-7\r\n"));
	assert_null(strstr(req, "Content-Length: 1\r\n"));
	body = strstr(req, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	p = strstr(req, "Content-Length: ");
	assert_non_null(p);
	clen = strtoul(p + 16, NULL, 10);
	assert_int_equal(clen, strlen(body));
	/* 10 tokens: a 40-character prompt */
	p = strstr(body, "\"content\":\"");
	assert_non_null(p);
	p += 11;
	assert_int_equal(strcspn(p, "\""), 40);
	free(req);
	/* a trace's own header replaces -H's of that name; no id asked: none */
	rq.headers = &own;
	rq.nheaders = 1;
	rq.request_id = NULL;
	assert_int_equal(load_body_request(b, &c, &rq, &seed), 0);
	len = evbuffer_get_length(b);
	req = malloc(len + 1);
	evbuffer_remove(b, req, len);
	req[len] = '\0';
	assert_non_null(strstr(req, "\r\nX-Mock-TTFT: 9ms\r\n"));
	assert_null(strstr(req, "5ms"));
	assert_null(strstr(req, "X-Request-Id"));
	free(req);
	evbuffer_free(b);
	load_conf_free(&c);
}

/* Prompts of a file go into the body escaped by the one JSON writer; a
 * chat's messages as the file gave them; a usage on every chunk asked. */
static void test_body_prompts(void **state)
{
	struct load_conf c;
	struct load_prompt pr;
	struct evbuffer *b = evbuffer_new();
	const char *err;
	char *json;
	size_t len;
	uint64_t seed = 1;
	struct load_req rq = { .max_tokens = 5, .prompt = &pr };

	(void)state;
	memset(&pr, 0, sizeof(pr));
	pr.text = (char *)"say \"hi\"\n\x01";
	pr.text_len = strlen(pr.text);
	assert_int_equal(load_conf_init(&c), 0);
	assert_int_equal(load_conf_set_url(&c, "http://h:1/v1/completions", &err), 0);
	c.continuous_usage = 1;
	assert_int_equal(load_body_json(b, &c, &rq, &seed), 0);
	len = evbuffer_get_length(b);
	json = malloc(len + 1);
	evbuffer_remove(b, json, len);
	json[len] = '\0';
	if (strstr(json, "\"prompt\":\"say \\\"hi\\\"\\u000a\\u0001\"") == NULL)
		fail_msg("%s", json);
	assert_non_null(strstr(json, "\"include_usage\":true,\"continuous_usage_stats\":true}"));
	assert_int_equal(strlen(json), len);          /* no NUL inside */
	free(json);
	pr.messages = (char *)"[{\"role\":\"system\",\"content\":\"be brief\"}]";
	pr.messages_len = strlen(pr.messages);
	assert_int_equal(load_conf_set_url(&c, "http://h:1/v1/chat/completions", &err), 0);
	assert_int_equal(load_body_json(b, &c, &rq, &seed), 0);
	len = evbuffer_get_length(b);
	json = malloc(len + 1);
	evbuffer_remove(b, json, len);
	json[len] = '\0';
	assert_non_null(strstr(json, "\"messages\":[{\"role\":\"system\",\"content\":"
	    "\"be brief\"}],"));
	free(json);
	evbuffer_free(b);
	load_conf_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_itl_recorded),
		cmocka_unit_test(test_error_rate),
		cmocka_unit_test(test_tpot_undefined_one_token),
		cmocka_unit_test(test_tpot_undefined_by_usage),
		cmocka_unit_test(test_tpot_defined),
		cmocka_unit_test(test_tpot_first_chunk),
		cmocka_unit_test(test_outcomes),
		cmocka_unit_test_setup_teardown(test_scen_errors, scen_setup, scen_teardown),
		cmocka_unit_test_setup_teardown(test_scen_syntax_error, scen_setup, scen_teardown),
		cmocka_unit_test_setup_teardown(test_scen_values, scen_setup, scen_teardown),
		cmocka_unit_test(test_scen_targets_eval),
		cmocka_unit_test_setup_teardown(test_goodput, scen_setup, scen_teardown),
		cmocka_unit_test(test_conf_parsers),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_request_head),
		cmocka_unit_test(test_body_prompts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
