/* SPDX-License-Identifier: Apache-2.0 */
/* Statistics: windows, trend, R², cardinality, Prometheus output, on a fake
 * clock. Records go through the same ring the workers use. */

#include <math.h>

#include <event2/buffer.h>

#include "config.h"
#include "history.h"
#include "meter.h"
#include "metrics.h"
#include "promout.h"
#include "ring.h"
#include "promproto.h"
#include "stats.h"

#include "unit.h"

static uint64_t fake_now;
static uint64_t fake_clock(void)
{
	return fake_now;
}

static struct ring *ring;

static void setup_conf(const char *yaml)
{
	struct conf *c = unit_conf(yaml);
	stats_free();
	stats_clock = ring_clock = fake_clock;
	fake_now = 1000ull * 1000000;   /* a slice boundary far from 0 */
	stats_configure(c);
	ring = ring_new();
	assert_non_null(ring);
	conf_unref(c);
}

/* One finished streaming request: TTFT and TPOT in µs, n tokens. */
static int unverified;      /* the next requests were answered 401 / 403 */
static uint64_t client_us;  /* the next requests took this to send (t_req - t0) */

static void request(const char *route, const char *tenant, const char *model,
    uint64_t ttft, uint64_t tpot, int n, long concurrency, enum meter_outcome outcome)
{
	struct meter m;
	struct sample smp;
	struct sample_key k;

	meter_init(&m, fake_now - ttft - tpot * (uint64_t)(n - 1) - 1000, DIALECT_OPENAI);
	m.stream = 1;
	m.t_req = m.t0 + client_us;
	m.t_first_token = m.t0 + ttft;
	m.t_last_token = m.t_first_token + tpot * (uint64_t)(n - 1);
	m.token_events = (uint64_t)n;
	m.t_end = fake_now;
	sample_fill(&smp, &m, NULL, outcome, 0, 0, concurrency);
	sample_key_set(&k, route, tenant, model, strlen(model));
	if (unverified)
		k.mint = 0;
	ring_request(ring, &k, &smp, NULL, 0);
}

static char *json(const char *window, unsigned by)
{
	struct evbuffer *b = evbuffer_new();
	char *s;
	stats_drain();
	stats_json(b, stats_window_index(window), by, 0, STATS_ROWS_MAX);
	s = unit_take(b);
	evbuffer_free(b);
	return s;
}

static void test_counts_and_quantiles(void **state)
{
	struct stats_view v;
	(void)state;
	setup_conf("stats: {windows: [1m, 5m]}\n");
	for (int i = 1; i <= 100; i++)
		request("r", "t", "m", (uint64_t)i * 1000, 20000, 10, 0, i <= 5 ? OUTCOME_TIMEOUT : OUTCOME_OK);
	stats_drain();
	stats_route_view("r", NULL, 60000000, 0.95, &v);
	assert_int_equal(v.requests, 100);
	assert_int_equal(v.errors, 5);
	assert_int_equal(v.ttft_count, 100);
	/* exact p95 of 1..100 ms is 95 ms; within 1 % */
	assert_true(v.ttft_q > 95000 * 0.99 && v.ttft_q < 95000 * 1.01);
	assert_true(v.tpot_q > 20000 * 0.99 && v.tpot_q < 20000 * 1.01);
	char *s = json("1m", BY_ROUTE);
	assert_non_null(strstr(s, "\"requests\":100,\"errors\":5,\"error_rate\":0.050"));
	free(s);
}

/* Clients that take 18.9 s to send their requests are felt in the TTFT
 * of /stats, but the alerts, the slow replicas and the headroom judge the
 * server side's TTFT (from the request's last byte): 50 to 61 ms, 1 ms
 * more for each other stream, where the TTFT from the first byte falls
 * with concurrency (the clients sent faster). */
static void test_alerts_judge_the_server_side(void **state)
{
	struct stats_view v;
	uint64_t count;
	double q, p50, slope, intercept;

	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	for (int i = 0; i < 12; i++) {
		client_us = 18900000 - (uint64_t)i * 10000;
		request("r", "t", "m", client_us + 50000 + (uint64_t)i * 1000, 20000, 10, i,
		    OUTCOME_OK);
	}
	client_us = 0;
	stats_drain();
	stats_route_view("r", NULL, 60000000, 0.95, &v);
	assert_int_equal(v.ttft_count, 12);
	assert_true(v.ttft_q > 61000 * 0.98 && v.ttft_q < 61000 * 1.02);
	stats_upstream_ttft("r", "-", 60000000, 0.95, &count, &q);
	assert_int_equal(count, 12);
	assert_true(q == v.ttft_q);
	char *s = json("1m", BY_ROUTE);
	char *p = strstr(s, "\"ttft_ms\":{");
	assert_non_null(p);
	assert_int_equal(sscanf(strstr(p, "\"p50\":"), "\"p50\":%lf", &p50), 1);
	assert_true(p50 > 18700 && p50 < 19000);               /* user-felt */
	p = strstr(s, "\"ttft_server_ms\":{");
	assert_non_null(p);
	assert_int_equal(sscanf(strstr(p, "\"p50\":"), "\"p50\":%lf", &p50), 1);
	assert_true(p50 > 54 && p50 < 57);
	/* the headroom's line: 50 ms, 1 ms a stream */
	assert_int_equal(sscanf(strstr(s, "\"ttft_concurrency_slope_ms\":"),
	    "\"ttft_concurrency_slope_ms\":%lf", &slope), 1);
	assert_int_equal(sscanf(strstr(s, "\"ttft_concurrency_intercept_ms\":"),
	    "\"ttft_concurrency_intercept_ms\":%lf", &intercept), 1);
	assert_true(slope > 0.99 && slope < 1.01);
	assert_true(intercept > 49.9 && intercept < 50.1);
	free(s);
}

/* Token gaps reach the windows through a group's pending gaps, flushed
 * when a batch falls in other slices and at the end of each drain: the
 * same sequence drained once must read as drained after every record,
 * across slice boundaries of both windows, with a batch out of time order
 * and a request between. */
static void itl_sequence(int drain_each, char **one, char **five)
{
	/* gap 0: a request alone; the last, two rings of 1m slices on
	 * (120 s), takes the place of the slice the gaps before it wait for */
	static const struct { int64_t dt_s; uint32_t gap; int request; } seq[] = {
		{ 0, 1000, 0 }, { 5, 2000, 0 }, { 20, 3000, 1 }, { 40, 4000, 0 },
		{ -30, 5000, 0 }, { 31, 6000, 0 }, { 1, 7000, 1 }, { 0, 8000, 0 },
		{ 120, 0, 1 },
	};
	struct sample_key k;

	setup_conf("stats: {windows: [1m, 5m]}\n");
	sample_key_set(&k, "r", "t", "m", 1);
	for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
		uint32_t gaps[RING_ITL_BATCH];
		fake_now = (uint64_t)((int64_t)fake_now + seq[i].dt_s * 1000000);
		for (unsigned j = 0; j < RING_ITL_BATCH; j++)
			gaps[j] = seq[i].gap + (j * 37u) % 500u;
		if (seq[i].gap != 0)
			ring_itl(ring, &k, gaps, RING_ITL_BATCH);
		if (seq[i].request)
			request("r", "t", "m", 1000, 1000, 2, 0, OUTCOME_OK);
		if (drain_each)
			stats_drain();
	}
	*one = json("1m", BY_ROUTE);
	*five = json("5m", BY_ROUTE);
	assert_non_null(strstr(*one, "\"requests\":1,"));
}

static void test_itl_pending_matches_direct(void **state)
{
	char *one_a, *five_a, *one_b, *five_b;

	(void)state;
	itl_sequence(1, &one_a, &five_a);
	itl_sequence(0, &one_b, &five_b);
	assert_non_null(strstr(five_a, "\"itl_ms\":{\"count\":"));
	assert_null(strstr(five_a, "\"itl_ms\":{\"count\":0"));
	/* from the groups on: generated_at is the wall clock's */
	assert_non_null(strstr(one_a, "\"groups\":"));
	assert_string_equal(strstr(one_a, "\"groups\":"), strstr(one_b, "\"groups\":"));
	assert_string_equal(strstr(five_a, "\"groups\":"), strstr(five_b, "\"groups\":"));
	free(one_a);
	free(five_a);
	free(one_b);
	free(five_b);
}

static void test_window_expiry(void **state)
{
	struct stats_view v;
	(void)state;
	setup_conf("stats: {windows: [1m, 5m]}\n");
	request("r", "t", "m", 1000, 1000, 2, 0, OUTCOME_OK);
	fake_now += 75ull * 1000000;     /* past the 1 m window, inside 5 m */
	stats_drain();
	stats_route_view("r", NULL, 60000000, 0.5, &v);
	assert_int_equal(v.requests, 0);
	stats_route_view("r", NULL, 300000000, 0.5, &v);
	assert_int_equal(v.requests, 1);
	fake_now += 300ull * 1000000;
	stats_route_view("r", NULL, 300000000, 0.5, &v);
	assert_int_equal(v.requests, 0);
}

static void test_trend_against_previous_window(void **state)
{
	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	for (int i = 0; i < 20; i++)
		request("r", "t", "m", 100000, 10000, 5, 0, OUTCOME_OK);
	fake_now += 60ull * 1000000;
	for (int i = 0; i < 20; i++)
		request("r", "t", "m", 150000, 12000, 5, 0, OUTCOME_OK);
	char *s = json("1m", BY_ROUTE);
	/* 150/100 - 1 and 12/10 - 1, within the histogram's resolution */
	char *t = strstr(s, "\"trend\":{\"ttft_p95\":");
	assert_non_null(t);
	double ttft, tpot;
	assert_int_equal(sscanf(t, "\"trend\":{\"ttft_p95\":%lf,\"tpot_p50\":%lf", &ttft, &tpot), 2);
	assert_true(ttft > 0.48 && ttft < 0.52);
	assert_true(tpot > 0.18 && tpot < 0.22);
	free(s);
}

static void test_r2_of_ttft_against_concurrency(void **state)
{
	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	for (int c = 0; c < 30; c++)
		request("lin", "t", "m", 50000 + (uint64_t)c * 10000, 10000, 3, c, OUTCOME_OK);
	for (int c = 0; c < 30; c++)
		request("flat", "t", "m", (c % 2) ? 50000 : 90000, 10000, 3, c, OUTCOME_OK);
	char *s = json("1m", BY_ROUTE);
	double r2_lin = -1, r2_flat = -1;
	char *p = strstr(s, "\"route\":\"lin\"");
	assert_non_null(p);
	assert_int_equal(sscanf(strstr(p, "ttft_concurrency_r2"), "ttft_concurrency_r2\":%lf", &r2_lin), 1);
	p = strstr(s, "\"route\":\"flat\"");
	assert_non_null(p);
	assert_int_equal(sscanf(strstr(p, "ttft_concurrency_r2"), "ttft_concurrency_r2\":%lf", &r2_flat), 1);
	assert_true(r2_lin > 0.99);
	assert_true(r2_flat < 0.1);
	free(s);
}

static void test_cardinality_overflow(void **state)
{
	(void)state;
	setup_conf("tenant: {max_tenants: 2}\nmodels: {max_models: 1}\n");
	request("r", "a", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "b", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "c", "m2", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "d", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	char *s = json("1m", BY_ROUTE | BY_TENANT | BY_MODEL);
	assert_non_null(strstr(s, "\"tenant\":\"a\",\"model\":\"m1\""));
	assert_non_null(strstr(s, "\"tenant\":\"b\",\"model\":\"m1\""));
	assert_non_null(strstr(s, "\"tenant\":\"_other\",\"model\":\"_other\""));
	assert_non_null(strstr(s, "\"tenant\":\"_other\",\"model\":\"m1\""));
	assert_null(strstr(s, "\"tenant\":\"c\""));
	free(s);
}

static void test_prometheus_buckets_include_thresholds(void **state)
{
	(void)state;
	setup_conf("tenant: {header_values: [t]}\n"
	    "alerts: {thresholds: {ttft_warning: 1234ms, ttft_critical: 3s}}\n"
	    "routes:\n  - {name: r, upstream: http://127.0.0.1:1, thresholds: {ttft_warning: 700ms}}\n");
	request("r", "t", "m\"x", 800000, 1000, 2, 0, OUTCOME_OK);
	request("r", "t", "m\"x", 1300000, 1000, 2, 0, OUTCOME_OK);
	stats_drain();
	struct evbuffer *b = evbuffer_new();
	struct promout *o = promout_new(b, 0);
	stats_prometheus(o);
	promout_finish(o);
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	const char *lbl = "{route=\"r\",tenant=\"t\",model=\"m\\\"x\",upstream=\"-\"";
#define assert_has(s, w) do { if (strstr((s), (w)) == NULL) { \
	fprintf(stderr, "missing: %s\nin:\n%s\n", (w), (s)); fail(); } } while (0)
	char want[256];
	snprintf(want, sizeof want, "tokentap_time_to_first_token_seconds_bucket%s,le=\"0.700000\"} 0", lbl);
	assert_has(s, want);
	snprintf(want, sizeof want, "tokentap_time_to_first_token_seconds_bucket%s,le=\"1.000000\"} 1", lbl);
	assert_has(s, want);
	snprintf(want, sizeof want, "tokentap_time_to_first_token_seconds_bucket%s,le=\"1.234000\"} 1", lbl);
	assert_has(s, want);
	snprintf(want, sizeof want, "tokentap_time_to_first_token_seconds_bucket%s,le=\"2.500000\"} 2", lbl);
	assert_has(s, want);
	snprintf(want, sizeof want, "tokentap_time_to_first_token_seconds_bucket%s,le=\"+Inf\"} 2", lbl);
	assert_has(s, want);
	snprintf(want, sizeof want, "tokentap_requests_total%s,outcome=\"ok\",code=\"none\"} 2", lbl);
	assert_has(s, want);
	assert_non_null(strstr(s, "# TYPE tokentap_time_per_output_token_seconds histogram\n"));
	free(s);
	evbuffer_free(b);
}

/* A request the backend refused (401 / 403) names no new tenant or model:
 * it counts as "_other"; a tenant already seen keeps its name. */
static void test_refused_requests_mint_nothing(void **state)
{
	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	request("r", "good", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	unverified = 1;
	request("r", "key:0badc0de", "m-random", 1000, 1000, 2, 0, OUTCOME_UPSTREAM_ERROR);
	request("r", "good", "m1", 1000, 1000, 2, 0, OUTCOME_UPSTREAM_ERROR);
	unverified = 0;
	char *s = json("1m", BY_ROUTE | BY_TENANT | BY_MODEL);
	assert_non_null(strstr(s, "\"tenant\":\"good\",\"model\":\"m1\",\"requests\":2"));
	assert_non_null(strstr(s, "\"tenant\":\"_other\",\"model\":\"_other\",\"requests\":1"));
	assert_null(strstr(s, "0badc0de"));
	assert_null(strstr(s, "m-random"));
	free(s);
	/* the same refused key once a verified request named it: its own
	 * group from then on (the last key's group is remembered; what minted
	 * the name took its place) */
	unverified = 1;
	request("r", "late", "m1", 1000, 1000, 2, 0, OUTCOME_UPSTREAM_ERROR);
	unverified = 0;
	request("r", "late", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	unverified = 1;
	request("r", "late", "m1", 1000, 1000, 2, 0, OUTCOME_UPSTREAM_ERROR);
	unverified = 0;
	s = json("1m", BY_ROUTE | BY_TENANT | BY_MODEL);
	assert_non_null(strstr(s, "\"tenant\":\"late\",\"model\":\"m1\",\"requests\":2"));
	assert_non_null(strstr(s, "\"tenant\":\"_other\",\"model\":\"m1\",\"requests\":1"));
	free(s);
}

/* The alert rules leave users who pressed stop, and clients too slow to
 * send or take, out of the error rate: the view counts them apart
 * (/stats still counts them in errors). */
static void test_client_aborts_counted_apart(void **state)
{
	struct stats_view v;
	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	for (int i = 0; i < 12; i++)
		request("r", "t", "m", 1000, 1000, 2, 0, i < 6 ? OUTCOME_CLIENT_ABORT :
		    i < 7 ? OUTCOME_TIMEOUT : i < 9 ? OUTCOME_CLIENT_TIMEOUT : OUTCOME_OK);
	stats_drain();
	stats_route_view("r", NULL, 60000000, 0.95, &v);
	assert_int_equal(v.requests, 12);
	assert_int_equal(v.errors, 9);
	assert_int_equal(v.by_client, 8);
}

/* /metrics as text. */
static char *prom_text(void)
{
	struct evbuffer *b = evbuffer_new();
	struct promout *o = promout_new(b, 0);
	char *s;

	stats_drain();
	stats_prometheus(o);
	promout_finish(o);
	s = unit_take(b);
	evbuffer_free(b);
	return s;
}

/* A stream's gauge records with its id. */
static void gauge(const char *tenant, const char *model, unsigned mint, uint64_t stream,
    int delta)
{
	struct sample_key k;

	sample_key_set(&k, "r", tenant, model, strlen(model));
	k.mint = (uint8_t)mint;
	k.stream = stream;
	ring_active(ring, &k, delta);
}

/* A stream started while its model had no name yet (a 404: it earns
 * none) counts under _other; another stream then earns the name. The
 * first stream's end must leave the gauges where its start put them:
 * resolved anew, its -1 went to the named group (active -1 there, +1 left
 * in _other for good). */
static void test_gauges_follow_their_stream(void **state)
{
	char *s;

	(void)state;
	setup_conf("stats: {windows: [1m]}\ntenant: {header_values: [t]}\n");
	gauge("t", "new", 0, 1, 1);
	stats_drain();
	gauge("t", "new", SAMPLE_MINT_TENANT | SAMPLE_MINT_MODEL, 2, 1);
	request("r", "t", "new", 1000, 1000, 2, 0, OUTCOME_OK);
	gauge("t", "new", SAMPLE_MINT_TENANT | SAMPLE_MINT_MODEL, 2, -1);
	stats_drain();
	gauge("t", "new", 0, 1, -1);
	s = json("1m", BY_ROUTE | BY_TENANT | BY_MODEL);
	assert_non_null(strstr(s, "\"tenant\":\"t\",\"model\":\"new\",\"requests\":1,"));
	assert_null(strstr(s, "\"active\":-"));
	assert_null(strstr(s, "\"active\":1"));
	free(s);
	s = prom_text();
	assert_null(strstr(s, "gauge_streams{route=\"r\",tenant=\"t\",model=\"new\","
	    "upstream=\"-\"} -1"));
	assert_null(strstr(s, "tenant=\"_other\",model=\"_other\",upstream=\"-\"} 1\n"));
	free(s);
}

/* Label sets idle for metrics.expiration go and give their series back;
 * one that comes back starts from zero. Groups go once their windows hold
 * nothing, and with them their names' places under max_models. */
static void test_idle_label_sets_and_groups_go(void **state)
{
	uint64_t base;
	char *s;

	(void)state;
	setup_conf("metrics: {expiration: 10s}\nstats: {windows: [1m]}\nalerts: {window: 1m}\n"
	    "models: {max_models: 2}\ntenant: {header_values: [t]}\n"
	    "routes:\n  - {name: r, upstream: http://127.0.0.1:1}\n");
	stats_drain();
	base = metrics_series_used();
	request("r", "t", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "t", "m2", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "t", "m3", 1000, 1000, 2, 0, OUTCOME_OK);
	s = prom_text();
	assert_true(metrics_series_used() > base);
	assert_non_null(strstr(s, "model=\"m1\""));
	assert_null(strstr(s, "model=\"m3\""));     /* max_models: 2 */
	free(s);
	fake_now += 9ull * 1000000;
	stats_drain();
	assert_true(metrics_series_used() > base);
	fake_now += 2ull * 1000000;                 /* 11 s idle */
	stats_drain();
	assert_int_equal(metrics_series_used(), base);
	s = prom_text();
	assert_null(strstr(s, "model=\"m1\""));
	assert_null(strstr(s, "tenant=\"t\""));
	free(s);
	s = json("1m", BY_ROUTE | BY_TENANT | BY_MODEL);   /* the window still has them */
	assert_non_null(strstr(s, "\"model\":\"m1\",\"requests\":1,"));
	free(s);
	request("r", "t", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	s = prom_text();
	assert_non_null(strstr(s, "tokentap_requests_total{route=\"r\",tenant=\"t\",model=\"m1\","
	    "upstream=\"-\",outcome=\"ok\",code=\"none\"} 1\n"));
	free(s);
	/* two windows and a slice on: every group goes, m3 finds a place */
	fake_now += 131ull * 1000000;
	stats_drain();
	request("r", "t", "m3", 1000, 1000, 2, 0, OUTCOME_OK);
	s = json("1m", BY_ROUTE | BY_TENANT | BY_MODEL);
	assert_non_null(strstr(s, "\"model\":\"m3\",\"requests\":1,"));
	assert_null(strstr(s, "\"model\":\"_other\""));
	free(s);
}

/* A group folded for want of room takes a label set of its own once idle
 * ones have gone, while it is in use. */
static void test_folded_group_finds_room(void **state)
{
#define FOLD_CONF "metrics: {expiration: 10s, max_series: %llu}\n" \
	"stats: {windows: [1m]}\nalerts: {window: 1m}\ntenant: {header_values: [t]}\n" \
	"routes:\n  - {name: r, upstream: http://127.0.0.1:1}\n"
	char yaml[512];
	uint64_t base, cost;
	char *s;

	(void)state;
	snprintf(yaml, sizeof yaml, FOLD_CONF, 100000ull);
	setup_conf(yaml);
	stats_drain();
	base = metrics_series_used();
	request("r", "t", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	stats_drain();
	cost = metrics_series_used() - base;
	/* room for two label sets of one outcome each */
	snprintf(yaml, sizeof yaml, FOLD_CONF, (unsigned long long)(base + 2 * cost));
	setup_conf(yaml);
	request("r", "t", "m1", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "t", "m2", 1000, 1000, 2, 0, OUTCOME_OK);
	request("r", "t", "m3", 1000, 1000, 2, 0, OUTCOME_OK);
	s = prom_text();
	assert_null(strstr(s, "model=\"m3\""));
	assert_non_null(strstr(s, "tokentap_metrics_folded_requests_total 1\n"));
	free(s);
	for (int i = 0; i < 6; i++) {          /* m3 in use every 2 s, m1 and m2 idle */
		fake_now += 2ull * 1000000;
		request("r", "t", "m3", 1000, 1000, 2, 0, OUTCOME_OK);
		stats_drain();
	}
	s = prom_text();
	assert_null(strstr(s, "model=\"m1\""));
	assert_non_null(strstr(s, "tokentap_requests_total{route=\"r\",tenant=\"t\",model=\"m3\","
	    "upstream=\"-\",outcome=\"ok\",code=\"none\"} "));
	free(s);
}

/* /stats pages: sorted rows from offset, at most limit, with the count
 * of all rows and whether more follow. */
static void test_stats_pages(void **state)
{
	struct evbuffer *b;
	char *s;
	const char *models[] = { "e", "b", "d", "a", "c" };

	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	for (int i = 0; i < 5; i++)
		request("r", "t", models[i], 1000, 1000, 2, 0, OUTCOME_OK);
	stats_drain();
	b = evbuffer_new();
	stats_json(b, 0, BY_MODEL, 1, 2);
	s = unit_take(b);
	assert_non_null(strstr(s, "\"groups\":[{\"model\":\"b\","));
	assert_non_null(strstr(s, "},{\"model\":\"c\","));
	assert_null(strstr(s, "\"model\":\"a\""));
	assert_null(strstr(s, "\"model\":\"d\""));
	assert_non_null(strstr(s, "],\"total_groups\":5,\"offset\":1,\"limit\":2,"
	    "\"truncated\":true}"));
	free(s);
	stats_json(b, 0, BY_MODEL, 4, 2);
	s = unit_take(b);
	assert_non_null(strstr(s, "\"groups\":[{\"model\":\"e\","));
	assert_non_null(strstr(s, "\"truncated\":false}"));
	free(s);
	evbuffer_free(b);
}

/* history_save's pieces gathered in a pb. */
static int to_pb(void *arg, const void *p, size_t n)
{
	pb_raw(arg, p, n);
	return ((struct pb *)arg)->oom ? -1 : 0;
}

static double field(const char *s, const char *after, const char *name)
{
	const char *p = strstr(s, after);
	char key[64];
	double v = -1;

	assert_non_null(p);
	snprintf(key, sizeof key, "\"%s\":", name);
	p = strstr(p, key);
	assert_non_null(p);
	if (strncmp(p + strlen(key), "null", 4) == 0)
		return NAN;
	assert_int_equal(sscanf(p + strlen(key), "%lf", &v), 1);
	return v;
}

/* With a history attached, a route's trend and R² (and the instance's)
 * come from it: after a restart that read the history back they are what
 * they were, where the window's own slices hold one request. */
static void test_trend_and_r2_from_the_history(void **state)
{
	static const struct conf_history_step t[] = { { 10000000, 300000000 } };
	struct history *h;
	struct pb saved = { 0 };
	char why[200];

	(void)state;
	setup_conf("stats: {windows: [1m]}\n");
	h = history_new(t, 1);
	assert_non_null(h);
	stats_set_history(h);
	history_advance(h, fake_now);
	for (int c = 0; c < 30; c++)
		request("lin", "t", "m", 100000 + (uint64_t)c * 1000, 10000, 5, c, OUTCOME_OK);
	fake_now += 60ull * 1000000;
	for (int c = 0; c < 30; c++)
		request("lin", "t", "m", 150000 + (uint64_t)c * 1000, 12000, 5, c, OUTCOME_OK);
	char *s = json("1m", BY_ROUTE);
	/* P95 of 150..179 ms against 100..129 ms */
	double trend = field(s, "\"route\":\"lin\"", "ttft_p95");
	double r2 = field(s, "\"route\":\"lin\"", "ttft_concurrency_r2");
	assert_true(trend > 178.0 / 128 - 1.02 && trend < 178.0 / 128 - 0.98);
	assert_true(r2 > 0.99);
	/* the instance's row: every group's, its trend the history's too */
	assert_true(field(s, "\"instance\":", "requests") == 30);
	assert_true(field(s, "\"instance\":", "ttft_p95") == trend);
	free(s);
	history_advance(h, fake_now);
	assert_int_equal(history_save(h, fake_now, to_pb, &saved), 0);
	stats_set_history(NULL);
	history_free(h);
	/* a restart: new windows, the history read back */
	uint64_t later = fake_now + 2000000;
	setup_conf("stats: {windows: [1m]}\n");
	fake_now = later;
	h = history_load(saved.p, saved.n, t, 1, fake_now, why, sizeof why);
	assert_non_null(h);
	request("lin", "t", "m", 160000, 12000, 5, 30, OUTCOME_OK);
	s = json("1m", BY_ROUTE);
	assert_true(isnan(field(s, "\"route\":\"lin\"", "ttft_concurrency_r2")));
	assert_true(isnan(field(s, "\"route\":\"lin\"", "ttft_p95")));
	free(s);
	stats_set_history(h);
	s = json("1m", BY_ROUTE);
	assert_true(field(s, "\"route\":\"lin\"", "ttft_concurrency_r2") > 0.98);
	assert_true(field(s, "\"route\":\"lin\"", "ttft_p95") == trend);
	/* by tenant: the window's own slices, as before */
	free(s);
	s = json("1m", BY_ROUTE | BY_TENANT);
	assert_true(isnan(field(s, "\"route\":\"lin\"", "ttft_concurrency_r2")));
	free(s);
	stats_set_history(NULL);
	history_free(h);
	pb_free(&saved);
}

static int teardown(void **state)
{
	(void)state;
	stats_free();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_counts_and_quantiles, teardown),
		cmocka_unit_test_teardown(test_alerts_judge_the_server_side, teardown),
		cmocka_unit_test_teardown(test_itl_pending_matches_direct, teardown),
		cmocka_unit_test_teardown(test_window_expiry, teardown),
		cmocka_unit_test_teardown(test_trend_against_previous_window, teardown),
		cmocka_unit_test_teardown(test_r2_of_ttft_against_concurrency, teardown),
		cmocka_unit_test_teardown(test_cardinality_overflow, teardown),
		cmocka_unit_test_teardown(test_client_aborts_counted_apart, teardown),
		cmocka_unit_test_teardown(test_refused_requests_mint_nothing, teardown),
		cmocka_unit_test_teardown(test_prometheus_buckets_include_thresholds, teardown),
		cmocka_unit_test_teardown(test_gauges_follow_their_stream, teardown),
		cmocka_unit_test_teardown(test_idle_label_sets_and_groups_go, teardown),
		cmocka_unit_test_teardown(test_folded_group_finds_room, teardown),
		cmocka_unit_test_teardown(test_stats_pages, teardown),
		cmocka_unit_test_teardown(test_trend_and_r2_from_the_history, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
