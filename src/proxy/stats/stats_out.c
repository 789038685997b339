/* SPDX-License-Identifier: Apache-2.0 */
/* What the statistics look like from outside: /stats JSON, /metrics text,
 * and the window views the alert rules read. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "gauge.h"
#include "headroom.h"
#include "history.h"
#include "stats.h"
#include "stats_int.h"
#include "jsonw.h"
#include "metrics.h"
#include "promout.h"
#include "util.h"

/* A string literal, its length counted by the compiler. */
#define ADD(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

/* One output row's window figures, merged from its groups. */
struct agg {
	uint64_t requests, errors, by_client, output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	long active, max_active;
	struct r2_sums r2;
	long stalled;
	uint64_t stalls, judged, buffered;
	uint64_t ttft_stamped, ttft_uncertain;
	uint64_t no_token[OUTCOME_COUNT];
	uint64_t counted_events, counted_tokens, first_told, first_tokens;
	uint64_t tpot_estimated;
	uint64_t wire[W_COUNT];
	unsigned dialects;         /* bit d: a group of dialect d */
	struct hist ttft, tpot, itl, prev_ttft, prev_tpot;
	struct hist ttfo, ovh_request, ovh_read;
	struct hist ttft_server, ttfo_server;
};

static void agg_reset(struct agg *a)
{
	memset(a, 0, offsetof(struct agg, ttft));
	hist_init(&a->ttft);
	hist_init(&a->tpot);
	hist_init(&a->itl);
	hist_init(&a->prev_ttft);
	hist_init(&a->prev_tpot);
	hist_init(&a->ttfo);
	hist_init(&a->ovh_request);
	hist_init(&a->ovh_read);
	hist_init(&a->ttft_server);
	hist_init(&a->ttfo_server);
}

/* The stream health part of a slice in the window. */
static void agg_health(struct agg *a, const struct slice *s)
{
	a->stalls += s->stalls;
	a->judged += s->judged;
	a->buffered += s->buffered;
	a->ttft_stamped += s->ttft_stamped;
	a->ttft_uncertain += s->ttft_uncertain;
	for (int o = 0; o < OUTCOME_COUNT; o++)
		a->no_token[o] += s->no_token[o];
	a->counted_events += s->counted_events;
	a->counted_tokens += s->counted_tokens;
	a->first_told += s->first_told;
	a->first_tokens += s->first_tokens;
	a->tpot_estimated += s->tpot_estimated;
	for (int i = 0; i < W_COUNT; i++)
		a->wire[i] += s->wire[i];
	hist_sparse_merge_into(&a->ttfo, &s->ttfo);
	hist_sparse_merge_into(&a->ttfo_server, &s->ttfo_server);
	hist_sparse_merge_into(&a->ovh_request, &s->ovh_request);
	hist_sparse_merge_into(&a->ovh_read, &s->ovh_read);
}

static void agg_add(struct agg *a, const struct group *g, size_t w, uint64_t cur)
{
	a->active += g->active;
	a->stalled += g->stalled;
	if (g->dialect < 32)
		a->dialects |= 1u << g->dialect;
	if (g->max_active > a->max_active)
		a->max_active = g->max_active;
	for (int i = 0; i < 2 * SLICES; i++) {
		const struct slice *s = group_slice(g, w, i);
		if (s == NULL || s->index + 2 * SLICES <= cur || s->index > cur)
			continue;
		if (s->index + SLICES <= cur) {      /* the previous window */
			hist_sparse_merge_into(&a->prev_ttft, &s->ttft);
			hist_sparse_merge_into(&a->prev_tpot, &s->tpot);
			continue;
		}
		a->requests += s->requests;
		a->errors += s->errors;
		a->by_client += s->by_client;
		a->output_tokens += s->output_tokens;
		a->input_tokens += s->input_tokens;
		a->speed_tokens += s->speed_tokens;
		a->speed_us += s->speed_us;
		a->r2.n += s->r2.n;
		a->r2.sx += s->r2.sx;
		a->r2.sy += s->r2.sy;
		a->r2.sxy += s->r2.sxy;
		a->r2.sxx += s->r2.sxx;
		a->r2.syy += s->r2.syy;
		hist_sparse_merge_into(&a->ttft, &s->ttft);
		hist_sparse_merge_into(&a->ttft_server, &s->ttft_server);
		hist_sparse_merge_into(&a->tpot, &s->tpot);
		hist_sparse_merge_into(&a->itl, &s->itl);
		agg_health(a, s);
	}
}

/* The least-squares line of TTFT (ms) on concurrency; R² undefined with
 * fewer than 3 points or no spread in either variable. */
static void fit_of(const struct r2_sums *r, struct headroom_fit *f)
{
	headroom_fit(r->n, r->sx, r->sy, r->sxy, r->sxx, r->syy, f);
}

/* A route's ttft_warning in ms; 0 when it has none. */
static double warning_ms(const char *route)
{
	const struct stats_state *st = stats_state();

	for (size_t i = 0; i < st->n_warnings; i++)
		if (strcmp(st->warnings[i].route, route) == 0)
			return (double)st->warnings[i].ttft_warning_us / 1000.0;
	return 0;
}

/* Slope, intercept and, per route, the concurrency at which the line
 * reaches the route's ttft_warning; null where undefined. */
static void json_headroom(struct evbuffer *out, const struct headroom_fit *f,
    const char *route)
{
	ADD(out, ",\"ttft_concurrency_slope_ms\":");
	if (f->ok)
		evbuffer_add_printf(out, "%.4f", f->slope);
	else
		ADD(out, "null");
	ADD(out, ",\"ttft_concurrency_intercept_ms\":");
	if (f->ok)
		evbuffer_add_printf(out, "%.4f", f->intercept);
	else
		ADD(out, "null");
	ADD(out, ",\"headroom_streams\":");
	jsonw_fixed(out, route ? headroom_streams(f, warning_ms(route)) : -1, 1);
}

/* ---- JSON ----------------------------------------------------------------- */

void stats_json_dist(struct evbuffer *out, const struct hist *h, double scale)
{
	evbuffer_add_printf(out, "{\"count\":%llu", (unsigned long long)h->count);
	if (h->count == 0) {
		evbuffer_add_printf(out, ",\"mean\":null,\"p50\":null,\"p90\":null,"
		    "\"p95\":null,\"p99\":null,\"max\":null}");
		return;
	}
	ADD(out, ",\"mean\":");
	jsonw_fixed(out, hist_mean(h) / scale, 3);
	ADD(out, ",\"p50\":");
	jsonw_fixed(out, hist_quantile(h, 0.50) / scale, 3);
	ADD(out, ",\"p90\":");
	jsonw_fixed(out, hist_quantile(h, 0.90) / scale, 3);
	ADD(out, ",\"p95\":");
	jsonw_fixed(out, hist_quantile(h, 0.95) / scale, 3);
	ADD(out, ",\"p99\":");
	jsonw_fixed(out, hist_quantile(h, 0.99) / scale, 3);
	ADD(out, ",\"max\":");
	jsonw_fixed(out, (double)h->max / scale, 3);
	ADD(out, "}");
}

static void json_dist(struct evbuffer *out, const char *name, const struct hist *h)
{
	evbuffer_add_printf(out, ",\"%s\":", name);
	stats_json_dist(out, h, 1000.0);
}

/* The outcomes a request without a token is counted by. */
static const enum meter_outcome no_token_outcomes[] = {
	OUTCOME_OK, OUTCOME_CLIENT_ABORT, OUTCOME_UPSTREAM_ABORT,
	OUTCOME_UPSTREAM_ERROR, OUTCOME_TIMEOUT
};

/* Stream health: TTFO, stalls now and in the window, requests without a
 * token, the share of judged streams that looked buffered, and the
 * proxy's own overhead (µs: request stage, and per read forwarded). */
static void json_health(struct evbuffer *out, const struct agg *a)
{
	json_dist(out, "ttfo_ms", &a->ttfo);
	json_dist(out, "ttfo_server_ms", &a->ttfo_server);
	evbuffer_add_printf(out, ",\"stalled\":%ld,\"stalls\":%llu,\"no_token\":{",
	    a->stalled, (unsigned long long)a->stalls);
	for (size_t i = 0; i < UTIL_ARRAY_LEN(no_token_outcomes); i++)
		evbuffer_add_printf(out, "%s\"%s\":%llu", i ? "," : "",
		    meter_outcome_name(no_token_outcomes[i]),
		    (unsigned long long)a->no_token[no_token_outcomes[i]]);
	evbuffer_add_printf(out, "},\"buffered\":%llu,\"buffered_share\":",
	    (unsigned long long)a->buffered);
	jsonw_fixed(out, a->judged ? (double)a->buffered / (double)a->judged : -1, 3);
	/* TTFTs whose first token was read merged with later bytes: the
	 * share of those the kernel stamped (docs/measurement.md, "Doubt") */
	evbuffer_add_printf(out, ",\"ttft_uncertain\":%llu,\"ttft_uncertain_share\":",
	    (unsigned long long)a->ttft_uncertain);
	jsonw_fixed(out, a->ttft_stamped ? (double)a->ttft_uncertain /
	    (double)a->ttft_stamped : -1, 3);
	ADD(out, ",\"overhead_us\":{\"request\":");
	stats_json_dist(out, &a->ovh_request, 1.0);
	ADD(out, ",\"read\":");
	stats_json_dist(out, &a->ovh_read, 1.0);
	ADD(out, "}");
}

/* A ratio with three decimals, null without a denominator. */
static void json_ratio(struct evbuffer *out, const char *name, uint64_t num,
    uint64_t den)
{
	evbuffer_add_printf(out, ",\"%s\":", name);
	jsonw_fixed(out, den ? (double)num / (double)den : -1, 3);
}

/* Chunks are not tokens: tokens per token event (the streams that counted
 * their tokens), the first event's tokens (mean, where told), TPOTs whose
 * divisor was estimated. */
static void json_tokens(struct evbuffer *out, const struct agg *a)
{
	json_ratio(out, "tokens_per_event", a->counted_tokens, a->counted_events);
	json_ratio(out, "first_event_tokens", a->first_tokens, a->first_told);
	evbuffer_add_printf(out, ",\"tpot_estimated\":%llu",
	    (unsigned long long)a->tpot_estimated);
}

/* The wire report: what the row's backends sent, each item counted over
 * the window's streams (docs/measurement.md, "The wire report"). */
static void json_wire(struct evbuffer *out, const struct agg *a)
{
	const uint64_t *v = a->wire;
	int n = 0;

	evbuffer_add_printf(out, ",\"wire\":{\"streams\":%llu,\"line_ends\":{\"lf\":%llu,"
	    "\"crlf\":%llu,\"cr\":%llu},\"data_space\":{\"with\":%llu,\"without\":%llu},"
	    "\"compressed\":{\"gzip\":%llu,\"deflate\":%llu,\"br\":%llu,\"zstd\":%llu},"
	    "\"end_marker\":{\"names\":[",
	    (unsigned long long)v[W_STREAMS], (unsigned long long)v[W_LF],
	    (unsigned long long)v[W_CRLF], (unsigned long long)v[W_CR],
	    (unsigned long long)v[W_DATA_SPACE], (unsigned long long)v[W_DATA_BARE],
	    (unsigned long long)v[W_GZIP], (unsigned long long)v[W_DEFLATE],
	    (unsigned long long)v[W_BR], (unsigned long long)v[W_ZSTD]);
	for (int d = 0; d < DIALECT_COUNT; d++)
		if ((a->dialects >> d & 1) && dialect_end_marker((enum dialect_id)d)) {
			evbuffer_add(out, ",", n++ > 0);
			jsonw_str(out, dialect_end_marker((enum dialect_id)d));
		}
	evbuffer_add_printf(out, "],\"seen\":%llu,\"missing\":%llu},\"usage\":{\"none\":%llu,"
	    "\"final\":%llu,\"every_chunk\":%llu},\"heartbeats\":{\"comments\":%llu,"
	    "\"pings\":%llu,\"empty_deltas\":%llu,\"interval_ms\":",
	    (unsigned long long)v[W_END_SEEN], (unsigned long long)v[W_END_MISSING],
	    (unsigned long long)v[W_USAGE_NONE], (unsigned long long)v[W_USAGE_FINAL],
	    (unsigned long long)v[W_USAGE_EVERY], (unsigned long long)v[W_COMMENTS],
	    (unsigned long long)v[W_PINGS], (unsigned long long)v[W_EMPTY_DELTAS]);
	jsonw_fixed(out, v[W_KA_GAPS] ? (double)v[W_KA_SPAN_MS] / (double)v[W_KA_GAPS] : -1,
	    1);
	ADD(out, "}");
	json_ratio(out, "events_per_read", v[W_EVENTS], v[W_EVENT_READS]);
	evbuffer_add_printf(out, ",\"errors_in_2xx\":%llu}",
	    (unsigned long long)v[W_ERRORS_2XX]);
}

static double trend(const struct hist *cur, const struct hist *prev, double q)
{
	double p, c;
	if (cur->count == 0 || prev->count == 0)
		return NAN;
	p = hist_quantile(prev, q);
	c = hist_quantile(cur, q);
	return p > 0 ? (c - p) / p : NAN;
}

static double trend_sparse(const struct hist_sparse *cur, const struct hist_sparse *prev,
    double q)
{
	double p, c;
	if (cur->count == 0 || prev->count == 0)
		return NAN;
	p = hist_sparse_quantile(prev, q);
	c = hist_sparse_quantile(cur, q);
	return p > 0 ? (c - p) / p : NAN;
}

/* R² (its line) and the trend of a route's row, or the instance's (route
 * NULL), from the history where it keeps the window twice over: there
 * they outlive a restart, and the previous hour is there for a 1h window.
 * 0, or -1: the window's own slices say them. */
static int from_history(const char *route, uint64_t window_us, struct headroom_fit *fit,
    double *t_ttft, double *t_tpot)
{
	static struct history_sum cur, prev;
	struct history *h = stats_state()->history;
	const struct history_series *se;

	if (h == NULL)
		return -1;
	se = route ? history_find(h, HISTORY_ROUTE, route) : history_find(h, HISTORY_INSTANCE, "");
	history_sum_clear(&cur);
	history_sum_clear(&prev);
	if (history_window(h, se, (uint64_t)((int64_t)stats_clock() + history_offset(h)),
	    window_us, &cur, &prev) < 0)
		return -1;
	headroom_fit((double)cur.r2.n, (double)cur.r2.sx, cur.r2.sy, cur.r2.sxy,
	    (double)cur.r2.sxx, cur.r2.syy, fit);
	*t_ttft = trend_sparse(&cur.ttft, &prev.ttft, 0.95);
	*t_tpot = trend_sparse(&cur.tpot, &prev.tpot, 0.50);
	return 0;
}

static void json_trend(struct evbuffer *out, const char *name, double v)
{
	evbuffer_add_printf(out, "\"%s\":", name);
	if (isnan(v))
		ADD(out, "null");
	else
		evbuffer_add_printf(out, "%.4f", v);
}

/* A row of the groups g's key by selects (g NULL: the instance's). */
static void json_row(struct evbuffer *out, const struct group *g, unsigned by,
    const struct agg *a, int first, uint64_t window_us)
{
	struct headroom_fit fit;
	double r2, t_ttft, t_tpot;

	if ((by != BY_ROUTE && g != NULL) ||
	    from_history(g ? g->route->text : NULL, window_us, &fit, &t_ttft, &t_tpot) < 0) {
		fit_of(&a->r2, &fit);
		t_ttft = trend(&a->ttft, &a->prev_ttft, 0.95);
		t_tpot = trend(&a->tpot, &a->prev_tpot, 0.50);
	}
	r2 = fit.ok ? fit.r2 : -1;
	evbuffer_add(out, first ? "{" : ",{", first ? 1 : 2);
	if (g == NULL)
		by = 0;
	if (by & BY_ROUTE) {
		ADD(out, "\"route\":");
		jsonw_str(out, g->route->text);
		ADD(out, ",");
	}
	if (by & BY_TENANT) {
		ADD(out, "\"tenant\":");
		jsonw_str(out, g->tenant->text);
		ADD(out, ",");
	}
	if (by & BY_MODEL) {
		ADD(out, "\"model\":");
		jsonw_str(out, g->model->text);
		ADD(out, ",");
	}
	if (by & BY_UPSTREAM) {
		ADD(out, "\"upstream\":");
		jsonw_str(out, g->upstream->text);
		ADD(out, ",");
	}
	evbuffer_add_printf(out, "\"requests\":%llu,\"errors\":%llu,\"error_rate\":",
	    (unsigned long long)a->requests, (unsigned long long)a->errors);
	jsonw_fixed(out, a->requests ? (double)a->errors / (double)a->requests : -1, 3);
	evbuffer_add_printf(out, ",\"active\":%ld,\"max_active\":%ld", a->active,
	    a->max_active);
	json_dist(out, "ttft_ms", &a->ttft);
	json_dist(out, "ttft_server_ms", &a->ttft_server);
	json_dist(out, "tpot_ms", &a->tpot);
	json_dist(out, "itl_ms", &a->itl);
	evbuffer_add_printf(out, ",\"output_tokens\":%llu,\"input_tokens\":%llu,"
	    "\"output_tokens_per_s\":", (unsigned long long)a->output_tokens,
	    (unsigned long long)a->input_tokens);
	jsonw_fixed(out, a->speed_us ? (double)a->speed_tokens * 1e6 / (double)a->speed_us : -1,
	    3);
	ADD(out, ",\"ttft_concurrency_r2\":");
	jsonw_fixed(out, r2, 4);
	json_headroom(out, &fit, by & BY_ROUTE ? g->route->text : NULL);
	json_health(out, a);
	json_tokens(out, a);
	if (by & BY_UPSTREAM)
		json_wire(out, a);
	ADD(out, ",\"trend\":{");
	json_trend(out, "ttft_p95", t_ttft);
	ADD(out, ",");
	json_trend(out, "tpot_p50", t_tpot);
	ADD(out, "}}");
}

static unsigned sort_by;

/* Names are kept once (stats_group.c): the same name, the same address. */
static int cmp_name(const struct stats_name *a, const struct stats_name *b)
{
	return a == b ? 0 : strcmp(a->text, b->text);
}

static int cmp_groups(const void *x, const void *y)
{
	const struct group *a = *(const struct group *const *)x;
	const struct group *b = *(const struct group *const *)y;
	int c = sort_by & BY_ROUTE ? cmp_name(a->route, b->route) : 0;
	if (c == 0 && (sort_by & BY_TENANT))
		c = cmp_name(a->tenant, b->tenant);
	if (c == 0 && (sort_by & BY_MODEL))
		c = cmp_name(a->model, b->model);
	if (c == 0 && (sort_by & BY_UPSTREAM))
		c = cmp_name(a->upstream, b->upstream);
	return c;
}

static struct group **sorted_groups(unsigned by)
{
	const struct stats_state *st = stats_state();

	struct group **v = malloc((st->n_groups + 1) * sizeof *v);
	size_t i = 0;
	if (v == NULL)
		return NULL;
	for (struct group *g = st->newest; g != NULL; g = g->older)
		v[i++] = g;
	sort_by = by;
	qsort(v, st->n_groups, sizeof *v, cmp_groups);
	return v;
}

/* Whether a row (its groups v[i..j)) shows: something in the window or
 * open now. The cheap part of agg_add, for rows outside the page. */
static int row_shows(struct group **v, size_t i, size_t j, size_t w, uint64_t cur)
{
	for (; i < j; i++) {
		if (v[i]->active > 0)
			return 1;
		for (int k = 0; k < 2 * SLICES; k++) {
			const struct slice *s = group_slice(v[i], w, k);
			if (s != NULL && s->requests > 0 && s->index + SLICES > cur && s->index <= cur)
				return 1;
		}
	}
	return 0;
}

void stats_json(struct evbuffer *out, int wi, unsigned by, size_t offset, size_t limit)
{
	const struct stats_state *st = stats_state();

	static struct agg a;       /* 35 KiB of histograms: not on the stack */
	struct group **v;
	char ts[32], wt[32], since[32];
	uint64_t cur;
	size_t i = 0, rows = 0;
	int first = 1;

	static const char *const fields[] = { "route", "tenant", "model", "upstream" };
	int listed = 0;

	util_rfc3339_ms(util_wall_ms(), ts);
	util_rfc3339_ms(st->since_ms, since);
	util_duration_text(st->window_us[wi], wt, sizeof wt);
	evbuffer_add_printf(out, "{\"window\":\"%s\",\"by\":[", wt);
	for (unsigned f = 0; f < 4; f++)
		if (by & (1u << f))
			evbuffer_add_printf(out, "%s\"%s\"", listed++ ? "," : "", fields[f]);
	evbuffer_add_printf(out, "],"
	    "\"generated_at\":\"%s\",\"since\":\"%s\",\"active_streams\":%ld,"
	    "\"max_active_streams\":%ld,\"instance\":", ts, since, atomic_load(&gauge_streams),
	    atomic_load(&gauge_max_streams));
	cur = stats_clock() / st->slice_us[wi];
	/* every group together; its concurrency the streams', as above */
	agg_reset(&a);
	for (struct group *g = st->newest; g != NULL; g = g->older)
		agg_add(&a, g, (size_t)wi, cur);
	a.active = atomic_load(&gauge_streams);
	a.max_active = atomic_load(&gauge_max_streams);
	json_row(out, NULL, 0, &a, 1, st->window_us[wi]);
	ADD(out, ",\"groups\":[");
	v = sorted_groups(by);
	/* every row is counted, the page's alone are summed and written: the
	 * work and the answer are bounded by limit, not by the groups */
	while (v != NULL && i < st->n_groups) {
		size_t j = i;
		sort_by = by;
		while (j < st->n_groups && cmp_groups(&v[i], &v[j]) == 0)
			j++;
		/* a group with nothing in the window and nothing active is left out */
		if (row_shows(v, i, j, (size_t)wi, cur) && rows++ >= offset &&
		    rows <= offset + limit) {
			agg_reset(&a);
			for (size_t k = i; k < j; k++)
				agg_add(&a, v[k], (size_t)wi, cur);
			json_row(out, v[i], by, &a, first, st->window_us[wi]);
			first = 0;
		}
		i = j;
	}
	free(v);
	evbuffer_add_printf(out, "],\"total_groups\":%zu,\"offset\":%zu,\"limit\":%zu,"
	    "\"truncated\":%s", rows, offset, limit, rows > offset + limit ? "true" : "false");
	if (stats_json_more != NULL)
		stats_json_more(out);
	ADD(out, "}\n");
}

void (*stats_json_more)(struct evbuffer *out);

/* ---- alert views ---------------------------------------------------------- */

static size_t window_for(uint64_t us)
{
	const struct stats_state *st = stats_state();

	size_t best = 0;
	for (size_t i = 1; i < st->n_windows; i++) {
		uint64_t d = st->window_us[i] > us ? st->window_us[i] - us : us - st->window_us[i];
		uint64_t db = st->window_us[best] > us ? st->window_us[best] - us :
		    us - st->window_us[best];
		if (d < db)
			best = i;
	}
	return best;
}

void stats_route_view(const char *route, const char *tenant, uint64_t window_us,
    double quantile, struct stats_view *out)
{
	const struct stats_state *st = stats_state();

	static struct agg a;
	size_t w;
	uint64_t cur;

	memset(out, 0, sizeof *out);
	out->ttft_q = out->tpot_q = out->ttfo_q = -1;
	if (st->n_windows == 0)
		return;
	w = window_for(window_us);
	cur = stats_clock() / st->slice_us[w];
	agg_reset(&a);
	for (struct group *g = st->newest; g != NULL; g = g->older)
		if (strcmp(g->route->text, route) == 0 &&
		    (tenant == NULL || strcmp(g->tenant->text, tenant) == 0))
			agg_add(&a, g, w, cur);
	out->requests = a.requests;
	out->errors = a.errors;
	out->by_client = a.by_client;
	/* the route is judged by the server side's TTFT and TTFO: a client's
	 * pace is no slow model */
	out->ttft_count = a.ttft_server.count;
	out->tpot_count = a.tpot.count;
	out->ttfo_count = a.ttfo_server.count;
	out->ttft_stamped = a.ttft_stamped;
	out->ttft_uncertain = a.ttft_uncertain;
	if (a.ttft_server.count)
		out->ttft_q = hist_quantile(&a.ttft_server, quantile);
	if (a.tpot.count)
		out->tpot_q = hist_quantile(&a.tpot, quantile);
	if (a.ttfo_server.count)
		out->ttfo_q = hist_quantile(&a.ttfo_server, quantile);
}

uint64_t stats_route_stalled(const char *route)
{
	long n = 0;

	for (const struct group *g = stats_state()->newest; g != NULL; g = g->older)
		if (strcmp(g->route->text, route) == 0)
			n += g->stalled;
	return n > 0 ? (uint64_t)n : 0;
}

void stats_upstream_ttft(const char *route, const char *upstream, uint64_t window_us,
    double q, uint64_t *count, double *value)
{
	const struct stats_state *st = stats_state();
	static struct agg a;
	size_t w;

	*count = 0;
	*value = -1;
	if (st->n_windows == 0)
		return;
	w = window_for(window_us);
	agg_reset(&a);
	for (struct group *g = st->newest; g != NULL; g = g->older)
		if (strcmp(g->route->text, route) == 0 && strcmp(g->upstream->text, upstream) == 0)
			agg_add(&a, g, w, stats_clock() / st->slice_us[w]);
	*count = a.ttft_server.count;
	if (a.ttft_server.count)
		*value = hist_quantile(&a.ttft_server, q);
}

void stats_each_route_tenant(uint64_t window_us,
    void (*fn)(void *arg, const char *route, const char *tenant), void *arg)
{
	const struct stats_state *st = stats_state();

	struct group **v = sorted_groups(BY_ROUTE | BY_TENANT);
	(void)window_us;
	for (size_t i = 0; v != NULL && i < st->n_groups; i++) {
		if (i > 0 && v[i]->route == v[i - 1]->route && v[i]->tenant == v[i - 1]->tenant)
			continue;
		fn(arg, v[i]->route->text, v[i]->tenant->text);
	}
	free(v);
}

/* ---- Prometheus ------------------------------------------------------------ */

void stats_prometheus(struct promout *o)
{
	const struct stats_state *st = stats_state();
	struct promout_labels none = { .n = 0 }, version = { .n = 0 };

	metrics_write(o);
	promout_family(o, "tokentap_active_connections", "Client connections open.",
	    PROMPROTO_GAUGE);
	promout_sample(o, &none, (double)atomic_load(&gauge_connections));
	promout_family(o, "tokentap_stats_dropped_total", "Statistics records lost "
	    "(a worker's spill full while the reader was away; logged).", PROMPROTO_COUNTER);
	promout_sample(o, &none, (double)st->dropped);
	promout_family(o, "tokentap_client_backlog_bytes", "Bytes waiting for "
	    "slow clients (limits.client_backlog bounds them).", PROMPROTO_GAUGE);
	promout_sample(o, &none, (double)atomic_load(&gauge_client_backlog));
	promout_family(o, "tokentap_request_buffer_bytes", "Bytes of request bodies "
	    "held in memory (limits.request_buffers bounds them).", PROMPROTO_GAUGE);
	promout_sample(o, &none, (double)atomic_load(&gauge_body_bytes));
	promout_family(o, "tokentap_request_bodies_spilled_total", "Request bodies "
	    "held in a temporary file (past 256 KiB, or past limits.request_buffers).",
	    PROMPROTO_COUNTER);
	promout_sample(o, &none, (double)atomic_load(&gauge_body_spills));
	promout_family(o, "tokentap_unmeasured_responses_total", "Response bodies "
	    "forwarded but not measured, by cause: a Content-Encoding not decoded "
	    "(coding), bytes not of their coding or past the decoder's memory bound "
	    "(decode_error), no memory for a decoder (no_memory).", PROMPROTO_COUNTER);
	for (int i = METER_MEASURED + 1; i < METER_UNMEASURED_COUNT; i++) {
		struct promout_labels l = { .n = 0 };
		promout_label(&l, "cause", meter_unmeasured_name((enum meter_unmeasured)i));
		promout_sample(o, &l, (double)atomic_load(&gauge_unmeasured[i]));
	}
	promout_family(o, "tokentap_read_timestamps_total", "Requests' first bytes and "
	    "response reads timed by the kernel's receive stamps (kernel) or by the "
	    "event loop's clock (loop: timestamps: loop, no stamp, a clock step).",
	    PROMPROTO_COUNTER);
	for (int i = 0; i < 2; i++) {
		struct promout_labels l = { .n = 0 };
		promout_label(&l, "source", i == 0 ? "kernel" : "loop");
		promout_sample(o, &l, (double)atomic_load(&gauge_read_times[i]));
	}
	promout_family(o, "tokentap_clock_steps_total", "Steps of the real-time clock "
	    "the workers saw (kernel receive times near one use the loop's clock).",
	    PROMPROTO_COUNTER);
	promout_sample(o, &none, (double)atomic_load(&gauge_clock_steps));
	promout_family(o, "tokentap_throughput_probes_total", "Throughput probes' "
	    "verdicts (health.throughput): pass, slow (the request went to another "
	    "replica), kept (slow, and no other replica could take it).",
	    PROMPROTO_COUNTER);
	for (int i = 0; i < GAUGE_PROBE_COUNT; i++) {
		static const char *const names[] = { "pass", "slow", "kept" };
		struct promout_labels l = { .n = 0 };
		promout_label(&l, "result", names[i]);
		promout_sample(o, &l, (double)atomic_load(&gauge_probes[i]));
	}
	promout_family(o, "tokentap_build_info", "Build information.", PROMPROTO_GAUGE);
	promout_label(&version, "version", TOKENTAP_VERSION);
	promout_sample(o, &version, 1);
}
