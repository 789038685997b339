/* SPDX-License-Identifier: Apache-2.0 */
/* The rules --prometheus-rules writes (alert_rules.c), as text: what they
 * read under each metrics.names, the summaries word for word as the
 * Alertmanager notifier's, one rule per alertname and severity, nothing
 * for a config without alerts. What they fire on is promtool's to say
 * (tests/e2e/test_alert_rules.py). */

#include <event2/buffer.h>

#include "alert.h"
#include "alert_format.h"
#include "alert_rules.h"
#include "config.h"
#include "util.h"

#include "unit.h"

/* The rules of yaml, as one string; the caller frees it. */
static char *rules_of(const char *yaml)
{
	struct conf *c = unit_conf(yaml);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(alert_rules_write(f, c), 0);
	fclose(f);
	conf_unref(c);
	return buf;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what))
		n++;
	return n;
}

static const char *const routes =
    "routes:\n"
    "  - {name: a, match: {path_prefix: /a/}, upstream: 'http://127.0.0.1:9'}\n"
    "  - name: b\n"
    "    match: {path_prefix: /b/}\n"
    "    upstream: http://127.0.0.1:9\n"
    "    thresholds: {ttft_warning: 250ms, ttfo_critical: 3s}\n";

static void one_rule_per_name_and_severity(void **state)
{
	char yaml[1024];
	char *r;

	(void)state;
	snprintf(yaml, sizeof yaml, "%salerts: {for: 30s}\n", routes);
	r = rules_of(yaml);
	/* TTFT warning: a 1000 ms branch (a) and a 250 ms one (b), one rule */
	assert_int_equal(count(r, "- alert: TTFTHigh\n"), 2);
	assert_int_equal(count(r, "- alert: TPOTHigh\n"), 2);
	assert_int_equal(count(r, "- alert: TTFOHigh\n"), 1);   /* b's critical only */
	assert_int_equal(count(r, "- alert: StreamStalled\n"), 1);
	assert_int_equal(count(r, "- alert: ErrorRateHigh"), 0);
	assert_int_equal(count(r, "- alert: PoolUnhealthy"), 0);
	assert_int_equal(count(r, "- alert: SLOBurnRate"), 0);     /* no slos */
	assert_non_null(strstr(r, "p95_rate1m{route=~\"a\"} > 1\n"));
	assert_non_null(strstr(r, "p95_rate1m{route=~\"b\"} > 0.25\n"));
	assert_non_null(strstr(r, "p95_rate1m{route=~\"a|b\"} > 2\n"));
	assert_non_null(strstr(r, "{route=~\"b\"} > 3\n"));
	assert_int_equal(count(r, "        for: 30s\n"), 6);
	/* the summary follows the route where the thresholds differ */
	assert_non_null(strstr(r, "summary: \"{{ if eq $labels.route \\\"a\\\" }}TTFT p95 of route "
	    "{{ $labels.route }} over 1000ms{{ else }}TTFT p95 of route {{ $labels.route }} "
	    "over 250ms{{ end }}\"\n"));
	free(r);
}

/* TTFT and TTFO are judged by the server side's, TPOT by tokentap's per
 * request: exported under either names (OpenTelemetry's client metrics
 * have no name for them), so the rules read the same families under
 * every metrics.names. */
static void the_names_in_force(void **state)
{
	char yaml[1024];
	char *r;

	(void)state;
	snprintf(yaml, sizeof yaml, "%smetrics: {names: otel}\n", routes);
	r = rules_of(yaml);
	assert_non_null(strstr(r, "rate(tokentap_time_to_first_token_server_seconds{route!=\"-\"}[1m])"));
	assert_non_null(strstr(r, "rate(tokentap_time_per_output_token_seconds_bucket{"));
	assert_non_null(strstr(r, "rate(tokentap_time_to_first_output_token_server_seconds{"));
	assert_null(strstr(r, "tokentap_time_to_first_token_seconds"));
	assert_null(strstr(r, "gen_ai_"));
	free(r);
	snprintf(yaml, sizeof yaml, "%smetrics: {names: both}\n", routes);
	r = rules_of(yaml);
	assert_null(strstr(r, "gen_ai_"));
	free(r);
}

/* Every summary is the one the Alertmanager notifier sends for the same
 * rule, the route's name in place of the template. */
static void summaries_as_the_notifier_sends(void **state)
{
	struct conf *c = unit_conf(routes);
	struct evbuffer *b = evbuffer_new();
	struct alert_transition t;
	char *r = rules_of(routes), *am, want[256];

	(void)state;
	memset(&t, 0, sizeof t);
	t.firing = 1;
	t.metric = ALERT_TTFT;
	t.severity = ALERT_WARNING;
	t.route = "b";
	t.threshold = 250;
	t.quantile = c->alerts_quantile;
	t.window_us = c->alerts_window_us;
	alert_format_alertmanager(b, &t, "h/x", "http://x/alerts", 0);
	am = unit_take(b);
	assert_non_null(strstr(am, "\"summary\":\"TTFT p95 of route b over 250ms\""));
	snprintf(want, sizeof want, "TTFT p95 of route {{ $labels.route }} over 250ms{{ end }}");
	assert_non_null(strstr(r, want));
	free(am);
	t.metric = ALERT_STALLED;
	t.threshold = 1;
	alert_format_alertmanager(b, &t, "h/x", "http://x/alerts", 0);
	am = unit_take(b);
	assert_non_null(strstr(am, "\"summary\":\"Streams of route b stalled\""));
	/* one text for both routes: no template */
	assert_non_null(strstr(r, "summary: \"Streams of route {{ $labels.route }} stalled\"\n"));
	free(am);
	free(r);
	evbuffer_free(b);
	conf_unref(c);
}

/* A config without a rule writes an empty group, not a missing one. */
static void nothing_to_alert_on(void **state)
{
	char *r = rules_of("routes:\n  - {name: a, upstream: 'http://127.0.0.1:9'}\n"
	    "alerts:\n  thresholds: {ttft_warning: 0s, ttft_critical: 0s, tpot_warning: 0s,\n"
	    "    tpot_critical: 0s, stall: 0s}\n");

	(void)state;
	assert_non_null(strstr(r, "groups:\n  - name: tokentap\n    rules:\n      []\n"));
	assert_null(strstr(r, "record:"));
	free(r);
}

/* PromQL has no unit below the millisecond. */
static void ranges(void **state)
{
	char buf[32];

	(void)state;
	alert_rules_range(60000000, buf, sizeof buf);
	assert_string_equal(buf, "1m");
	alert_rules_range(1500000, buf, sizeof buf);
	assert_string_equal(buf, "1500ms");
	alert_rules_range(1500, buf, sizeof buf);
	assert_string_equal(buf, "2ms");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_rule_per_name_and_severity),
		cmocka_unit_test(the_names_in_force),
		cmocka_unit_test(summaries_as_the_notifier_sends),
		cmocka_unit_test(nothing_to_alert_on),
		cmocka_unit_test(ranges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
