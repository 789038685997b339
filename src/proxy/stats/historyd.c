/* SPDX-License-Identifier: Apache-2.0 */
#include "historyd.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "gauge.h"
#include "headroom.h"
#include "history.h"
#include "jsonw.h"
#include "log.h"
#include "slod.h"
#include "statefile.h"
#include "stats.h"
#include "util.h"
#include "yconf.h"

#define TICK_US 500000
#define SAVE_EVERY_US (60 * 1000000ull)
#define FILE_MAX ((size_t)1 << 30)

static struct history *hist;
static struct event *tick;
static struct conf *conf;
static char *path;
static uint64_t saved_at;

/* Each SLO's counts as last seen: the steps get what came since. */
static struct slo_seen {
	char name[HISTORY_NAME_MAX];
	uint64_t good, bad;
} *seen;
static size_t n_seen, cap_seen;

static uint64_t now_wall(void)
{
	return (uint64_t)((int64_t)stats_clock() + history_offset(hist));
}

static void tiers_of(const struct conf *c, struct conf_history_step *t)
{
	for (size_t i = 0; i < c->n_stats_history && i < HISTORY_TIERS_MAX; i++) {
		t[i].step_us = c->stats_history[i].step_us;
		t[i].keep_us = c->stats_history[i].keep_us;
	}
}

/* ---- the SLOs' counts ----------------------------------------------------- */

static void on_slo_total(void *arg, const char *name, uint64_t good, uint64_t bad)
{
	uint64_t t = *(const uint64_t *)arg;
	struct slo_seen *s = NULL;

	for (size_t i = 0; i < n_seen && s == NULL; i++)
		if (strncmp(seen[i].name, name, sizeof seen[i].name - 1) == 0)
			s = &seen[i];
	if (s == NULL) {
		if (n_seen == cap_seen) {
			size_t cap = cap_seen ? cap_seen * 2 : 8;
			struct slo_seen *v = realloc(seen, cap * sizeof *v);
			if (v == NULL)
				return;
			seen = v;
			cap_seen = cap;
		}
		s = &seen[n_seen++];
		snprintf(s->name, sizeof s->name, "%s", name);
		s->good = s->bad = 0;
	}
	/* an SLO made anew by a reload counts from 0 again */
	history_slo(hist, name, t, good >= s->good ? good - s->good : good,
	    bad >= s->bad ? bad - s->bad : bad);
	s->good = good;
	s->bad = bad;
}

/* ---- the file ------------------------------------------------------------- */

static int to_file(void *arg, const void *p, size_t n)
{
	return fwrite(p, 1, n, arg) == n ? 0 : -1;
}

static int fill_file(void *arg, FILE *f)
{
	(void)arg;
	return history_save(hist, now_wall(), to_file, f);
}

static void save(void)
{
	if (path != NULL && hist != NULL)
		statefile_write(path, "stats.history_file", fill_file, NULL);
	saved_at = stats_clock();
}

/* The file read into a store of c's steps; NULL (said) when there is
 * none to read. */
static struct history *load(const struct conf *c, int64_t offset)
{
	struct conf_history_step t[HISTORY_TIERS_MAX];
	struct history *h;
	char why[256];
	size_t len;
	uint8_t *bytes;

	if (path == NULL)
		return NULL;
	bytes = (uint8_t *)statefile_read(path, FILE_MAX, &len);
	if (bytes == NULL) {
		if (errno == ENOENT)
			log_info("stats.history_file %s: not there yet; the history starts empty",
			    path);
		else
			log_warn("stats.history_file %s: cannot read (%s); the history starts "
			    "empty", path, errno == ELOOP ? "a symlink" : errno == ENODEV ?
			    "not a regular file" : errno == EFBIG ? "over 1 GiB" : strerror(errno));
		return NULL;
	}
	tiers_of(c, t);
	h = history_load(bytes, len, t, c->n_stats_history,
	    (uint64_t)((int64_t)stats_clock() + offset), why, sizeof why);
	free(bytes);
	if (h == NULL) {
		log_warn("stats.history_file %s: %s; the history starts empty", path, why);
		return NULL;
	}
	log_info("stats.history_file %s: the history of %zu route(s) and SLO(s) read",
	    path, history_n_series(h) - 1);
	return h;
}

static void set_path(const struct conf *c)
{
	free(path);
	path = c->stats_history_file != NULL && c->n_stats_history > 0 ?
	    strdup(c->stats_history_file) : NULL;
}

/* ---- the service ---------------------------------------------------------- */

/* A route or an SLO the config names keeps its series; one a reload
 * removed loses it (history_set_keep). */
static int keep_series(void *arg, enum history_kind kind, const char *name)
{
	const struct conf *c = arg;

	if (kind == HISTORY_ROUTE) {
		for (size_t i = 0; i < c->n_routes; i++)
			if (strncmp(c->routes[i].name, name, HISTORY_NAME_MAX - 1) == 0)
				return 1;
		return 0;
	}
	for (size_t i = 0; i < c->n_slos; i++)
		if (strncmp(c->slos[i].name, name, HISTORY_NAME_MAX - 1) == 0)
			return 1;
	return 0;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t t;
	long peak;

	(void)fd;
	(void)what;
	(void)arg;
	stats_drain();
	t = stats_clock();
	peak = atomic_exchange(&gauge_peak_streams, 0);
	history_concurrency(hist, t, atomic_load(&gauge_streams), peak);
	slod_each_total(on_slo_total, &t);
	history_advance(hist, now_wall());
	if (path != NULL && t - saved_at >= SAVE_EVERY_US)
		save();
}

int historyd_start(struct event_base *base, const struct conf *c)
{
	struct conf_history_step t[HISTORY_TIERS_MAX];
	struct timeval tv = { 0, TICK_US };
	int64_t offset = (int64_t)(util_wall_ms() * 1000) - (int64_t)stats_clock();

	set_path(c);
	hist = load(c, offset);
	if (hist == NULL) {
		tiers_of(c, t);
		hist = history_new(t, c->n_stats_history);
	}
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	if (hist == NULL || tick == NULL) {
		log_error("history: cannot start (out of memory)");
		historyd_stop();
		return -1;
	}
	history_set_offset(hist, offset);
	history_advance(hist, now_wall());
	conf = conf_ref((struct conf *)c);
	history_set_keep(hist, keep_series, conf);
	saved_at = stats_clock();
	stats_set_history(hist);
	event_add(tick, &tv);
	return 0;
}

void historyd_reload(const struct conf *c)
{
	struct conf_history_step t[HISTORY_TIERS_MAX];
	const struct conf_history_step *old;
	size_t n_old;
	int same;

	if (hist == NULL)
		return;
	stats_drain();          /* what finished counts in the steps kept */
	tiers_of(c, t);
	n_old = history_tiers(hist, &old);
	same = n_old == c->n_stats_history;
	for (size_t i = 0; same && i < n_old; i++)
		same = old[i].step_us == t[i].step_us && old[i].keep_us == t[i].keep_us;
	if (!same) {
		struct history *nh = history_retier(hist, t, c->n_stats_history, now_wall());
		if (nh == NULL) {
			log_error("history: out of memory; the previous steps stay");
		} else {
			hist = nh;
			stats_set_history(hist);
			log_info("history: new steps; what was kept is re-bucketed into them");
		}
	}
	conf_unref(conf);
	conf = conf_ref((struct conf *)c);
	history_set_keep(hist, keep_series, conf);
	set_path(c);
	save();
}

void historyd_stop(void)
{
	if (hist != NULL) {
		stats_drain();          /* the last records count, then none */
		stats_set_history(NULL);
		if (path != NULL)
			save();
	}
	if (tick != NULL)
		event_free(tick);
	tick = NULL;
	history_free(hist);
	hist = NULL;
	if (conf != NULL)
		conf_unref(conf);
	conf = NULL;
	free(path);
	path = NULL;
	free(seen);
	seen = NULL;
	n_seen = cap_seen = 0;
}

/* ---- GET /stats/history ---------------------------------------------------- */

/* One point's figures, as its columns show them: counts are whole
 * (exact in a double to 2^53), durations in ms (< 0: no sample). */
enum {
	V_REQUESTS, V_ERRORS, V_OUT_TOKENS, V_SPEED, V_ACTIVE, V_PEAK, V_STALLS,
	V_GOOD, V_BAD, V_OUTCOMES,
	V_DISTS = V_OUTCOMES + OUTCOME_COUNT,     /* 4 of count, p50, p90, p95, p99, max */
	N_V = V_DISTS + 4 * 6
};

static const double quantiles[4] = { 0.50, 0.90, 0.95, 0.99 };
static const char *const q_names[6] = { "count", "p50", "p90", "p95", "p99", "max" };
static const char *const d_names[4] = { "ttft_ms", "tpot_ms", "itl_ms", "ttfo_ms" };

static const struct hist_sparse *dist_of(const struct history_sum *s, int d)
{
	return d == 0 ? &s->ttft : d == 1 ? &s->tpot : d == 2 ? &s->itl : &s->ttfo;
}

static void point_of(const struct history_sum *s, double *v)
{
	uint64_t n = history_sum_requests(s);

	v[V_REQUESTS] = (double)n;
	v[V_ERRORS] = (double)(n - s->outcomes[OUTCOME_OK]);
	v[V_OUT_TOKENS] = (double)s->output_tokens;
	v[V_SPEED] = s->speed_us ? (double)s->speed_tokens * 1e6 / (double)s->speed_us : -1;
	v[V_ACTIVE] = (double)s->active;
	v[V_PEAK] = (double)s->peak;
	v[V_STALLS] = (double)s->stalls;
	v[V_GOOD] = (double)s->good;
	v[V_BAD] = (double)s->bad;
	for (int o = 0; o < OUTCOME_COUNT; o++)
		v[V_OUTCOMES + o] = (double)s->outcomes[o];
	for (int d = 0; d < 4; d++) {
		const struct hist_sparse *h = dist_of(s, d);
		double *x = &v[V_DISTS + 6 * d];
		x[0] = (double)h->count;
		for (int q = 0; q < 4; q++)
			x[1 + q] = h->count ? hist_sparse_quantile(h, quantiles[q]) / 1000.0 : -1;
		x[5] = h->count ? (double)h->max / 1000.0 : -1;
	}
}

/* "name":[...] of value i over the points, after a comma unless *first;
 * ms: durations (3 decimals, null without a sample), else whole counts. */
static void column(struct evbuffer *out, int *first, const char *name, const double *pts,
    size_t n, int i, int ms)
{
	evbuffer_add_printf(out, "%s\"%s\":[", *first ? "" : ",", name);
	*first = 0;
	for (size_t p = 0; p < n; p++) {
		double v = pts[p * N_V + (size_t)i];
		if (p > 0)
			evbuffer_add(out, ",", 1);
		if (ms)
			jsonw_fixed(out, v, 3);
		else
			evbuffer_add_printf(out, "%.0f", v);
	}
	evbuffer_add(out, "]", 1);
}

static void columns(struct evbuffer *out, const double *pts, size_t n,
    enum history_kind kind)
{
	int first = 1, inner;

	evbuffer_add_printf(out, ",\"points\":{");
	if (kind == HISTORY_SLO) {
		column(out, &first, "good", pts, n, V_GOOD, 0);
		column(out, &first, "bad", pts, n, V_BAD, 0);
		evbuffer_add(out, "}", 1);
		return;
	}
	column(out, &first, "requests", pts, n, V_REQUESTS, 0);
	column(out, &first, "errors", pts, n, V_ERRORS, 0);
	/* the outcomes that happened in these points */
	evbuffer_add_printf(out, ",\"outcomes\":{");
	inner = 1;
	for (int o = 0; o < OUTCOME_COUNT; o++) {
		int any = 0;
		for (size_t p = 0; p < n && !any; p++)
			any = pts[p * N_V + V_OUTCOMES + (size_t)o] > 0;
		if (any)
			column(out, &inner, meter_outcome_name((enum meter_outcome)o), pts, n,
			    V_OUTCOMES + o, 0);
	}
	evbuffer_add(out, "}", 1);
	for (int d = 0; d < 4; d++) {
		evbuffer_add_printf(out, ",\"%s\":{", d_names[d]);
		inner = 1;
		for (int q = 0; q < 6; q++)
			column(out, &inner, q_names[q], pts, n, V_DISTS + 6 * d + q, q > 0);
		evbuffer_add(out, "}", 1);
	}
	column(out, &first, "output_tokens", pts, n, V_OUT_TOKENS, 0);
	column(out, &first, "output_tokens_per_s", pts, n, V_SPEED, 1);
	column(out, &first, "active", pts, n, V_ACTIVE, 0);
	column(out, &first, "max_active", pts, n, V_PEAK, 0);
	column(out, &first, "stalls", pts, n, V_STALLS, 0);
	evbuffer_add(out, "}", 1);
}

static double trend_of(const struct hist_sparse *cur, const struct hist_sparse *prev,
    double q)
{
	double c, p;

	if (cur->count == 0 || prev->count == 0)
		return NAN;
	c = hist_sparse_quantile(cur, q);
	p = hist_sparse_quantile(prev, q);
	return p > 0 ? (c - p) / p : NAN;
}

static void json_trend(struct evbuffer *out, const char *name, double v)
{
	evbuffer_add_printf(out, "\"%s\":", name);
	if (isnan(v))
		evbuffer_add(out, "null", 4);
	else
		evbuffer_add_printf(out, "%.4f", v);
}

/* A route's ttft_warning in ms; 0 when it has none (the instance). */
static double warning_ms(const char *route)
{
	for (size_t i = 0; route != NULL && i < conf->n_routes; i++)
		if (strcmp(conf->routes[i].name, route) == 0)
			return (double)conf->routes[i].thresholds.ttft_warning_us / 1000.0;
	return 0;
}

/* The figures over the whole range, named as a /stats group's: quantiles
 * of every request in it, R² and headroom, the trend against the range
 * before it. */
static void summary(struct evbuffer *out, const struct history_series *se,
    const char *route, const struct history_sum *s, uint64_t range_us)
{
	static struct hist dense;
	static struct history_sum cur, prev;
	uint64_t n = history_sum_requests(s), errors = n - s->outcomes[OUTCOME_OK];
	struct headroom_fit fit;
	const struct history_r2 *r2 = &s->r2;
	double t_ttft = NAN, t_tpot = NAN;

	evbuffer_add_printf(out, ",\"summary\":{\"requests\":%llu,\"errors\":%llu,"
	    "\"error_rate\":", (unsigned long long)n, (unsigned long long)errors);
	jsonw_fixed(out, n ? (double)errors / (double)n : -1, 3);
	evbuffer_add_printf(out, ",\"active\":%lld,\"max_active\":%lld", (long long)s->active,
	    (long long)s->peak);
	for (int d = 0; d < 4; d++) {
		hist_init(&dense);
		hist_sparse_merge_into(&dense, dist_of(s, d));
		evbuffer_add_printf(out, ",\"%s\":", d_names[d]);
		stats_json_dist(out, &dense, 1000.0);
	}
	evbuffer_add_printf(out, ",\"output_tokens\":%llu,\"input_tokens\":%llu,"
	    "\"output_tokens_per_s\":", (unsigned long long)s->output_tokens,
	    (unsigned long long)s->input_tokens);
	jsonw_fixed(out, s->speed_us ? (double)s->speed_tokens * 1e6 / (double)s->speed_us : -1, 3);
	/* R² and the trend as /stats has them for a window of the range's
	 * length (the same steps, the same sums); the points' own sums where
	 * the history does not keep the range twice over */
	history_sum_clear(&cur);
	history_sum_clear(&prev);
	if (history_window(hist, se, now_wall(), range_us, &cur, &prev) == 0) {
		t_ttft = trend_of(&cur.ttft, &prev.ttft, 0.95);
		t_tpot = trend_of(&cur.tpot, &prev.tpot, 0.50);
		r2 = &cur.r2;
	}
	headroom_fit((double)r2->n, (double)r2->sx, r2->sy, r2->sxy, (double)r2->sxx, r2->syy,
	    &fit);
	evbuffer_add_printf(out, ",\"ttft_concurrency_r2\":");
	jsonw_fixed(out, fit.ok ? fit.r2 : -1, 4);
	evbuffer_add_printf(out, ",\"ttft_concurrency_slope_ms\":");
	jsonw_fixed(out, fit.ok ? fit.slope : -1, 4);
	evbuffer_add_printf(out, ",\"ttft_concurrency_intercept_ms\":");
	jsonw_fixed(out, fit.ok ? fit.intercept : -1, 4);
	evbuffer_add_printf(out, ",\"headroom_streams\":");
	jsonw_fixed(out, route ? headroom_streams(&fit, warning_ms(route)) : -1, 1);
	evbuffer_add_printf(out, ",\"stalls\":%llu,\"outcomes\":{", (unsigned long long)s->stalls);
	for (int o = 0; o < OUTCOME_COUNT; o++)
		evbuffer_add_printf(out, "%s\"%s\":%llu", o ? "," : "",
		    meter_outcome_name((enum meter_outcome)o), (unsigned long long)s->outcomes[o]);
	evbuffer_add_printf(out, "},\"trend\":{");
	json_trend(out, "ttft_p95", t_ttft);
	evbuffer_add(out, ",", 1);
	json_trend(out, "tpot_p50", t_tpot);
	evbuffer_add(out, "}}", 2);
}

/* One series: its name, the summary of the range, the points from p0. */
static int series_json(struct evbuffer *out, const struct history_series *se,
    enum history_kind kind, const char *name, const struct history_view *v,
    size_t p0, uint64_t range_us, double *pts, int first)
{
	static struct history_sum acc, all;

	history_sum_clear(&all);
	evbuffer_add_printf(out, "%s{\"%s\":", first ? "" : ",",
	    kind == HISTORY_SLO ? "slo" : "route");
	jsonw_str(out, kind == HISTORY_INSTANCE ? NULL : name);
	for (size_t p = 0; p < v->points; p++) {
		history_sum_clear(&acc);
		if (se != NULL && history_merge(hist, se, v, p, p + 1, &acc) < 0)
			return -1;
		if (p >= p0)
			point_of(&acc, &pts[(p - p0) * N_V]);
		if (history_sum_merge(&all, &acc) < 0)
			return -1;
	}
	if (kind == HISTORY_SLO)
		evbuffer_add_printf(out, ",\"summary\":{\"good\":%llu,\"bad\":%llu}",
		    (unsigned long long)all.good, (unsigned long long)all.bad);
	else
		summary(out, se, kind == HISTORY_ROUTE ? name : NULL, &all, range_us);
	columns(out, pts, v->points - p0, kind);
	evbuffer_add(out, "}", 1);
	return 0;
}

static int parse_duration(const char *v, uint64_t *us)
{
	return v == NULL ? (*us = 0, 0) : util_parse_duration_us(v, us) < 0 || *us == 0 ? -1 : 0;
}

static int configured(const char *route)
{
	for (size_t i = 0; i < conf->n_routes; i++)
		if (strcmp(conf->routes[i].name, route) == 0)
			return 1;
	return 0;
}

static int cmp_series(const void *x, const void *y)
{
	const struct history_series *a = *(const struct history_series *const *)x;
	const struct history_series *b = *(const struct history_series *const *)y;

	if (history_series_kind(a) != history_series_kind(b))
		return (int)history_series_kind(a) - (int)history_series_kind(b);
	return strcmp(history_series_name(a), history_series_name(b));
}

static int write_doc(struct evbuffer *out, const struct history_view *v, uint64_t range_us,
    const char *route, uint64_t since_ms)
{
	const struct history_series **all = NULL;
	double *pts = NULL;
	char ts[32], rt[32], st[32];
	size_t p0 = 0, n = 0;
	int rc = -1, first = 1;

	while (p0 < v->points && (v->first + p0) * v->step_us / 1000 < since_ms)
		p0++;
	pts = malloc((v->points - p0 + 1) * N_V * sizeof *pts);
	all = malloc((history_n_series(hist) + 1) * sizeof *all);
	if (pts == NULL || all == NULL)
		goto out;
	util_rfc3339_ms(util_wall_ms(), ts);
	util_duration_text(range_us, rt, sizeof rt);
	util_duration_text(v->step_us, st, sizeof st);
	evbuffer_add_printf(out, "{\"range\":\"%s\",\"step\":\"%s\",\"generated_at\":\"%s\","
	    "\"bytes\":%zu,\"t\":[", rt, st, ts, history_bytes(hist));
	for (size_t p = p0; p < v->points; p++)
		evbuffer_add_printf(out, "%s%llu", p > p0 ? "," : "",
		    (unsigned long long)((v->first + p) * v->step_us / 1000));
	evbuffer_add_printf(out, "],\"series\":[");
	if (route != NULL) {
		if (series_json(out, history_find(hist, HISTORY_ROUTE, route), HISTORY_ROUTE,
		    route, v, p0, range_us, pts, 1) < 0)
			goto out;
		evbuffer_add_printf(out, "],\"slos\":[]}\n");
		rc = 0;
		goto out;
	}
	for (size_t i = 0; i < history_n_series(hist); i++)
		all[n++] = history_series_at(hist, i);
	qsort(all, n, sizeof *all, cmp_series);
	/* the instance, then the routes; the SLOs in their own list */
	for (size_t i = 0; i < n && history_series_kind(all[i]) != HISTORY_SLO; i++, first = 0)
		if (series_json(out, all[i], history_series_kind(all[i]),
		    history_series_name(all[i]), v, p0, range_us, pts, first) < 0)
			goto out;
	evbuffer_add_printf(out, "],\"slos\":[");
	first = 1;
	for (size_t i = 0; i < n; i++) {
		if (history_series_kind(all[i]) != HISTORY_SLO)
			continue;
		if (series_json(out, all[i], HISTORY_SLO, history_series_name(all[i]), v, p0,
		    range_us, pts, first) < 0)
			goto out;
		first = 0;
	}
	evbuffer_add_printf(out, "]}\n");
	rc = 0;
out:
	free(pts);
	free(all);
	return rc;
}

int historyd_json(struct evbuffer *out, const char *query, char *why, size_t why_len)
{
	struct evkeyvalq q;
	struct history_view v;
	const char *route, *since;
	uint64_t range_us, step_us, since_ms = 0;
	int rc = -1;

	TAILQ_INIT(&q);
	why[0] = '\0';
	if (hist == NULL) {
		snprintf(why, why_len, "history: not started");
		return -1;
	}
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
		snprintf(why, why_len, "a query that does not parse");
		return -1;
	}
	route = evhttp_find_header(&q, "route");
	since = evhttp_find_header(&q, "since");
	if (parse_duration(evhttp_find_header(&q, "range"), &range_us) < 0) {
		snprintf(why, why_len, "range: a duration such as 15m or 1h");
	} else if (parse_duration(evhttp_find_header(&q, "step"), &step_us) < 0) {
		snprintf(why, why_len, "step: a duration such as 10s or 1m");
	} else if (since != NULL && yconf_parse_uint(since, &since_ms) < 0) {
		snprintf(why, why_len, "since: milliseconds since 1970 (a point's t)");
	} else if (route != NULL && !configured(route) &&
	    history_find(hist, HISTORY_ROUTE, route) == NULL) {
		snprintf(why, why_len, "route: not one configured or kept");
	} else {
		stats_drain();
		history_advance(hist, now_wall());
		if (history_view(hist, now_wall(), range_us, step_us, &v, why, why_len) == 0 &&
		    write_doc(out, &v, range_us ? range_us : v.points * v.step_us, route,
		    since_ms) == 0)
			rc = 0;
		else if (rc < 0 && why[0] == '\0')
			snprintf(why, why_len, "out of memory");
	}
	evhttp_clear_headers(&q);
	return rc;
}
