/* What the statistics look like from outside: /stats JSON, /metrics text,
 * and the window views the alert rules read. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "stats.h"
#include "stats_int.h"
#include "jsonw.h"
#include "promtext.h"
#include "util.h"

/* A string literal, its length counted by the compiler. */
#define ADD(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

/* One output row's window figures, merged from its groups. */
struct agg {
	uint64_t requests, errors, output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	long active, max_active;
	struct r2_sums r2;
	struct hist ttft, tpot, itl, prev_ttft, prev_tpot;
};

static void agg_reset(struct agg *a)
{
	memset(a, 0, offsetof(struct agg, ttft));
	hist_init(&a->ttft);
	hist_init(&a->tpot);
	hist_init(&a->itl);
	hist_init(&a->prev_ttft);
	hist_init(&a->prev_tpot);
}

static void agg_add(struct agg *a, const struct group *g, size_t w, uint64_t cur)
{
	a->active += g->active;
	if (g->max_active > a->max_active)
		a->max_active = g->max_active;
	if (g->win[w] == NULL)
		return;
	for (int i = 0; i < 2 * SLICES; i++) {
		const struct slice *s = &g->win[w][i];
		if (s->index + 2 * SLICES <= cur || s->index > cur)
			continue;
		if (s->index + SLICES <= cur) {      /* the previous window */
			hist_sparse_merge_into(&a->prev_ttft, &s->ttft);
			hist_sparse_merge_into(&a->prev_tpot, &s->tpot);
			continue;
		}
		a->requests += s->requests;
		a->errors += s->errors;
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
		hist_sparse_merge_into(&a->tpot, &s->tpot);
		hist_sparse_merge_into(&a->itl, &s->itl);
	}
}

/* R² of the least-squares line; undefined with fewer than 3 points or no
 * spread in either variable. */
static double r2_of(const struct r2_sums *r)
{
	double n = r->n;
	double cov = n * r->sxy - r->sx * r->sy;
	double vx = n * r->sxx - r->sx * r->sx;
	double vy = n * r->syy - r->sy * r->sy;
	if (n < 3 || vx <= 1e-12 || vy <= 1e-12)
		return -1;
	return cov * cov / (vx * vy);
}

/* ---- JSON ----------------------------------------------------------------- */

static void json_dist(struct evbuffer *out, const char *name, const struct hist *h)
{
	evbuffer_add_printf(out, ",\"%s\":{\"count\":%llu", name,
	    (unsigned long long)h->count);
	if (h->count == 0) {
		evbuffer_add_printf(out, ",\"mean\":null,\"p50\":null,\"p90\":null,"
		    "\"p95\":null,\"p99\":null,\"max\":null}");
		return;
	}
	ADD(out, ",\"mean\":");
	jsonw_fixed(out, hist_mean(h) / 1000.0, 3);
	ADD(out, ",\"p50\":");
	jsonw_fixed(out, hist_quantile(h, 0.50) / 1000.0, 3);
	ADD(out, ",\"p90\":");
	jsonw_fixed(out, hist_quantile(h, 0.90) / 1000.0, 3);
	ADD(out, ",\"p95\":");
	jsonw_fixed(out, hist_quantile(h, 0.95) / 1000.0, 3);
	ADD(out, ",\"p99\":");
	jsonw_fixed(out, hist_quantile(h, 0.99) / 1000.0, 3);
	ADD(out, ",\"max\":");
	jsonw_fixed(out, (double)h->max / 1000.0, 3);
	ADD(out, "}");
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

static void json_trend(struct evbuffer *out, const char *name, double v)
{
	evbuffer_add_printf(out, "\"%s\":", name);
	if (isnan(v))
		ADD(out, "null");
	else
		evbuffer_add_printf(out, "%.4f", v);
}

static void json_row(struct evbuffer *out, const struct group *g, unsigned by,
    const struct agg *a, int first)
{
	double r2 = r2_of(&a->r2);

	evbuffer_add(out, first ? "{" : ",{", first ? 1 : 2);
	if (by & BY_ROUTE) {
		ADD(out, "\"route\":");
		jsonw_str(out, g->key.route);
		ADD(out, ",");
	}
	if (by & BY_TENANT) {
		ADD(out, "\"tenant\":");
		jsonw_str(out, g->key.tenant);
		ADD(out, ",");
	}
	if (by & BY_MODEL) {
		ADD(out, "\"model\":");
		jsonw_str(out, g->key.model);
		ADD(out, ",");
	}
	if (by & BY_UPSTREAM) {
		ADD(out, "\"upstream\":");
		jsonw_str(out, g->key.upstream);
		ADD(out, ",");
	}
	evbuffer_add_printf(out, "\"requests\":%llu,\"errors\":%llu,\"error_rate\":",
	    (unsigned long long)a->requests, (unsigned long long)a->errors);
	jsonw_fixed(out, a->requests ? (double)a->errors / (double)a->requests : -1, 3);
	evbuffer_add_printf(out, ",\"active\":%ld,\"max_active\":%ld", a->active,
	    a->max_active);
	json_dist(out, "ttft_ms", &a->ttft);
	json_dist(out, "tpot_ms", &a->tpot);
	json_dist(out, "itl_ms", &a->itl);
	evbuffer_add_printf(out, ",\"output_tokens\":%llu,\"input_tokens\":%llu,"
	    "\"output_tokens_per_s\":", (unsigned long long)a->output_tokens,
	    (unsigned long long)a->input_tokens);
	jsonw_fixed(out, a->speed_us ? (double)a->speed_tokens * 1e6 / (double)a->speed_us : -1,
	    3);
	ADD(out, ",\"ttft_concurrency_r2\":");
	jsonw_fixed(out, r2, 4);
	ADD(out, ",\"trend\":{");
	json_trend(out, "ttft_p95", trend(&a->ttft, &a->prev_ttft, 0.95));
	ADD(out, ",");
	json_trend(out, "tpot_p50", trend(&a->tpot, &a->prev_tpot, 0.50));
	ADD(out, "}}");
}

static unsigned sort_by;

static int cmp_groups(const void *x, const void *y)
{
	const struct group *a = *(const struct group *const *)x;
	const struct group *b = *(const struct group *const *)y;
	int c = sort_by & BY_ROUTE ? strcmp(a->key.route, b->key.route) : 0;
	if (c == 0 && (sort_by & BY_TENANT))
		c = strcmp(a->key.tenant, b->key.tenant);
	if (c == 0 && (sort_by & BY_MODEL))
		c = strcmp(a->key.model, b->key.model);
	if (c == 0 && (sort_by & BY_UPSTREAM))
		c = strcmp(a->key.upstream, b->key.upstream);
	return c;
}

static struct group **sorted_groups(unsigned by)
{
	const struct stats_state *st = stats_state();

	struct group **v = malloc((st->n_groups + 1) * sizeof *v);
	size_t i = 0;
	if (v == NULL)
		return NULL;
	for (struct group *g = st->groups; g != NULL; g = g->next)
		v[i++] = g;
	sort_by = by;
	qsort(v, st->n_groups, sizeof *v, cmp_groups);
	return v;
}

void stats_json(struct evbuffer *out, int wi, unsigned by)
{
	const struct stats_state *st = stats_state();

	static struct agg a;       /* 35 KiB of histograms: not on the stack */
	struct group **v;
	char ts[32], wt[32];
	uint64_t cur;
	size_t i = 0;
	int first = 1;

	static const char *const fields[] = { "route", "tenant", "model", "upstream" };
	int listed = 0;

	util_rfc3339_ms(util_wall_ms(), ts);
	util_duration_text(st->window_us[wi], wt, sizeof wt);
	evbuffer_add_printf(out, "{\"window\":\"%s\",\"by\":[", wt);
	for (unsigned f = 0; f < 4; f++)
		if (by & (1u << f))
			evbuffer_add_printf(out, "%s\"%s\"", listed++ ? "," : "", fields[f]);
	evbuffer_add_printf(out, "],"
	    "\"generated_at\":\"%s\",\"active_streams\":%ld,\"max_active_streams\":%ld,"
	    "\"groups\":[", ts, atomic_load(&tokentap_active_streams),
	    atomic_load(&tokentap_max_active_streams));
	v = sorted_groups(by);
	cur = stats_clock() / st->slice_us[wi];
	while (v != NULL && i < st->n_groups) {
		size_t j = i;
		agg_reset(&a);
		sort_by = by;
		while (j < st->n_groups && cmp_groups(&v[i], &v[j]) == 0)
			agg_add(&a, v[j++], (size_t)wi, cur);
		/* a group with nothing in the window and nothing active is left out */
		if (a.requests > 0 || a.active > 0) {
			json_row(out, v[i], by, &a, first);
			first = 0;
		}
		i = j;
	}
	free(v);
	ADD(out, "]");
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
	out->ttft_q = out->tpot_q = -1;
	if (st->n_windows == 0)
		return;
	w = window_for(window_us);
	cur = stats_clock() / st->slice_us[w];
	agg_reset(&a);
	for (struct group *g = st->groups; g != NULL; g = g->next)
		if (strcmp(g->key.route, route) == 0 &&
		    (tenant == NULL || strcmp(g->key.tenant, tenant) == 0))
			agg_add(&a, g, w, cur);
	out->requests = a.requests;
	out->errors = a.errors;
	out->ttft_count = a.ttft.count;
	out->tpot_count = a.tpot.count;
	if (a.ttft.count)
		out->ttft_q = hist_quantile(&a.ttft, quantile);
	if (a.tpot.count)
		out->tpot_q = hist_quantile(&a.tpot, quantile);
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
	for (struct group *g = st->groups; g != NULL; g = g->next)
		if (strcmp(g->key.route, route) == 0 && strcmp(g->key.upstream, upstream) == 0)
			agg_add(&a, g, w, stats_clock() / st->slice_us[w]);
	*count = a.ttft.count;
	if (a.ttft.count)
		*value = hist_quantile(&a.ttft, q);
}

void stats_each_route_tenant(uint64_t window_us,
    void (*fn)(void *arg, const char *route, const char *tenant), void *arg)
{
	const struct stats_state *st = stats_state();

	struct group **v = sorted_groups(BY_ROUTE | BY_TENANT);
	(void)window_us;
	for (size_t i = 0; v != NULL && i < st->n_groups; i++) {
		if (i > 0 && strcmp(v[i]->key.route, v[i - 1]->key.route) == 0 &&
		    strcmp(v[i]->key.tenant, v[i - 1]->key.tenant) == 0)
			continue;
		fn(arg, v[i]->key.route, v[i]->key.tenant);
	}
	free(v);
}

/* ---- Prometheus ------------------------------------------------------------ */

static void prom_labels(struct evbuffer *out, const struct group *g)
{
	promtext_label(out, "route", g->key.route);
	ADD(out, ",");
	promtext_label(out, "tenant", g->key.tenant);
	ADD(out, ",");
	promtext_label(out, "model", g->key.model);
	ADD(out, ",");
	promtext_label(out, "upstream", g->key.upstream);
}

static void prom_seconds(struct evbuffer *out, uint64_t us)
{
	evbuffer_add_printf(out, "%llu.%06llu", (unsigned long long)(us / 1000000),
	    (unsigned long long)(us % 1000000));
}

static void prom_histogram(struct evbuffer *out, const char *name,
    const char *help, int which)
{
	const struct stats_state *st = stats_state();

	const struct bounds *b = &st->bounds[which];
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (const struct group *g = st->groups; g != NULL; g = g->next) {
		const struct prom_hist *p = &g->prom[which];
		uint64_t cum = 0;
		if (p->counts == NULL || p->count == 0)
			continue;
		for (size_t i = 0; i <= b->n; i++) {
			cum += p->counts[i];
			evbuffer_add_printf(out, "%s_bucket{", name);
			prom_labels(out, g);
			ADD(out, ",le=\"");
			if (i < b->n)
				prom_seconds(out, b->us[i]);
			else
				ADD(out, "+Inf");
			evbuffer_add_printf(out, "\"} %llu\n", (unsigned long long)cum);
		}
		evbuffer_add_printf(out, "%s_sum{", name);
		prom_labels(out, g);
		ADD(out, "} ");
		prom_seconds(out, p->sum_us);
		evbuffer_add_printf(out, "\n%s_count{", name);
		prom_labels(out, g);
		evbuffer_add_printf(out, "} %llu\n", (unsigned long long)p->count);
	}
}

static void prom_counter(struct evbuffer *out, const char *name, const char *help,
    size_t field)
{
	const struct stats_state *st = stats_state();

	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (const struct group *g = st->groups; g != NULL; g = g->next) {
		uint64_t v = *(const uint64_t *)((const char *)g + field);
		evbuffer_add_printf(out, "%s{", name);
		prom_labels(out, g);
		evbuffer_add_printf(out, "} %llu\n", (unsigned long long)v);
	}
}

void stats_prometheus(struct evbuffer *out)
{
	const struct stats_state *st = stats_state();

	static const char *const thr[] = {
		"ttft_warning", "ttft_critical", "tpot_warning", "tpot_critical"
	};

	prom_histogram(out, "tokentap_time_to_first_token_seconds",
	    "Time from the request's first byte to the first token-bearing event.", PROM_TTFT);
	prom_histogram(out, "tokentap_time_per_output_token_seconds",
	    "(last token - first token) / (output tokens - 1), per request.", PROM_TPOT);
	prom_histogram(out, "tokentap_inter_token_latency_seconds",
	    "Gaps between consecutive token-bearing events.", PROM_ITL);
	prom_histogram(out, "tokentap_request_duration_seconds",
	    "Time from the request's first byte to the end of the response.", PROM_DURATION);
	prom_histogram(out, "tokentap_upstream_connect_seconds",
	    "Time to open a new upstream connection (TCP, plus TLS).", PROM_CONNECT);

	evbuffer_add_printf(out, "# HELP tokentap_requests_total Requests by outcome.\n"
	    "# TYPE tokentap_requests_total counter\n");
	for (const struct group *g = st->groups; g != NULL; g = g->next)
		for (int o = 0; o < OUTCOME_COUNT; o++) {
			if (g->requests[o] == 0 && o != OUTCOME_OK)
				continue;
			ADD(out, "tokentap_requests_total{");
			prom_labels(out, g);
			evbuffer_add_printf(out, ",outcome=\"%s\"} %llu\n",
			    meter_outcome_name(o), (unsigned long long)g->requests[o]);
		}
	prom_counter(out, "tokentap_output_tokens_total", "Output tokens.",
	    offsetof(struct group, output_tokens));
	prom_counter(out, "tokentap_input_tokens_total", "Input (prompt) tokens reported.",
	    offsetof(struct group, input_tokens));

	evbuffer_add_printf(out, "# HELP tokentap_threshold_exceeded_total Requests over "
	    "a threshold.\n# TYPE tokentap_threshold_exceeded_total counter\n");
	for (const struct group *g = st->groups; g != NULL; g = g->next)
		for (int i = 0; i < 4; i++) {
			ADD(out, "tokentap_threshold_exceeded_total{");
			prom_labels(out, g);
			evbuffer_add_printf(out, ",threshold=\"%s\"} %llu\n", thr[i],
			    (unsigned long long)g->exceeded[i]);
		}

	evbuffer_add_printf(out, "# HELP tokentap_active_streams Streams in flight.\n"
	    "# TYPE tokentap_active_streams gauge\n");
	for (const struct group *g = st->groups; g != NULL; g = g->next) {
		ADD(out, "tokentap_active_streams{");
		prom_labels(out, g);
		evbuffer_add_printf(out, "} %ld\n", g->active);
	}
	evbuffer_add_printf(out, "# HELP tokentap_active_connections Client connections open.\n"
	    "# TYPE tokentap_active_connections gauge\ntokentap_active_connections %ld\n",
	    atomic_load(&tokentap_active_connections));
	evbuffer_add_printf(out, "# HELP tokentap_stats_dropped_total Statistics records lost "
	    "(a worker's spill full while the reader was away; logged).\n"
	    "# TYPE tokentap_stats_dropped_total counter\ntokentap_stats_dropped_total %llu\n",
	    (unsigned long long)st->dropped);
	evbuffer_add_printf(out, "# HELP tokentap_client_backlog_bytes Bytes waiting for "
	    "slow clients (limits.client_backlog bounds them).\n"
	    "# TYPE tokentap_client_backlog_bytes gauge\ntokentap_client_backlog_bytes %ld\n",
	    atomic_load(&tokentap_client_backlog));
	evbuffer_add_printf(out, "# HELP tokentap_build_info Build information.\n"
	    "# TYPE tokentap_build_info gauge\ntokentap_build_info{version=\"%s\"} 1\n",
	    TOKENTAP_VERSION);
}
