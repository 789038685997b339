/* SPDX-License-Identifier: Apache-2.0 */
/* Alert rules on a fake clock: when rules fire and resolve (min_samples,
 * for, hysteresis, empty windows, severities, route overrides, error rate,
 * per tenant), what /alerts and /metrics say, and that a reload keeps the
 * state of the rules that remain. Configs come from the real loader. */

#include <event2/buffer.h>

#include "alert.h"
#include "promout.h"
#include "alert_format.h"
#include "config.h"
#include "util.h"

#include "unit.h"

#define T0_WALL 1795968000000ull      /* 2026-11-29T16:00:00.000Z */
#define STEP_US 10000000ull           /* one evaluation every 10 s */

struct seen {
	int firing;
	enum alert_metric metric;
	enum alert_severity severity;
	char route[64];
	char tenant[64];               /* "" for the route's own rules */
	double value, threshold;
	uint64_t samples;
	uint64_t at_ms, starts_at_ms, ends_at_ms;
	uint64_t window_us;
	double quantile;
};

static struct seen seen[512];
static size_t n_seen;
static struct alert_set *set;
static struct conf *conf;
static uint64_t now_us, wall_ms;

static void on_transition(void *arg, const struct alert_transition *t)
{
	struct seen *s = &seen[n_seen++ % UTIL_ARRAY_LEN(seen)];
	(void)arg;
	memset(s, 0, sizeof *s);
	s->firing = t->firing;
	s->metric = t->metric;
	s->severity = t->severity;
	snprintf(s->route, sizeof s->route, "%s", t->route);
	snprintf(s->tenant, sizeof s->tenant, "%s", t->tenant ? t->tenant : "");
	s->value = t->value;
	s->threshold = t->threshold;
	s->samples = t->samples;
	s->at_ms = t->at_ms;
	s->starts_at_ms = t->starts_at_ms;
	s->ends_at_ms = t->ends_at_ms;
	s->window_us = t->window_us;
	s->quantile = t->quantile;
}

/* Routes a (global thresholds) and b (ttft_warning 500ms), then extra. */
static const char *const two_routes =
    "routes:\n"
    "  - name: a\n"
    "    upstream: http://127.0.0.1:9\n"
    "  - name: b\n"
    "    upstream: http://127.0.0.1:9\n"
    "    thresholds: {ttft_warning: 500ms}\n";

static void start(const char *alerts_yaml)
{
	char yaml[2048];
	snprintf(yaml, sizeof yaml, "%s%s", two_routes, alerts_yaml);
	conf = unit_conf(yaml);
	n_seen = 0;
	now_us = 5000000000ull;
	wall_ms = T0_WALL;
	set = alert_new(on_transition, NULL);
	assert_non_null(set);
	assert_int_equal(alert_configure(set, conf, now_us, wall_ms), 0);
}

static int teardown(void **state)
{
	(void)state;
	alert_free(set);
	set = NULL;
	if (conf != NULL)
		conf_unref(conf);
	conf = NULL;
	return 0;
}

static struct alert_figures ttft(double ms, uint64_t n)
{
	struct alert_figures f = { n, 0, n, 0, n ? ms * 1000 : -1, -1, 0, -1, -1, 0, 0 };
	return f;
}

static struct alert_figures tpot(double ms, uint64_t n)
{
	struct alert_figures f = { n, 0, 0, n, -1, n ? ms * 1000 : -1, 0, -1, -1, 0, 0 };
	return f;
}

static struct alert_figures errors(uint64_t errs, uint64_t requests)
{
	struct alert_figures f = { requests, errs, 0, 0, -1, -1, 0, -1, -1, 0, 0 };
	return f;
}

/* One evaluation, 10 s after the last, where only route (and tenant) had
 * traffic. */
static void round_of(const char *route, const char *tenant, struct alert_figures f)
{
	now_us += STEP_US;
	wall_ms += STEP_US / 1000;
	alert_begin(set, now_us, wall_ms);
	if (route != NULL)
		assert_int_equal(alert_observe(set, route, tenant, &f), 0);
	alert_end(set);
}

/* The same, with the figures given to the route and one of its tenants. */
static void round_tenant(const char *route, const char *tenant, struct alert_figures f)
{
	now_us += STEP_US;
	wall_ms += STEP_US / 1000;
	alert_begin(set, now_us, wall_ms);
	assert_int_equal(alert_observe(set, route, NULL, &f), 0);
	assert_int_equal(alert_observe(set, route, tenant, &f), 0);
	alert_end(set);
}

static char *text(void (*fn)(const struct alert_set *, struct evbuffer *))
{
	struct evbuffer *b = evbuffer_new();
	char *s;
	fn(set, b);
	s = unit_take(b);
	evbuffer_free(b);
	return s;
}

/* The alert series as /metrics writes them (text). */
static void prom_text(const struct alert_set *s, struct evbuffer *b)
{
	struct promout *o = promout_new(b, 0);
	alert_prometheus(s, o);
	promout_finish(o);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* The state of one rule as /alerts shows it. */
static void expect_state(const char *route, const char *tenant, const char *name,
    const char *severity, const char *state)
{
	char want[512];
	char *js = text(alert_json);
	snprintf(want, sizeof want, "{\"alertname\":\"%s\",\"severity\":\"%s\","
	    "\"route\":\"%s\",\"tenant\":%s%s%s,", name, severity, route,
	    tenant ? "\"" : "", tenant ? tenant : "null", tenant ? "\"" : "");
	const char *at = strstr(js, want);
	if (at == NULL)
		fail_msg("no rule %s in %s", want, js);
	at = strstr(at, "\"state\":\"");
	assert_non_null(at);
	if (strncmp(at + 9, state, strlen(state)) != 0 || at[9 + strlen(state)] != '"')
		fail_msg("%s %s %s: want %s in %.80s", route, name, severity, state, at);
	free(js);
}

static void test_fires_only_with_enough_samples(void **state)
{
	(void)state;
	start("alerts: {min_samples: 10}\n");
	round_of("a", NULL, ttft(1500, 9));
	assert_int_equal(n_seen, 0);
	expect_state("a", NULL, "TTFTHigh", "warning", "ok");
	round_of("a", NULL, ttft(1500, 10));
	assert_int_equal(n_seen, 1);
	assert_true(seen[0].firing);
	assert_int_equal(seen[0].metric, ALERT_TTFT);
	assert_int_equal(seen[0].severity, ALERT_WARNING);
	assert_string_equal(seen[0].route, "a");
	assert_string_equal(seen[0].tenant, "");
	assert_true(seen[0].value == 1500 && seen[0].threshold == 1000);
	assert_int_equal(seen[0].samples, 10);
	assert_int_equal(seen[0].at_ms, wall_ms);
	assert_int_equal(seen[0].starts_at_ms, wall_ms);
	assert_int_equal(seen[0].ends_at_ms, 0);
	assert_int_equal(seen[0].window_us, 60000000);
	assert_true(seen[0].quantile == 0.95);
	expect_state("a", NULL, "TTFTHigh", "warning", "firing");
	expect_state("a", NULL, "TTFTHigh", "critical", "ok");
}

static void test_for_is_respected(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1, for: 25s}\n");
	round_of("a", NULL, ttft(1500, 5));            /* t = 0: pending */
	expect_state("a", NULL, "TTFTHigh", "warning", "pending");
	round_of("a", NULL, ttft(1500, 5));            /* 10 s */
	round_of("a", NULL, ttft(1500, 5));            /* 20 s */
	assert_int_equal(n_seen, 0);
	expect_state("a", NULL, "TTFTHigh", "warning", "pending");
	round_of("a", NULL, ttft(1500, 5));            /* 30 s >= 25 s */
	assert_int_equal(n_seen, 1);
	assert_true(seen[0].firing);

	/* pending that drops goes back to ok and starts over */
	round_of("b", NULL, ttft(800, 5));
	round_of("b", NULL, ttft(400, 5));
	expect_state("b", NULL, "TTFTHigh", "warning", "ok");
	round_of("b", NULL, ttft(800, 5));
	round_of("b", NULL, ttft(800, 5));
	round_of("b", NULL, ttft(800, 5));
	expect_state("b", NULL, "TTFTHigh", "warning", "pending");
	assert_int_equal(n_seen, 2);   /* a resolved (empty window), b not yet */
	assert_false(seen[1].firing);
	round_of("b", NULL, ttft(800, 5));
	assert_int_equal(n_seen, 3);
	assert_true(seen[2].firing);
	assert_string_equal(seen[2].route, "b");
}

/* A value going round the threshold: one firing, resolved only below
 * threshold * (1 - hysteresis); without hysteresis it flaps. */
static void oscillate(void)
{
	static const double ms[] = { 1100, 990, 1010, 950, 1050, 920, 1080, 905 };
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
		round_of("a", NULL, ttft(ms[i], 20));
}

static void test_hysteresis_keeps_it_from_flapping(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1, hysteresis: 0.1}\n");
	oscillate();
	assert_int_equal(n_seen, 1);
	expect_state("a", NULL, "TTFTHigh", "warning", "firing");
	round_of("a", NULL, ttft(899, 20));
	assert_int_equal(n_seen, 2);
	assert_false(seen[1].firing);
	assert_true(seen[1].value == 899);
	assert_int_equal(seen[1].starts_at_ms, seen[0].at_ms);
	assert_int_equal(seen[1].ends_at_ms, wall_ms);
	teardown(NULL);

	start("alerts: {min_samples: 1, hysteresis: 0}\n");
	oscillate();
	assert_int_equal(n_seen, 8);
}

static void test_route_override_beats_global(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1}\n");
	round_of("a", NULL, ttft(700, 5));
	assert_int_equal(n_seen, 0);
	round_of("b", NULL, ttft(700, 5));
	assert_int_equal(n_seen, 1);
	assert_string_equal(seen[0].route, "b");
	assert_true(seen[0].threshold == 500);
	/* b's critical is still the global one */
	round_of("b", NULL, ttft(2100, 5));
	assert_int_equal(n_seen, 2);
	assert_int_equal(seen[1].severity, ALERT_CRITICAL);
	assert_true(seen[1].threshold == 2000);
}

static void test_critical_and_warning_are_independent(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1}\n");
	round_of("a", NULL, ttft(1500, 5));
	assert_int_equal(n_seen, 1);
	assert_int_equal(seen[0].severity, ALERT_WARNING);
	round_of("a", NULL, ttft(2500, 5));
	assert_int_equal(n_seen, 2);
	assert_int_equal(seen[1].severity, ALERT_CRITICAL);
	assert_true(seen[1].firing);
	round_of("a", NULL, ttft(1500, 5));     /* < 2000 * 0.9: critical only */
	assert_int_equal(n_seen, 3);
	assert_int_equal(seen[2].severity, ALERT_CRITICAL);
	assert_false(seen[2].firing);
	expect_state("a", NULL, "TTFTHigh", "warning", "firing");
	expect_state("a", NULL, "TTFTHigh", "critical", "ok");
	/* TPOT rules are separate alerts too */
	round_of("a", NULL, tpot(150, 5));
	expect_state("a", NULL, "TPOTHigh", "warning", "firing");
	expect_state("a", NULL, "TTFTHigh", "warning", "ok");
}

static void test_resolves_on_empty_window(void **state)
{
	(void)state;
	start("alerts: {min_samples: 3}\n");
	round_of("a", NULL, ttft(3000, 5));
	assert_int_equal(n_seen, 2);
	/* too few samples does not resolve a high value ... */
	round_of("a", NULL, ttft(3000, 1));
	assert_int_equal(n_seen, 2);
	/* ... an empty window does, for both severities */
	round_of(NULL, NULL, ttft(0, 0));
	assert_int_equal(n_seen, 4);
	for (size_t i = 2; i < 4; i++) {
		assert_false(seen[i].firing);
		assert_true(seen[i].value < 0);
		assert_int_equal(seen[i].samples, 0);
	}
	char *js = text(alert_json);
	assert_non_null(strstr(js, "\"status\":\"resolved\",\"alertname\":\"TTFTHigh\","
	    "\"severity\":\"critical\",\"route\":\"a\",\"tenant\":null,\"metric\":\"ttft\","
	    "\"value\":null,\"threshold\":2000,\"samples\":0}"));
	free(js);
}

static void test_error_rate_rules(void **state)
{
	(void)state;
	start("alerts:\n  min_samples: 20\n"
	    "  thresholds: {error_rate_warning: 0.05, error_rate_critical: 0.2}\n");
	round_of("a", NULL, errors(5, 19));       /* too few requests */
	assert_int_equal(n_seen, 0);
	round_of("a", NULL, errors(2, 40));       /* 0.05 is not over 0.05 */
	assert_int_equal(n_seen, 0);
	round_of("a", NULL, errors(4, 40));
	assert_int_equal(n_seen, 1);
	assert_int_equal(seen[0].metric, ALERT_ERROR_RATE);
	assert_true(seen[0].value == 0.1 && seen[0].threshold == 0.05);
	assert_int_equal(seen[0].samples, 40);
	round_of("a", NULL, errors(10, 40));
	assert_int_equal(n_seen, 2);
	assert_int_equal(seen[1].severity, ALERT_CRITICAL);
	char *js = text(alert_json);
	assert_non_null(strstr(js, "\"alertname\":\"ErrorRateHigh\",\"severity\":\"critical\","
	    "\"route\":\"a\",\"tenant\":null,\"metric\":\"error_rate\",\"state\":\"firing\","
	    "\"value\":0.25,\"threshold\":0.2,\"samples\":40,"));
	free(js);
	/* 0.19 stays over 0.2 * 0.9, then 0.044 < 0.05 * 0.9 resolves both */
	round_of("a", NULL, errors(19, 100));
	expect_state("a", NULL, "ErrorRateHigh", "critical", "firing");
	round_of("a", NULL, errors(11, 250));
	expect_state("a", NULL, "ErrorRateHigh", "warning", "ok");
	expect_state("a", NULL, "ErrorRateHigh", "critical", "ok");
}

static void test_no_error_rate_rule_without_threshold(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1}\n");
	round_of("a", NULL, errors(10, 10));
	assert_int_equal(n_seen, 0);
	char *js = text(alert_json);
	assert_null(strstr(js, "ErrorRateHigh"));
	/* 2 routes x (4 + StreamStalled, on by default) */
	assert_int_equal(count(js, "\"alertname\""), 10);
	free(js);
}

static void test_transitions_capped_newest_first(void **state)
{
	char want[64], ts[32];
	(void)state;
	start("alerts: {min_samples: 1}\n");
	for (int i = 0; i < 60; i++) {
		round_of("a", NULL, ttft(1500, 5));
		round_of("a", NULL, ttft(10, 5));
	}
	assert_int_equal(n_seen, 120);
	char *js = text(alert_json);
	const char *tr = strstr(js, "\"transitions\":[");
	assert_non_null(tr);
	assert_int_equal(count(tr, "{\"at\":"), ALERT_TRANSITIONS_MAX);
	util_rfc3339_ms(wall_ms, ts);
	snprintf(want, sizeof want, "{\"at\":\"%s\",\"status\":\"resolved\"", ts);
	assert_ptr_equal(strstr(tr, "{\"at\":"), strstr(tr, want));
	/* the oldest kept is the 21st transition, a firing */
	util_rfc3339_ms(seen[20].at_ms, ts);
	snprintf(want, sizeof want, "{\"at\":\"%s\",\"status\":\"firing\"", ts);
	const char *last = strstr(tr, want);
	assert_non_null(last);
	assert_null(strstr(last + 1, "{\"at\":"));
	util_rfc3339_ms(seen[19].at_ms, ts);
	assert_null(strstr(tr, ts));
	free(js);
}

static void test_json_output(void **state)
{
	(void)state;
	conf = unit_conf("routes:\n"
	    "  - name: r\"1\n"
	    "    upstream: http://127.0.0.1:9\n"
	    "alerts:\n"
	    "  min_samples: 1\n"
	    "  thresholds: {ttft_warning: 1s, ttft_critical: 0s, tpot_warning: 0s,\n"
	    "               tpot_critical: 250ms, error_rate_warning: 0.1, stall: 0s}\n");
	n_seen = 0;
	now_us = 1;
	wall_ms = T0_WALL;
	set = alert_new(on_transition, NULL);
	assert_int_equal(alert_configure(set, conf, now_us, wall_ms), 0);
	char *js = text(alert_json);
	assert_string_equal(js, "{\"rules\":["
	    "{\"alertname\":\"TTFTHigh\",\"severity\":\"warning\",\"route\":\"r\\\"1\","
	    "\"tenant\":null,\"metric\":\"ttft\",\"state\":\"ok\",\"value\":null,"
	    "\"threshold\":1000,\"samples\":0,\"since\":\"2026-11-29T16:00:00.000Z\"},"
	    "{\"alertname\":\"TPOTHigh\",\"severity\":\"critical\",\"route\":\"r\\\"1\","
	    "\"tenant\":null,\"metric\":\"tpot\",\"state\":\"ok\",\"value\":null,"
	    "\"threshold\":250,\"samples\":0,\"since\":\"2026-11-29T16:00:00.000Z\"},"
	    "{\"alertname\":\"ErrorRateHigh\",\"severity\":\"warning\",\"route\":\"r\\\"1\","
	    "\"tenant\":null,\"metric\":\"error_rate\",\"state\":\"ok\",\"value\":null,"
	    "\"threshold\":0.1,\"samples\":0,\"since\":\"2026-11-29T16:00:00.000Z\"}"
	    "],\"transitions\":[]}\n");
	free(js);
	round_of("r\"1", NULL, ttft(1234.5678, 3));
	js = text(alert_json);
	assert_string_equal(js, "{\"rules\":["
	    "{\"alertname\":\"TTFTHigh\",\"severity\":\"warning\",\"route\":\"r\\\"1\","
	    "\"tenant\":null,\"metric\":\"ttft\",\"state\":\"firing\",\"value\":1234.568,"
	    "\"threshold\":1000,\"samples\":3,\"since\":\"2026-11-29T16:00:10.000Z\"},"
	    "{\"alertname\":\"TPOTHigh\",\"severity\":\"critical\",\"route\":\"r\\\"1\","
	    "\"tenant\":null,\"metric\":\"tpot\",\"state\":\"ok\",\"value\":null,"
	    "\"threshold\":250,\"samples\":0,\"since\":\"2026-11-29T16:00:00.000Z\"},"
	    "{\"alertname\":\"ErrorRateHigh\",\"severity\":\"warning\",\"route\":\"r\\\"1\","
	    "\"tenant\":null,\"metric\":\"error_rate\",\"state\":\"ok\",\"value\":0,"
	    "\"threshold\":0.1,\"samples\":3,\"since\":\"2026-11-29T16:00:00.000Z\"}"
	    "],\"transitions\":["
	    "{\"at\":\"2026-11-29T16:00:10.000Z\",\"status\":\"firing\",\"alertname\":\"TTFTHigh\","
	    "\"severity\":\"warning\",\"route\":\"r\\\"1\",\"tenant\":null,\"metric\":\"ttft\","
	    "\"value\":1234.568,\"threshold\":1000,\"samples\":3}"
	    "]}\n");
	free(js);
}

static void test_prometheus_output(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1}\n");
	round_of("b", NULL, ttft(600, 5));
	char *p = text(prom_text);
	assert_string_equal(p,
	    "# HELP tokentap_alert_firing 1 while the alert fires, per rule.\n"
	    "# TYPE tokentap_alert_firing gauge\n"
	    "tokentap_alert_firing{alertname=\"TTFTHigh\",severity=\"warning\",route=\"a\"} 0\n"
	    "tokentap_alert_firing{alertname=\"TTFTHigh\",severity=\"critical\",route=\"a\"} 0\n"
	    "tokentap_alert_firing{alertname=\"TPOTHigh\",severity=\"warning\",route=\"a\"} 0\n"
	    "tokentap_alert_firing{alertname=\"TPOTHigh\",severity=\"critical\",route=\"a\"} 0\n"
	    "tokentap_alert_firing{alertname=\"StreamStalled\",severity=\"warning\",route=\"a\"} 0\n"
	    "tokentap_alert_firing{alertname=\"TTFTHigh\",severity=\"warning\",route=\"b\"} 1\n"
	    "tokentap_alert_firing{alertname=\"TTFTHigh\",severity=\"critical\",route=\"b\"} 0\n"
	    "tokentap_alert_firing{alertname=\"TPOTHigh\",severity=\"warning\",route=\"b\"} 0\n"
	    "tokentap_alert_firing{alertname=\"TPOTHigh\",severity=\"critical\",route=\"b\"} 0\n"
	    "tokentap_alert_firing{alertname=\"StreamStalled\",severity=\"warning\",route=\"b\"} 0\n");
	free(p);
}

static void test_per_tenant_rules(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1, per_tenant: true}\n");
	now_us += STEP_US;
	wall_ms += 10000;
	alert_begin(set, now_us, wall_ms);
	struct alert_figures slow = ttft(1500, 4), fast = ttft(100, 40), all = ttft(300, 44);
	assert_int_equal(alert_observe(set, "a", NULL, &all), 0);
	assert_int_equal(alert_observe(set, "a", "t\"x", &slow), 0);
	assert_int_equal(alert_observe(set, "a", "fast", &fast), 0);
	assert_int_equal(alert_observe(set, "nope", "fast", &fast), -1);
	alert_end(set);
	assert_int_equal(n_seen, 1);
	assert_string_equal(seen[0].tenant, "t\"x");
	expect_state("a", NULL, "TTFTHigh", "warning", "ok");
	expect_state("a", "fast", "TTFTHigh", "warning", "ok");
	char *p = text(prom_text);
	assert_non_null(strstr(p, "tokentap_alert_firing{alertname=\"TTFTHigh\","
	    "severity=\"warning\",route=\"a\",tenant=\"t\\\"x\"} 1\n"));
	free(p);
	char *js = text(alert_json);
	assert_non_null(strstr(js, "\"route\":\"a\",\"tenant\":\"t\\\"x\",\"metric\":\"ttft\","
	    "\"state\":\"firing\""));
	free(js);
	/* the tenant goes quiet: its alert resolves, its rules go away */
	round_of("a", NULL, all);
	assert_int_equal(n_seen, 2);
	assert_false(seen[1].firing);
	assert_string_equal(seen[1].tenant, "t\"x");
	js = text(alert_json);
	assert_null(strstr(js, "\"tenant\":\"fast\",\"metric\""));
	free(js);
}

static void test_tenants_ignored_without_per_tenant(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1}\n");
	struct alert_figures slow = ttft(1500, 4);
	alert_begin(set, now_us, wall_ms);
	assert_int_equal(alert_observe(set, "a", "t1", &slow), -1);
	alert_end(set);
	assert_int_equal(n_seen, 0);
}

static void test_reconfigure_keeps_state(void **state)
{
	(void)state;
	start("alerts: {min_samples: 1, for: 20s, per_tenant: true}\n");
	round_of("a", NULL, ttft(1500, 5));
	round_of("a", NULL, ttft(1500, 5));
	round_of("a", NULL, ttft(1500, 5));
	assert_int_equal(n_seen, 1);
	round_tenant("b", "t1", ttft(1500, 5));      /* b: pending; a resolves */
	assert_int_equal(n_seen, 2);
	round_tenant("b", "t1", ttft(1500, 5));
	round_tenant("b", "t1", ttft(1500, 5));
	assert_int_equal(n_seen, 4);                 /* b and (b, t1) fire */
	round_of("a", NULL, ttft(1500, 5));          /* a pending again */
	assert_int_equal(n_seen, 6);                 /* b, (b, t1) resolve */
	round_of("a", NULL, ttft(1500, 5));
	expect_state("a", NULL, "TTFTHigh", "warning", "pending");

	/* route c added, a's warning moved, b removed */
	struct conf *c2 = unit_conf("routes:\n"
	    "  - name: c\n    upstream: http://127.0.0.1:9\n"
	    "  - name: a\n    upstream: http://127.0.0.1:9\n"
	    "    thresholds: {ttft_warning: 1200ms}\n"
	    "alerts: {min_samples: 1, for: 20s, per_tenant: true}\n");
	assert_int_equal(alert_configure(set, c2, now_us, wall_ms), 0);
	conf_unref(conf);
	conf = c2;
	expect_state("a", NULL, "TTFTHigh", "warning", "pending");
	round_of("a", NULL, ttft(1500, 5));          /* 20 s pending: fires */
	assert_int_equal(n_seen, 7);
	assert_true(seen[6].firing && seen[6].threshold == 1200);
	expect_state("c", NULL, "TTFTHigh", "warning", "ok");
	char *js = text(alert_json);
	*strstr(js, "\"transitions\"") = '\0';
	assert_null(strstr(js, "\"route\":\"b\""));
	free(js);

	/* a firing rule that the reload removes is reported resolved */
	struct conf *c3 = unit_conf("routes:\n"
	    "  - name: c\n    upstream: http://127.0.0.1:9\n"
	    "alerts: {min_samples: 1}\n");
	assert_int_equal(alert_configure(set, c3, now_us, wall_ms + 5), 0);
	conf_unref(conf);
	conf = c3;
	assert_int_equal(n_seen, 8);
	assert_false(seen[7].firing);
	assert_string_equal(seen[7].route, "a");
	assert_int_equal(seen[7].ends_at_ms, wall_ms + 5);
}

static struct alert_figures ttfo(double ms, uint64_t n)
{
	struct alert_figures f = { n, 0, n, 0, 100000, -1, n, n ? ms * 1000 : -1, -1, 0, 0 };
	return f;
}

/* TTFOHigh: only where a ttfo threshold is set; warning and critical. */
static void test_ttfo_rules(void **state)
{
	(void)state;
	start("alerts:\n  min_samples: 1\n"
	    "  thresholds: {ttfo_warning: 3s, ttfo_critical: 6s}\n");
	round_of("a", NULL, ttfo(4000, 5));
	assert_int_equal(n_seen, 1);
	assert_int_equal(seen[0].metric, ALERT_TTFO);
	assert_int_equal(seen[0].severity, ALERT_WARNING);
	assert_true(seen[0].value > 3999 && seen[0].value < 4001);
	assert_true(seen[0].threshold == 3000);
	assert_string_equal(alert_name(ALERT_TTFO), "TTFOHigh");
	round_of("a", NULL, ttfo(7000, 5));
	assert_int_equal(n_seen, 2);
	assert_int_equal(seen[1].severity, ALERT_CRITICAL);
	round_of("a", NULL, ttfo(100, 5));
	assert_int_equal(n_seen, 4);
	teardown(NULL);
	/* no TTFO thresholds by default: no rule */
	start("alerts: {min_samples: 1}\n");
	round_of("a", NULL, ttfo(99000, 5));
	assert_int_equal(n_seen, 0);
	char *js = text(alert_json);
	assert_null(strstr(js, "TTFOHigh"));
	free(js);
}

static struct alert_figures uncertain(uint64_t n, uint64_t stamped)
{
	struct alert_figures f = { stamped, 0, stamped, 0, 100000, -1, 0, -1, -1,
	    stamped, n };
	return f;
}

/* TTFTUncertain: a route's warning when the share of its kernel-stamped
 * TTFTs doubted by over 1 ms passes ttft_uncertain_warning; resolves
 * below it; never per tenant; its log line says what it means; off by
 * default. */
static void test_uncertain_rules(void **state)
{
	char line[512];
	struct alert_transition t;

	(void)state;
	start("alerts:\n  min_samples: 1\n  per_tenant: true\n"
	    "  thresholds: {ttft_uncertain_warning: 0.2}\n");
	round_tenant("a", "t", uncertain(1, 10));
	assert_int_equal(n_seen, 0);
	round_tenant("a", "t", uncertain(5, 10));
	assert_int_equal(n_seen, 1);
	assert_int_equal(seen[0].metric, ALERT_UNCERTAIN);
	assert_int_equal(seen[0].severity, ALERT_WARNING);
	assert_string_equal(seen[0].tenant, "");
	assert_true(seen[0].value == 0.5 && seen[0].threshold == 0.2);
	assert_string_equal(alert_name(ALERT_UNCERTAIN), "TTFTUncertain");
	t = (struct alert_transition){ .firing = 1, .metric = ALERT_UNCERTAIN,
	    .severity = ALERT_WARNING, .route = "a", .value = 0.5, .threshold = 0.2,
	    .samples = 10, .window_us = 60000000 };
	alert_format_log(&t, line, sizeof line);
	assert_string_equal(line, "alert firing: TTFTUncertain severity=warning route=a "
	    "ttft_uncertain_share=0.5, threshold 0.2 (n=10, window 1m): numbers "
	    "approximate: worker saturated (first tokens read merged with later ones)");
	round_tenant("a", "t", uncertain(0, 10));
	assert_int_equal(n_seen, 2);
	assert_false(seen[1].firing);
	teardown(NULL);
	start("alerts:\n  min_samples: 1\n");
	round_of("a", NULL, uncertain(10, 10));
	assert_int_equal(n_seen, 0);
	char *js = text(alert_json);
	assert_null(strstr(js, "TTFTUncertain"));
	free(js);
}

/* StreamStalled: on its own cadence, fires while at least min_stalled of
 * the route's streams are stalled, for alerts.for, resolves when none is;
 * a route with stall: 0 has no such rule; never per tenant. */
static void test_stalled_rules(void **state)
{
	(void)state;
	start("alerts:\n  for: 2s\n  per_tenant: true\n"
	    "  thresholds: {min_stalled: 2}\n");
	assert_int_equal(alert_observe_stalled(set, "a", 1, now_us, wall_ms), 0);
	assert_int_equal(n_seen, 0);
	assert_int_equal(alert_observe_stalled(set, "a", 2, now_us += 1000000,
	    wall_ms += 1000), 0);
	assert_int_equal(n_seen, 0);                       /* pending: for 2s */
	alert_observe_stalled(set, "a", 3, now_us += 2000000, wall_ms += 2000);
	assert_int_equal(n_seen, 1);
	assert_int_equal(seen[0].metric, ALERT_STALLED);
	assert_true(seen[0].firing);
	assert_true(seen[0].value == 3 && seen[0].threshold == 2);
	assert_string_equal(seen[0].route, "a");
	/* a regular evaluation neither resolves nor touches it */
	round_of("a", NULL, ttft(10, 5));
	round_of(NULL, NULL, ttft(10, 0));
	assert_int_equal(n_seen, 1);
	alert_observe_stalled(set, "a", 1, now_us += 1000000, wall_ms += 1000);
	assert_int_equal(n_seen, 1);                       /* one is still stalled */
	alert_observe_stalled(set, "a", 0, now_us += 1000000, wall_ms += 1000);
	assert_int_equal(n_seen, 2);
	assert_false(seen[1].firing);
	assert_int_equal(alert_observe_stalled(set, "nope", 5, now_us, wall_ms), -1);
	/* tenants get no StreamStalled rule */
	round_tenant("a", "t1", ttft(10, 5));
	char *js = text(alert_json);
	assert_int_equal(count(js, "StreamStalled"), 4);   /* a, b, and 2 transitions */
	free(js);
	teardown(NULL);

	start("alerts:\n  thresholds: {stall: 0s}\n");
	assert_int_equal(alert_observe_stalled(set, "a", 9, now_us, wall_ms), 0);
	assert_int_equal(n_seen, 0);
	js = text(alert_json);
	assert_null(strstr(js, "StreamStalled"));
	free(js);
}

static void test_notification_formats(void **state)
{
	struct alert_transition t = {
		.firing = 1, .metric = ALERT_TTFT, .severity = ALERT_CRITICAL,
		.route = "openai", .tenant = NULL, .value = 2310.4, .threshold = 2000,
		.samples = 57, .quantile = 0.95, .window_us = 60000000,
		.at_ms = T0_WALL + 5, .starts_at_ms = T0_WALL + 5, .ends_at_ms = 0,
	};
	struct evbuffer *b = evbuffer_new();
	char line[512], *js;
	(void)state;

	alert_format_log(&t, line, sizeof line);
	assert_string_equal(line, "alert firing: TTFTHigh severity=critical route=openai "
	    "p95=2310ms > 2000ms (n=57, window 1m)");
	alert_format_webhook(b, &t, "gw1/0.0.0.0:8080");
	js = unit_take(b);
	assert_string_equal(js, "{\"status\":\"firing\",\"alertname\":\"TTFTHigh\","
	    "\"severity\":\"critical\",\"route\":\"openai\",\"tenant\":null,\"metric\":\"ttft\","
	    "\"quantile\":0.95,\"value_ms\":2310.4,\"threshold_ms\":2000,\"samples\":57,"
	    "\"window_s\":60,\"starts_at\":\"2026-11-29T16:00:00.005Z\",\"ends_at\":null,"
	    "\"instance\":\"gw1/0.0.0.0:8080\"}");
	free(js);
	alert_format_alertmanager(b, &t, "gw1/0.0.0.0:8080", "http://gw1:9464/alerts",
	    T0_WALL + 180005);
	js = unit_take(b);
	assert_string_equal(js, "{\"labels\":{\"alertname\":\"TTFTHigh\",\"severity\":\"critical\","
	    "\"route\":\"openai\",\"instance\":\"gw1/0.0.0.0:8080\"},\"annotations\":{"
	    "\"summary\":\"TTFT p95 of route openai over 2000ms\",\"description\":"
	    "\"TTFT p95 was 2310ms over the last 1m (57 samples); the critical threshold is 2000ms.\"},"
	    "\"startsAt\":\"2026-11-29T16:00:00.005Z\",\"endsAt\":\"2026-11-29T16:03:00.005Z\","
	    "\"generatorURL\":\"http://gw1:9464/alerts\"}");
	free(js);

	/* resolved on an empty window, per tenant, another quantile */
	t.firing = 0;
	t.metric = ALERT_TPOT;
	t.severity = ALERT_WARNING;
	t.tenant = "t\"1";
	t.value = -1;
	t.threshold = 12.5;
	t.samples = 0;
	t.quantile = 0.999;
	t.window_us = 10000000;
	t.ends_at_ms = T0_WALL + 70000;
	alert_format_log(&t, line, sizeof line);
	assert_string_equal(line, "alert resolved: TPOTHigh severity=warning route=openai "
	    "tenant=t\"1 p99.9=none, threshold 12.5ms (n=0, window 10s)");
	alert_format_webhook(b, &t, "gw1/0.0.0.0:8080");
	js = unit_take(b);
	assert_non_null(strstr(js, "\"tenant\":\"t\\\"1\",\"metric\":\"tpot\",\"quantile\":0.999,"
	    "\"value_ms\":null,\"threshold_ms\":12.5,\"samples\":0,\"window_s\":10,"
	    "\"starts_at\":\"2026-11-29T16:00:00.005Z\",\"ends_at\":\"2026-11-29T16:01:10.000Z\""));
	free(js);

	/* error rate: a fraction, no quantile */
	t.firing = 1;
	t.metric = ALERT_ERROR_RATE;
	t.tenant = NULL;
	t.value = 0.3125;
	t.threshold = 0.05;
	t.samples = 32;
	t.window_us = 300000000;
	t.ends_at_ms = 0;
	alert_format_log(&t, line, sizeof line);
	assert_string_equal(line, "alert firing: ErrorRateHigh severity=warning route=openai "
	    "error_rate=0.312 > 0.05 (n=32, window 5m)");
	alert_format_webhook(b, &t, "gw1/0.0.0.0:8080");
	js = unit_take(b);
	assert_non_null(strstr(js, "\"metric\":\"error_rate\",\"quantile\":null,\"value\":0.3125,"
	    "\"threshold\":0.05,\"samples\":32,\"window_s\":300,"));
	assert_null(strstr(js, "_ms\""));
	free(js);

	/* streams stalled now: a count */
	t.metric = ALERT_STALLED;
	t.value = 3;
	t.threshold = 1;
	t.samples = 3;
	alert_format_log(&t, line, sizeof line);
	assert_string_equal(line, "alert firing: StreamStalled severity=warning "
	    "route=openai stalled=3, threshold 1 (streams stalled now)");
	alert_format_webhook(b, &t, "gw1/0.0.0.0:8080");
	js = unit_take(b);
	assert_non_null(strstr(js, "\"alertname\":\"StreamStalled\",\"severity\":\"warning\""));
	assert_non_null(strstr(js, "\"metric\":\"stalled\",\"quantile\":null,\"value\":3,"
	    "\"threshold\":1,\"samples\":3,"));
	free(js);
	alert_format_alertmanager(b, &t, "gw1", "http://gw1:9464/alerts", 0);
	js = unit_take(b);
	assert_non_null(strstr(js, "\"summary\":\"Streams of route openai stalled\""));
	free(js);
	evbuffer_free(b);
}

/* min_healthy: PoolUnhealthy (critical) fires below it, after `for`,
 * whatever min_samples says, stays while below, resolves at it; a tenant has no pool rule. */
static void test_pool_unhealthy(void **state)
{
	(void)state;
	struct alert_figures f = { .ttft_us = -1, .tpot_us = -1, .ttfo_us = -1, .healthy = 3 };
	char yaml[512], *j, line[512];

	conf = unit_conf("routes:\n  - name: p\n    upstreams: [{url: http://127.0.0.1:9}, "
	    "{url: http://127.0.0.1:10}, {url: http://127.0.0.1:11}]\n"
	    "    min_healthy: 2\n"
	    "alerts: {min_samples: 10, for: 10s, per_tenant: true}\n");
	(void)yaml;
	n_seen = 0;
	now_us = 5000000000ull;
	wall_ms = T0_WALL;
	set = alert_new(on_transition, NULL);
	assert_int_equal(alert_configure(set, conf, now_us, wall_ms), 0);
	round_of("p", NULL, f);
	f.healthy = 1;
	round_of("p", NULL, f);                /* pending: `for` applies */
	assert_int_equal(n_seen, 0);
	round_tenant("p", "acme", f);          /* the tenant's figures have no pool */
	assert_int_equal(n_seen, 1);
	assert_true(seen[0].firing);
	assert_int_equal(seen[0].metric, ALERT_HEALTHY);
	assert_int_equal(seen[0].severity, ALERT_CRITICAL);
	assert_true(seen[0].value == 1 && seen[0].threshold == 2);
	assert_string_equal(alert_name(ALERT_HEALTHY), "PoolUnhealthy");
	j = text(alert_json);
	assert_non_null(strstr(j, "\"alertname\":\"PoolUnhealthy\",\"severity\":\"critical\","
	    "\"route\":\"p\",\"tenant\":null,\"metric\":\"healthy\","
	    "\"state\":\"firing\",\"value\":1,\"threshold\":2"));
	assert_null(strstr(j, "\"tenant\":\"acme\",\"metric\":\"healthy\""));
	free(j);
	{
		struct alert_transition t = { .firing = 1, .metric = ALERT_HEALTHY,
		    .severity = ALERT_CRITICAL, .route = "p", .value = 1, .threshold = 2,
		    .samples = 1, .window_us = 60000000 };
		alert_format_log(&t, line, sizeof line);
		assert_string_equal(line, "alert firing: PoolUnhealthy severity=critical route=p "
		    "healthy=1 < 2 (n=1, window 1m)");
	}
	/* still below: it stays (it resolved at every other evaluation, below
	 * threshold x (1 - hysteresis) read as clear of it) */
	round_of("p", NULL, f);
	round_of("p", NULL, f);
	assert_int_equal(n_seen, 1);
	/* back at min_healthy: resolved at once */
	f.healthy = 2;
	round_of("p", NULL, f);
	assert_int_equal(n_seen, 2);
	assert_false(seen[1].firing);
	teardown(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_fires_only_with_enough_samples, teardown),
		cmocka_unit_test_teardown(test_for_is_respected, teardown),
		cmocka_unit_test_teardown(test_hysteresis_keeps_it_from_flapping, teardown),
		cmocka_unit_test_teardown(test_route_override_beats_global, teardown),
		cmocka_unit_test_teardown(test_critical_and_warning_are_independent, teardown),
		cmocka_unit_test_teardown(test_resolves_on_empty_window, teardown),
		cmocka_unit_test_teardown(test_error_rate_rules, teardown),
		cmocka_unit_test_teardown(test_no_error_rate_rule_without_threshold, teardown),
		cmocka_unit_test_teardown(test_transitions_capped_newest_first, teardown),
		cmocka_unit_test_teardown(test_json_output, teardown),
		cmocka_unit_test_teardown(test_prometheus_output, teardown),
		cmocka_unit_test_teardown(test_per_tenant_rules, teardown),
		cmocka_unit_test_teardown(test_tenants_ignored_without_per_tenant, teardown),
		cmocka_unit_test_teardown(test_reconfigure_keeps_state, teardown),
		cmocka_unit_test_teardown(test_ttfo_rules, teardown),
		cmocka_unit_test_teardown(test_uncertain_rules, teardown),
		cmocka_unit_test_teardown(test_stalled_rules, teardown),
		cmocka_unit_test(test_notification_formats),
		cmocka_unit_test(test_pool_unhealthy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
