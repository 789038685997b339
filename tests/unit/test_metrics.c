/* SPDX-License-Identifier: Apache-2.0 */
/* The /metrics label sets: bucket layout, tenant labels, the series
 * budget and its folding, the code label, OpenTelemetry names. */
#include <math.h>

#include <event2/buffer.h>

#include "config.h"
#include "dialect.h"
#include "meter.h"
#include "metrics.h"
#include "sample.h"
#include "promout.h"
#include "util.h"

#include "unit.h"

#define BOUNDS_MAX_TEST 128

static void setup(const char *yaml)
{
	struct conf *c = unit_conf(yaml);
	metrics_free();
	metrics_configure(c);
	conf_unref(c);
}

static int teardown(void **state)
{
	(void)state;
	metrics_free();
	return 0;
}

static char *exposition(void)
{
	struct evbuffer *b = evbuffer_new();
	struct promout *o = promout_new(b, 0);
	char *s;
	metrics_write(o);
	assert_int_equal(promout_finish(o), 0);
	s = unit_take(b);
	evbuffer_free(b);
	return s;
}

/* Series lines (not comments) in s. */
static size_t series(const char *s)
{
	size_t n = 0;
	for (const char *l = s; *l; l = strchr(l, '\n') + 1) {
		n += *l != '#';
		if (strchr(l, '\n') == NULL)
			break;
	}
	return n;
}

static void observe(struct mset *m, int64_t ttft, unsigned status)
{
	struct sample o = { .outcome = OUTCOME_OK, .status = status, .ttft_us = ttft,
		.tpot_us = 20000, .duration_us = 2 * ttft, .connect_us = 300,
		.output_tokens = 10, .input_tokens = 5, .ttfc_us = ttft / 2 };
	metrics_request(m, 0, &o);
}

/* The le values of family name, in seconds, in order. */
static size_t bounds_of(const char *s, const char *name, double *out, size_t max)
{
	char want[128];
	size_t n = 0;
	const char *p = s, *first = NULL;
	snprintf(want, sizeof want, "%s_bucket{", name);
	while ((p = strstr(p, want)) != NULL && n < max) {
		const char *le = strstr(p, "le=\"");
		const char *eol = strchr(p, '\n');
		if (first == NULL)
			first = strchr(p, ',');
		else if (strncmp(strchr(p, ','), first, (size_t)(strstr(first, "le=") - first)) != 0)
			break;              /* the next label set */
		if (le == NULL || le > eol)
			break;
		if (strncmp(le, "le=\"+Inf", 8) == 0)
			break;
		out[n++] = strtod(le + 4, NULL);
		p = eol;
	}
	return n;
}

static int has(const double *v, size_t n, double x)
{
	for (size_t i = 0; i < n; i++)
		if (fabs(v[i] - x) < 1e-9)
			return 1;
	return 0;
}

static void max_ratio_between(const double *v, size_t n, double lo, double hi, double most)
{
	for (size_t i = 1; i < n; i++)
		if (v[i - 1] >= lo && v[i] <= hi && v[i] / v[i - 1] > most + 1e-9) {
			fprintf(stderr, "%g -> %g: %.3fx\n", v[i - 1], v[i], v[i] / v[i - 1]);
			fail();
		}
}

static void test_bucket_layout(void **state)
{
	static const double otel_ttft[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
		0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10 };
	static const double otel_tpot[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
		0.4, 0.5, 0.75, 1, 2.5 };
	double b[128];
	size_t n;
	int folded;
	(void)state;
	setup("tenant: {header_values: [t]}\n"
	    "alerts: {thresholds: {ttft_warning: 1234ms, tpot_warning: 77ms}}\n"
	    "slos:\n  - {name: s, ttft: 321ms, tpot: 43ms}\n"
	    "routes:\n  - {name: r, upstream: http://127.0.0.1:1, timeouts: {first_byte: 600s}}\n");
	struct mset *m = metrics_resolve("r", "t", "m", "http://10.0.0.1:8000", 0, 0, &folded);
	assert_non_null(m);
	assert_false(folded);
	observe(m, 100000, 200);
	metrics_itl(m, (const uint32_t[]){ 1000 }, 1);
	char *s = exposition();
	n = bounds_of(s, "tokentap_time_to_first_token_seconds", b, 128);
	assert_true(n > 30);
	for (size_t i = 0; i < UTIL_ARRAY_LEN(otel_ttft); i++)
		assert_true(has(b, n, otel_ttft[i]));
	assert_true(has(b, n, 1.234));
	assert_true(has(b, n, 0.321));             /* the SLO's targets too */
	max_ratio_between(b, n, 0.0025, 120, 1.6);
	assert_true(b[n - 1] > 600);               /* the route's first_byte */
	n = bounds_of(s, "tokentap_time_per_output_token_seconds", b, 128);
	for (size_t i = 0; i < UTIL_ARRAY_LEN(otel_tpot); i++)
		assert_true(has(b, n, otel_tpot[i]));
	assert_true(has(b, n, 0.077));
	assert_true(has(b, n, 0.043));
	max_ratio_between(b, n, 0.001, 2.5, 1.6);
	assert_true(b[n - 1] > 60);                /* timeouts.idle */
	double itl[128];
	assert_int_equal(bounds_of(s, "tokentap_inter_token_latency_seconds", itl, 128), n);
	n = bounds_of(s, "tokentap_request_duration_seconds", b, 128);
	assert_true(has(b, n, 81.92) && b[n - 1] > 600);
	n = bounds_of(s, "tokentap_upstream_connect_seconds", b, 128);
	assert_true(b[n - 1] > 5);                 /* timeouts.connect */
	/* connect time is per route, not per tenant and model */
	assert_non_null(strstr(s, "tokentap_upstream_connect_seconds_count{route=\"r\"} 1\n"));
	assert_non_null(strstr(s, "tokentap_requests_total{route=\"r\",tenant=\"t\",model=\"m\","
	    "upstream=\"http://10.0.0.1:8000\",outcome=\"ok\",code=\"2xx\"} 1\n"));
	free(s);
}

static void test_tenant_labels(void **state)
{
	int f;
	(void)state;
	/* sha256("k1") */
	setup("tenant:\n  header_values: [acme]\n  header_pattern: 'team-[a-z]+'\n"
	    "  api_keys: {named: 4a44dc15364204a80fe80e9039455cc1608281820fe2b24f1e5233ade6af1dd5}\n");
	observe(metrics_resolve("-", "acme", "m", "-", 0, 0, &f), 1000, 200);
	observe(metrics_resolve("-", "team-x", "m", "-", 0, 0, &f), 1000, 200);
	observe(metrics_resolve("-", "team-X", "m", "-", 0, 0, &f), 1000, 200);
	observe(metrics_resolve("-", "named", "m", "-", 0, 0, &f), 1000, 200);
	observe(metrics_resolve("-", "key:12345678", "m", "-", 0, 0, &f), 1000, 200);
	observe(metrics_resolve("-", "intruder", "m", "-", 0, 0, &f), 1000, 404);
	char *s = exposition();
	assert_non_null(strstr(s, "tenant=\"acme\""));
	assert_non_null(strstr(s, "tenant=\"team-x\""));
	assert_null(strstr(s, "tenant=\"team-X\""));
	assert_non_null(strstr(s, "tenant=\"named\""));
	assert_null(strstr(s, "key:"));
	assert_null(strstr(s, "intruder"));
	assert_non_null(strstr(s, "tokentap_requests_total{route=\"-\",tenant=\"_other\",model=\"m\","
	    "upstream=\"-\",outcome=\"ok\",code=\"4xx\"} 1\n"));
	free(s);
	setup("metrics: {tenants: hashed}\n");
	observe(metrics_resolve("-", "key:12345678", "m", "-", 0, 0, &f), 1000, 200);
	s = exposition();
	assert_non_null(strstr(s, "tenant=\"key:12345678\""));
	free(s);
}

/* 1,000 requests with random keys and random models (hashed keys on, the
 * worst case) add no more series than the budget; what did not fit counts
 * under the route's _other label set and as folded. */
static void test_series_budget(void **state)
{
	char tenant[32], model[32];
	int f;
	(void)state;
	setup("metrics: {max_series: 2000, tenants: hashed}\n"
	    "routes:\n  - {name: r, upstream: http://127.0.0.1:1}\n");
	uint64_t reserved = metrics_series_used();
	char *s = exposition();
	size_t before = series(s);
	free(s);
	for (int i = 0; i < 1000; i++) {
		struct mset *m;
		snprintf(tenant, sizeof tenant, "key:%08x", (unsigned)(i * 2654435761u));
		snprintf(model, sizeof model, "m%d", i);
		m = metrics_resolve("r", tenant, model, "-", 0, 0, &f);
		assert_non_null(m);
		struct sample o = { .outcome = (unsigned)(i % OUTCOME_COUNT),
			.status = 100 + (unsigned)(i % 5) * 100, .ttft_us = 1000 + i, .tpot_us = i,
			.duration_us = 5000, .connect_us = i, .output_tokens = 3,
			.input_tokens = 2 };
		metrics_request(m, f, &o);
		metrics_itl(m, (const uint32_t[]){ 10, 20000 }, 2);
		metrics_active(m, 1);
	}
	s = exposition();
	size_t after = series(s);
	assert_true(metrics_series_used() <= 2000);
	assert_true(reserved > 0 && reserved < 2000);
	/* the budget bounds the series, the reservations included; the
	 * budget's own three series and the labelless ones are outside */
	assert_true(after - before <= 2000);
	assert_non_null(strstr(s, "tenant=\"_other\",model=\"_other\""));
	const char *key = "\ntokentap_metrics_folded_requests_total ";
	char *fold = strstr(s, key);
	assert_non_null(fold);
	assert_true(strtod(fold + strlen(key), NULL) > 900);
	free(s);
}

/* A client 3 s in sending its request to a backend 50 ms to its first
 * token: the user-felt TTFT's histogram has 3 s, the server side's (what
 * the TTFTHigh rules read) 50 ms; the server side's TTFO is exported only
 * where a TTFO threshold is (what reads it is the TTFOHigh rule). */
static void test_server_side_families(void **state)
{
	struct mset *m;
	int f;
	struct sample o = { .outcome = OUTCOME_OK, .status = 200, .ttft_us = 3000000,
		.ttft_server_us = 50000, .ttfo_us = 3000000, .ttfo_server_us = 50000,
		.tpot_us = -1, .duration_us = 3100000, .duration_server_us = 100000,
		.connect_us = -1, .output_tokens = 3, .input_tokens = 2 };
	const char *lbl = "{route=\"r\",tenant=\"-\",model=\"m\",upstream=\"-\"";
	char want[256];
	char *s;

	(void)state;
	for (int ttfo = 0; ttfo < 2; ttfo++) {
		setup(ttfo ? "alerts: {thresholds: {ttfo_warning: 1s}}\n"
		    "routes:\n  - {name: r, upstream: http://127.0.0.1:1}\n" :
		    "routes:\n  - {name: r, upstream: http://127.0.0.1:1}\n");
		/* two statements: a call's arguments are evaluated in no set
		 * order, so f could be read before metrics_resolve sets it */
		m = metrics_resolve("r", "-", "m", "-", 0, 0, &f);
		metrics_request(m, f, &o);
		s = exposition();
		snprintf(want, sizeof want, "tokentap_time_to_first_token_server_seconds_bucket%s"
		    ",le=\"0.100000\"} 1\n", lbl);
		assert_non_null(strstr(s, want));
		snprintf(want, sizeof want, "tokentap_time_to_first_token_seconds_bucket%s"
		    ",le=\"0.100000\"} 0\n", lbl);
		assert_non_null(strstr(s, want));
		snprintf(want, sizeof want, "tokentap_time_to_first_output_token_server_seconds_bucket"
		    "%s,le=\"0.100000\"} 1\n", lbl);
		if (ttfo)
			assert_non_null(strstr(s, want));
		else
			assert_null(strstr(s, "tokentap_time_to_first_output_token_server_seconds"));
		free(s);
	}
}

static void test_otel_names(void **state)
{
	int f;
	(void)state;
	setup("tenant: {header_values: [t]}\nmetrics: {names: both}\n");
	struct mset *m = metrics_resolve("-", "t", "llama", "-", 1 /* openai */,
	    dialect_operation("/v1/chat/completions?x=1", 24), &f);
	observe(m, 5000, 200);
	char *s = exposition();
	/* the conventions' client metrics (tokentap is the model's client),
	 * never the model server's */
	assert_non_null(strstr(s, "gen_ai_client_operation_time_to_first_chunk_seconds_count{"
	    "route=\"-\",tenant=\"t\",gen_ai_request_model=\"llama\",upstream=\"-\","
	    "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\"} 1\n"));
	assert_non_null(strstr(s, "gen_ai_client_operation_time_to_first_chunk_seconds_sum{"
	    "route=\"-\",tenant=\"t\",gen_ai_request_model=\"llama\",upstream=\"-\","
	    "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\"} 0.002500\n"));
	assert_non_null(strstr(s,
	    "# TYPE gen_ai_client_operation_time_per_output_chunk_seconds histogram"));
	assert_null(strstr(s, "gen_ai_server_"));
	assert_non_null(strstr(s, "gen_ai_client_token_usage_sum{route=\"-\",tenant=\"t\","
	    "gen_ai_request_model=\"llama\",upstream=\"-\",gen_ai_operation_name=\"chat\","
	    "gen_ai_provider_name=\"openai\",gen_ai_token_type=\"output\"} 10\n"));
	assert_non_null(strstr(s, "# TYPE gen_ai_client_operation_duration_seconds histogram"));
	assert_non_null(strstr(s, "tokentap_time_to_first_token_seconds_count{route=\"-\","
	    "tenant=\"t\",model=\"llama\",upstream=\"-\",gen_ai_operation_name=\"chat\","
	    "gen_ai_provider_name=\"openai\"} 1\n"));
	free(s);
	assert_string_equal(dialect_op_names[dialect_operation("/v1/completions", 15)],
	    "text_completion");
	assert_string_equal(dialect_op_names[dialect_operation(
	    "/v1beta/models/g:streamGenerateContent", 38)], "generate_content");
	assert_string_equal(dialect_op_names[dialect_operation("/x", 2)], "_other");
	setup("metrics: {names: otel}\n");
	observe(metrics_resolve("-", "-", "m", "-", 1, 1, &f), 5000, 200);
	s = exposition();
	/* TTFT from the client's first byte has no name of OpenTelemetry's:
	 * tokentap's; the token gaps are the conventions' time per chunk */
	assert_non_null(strstr(s, "tokentap_time_to_first_token_seconds_count{"));
	assert_null(strstr(s, "tokentap_inter_token_latency_seconds"));
	assert_non_null(strstr(s,
	    "# TYPE gen_ai_client_operation_time_per_output_chunk_seconds histogram"));
	assert_null(strstr(s, "gen_ai_server_"));
	free(s);
}

/* Token gaps land in the classic bucket whose le is the first at or above
 * them, exactly: on every bound, a microsecond either side, 0 and the
 * largest gap. The exposition's cumulative counts are checked against a
 * count of the gaps at or below each le. */
static void test_itl_classic_buckets(void **state)
{
	double b[BOUNDS_MAX_TEST];
	uint32_t gaps[3 * BOUNDS_MAX_TEST + 4];
	size_t n, ng = 0;
	int folded;
	const char *p;
	char *s;

	(void)state;
	setup("routes:\n  - {name: r, upstream: http://127.0.0.1:1}\n");
	struct mset *m = metrics_resolve("r", "-", "m", "-", 0, 0, &folded);
	assert_non_null(m);
	gaps[ng++] = 5000;             /* a first gap shows the histogram */
	metrics_itl(m, gaps, 1);
	s = exposition();
	n = bounds_of(s, "tokentap_inter_token_latency_seconds", b, BOUNDS_MAX_TEST);
	free(s);
	assert_true(n > 10);
	for (size_t i = 0; i < n; i++) {
		uint32_t us = (uint32_t)llround(b[i] * 1e6);
		gaps[ng++] = us - 1;
		gaps[ng++] = us;
		gaps[ng++] = us + 1;
	}
	gaps[ng++] = 0;
	gaps[ng++] = 1;
	gaps[ng++] = UINT32_MAX;
	metrics_itl(m, gaps + 1, (unsigned)ng - 1);
	s = exposition();
	p = strstr(s, "tokentap_inter_token_latency_seconds_bucket{");
	assert_non_null(p);
	for (size_t i = 0; i < n; i++, p = strchr(p, '\n') + 1) {
		const char *le = strstr(p, "le=\"");
		uint64_t want = 0, got;
		double bound = strtod(le + 4, NULL);
		for (size_t g = 0; g < ng; g++)
			want += gaps[g] <= (uint64_t)llround(bound * 1e6);
		got = strtoull(strstr(le, "} ") + 2, NULL, 10);
		if (got != want)
			fail_msg("le=%g: %llu, not %llu", bound, (unsigned long long)got,
			    (unsigned long long)want);
	}
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_bucket_layout, teardown),
		cmocka_unit_test_teardown(test_tenant_labels, teardown),
		cmocka_unit_test_teardown(test_series_budget, teardown),
		cmocka_unit_test_teardown(test_server_side_families, teardown),
		cmocka_unit_test_teardown(test_otel_names, teardown),
		cmocka_unit_test_teardown(test_itl_classic_buckets, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
