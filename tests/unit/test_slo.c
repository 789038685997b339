/* SPDX-License-Identifier: Apache-2.0 */
/* slo.c: requests counted per SLO in buckets of time, the budget and the
 * windows read from them, burn-rate pairs that fire only when both windows
 * burn, the state text read back whole or not at all. */
#include <math.h>

#include <event2/buffer.h>

#include "config.h"
#include "promout.h"
#include "slo.h"

#include "unit.h"

#define MS 1000ull
#define S  1000000ull
#define T0 (1800000000ull * S)     /* a wall time */

static const char conf_text[] =
    "routes: [{name: llm, upstream: 'http://x'}, {name: other, upstream: 'http://y'}]\n"
    "stats: {windows: [1m]}\n"
    "alerts:\n"
    "  burn_min_requests: 2\n"
    "  burn_rates:\n"
    "    - {severity: critical, long: 10s, short: 2s, rate: 5}\n"
    "    - {severity: warning, long: 100s, short: 2s, rate: 5}\n"
    "slos:\n"
    "  - {name: chat, ttft: 100ms, objective: 0.9, period: 1h, match: {route: llm}}\n"
    "  - {name: acme, tpot: 20ms, match: {tenant: acme}}\n";

struct seen {
	int n;
	struct alert_transition t[16];
	char slo[16][64];
};

static void on_t(void *arg, const struct alert_transition *t)
{
	struct seen *s = arg;
	assert_true(s->n < 16);
	s->t[s->n] = *t;
	snprintf(s->slo[s->n], 64, "%s", t->slo);
	s->n++;
}

static struct slo_set *set_of(const char *yaml, uint64_t now)
{
	struct conf *c = unit_conf(yaml);
	struct slo_set *s = slo_new();
	assert_non_null(s);
	assert_int_equal(slo_configure(s, c, now, NULL, NULL), 0);
	conf_unref(c);
	return s;
}

static void rec(struct slo_set *s, const char *route, const char *tenant, int64_t ttft_ms,
    int64_t tpot_ms, enum meter_outcome o, uint64_t t)
{
	struct slo_request q = { route, tenant, "m",
		{ o, { ttft_ms < 0 ? -1 : ttft_ms * (int64_t)MS,
		       tpot_ms < 0 ? -1 : tpot_ms * (int64_t)MS }, 1000 * (int64_t)MS }, t };
	slo_record(s, &q);
}

/* The /slo document at now. */
static char *json(struct slo_set *s, uint64_t now)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *out;

	slo_json(s, b, now);
	n = evbuffer_get_length(b);
	out = malloc(n + 1);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
	evbuffer_free(b);
	return out;
}

static void has(const char *doc, const char *part)
{
	if (strstr(doc, part) == NULL)
		fail_msg("no %s in\n%s", part, doc);
}

static void test_counts_windows_and_budget(void **state)
{
	struct slo_set *s = set_of(conf_text, T0);
	char *doc;

	(void)state;
	rec(s, "llm", "-", 50, 10, OUTCOME_OK, T0 + 1 * S);
	rec(s, "llm", "-", 150, 10, OUTCOME_OK, T0 + 2 * S);       /* slow: bad */
	rec(s, "llm", "-", -1, -1, OUTCOME_UPSTREAM_ERROR, T0 + 3 * S);
	rec(s, "llm", "-", -1, -1, OUTCOME_CLIENT_ABORT, T0 + 3 * S); /* 1 s > 100 ms */
	rec(s, "other", "acme", 50, 30, OUTCOME_OK, T0 + 4 * S);   /* acme only: bad */
	rec(s, "other", "-", 50, 30, OUTCOME_OK, T0 + 4 * S);      /* neither */
	doc = json(s, T0 + 5 * S);
	has(doc, "{\"name\":\"chat\",\"match\":{\"route\":\"llm\",\"tenant\":null,\"model\":null},"
	    "\"targets\":{\"ttft_ms\":100},\"objective\":0.9,\"period\":\"1h\",\"bucket\":\"447ms\",\"burn_bucket\":\"400ms\","
	    "\"windows\":[{\"window\":\"1m\",\"eligible\":4,\"good\":1,\"bad\":3,"
	    "\"attainment\":0.250000,\"goodput_per_s\":0.016667}],"
	    "\"budget\":{\"eligible\":4,\"good\":1,\"bad\":3,\"attainment\":0.250000,"
	    "\"allowed_bad\":0.400000,\"remaining\":-6.500000}");
	has(doc, "{\"name\":\"acme\",\"match\":{\"route\":null,\"tenant\":\"acme\",\"model\":null},"
	    "\"targets\":{\"tpot_ms\":20},\"objective\":0.99,\"period\":\"28d\","
	    "\"bucket\":\"5m\",\"burn_bucket\":\"400ms\"");   /* 28 days do not coarsen the burn */
	has(doc, "\"eligible\":1,\"good\":0,\"bad\":1");
	free(doc);
	/* a minute on, the window is empty; the budget (1h) still holds them */
	doc = json(s, T0 + 70 * S);
	has(doc, "\"windows\":[{\"window\":\"1m\",\"eligible\":0,\"good\":0,\"bad\":0,"
	    "\"attainment\":null,\"goodput_per_s\":0.000000}],"
	    "\"budget\":{\"eligible\":4,");
	free(doc);
	/* past the period, the budget is whole again */
	doc = json(s, T0 + 3700 * S);
	has(doc, "\"budget\":{\"eligible\":0,\"good\":0,\"bad\":0,\"attainment\":null,"
	    "\"allowed_bad\":0.000000,\"remaining\":1.000000}");
	free(doc);
	slo_free(s);
}

static void test_a_pair_fires_only_when_both_windows_burn(void **state)
{
	struct slo_set *s = set_of(conf_text, T0);
	struct seen seen = { 0 };
	char *doc;

	(void)state;
	for (int i = 0; i < 40; i++)
		rec(s, "llm", "-", 50, -1, OUTCOME_OK, T0 + (uint64_t)i * S);
	slo_evaluate(s, T0 + 41 * S, on_t, &seen);
	assert_int_equal(seen.n, 0);
	for (int i = 0; i < 10; i++)
		rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 50 * S + (uint64_t)i * 50 * MS);
	slo_evaluate(s, T0 + 50 * S + 600 * MS, on_t, &seen);
	/* 10 s: 10 bad of 10, burn 10 > 5; 2 s alike: the critical pair fires.
	 * 100 s: 10 of 50, burn 2: the warning pair, its short window burning
	 * as fast, must not. */
	assert_int_equal(seen.n, 1);
	assert_true(seen.t[0].firing);
	assert_int_equal(seen.t[0].metric, ALERT_BURN_RATE);
	assert_int_equal(seen.t[0].severity, ALERT_CRITICAL);
	assert_string_equal(seen.slo[0], "chat");
	assert_true(fabs(seen.t[0].value - 10) < 1e-9 && fabs(seen.t[0].short_value - 10) < 1e-9);
	assert_int_equal(seen.t[0].samples, 10);
	assert_int_equal(seen.t[0].window_us, 10 * S);
	assert_int_equal(seen.t[0].short_window_us, 2 * S);
	assert_true(seen.t[0].threshold == 5 && seen.t[0].objective == 0.9);
	doc = json(s, T0 + 50 * S + 700 * MS);
	has(doc, "{\"severity\":\"warning\",\"long_window\":\"100s\",\"short_window\":\"2s\","
	    "\"rate\":5,\"long_burn\":2.000000,\"short_burn\":10.000000,\"long_requests\":50,"
	    "\"short_requests\":10,\"state\":\"ok\"");
	has(doc, "\"state\":\"firing\"");
	free(doc);
	/* the short window empties: it resolves at once */
	slo_evaluate(s, T0 + 54 * S, on_t, &seen);
	assert_int_equal(seen.n, 2);
	assert_false(seen.t[1].firing);
	assert_int_equal(seen.t[1].ends_at_ms, (T0 + 54 * S) / 1000);
	assert_int_equal(seen.t[1].starts_at_ms, (T0 + 50 * S + 600 * MS) / 1000);
	slo_free(s);
}

static void test_reload_keeps_counts_and_resolves_dropped_pairs(void **state)
{
	struct slo_set *s = set_of(conf_text, T0);
	struct seen seen = { 0 };
	struct conf *c;
	char *doc;

	(void)state;
	for (int i = 0; i < 4; i++)
		rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + (uint64_t)i * 100 * MS);
	slo_evaluate(s, T0 + 500 * MS, on_t, &seen);
	assert_int_equal(seen.n, 2);            /* both pairs: every request bad */
	/* the warning pair goes, the SLO stays: counts kept, one resolved */
	c = unit_conf("routes: [{name: llm, upstream: 'http://x'}]\n"
	    "stats: {windows: [1m]}\n"
	    "alerts:\n  burn_min_requests: 2\n  burn_rates:\n"
	    "    - {severity: critical, long: 10s, short: 2s, rate: 5}\n"
	    "slos:\n  - {name: chat, ttft: 100ms, objective: 0.9, period: 1h}\n");
	assert_int_equal(slo_configure(s, c, T0 + S, on_t, &seen), 0);
	conf_unref(c);
	assert_int_equal(seen.n, 3);
	assert_false(seen.t[2].firing);
	assert_int_equal(seen.t[2].severity, ALERT_WARNING);
	doc = json(s, T0 + S);
	has(doc, "\"windows\":[{\"window\":\"1m\",\"eligible\":4,");
	has(doc, "\"budget\":{\"eligible\":4,");
	has(doc, "\"state\":\"firing\"");
	free(doc);
	slo_free(s);
}

static char *state_text(struct slo_set *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_int_equal(slo_state_write(s, f), 0);
	fclose(f);
	return text;
}

static void test_state_round_trip_and_corruption(void **state)
{
	struct slo_set *s = set_of(conf_text, T0), *r;
	struct slo_state_clock clk = { T0 + 3 * S, NULL, NULL };
	char why[200], *text, *doc, *bad;

	(void)state;
	rec(s, "llm", "-", 50, -1, OUTCOME_OK, T0 + 1 * S);
	rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 2 * S);
	rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 2 * S + 10 * MS);
	assert_true(slo_dirty(s));
	text = state_text(s);
	assert_false(slo_dirty(s));
	assert_non_null(strstr(text, "tokentap-slo-state 1\nslo chat budget 447000 "));
	r = set_of(conf_text, T0);
	assert_int_equal(slo_state_read(r, text, strlen(text), &clk, why, sizeof why), 0);
	doc = json(r, T0 + 3 * S);
	has(doc, "\"budget\":{\"eligible\":3,\"good\":1,\"bad\":2,");
	/* the windows start empty: only the budget is kept */
	has(doc, "\"windows\":[{\"window\":\"1m\",\"eligible\":0,");
	free(doc);
	slo_free(r);

	/* into buckets of another length (a shorter burn window: 200 ms) */
	r = set_of("routes: [{name: llm, upstream: 'http://x'}]\n"
	    "alerts:\n  burn_rates: [{severity: critical, long: 10s, short: 1s, rate: 5}]\n"
	    "slos:\n  - {name: chat, ttft: 100ms, objective: 0.9, period: 1h}\n", T0);
	assert_int_equal(slo_state_read(r, text, strlen(text), &clk, why, sizeof why), 0);
	doc = json(r, T0 + 3 * S);
	has(doc, "\"bucket\":\"447ms\",\"burn_bucket\":\"200ms\"");
	has(doc, "\"budget\":{\"eligible\":3,\"good\":1,\"bad\":2,");
	free(doc);

	/* cut short, a count that is not one, another file: refused, nothing changed */
	bad = strndup(text, strlen(text) - 4);
	assert_int_equal(slo_state_read(r, bad, strlen(bad), &clk, why, sizeof why), -1);
	assert_non_null(strstr(why, "line "));
	free(bad);
	bad = strdup(text);
	*strrchr(bad, 'e') = 'x';
	assert_int_equal(slo_state_read(r, bad, strlen(bad), &clk, why, sizeof why), -1);
	free(bad);
	bad = strdup(text);
	bad[strlen("tokentap-slo-state 1\nslo chat budget 447000 ") + 2] = 'z';
	assert_int_equal(slo_state_read(r, bad, strlen(bad), &clk, why, sizeof why), -1);
	assert_string_equal(why, "line 2: expected 'slo NAME RING BUCKET_US HEAD COUNT'");
	free(bad);
	assert_int_equal(slo_state_read(r, "{}\n", 3, &clk, why, sizeof why), -1);
	assert_string_equal(why, "line 1: not a tokentap SLO state file");
	doc = json(r, T0 + 3 * S);
	has(doc, "\"budget\":{\"eligible\":3,\"good\":1,\"bad\":2,");
	free(doc);
	free(text);
	slo_free(r);
	slo_free(s);
}

/* What a state read said about sections ahead of its clock. */
struct notes {
	int n;
	char msg[4][400];
};

static void on_note(void *arg, const char *msg)
{
	struct notes *n = arg;
	assert_true(n->n < 4);
	snprintf(n->msg[n->n++], sizeof n->msg[0], "%s", msg);
}

/* A state read at clk: 0 or -1, why and the notes kept. */
static int read_at(struct slo_set *r, const char *text, uint64_t now, struct notes *n,
    char *why, size_t wl)
{
	struct slo_state_clock clk = { now, on_note, n };
	memset(n, 0, sizeof *n);
	why[0] = '\0';
	return slo_state_read(r, text, strlen(text), &clk, why, wl);
}

/* The HEAD field of the "slo NAME RING" line of text. */
static uint64_t head_of(const char *text, const char *section)
{
	const char *p = strstr(text, section);
	unsigned long long b, head;
	assert_non_null(p);
	assert_int_equal(sscanf(p + strlen(section), " %llu %llu", &b, &head), 2);
	return head;
}

static void test_state_numbers_are_strict(void **state)
{
	static const struct {
		const char *text;
		int line;
	} bad[] = {
		{ "slo chat burn 400000 -1 1\n0 1 2\nend 1\n", 2 },          /* sscanf: 2^64 - 1 */
		{ "slo chat burn 400000 +5 1\n5 1 2\nend 1\n", 2 },
		{ "slo chat burn 400000 18446744073709551616 1\n5 1 2\nend 1\n", 2 },
		{ "slo chat burn 0 5 1\n5 1 2\nend 1\n", 2 },
		{ "slo chat burn 400000 5 -1\n5 1 2\nend 1\n", 2 },
		{ "slo chat burn 400000  5 1\n5 1 2\nend 1\n", 2 },
		{ "slo chat burn 400000 5 1 \n5 1 2\nend 1\n", 2 },
		{ "slo chat burn 400000 5 1\n5 4294967296 2\nend 1\n", 3 },  /* past uint32 */
		{ "slo chat burn 400000 5 1\n5 1 -2\nend 1\n", 3 },
		{ "slo chat burn 400000 5 1\n6 1 2\nend 1\n", 3 },           /* past HEAD */
		{ "slo chat burn 400000 5 1\n5 1 2\nend -1\n", 4 },
		{ "slo chat burn 400000 5 1\n5 1 2\nend 1 \n", 4 },
	};
	struct slo_set *r = set_of(conf_text, T0);
	struct notes n;
	char why[200], text[300], line[16];

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "tokentap-slo-state 1\n%s", bad[i].text);
		snprintf(line, sizeof line, "line %d: ", bad[i].line);
		if (read_at(r, text, T0, &n, why, sizeof why) != -1 || strncmp(why, line, strlen(line)))
			fail_msg("accepted or misplaced (%s):\n%s", why, text);
	}
	/* the largest number is a number: a head 2^64 - 1 buckets on, impossible,
	 * is dropped with a note, the rest of the file read */
	assert_int_equal(read_at(r, "tokentap-slo-state 1\nslo chat burn 400000 "
	    "18446744073709551615 1\n18446744073709551615 1 2\n"
	    "slo chat budget 447000 5 1\n5 1 2\nend 2\n", T0, &n, why, sizeof why), 0);
	assert_int_equal(n.n, 1);
	assert_non_null(strstr(n.msg[0], "line 2: slo chat burn: its newest bucket begins "));
	assert_non_null(strstr(n.msg[0], " days after"));
	assert_non_null(strstr(n.msg[0], "its 1 bucket(s) after now (3 request(s)) dropped, "
	    "the 0 older kept"));
	slo_free(r);
}

static void test_state_ahead_of_the_clock(void **state)
{
	struct slo_set *s = set_of(conf_text, T0), *r;
	struct seen seen = { 0 };
	struct notes n;
	char why[200], text[400], *saved, *again, *doc;
	uint64_t now = T0 + 200 * S, ten_years = 3650 * 86400 * S;

	(void)state;
	/* written on a clock an hour ahead (or before this one was stepped
	 * back an hour): two bad requests 100 s ago, three good in an hour */
	rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 100 * S);
	rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 100 * S);
	for (int i = 0; i < 3; i++)
		rec(s, "llm", "-", 50, -1, OUTCOME_OK, T0 + 3600 * S);
	saved = state_text(s);
	slo_free(s);
	r = set_of(conf_text, now);
	assert_int_equal(read_at(r, saved, now, &n, why, sizeof why), 0);
	assert_int_equal(n.n, 2);
	assert_non_null(strstr(n.msg[0], "line 2: slo chat budget: its newest bucket begins "
	    "57 minutes after this clock's now"));
	assert_non_null(strstr(n.msg[0], "its 1 bucket(s) after now (3 request(s)) dropped, "
	    "the 1 older kept"));
	assert_non_null(strstr(n.msg[1], "slo chat burn: "));
	/* the budget keeps what is not ahead */
	doc = json(r, now);
	has(doc, "\"budget\":{\"eligible\":2,\"good\":0,\"bad\":2,");
	free(doc);
	/* new requests count, and the pair fires on them */
	for (int i = 0; i < 10; i++)
		rec(r, "llm", "-", 500, -1, OUTCOME_OK, now + (uint64_t)i * 50 * MS);
	slo_evaluate(r, now + 600 * MS, on_t, &seen);
	assert_true(seen.n >= 1 && seen.t[0].firing && seen.t[0].severity == ALERT_CRITICAL);
	assert_int_equal(seen.t[0].samples, 10);
	/* what is written back is not ahead */
	again = state_text(r);
	assert_true(head_of(again, "slo chat burn") * 400 * MS <= now + SLO_STATE_AHEAD_US);
	assert_true(head_of(again, "slo chat budget") * 447 * MS <= now + SLO_STATE_AHEAD_US);
	free(again);
	free(saved);
	slo_free(r);

	/* ten years ahead: the same */
	r = set_of(conf_text, T0);
	snprintf(text, sizeof text, "tokentap-slo-state 1\nslo chat burn 400000 %llu 1\n"
	    "%llu 0 5\nend 1\n", (unsigned long long)((T0 + ten_years) / (400 * MS)),
	    (unsigned long long)((T0 + ten_years) / (400 * MS)));
	assert_int_equal(read_at(r, text, T0, &n, why, sizeof why), 0);
	assert_int_equal(n.n, 1);
	assert_non_null(strstr(n.msg[0], "begins 3650 days after"));
	memset(&seen, 0, sizeof seen);
	for (int i = 0; i < 3; i++)
		rec(r, "llm", "-", 500, -1, OUTCOME_OK, T0 + (uint64_t)i * MS);
	slo_evaluate(r, T0 + 100 * MS, on_t, &seen);
	assert_true(seen.n >= 1 && seen.t[0].firing && seen.t[0].samples == 3);
	slo_free(r);

	/* within SLO_STATE_AHEAD_US (another host's clock 30 s on): kept whole,
	 * as now's */
	r = set_of(conf_text, T0);
	snprintf(text, sizeof text, "tokentap-slo-state 1\nslo chat burn 400000 %llu 1\n"
	    "%llu 0 5\nend 1\n", (unsigned long long)((T0 + 30 * S) / (400 * MS)),
	    (unsigned long long)((T0 + 30 * S) / (400 * MS)));
	assert_int_equal(read_at(r, text, T0, &n, why, sizeof why), 0);
	assert_int_equal(n.n, 0);
	memset(&seen, 0, sizeof seen);
	slo_evaluate(r, T0 + 500 * MS, on_t, &seen);
	assert_true(seen.n >= 1 && seen.t[0].firing && seen.t[0].samples == 5);
	again = state_text(r);
	assert_true(head_of(again, "slo chat burn") == (T0 + 500 * MS) / (400 * MS));
	free(again);
	slo_free(r);
}

/* The wall clock stepped back while running: the windows are summed at
 * now, not at the newest bucket (ahead of now until the clock catches up). */
static void test_windows_at_now_after_a_step_back(void **state)
{
	struct slo_set *s = set_of(conf_text, T0);
	struct seen seen = { 0 };

	(void)state;
	rec(s, "llm", "-", 50, -1, OUTCOME_OK, T0 + 90 * S);
	for (int i = 0; i < 10; i++)
		rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + (uint64_t)i * 50 * MS);
	slo_evaluate(s, T0 + 600 * MS, on_t, &seen);
	assert_true(seen.n >= 1 && seen.t[0].firing && seen.t[0].severity == ALERT_CRITICAL);
	assert_int_equal(seen.t[0].samples, 10);
	slo_free(s);
}

static void test_prometheus(void **state)
{
	struct slo_set *s = set_of(conf_text, T0);
	struct evbuffer *b = evbuffer_new();
	struct promout *o = promout_new(b, 0);
	char *text;

	(void)state;
	rec(s, "llm", "-", 50, -1, OUTCOME_OK, T0 + 1 * S);
	rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 2 * S);
	rec(s, "llm", "-", 500, -1, OUTCOME_OK, T0 + 2 * S);
	slo_prometheus(s, o);
	promout_family(o, "tokentap_alert_firing", "1 while the alert fires.", PROMPROTO_GAUGE);
	slo_alert_prometheus(s, o);
	assert_int_equal(promout_finish(o), 0);
	text = unit_take(b);
	has(text, "tokentap_slo_requests_total{slo=\"chat\",result=\"good\"} 1\n"
	    "tokentap_slo_requests_total{slo=\"chat\",result=\"bad\"} 2\n");
	has(text, "tokentap_slo_objective{slo=\"chat\"} 0.9\n");
	has(text, "tokentap_slo_objective{slo=\"acme\"} 0.99\n");
	has(text, "tokentap_alert_firing{alertname=\"SLOBurnRate\",severity=\"critical\","
	    "slo=\"chat\",long_window=\"10s\",short_window=\"2s\"} 0\n");
	free(text);
	evbuffer_free(b);
	slo_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_windows_and_budget),
		cmocka_unit_test(test_a_pair_fires_only_when_both_windows_burn),
		cmocka_unit_test(test_reload_keeps_counts_and_resolves_dropped_pairs),
		cmocka_unit_test(test_state_round_trip_and_corruption),
		cmocka_unit_test(test_state_numbers_are_strict),
		cmocka_unit_test(test_state_ahead_of_the_clock),
		cmocka_unit_test(test_windows_at_now_after_a_step_back),
		cmocka_unit_test(test_prometheus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
