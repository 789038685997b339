/* SPDX-License-Identifier: Apache-2.0 */
#include "metrics.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dialect_names.h"
#include "sample.h"
#include "vitals.h"
#include "log.h"
#include "meter.h"
#include "nhist.h"
#include "promout.h"
#include "tenant.h"
#include "util.h"

/* ---- bucket sets --------------------------------------------------------- */

/* Classic bounds (docs/contract.md §5), in µs (tokens for B_TOKENS). They hold
 * the OpenTelemetry GenAI advice; from 2.5 ms to 2 min for TTFT and 1 ms to
 * 2.5 s for TPOT and ITL adjacent bounds are at most 1.6x apart (1.5x from 5
 * ms, mostly 1.2-1.33x), so histogram_quantile on them stays within about a
 * quarter of the truth even when the values crowd into one bucket; every
 * threshold configured is added; past the table each set doubles until it is
 * above the longest timeout that bounds its values. */
enum { B_TTFT, B_TPOT, B_DURATION, B_CONNECT, B_TOKENS, B_OVERHEAD, B_COUNT };

#define BOUNDS_MAX 80

struct bset {
	size_t n;
	uint64_t v[BOUNDS_MAX];
	uint16_t octave[65];       /* the first bound >= 2^k (bucket_of) */
};

static const double ttft_table[] = { 0.001, 0.0025, 0.004, 0.005, 0.0075, 0.01, 0.015,
	0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5,
	0.6, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 10, 15, 20, 30, 45, 60, 90, 120 };
static const double tpot_table[] = { 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.006,
	0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1,
	0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 1, 1.5, 2, 2.5 };
/* OpenTelemetry's gen_ai.client.operation.duration advice as it is */
static const double duration_table[] = { 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
	1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92 };
static const double connect_table[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };
/* gen_ai.client.token.usage advice, in tokens */
static const double tokens_table[] = { 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536,
	262144, 1048576, 4194304, 16777216, 67108864 };

/* ---- families ------------------------------------------------------------ */

/* The histograms kept per label set; a family names one of them. */
enum { H_TTFT, H_TPOT, H_ITL, H_DURATION, H_TOKENS_IN, H_TOKENS_OUT, H_TTFO,
	H_TTFT_SERVER, H_TTFO_SERVER, H_TTFC, H_COUNT };

/* Which metrics.names exports a family. */
enum { N_TOKENTAP = 1, N_OTEL = 2, N_ANY = 3 };

struct hfamily {
	const char *name;
	const char *help;
	int slot;               /* H_* */
	int bset;               /* B_* */
	int names;              /* N_* */
	const char *token_type; /* gen_ai.token.type, for the token histogram */
};

/* One line per exported histogram; the OpenTelemetry ones are the GenAI
 * semantic conventions' client metrics (tokentap is the model's client;
 * docs/alerts-and-metrics.md, "OpenTelemetry"), names and units. A figure the conventions
 * have no name for (TTFT from the client's first byte, TPOT per request)
 * keeps tokentap's under either names. Rows of one name follow each
 * other (one family). */
static const struct hfamily hfamilies[] = {
	{ "tokentap_time_to_first_token_seconds",
	  "Time from the request's first byte to the first token-bearing event.",
	  H_TTFT, B_TTFT, N_ANY, NULL },
	{ "tokentap_time_per_output_token_seconds",
	  "(last token - first token) / (output tokens - 1), per request.",
	  H_TPOT, B_TPOT, N_ANY, NULL },
	{ "tokentap_inter_token_latency_seconds",
	  "Gaps between consecutive token-bearing events.", H_ITL, B_TPOT, N_TOKENTAP,
	  NULL },
	/* OpenTelemetry has no name for it: exported under either */
	{ "tokentap_time_to_first_output_token_seconds",
	  "Time from the request's first byte to the first token-bearing event "
	  "that is not reasoning.", H_TTFO, B_TTFT, N_ANY, NULL },
	/* the server side's (sample.h), what the TTFTHigh and TTFOHigh rules
	 * judge, under either names; TTFO's only with a TTFO threshold */
	{ "tokentap_time_to_first_token_server_seconds",
	  "Time from the request's last byte to the first token-bearing event: "
	  "TTFT without the client's upload, what the TTFTHigh alerts judge.",
	  H_TTFT_SERVER, B_TTFT, N_ANY, NULL },
	{ "tokentap_time_to_first_output_token_server_seconds",
	  "Time from the request's last byte to the first token-bearing event "
	  "that is not reasoning, what the TTFOHigh alerts judge.",
	  H_TTFO_SERVER, B_TTFT, N_ANY, NULL },
	{ "tokentap_request_duration_seconds",
	  "Time from the request's first byte to the end of the response.",
	  H_DURATION, B_DURATION, N_TOKENTAP, NULL },
	{ "gen_ai_client_operation_time_to_first_chunk_seconds",
	  "Time from tokentap's send of the request to the first chunk with content "
	  "(gen_ai.client.operation.time_to_first_chunk).",
	  H_TTFC, B_TTFT, N_OTEL, NULL },
	{ "gen_ai_client_operation_time_per_output_chunk_seconds",
	  "Gaps between consecutive chunks with content "
	  "(gen_ai.client.operation.time_per_output_chunk).",
	  H_ITL, B_TPOT, N_OTEL, NULL },
	{ "gen_ai_client_operation_duration_seconds",
	  "GenAI operation duration (gen_ai.client.operation.duration).",
	  H_DURATION, B_DURATION, N_OTEL, NULL },
	{ "gen_ai_client_token_usage",
	  "Tokens used per request (gen_ai.client.token.usage).",
	  H_TOKENS_IN, B_TOKENS, N_OTEL, "input" },
	{ "gen_ai_client_token_usage",
	  "Tokens used per request (gen_ai.client.token.usage).",
	  H_TOKENS_OUT, B_TOKENS, N_OTEL, "output" },
};

/* The code label: the status class the client got. */
enum { CODE_NONE, CODE_1XX, CODE_2XX, CODE_3XX, CODE_4XX, CODE_5XX, CODE_COUNT };
static const char *const code_names[CODE_COUNT] = {
	"none", "1xx", "2xx", "3xx", "4xx", "5xx"
};

/* accesslog.h's ACCESSLOG_* bits, in order; the TTFO two are exported
 * only where a TTFO threshold is configured (M.n_thresholds). */
#define THRESHOLDS 6
static const char *const threshold_names[THRESHOLDS] = {
	"ttft_warning", "ttft_critical", "tpot_warning", "tpot_critical",
	"ttfo_warning", "ttfo_critical"
};

/* The outcomes a request without a token is counted by. */
static const enum meter_outcome no_token_outcomes[] = {
	OUTCOME_OK, OUTCOME_CLIENT_ABORT, OUTCOME_UPSTREAM_ABORT,
	OUTCOME_UPSTREAM_ERROR, OUTCOME_TIMEOUT
};

/* Series per label set besides the histograms and the thresholds: output
 * and input tokens, token events and their tokens, active and stalled
 * streams, stalls, buffered streams, requests without a token by outcome.
 * Each requests_total pair adds one. */
#define FIXED_SERIES (8 + UTIL_ARRAY_LEN(no_token_outcomes))

/* The stages of tokentap_proxy_overhead_seconds. */
enum { OVH_REQUEST, OVH_READ, OVH_COUNT };
static const char *const stage_names[OVH_COUNT] = { "request", "read" };

#define DIALECT_NONE 255u      /* the folded label set's provider: "_other" */

/* ---- the state ----------------------------------------------------------- */

struct mhist {
	uint64_t *counts;          /* per bound, +Inf last */
	uint64_t sum, count;
	struct nhist native;
};

struct mroute;

struct mset {
	struct mset *hnext, *next, *prev;
	uint64_t hash;
	uint64_t refs;             /* statistics groups that resolve to it */
	uint64_t last_us;          /* when the last group that let it go used it */
	char *tenant, *model, *upstream;
	unsigned dialect, op;
	int sink;                  /* its route's (_other, _other): reserved */
	struct mroute *route;
	uint64_t requests[OUTCOME_COUNT][CODE_COUNT];
	uint64_t output_tokens, input_tokens;
	uint64_t token_events, token_event_tokens;   /* streams that counted them */
	uint64_t exceeded[THRESHOLDS];
	long active, stalled;
	uint64_t stalls, buffered;
	uint64_t ttft_stamped, ttft_uncertain;   /* sample.h */
	uint64_t no_token[OUTCOME_COUNT];
	struct mhist h[H_COUNT];
};

struct mroute {
	struct mroute *next;
	char *name;
	struct mhist connect;      /* per upstream: not per tenant and model */
	struct mhist ovh[OVH_COUNT];   /* the proxy's own: per route too */
	struct mset *sink;
};

#define SET_BUCKETS 4096

static struct {
	int configured;
	const struct conf *conf;   /* own reference */
	enum metrics_names names;
	int otlp;                  /* OTLP metrics: every histogram is kept */
	struct bset b[B_COUNT];
	unsigned n_thresholds;     /* 4, or 6 with a TTFO threshold */
	uint64_t max_series, used;
	uint64_t folded;
	uint64_t epoch;            /* label sets that went: room again */
	struct mset *table[SET_BUCKETS];
	struct mset *sets;
	struct mroute *routes;
} M;

static int family_on(const struct hfamily *f)
{
	if (f->slot == H_TTFO_SERVER && M.n_thresholds < THRESHOLDS)
		return 0;
	return (f->names & (M.names == METRICS_NAMES_TOKENTAP ? N_TOKENTAP :
	    M.names == METRICS_NAMES_OTEL ? N_OTEL : N_TOKENTAP | N_OTEL)) != 0;
}

/* A histogram kept when a family exported under the names in force reads it. */
static int slot_on(int slot)
{
	if (M.otlp)
		return 1;
	for (size_t i = 0; i < UTIL_ARRAY_LEN(hfamilies); i++)
		if (hfamilies[i].slot == slot && family_on(&hfamilies[i]))
			return 1;
	return 0;
}

static int slot_bset(int slot)
{
	for (size_t i = 0; i < UTIL_ARRAY_LEN(hfamilies); i++)
		if (hfamilies[i].slot == slot)
			return hfamilies[i].bset;
	return B_TTFT;
}

/* What one label set may export: each family's buckets, +Inf, _sum and
 * _count, and the fixed series; a sink every requests_total pair too. */
static uint64_t set_cost(int sink)
{
	uint64_t n = FIXED_SERIES + M.n_thresholds;
	for (size_t i = 0; i < UTIL_ARRAY_LEN(hfamilies); i++)
		if (family_on(&hfamilies[i]))
			n += M.b[hfamilies[i].bset].n + 3;
	return sink ? n + OUTCOME_COUNT * CODE_COUNT : n;
}

static uint64_t route_cost(void)
{
	return M.b[B_CONNECT].n + 3 + OVH_COUNT * (M.b[B_OVERHEAD].n + 3) + set_cost(1);
}

uint64_t metrics_series_used(void)
{
	return M.used;
}

/* ---- bounds --------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void bounds_add(struct bset *b, uint64_t v)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->v[i] == v)
			return;
	if (v != 0 && b->n < BOUNDS_MAX)
		b->v[b->n++] = v;
}

static void bounds_table(struct bset *b, const double *t, size_t n, double unit)
{
	b->n = 0;
	for (size_t i = 0; i < n; i++)
		bounds_add(b, (uint64_t)(t[i] * unit + 0.5));
}

/* Doubles the top bound until it is above limit (the values above the
 * longest timeout that bounds them would all sit in +Inf otherwise). */
static void bounds_above(struct bset *b, uint64_t limit)
{
	qsort(b->v, b->n, sizeof b->v[0], cmp_u64);
	while (b->n > 0 && b->n < BOUNDS_MAX && b->v[b->n - 1] <= limit) {
		b->v[b->n] = b->v[b->n - 1] * 2;
		b->n++;
	}
}

static void timeouts_max(const struct conf_timeouts *t, uint64_t *any, uint64_t *idle,
    uint64_t *connect)
{
	uint64_t v[] = { t->first_byte_us, t->idle_us, t->connect_us };
	for (size_t i = 0; i < UTIL_ARRAY_LEN(v); i++)
		if (v[i] > *any)
			*any = v[i];
	if (t->idle_us > *idle)
		*idle = t->idle_us;
	if (t->connect_us > *connect)
		*connect = t->connect_us;
}

/* docs/contract.md §5: every threshold configured anywhere is a bound, so the
 * share of requests over a threshold is exact in PromQL; every SLO target too,
 * so a fleet's attainment from the buckets is exact. */
static void thresholds_bounds(const struct conf *c, struct bset *b)
{
	for (size_t i = 0; i <= c->n_routes; i++) {
		const struct conf_thresholds *t = i < c->n_routes ?
		    &c->routes[i].thresholds : &c->thresholds;
		bounds_add(&b[B_TTFT], t->ttft_warning_us);
		bounds_add(&b[B_TTFT], t->ttft_critical_us);
		bounds_add(&b[B_TPOT], t->tpot_warning_us);
		bounds_add(&b[B_TPOT], t->tpot_critical_us);
		bounds_add(&b[B_TTFT], t->ttfo_warning_us);   /* TTFO's are B_TTFT too */
		bounds_add(&b[B_TTFT], t->ttfo_critical_us);
	}
	for (size_t i = 0; i < c->n_slos; i++) {
		bounds_add(&b[B_TTFT], c->slos[i].targets.us[GOODPUT_TTFT]);
		bounds_add(&b[B_TPOT], c->slos[i].targets.us[GOODPUT_TPOT]);
		bounds_add(&b[B_TTFT], c->slos[i].targets.us[GOODPUT_TTFO]);
	}
}

/* Where a value's bucket is looked for from: the first bound at or above
 * the value's power of two (the bounds before it are all below it). */
static void bounds_octaves(struct bset *b)
{
	size_t i = 0;

	for (unsigned k = 0; k <= 64; k++) {
		while (i < b->n && k < 64 && b->v[i] < (1ull << k))
			i++;
		b->octave[k] = (uint16_t)(k < 64 ? i : b->n);
	}
}

static void make_bounds(const struct conf *c, struct bset *b)
{
	uint64_t any = 0, idle = 0, connect = 0;

	memset(b, 0, B_COUNT * sizeof *b);
	bounds_table(&b[B_TTFT], ttft_table, UTIL_ARRAY_LEN(ttft_table), 1e6);
	bounds_table(&b[B_TPOT], tpot_table, UTIL_ARRAY_LEN(tpot_table), 1e6);
	bounds_table(&b[B_DURATION], duration_table, UTIL_ARRAY_LEN(duration_table), 1e6);
	bounds_table(&b[B_CONNECT], connect_table, UTIL_ARRAY_LEN(connect_table), 1e6);
	bounds_table(&b[B_TOKENS], tokens_table, UTIL_ARRAY_LEN(tokens_table), 1);
	/* µs, powers of two to 65.536 ms: edges of the per-read coarse
	 * histogram (vitals.h), so its counts land in the right bucket */
	for (unsigned e = 0; e <= 16; e++)
		bounds_add(&b[B_OVERHEAD], 1ull << e);
	thresholds_bounds(c, b);
	timeouts_max(&c->timeouts, &any, &idle, &connect);
	for (size_t i = 0; i < c->n_routes; i++)
		timeouts_max(&c->routes[i].timeouts, &any, &idle, &connect);
	bounds_above(&b[B_TTFT], any);
	bounds_above(&b[B_DURATION], any);
	bounds_above(&b[B_TPOT], idle);
	bounds_above(&b[B_CONNECT], connect);
	qsort(b[B_TOKENS].v, b[B_TOKENS].n, sizeof b[B_TOKENS].v[0], cmp_u64);
	for (int i = 0; i < B_COUNT; i++)
		bounds_octaves(&b[i]);
}

/* ---- histograms ----------------------------------------------------------- */

static void mhist_init(struct mhist *h, int bset)
{
	h->counts = calloc(M.b[bset].n + 1, sizeof *h->counts);
	h->sum = h->count = 0;
	memset(&h->native, 0, sizeof h->native);
}

static void mhist_free(struct mhist *h)
{
	free(h->counts);
	nhist_free(&h->native);
	memset(h, 0, sizeof *h);
}

/* n values of v, their sum counted apart (mhist_observe adds v's). */
/* The classic bucket of v: the first bound >= v ("le" is inclusive),
 * looked for from the first bound of v's power of two, a step or two (the
 * bounds crowd where values are: 4, 5, 6 ms). */
static size_t bucket_of(const struct bset *b, uint64_t v)
{
	size_t lo = b->octave[v ? 63 - __builtin_clzll(v) : 0];

	while (lo < b->n && b->v[lo] < v)
		lo++;
	return lo;
}

static void mhist_count(struct mhist *h, int bset, uint64_t v, uint64_t n)
{
	if (h->counts == NULL)
		return;
	h->counts[bucket_of(&M.b[bset], v)] += n;
	h->count += n;
	if (bset == B_TOKENS)
		nhist_record_n(&h->native, (double)v, n);
	else
		nhist_record_us_n(&h->native, v, n);
}

static void mhist_observe(struct mhist *h, int bset, uint64_t v)
{
	if (h->counts == NULL)
		return;
	mhist_count(h, bset, v, 1);
	h->sum += v;
}

static void route_hists_init(struct mroute *r)
{
	mhist_init(&r->connect, B_CONNECT);
	for (int i = 0; i < OVH_COUNT; i++)
		mhist_init(&r->ovh[i], B_OVERHEAD);
}

static void route_hists_free(struct mroute *r)
{
	mhist_free(&r->connect);
	for (int i = 0; i < OVH_COUNT; i++)
		mhist_free(&r->ovh[i]);
}

static void set_hists_init(struct mset *m)
{
	for (int i = 0; i < H_COUNT; i++)
		if (slot_on(i))
			mhist_init(&m->h[i], slot_bset(i));
}

static void set_hists_free(struct mset *m)
{
	for (int i = 0; i < H_COUNT; i++)
		mhist_free(&m->h[i]);
}

/* ---- label sets ------------------------------------------------------------ */

static uint64_t hash_of(const char *route, const char *tenant, const char *model,
    const char *upstream, unsigned dialect, unsigned op)
{
	uint64_t h = UTIL_FNV_INIT;
	const char *parts[4] = { route, tenant, model, upstream };
	for (int p = 0; p < 4; p++)
		h = util_fnv_str(h, parts[p]);
	return util_fnv_byte(util_fnv_byte(h, dialect), op);
}

static struct mroute *route_get(const char *name)
{
	struct mroute *r;
	for (r = M.routes; r != NULL; r = r->next)
		if (strcmp(r->name, name) == 0)
			return r;
	if ((r = calloc(1, sizeof *r)) == NULL || (r->name = strdup(name)) == NULL) {
		free(r);
		return NULL;
	}
	route_hists_init(r);
	r->next = M.routes;
	M.routes = r;
	/* its _other label set and connect histogram are reserved up front:
	 * folding never goes over the budget */
	M.used += route_cost();
	return r;
}

static struct mset *set_find(struct mroute *r, const char *tenant, const char *model,
    const char *upstream, unsigned dialect, unsigned op, uint64_t h)
{
	for (struct mset *m = M.table[h % SET_BUCKETS]; m != NULL; m = m->hnext)
		if (m->hash == h && m->route == r && m->dialect == dialect && m->op == op &&
		    strcmp(m->tenant, tenant) == 0 && strcmp(m->model, model) == 0 &&
		    strcmp(m->upstream, upstream) == 0)
			return m;
	return NULL;
}

static void set_free(struct mset *m)
{
	set_hists_free(m);
	free(m->tenant);
	free(m->model);
	free(m->upstream);
	free(m);
}

static struct mset *set_new(struct mroute *r, const char *tenant, const char *model,
    const char *upstream, unsigned dialect, unsigned op, uint64_t h, int sink)
{
	struct mset *m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	if ((m->tenant = strdup(tenant)) == NULL || (m->model = strdup(model)) == NULL ||
	    (m->upstream = strdup(upstream)) == NULL) {
		set_free(m);
		return NULL;
	}
	m->hash = h;
	m->route = r;
	m->dialect = dialect;
	m->op = op;
	m->sink = sink;
	set_hists_init(m);
	m->hnext = M.table[h % SET_BUCKETS];
	M.table[h % SET_BUCKETS] = m;
	m->next = M.sets;
	if (M.sets != NULL)
		M.sets->prev = m;
	M.sets = m;
	if (!sink)
		M.used += set_cost(0);
	return m;
}

static struct mset *sink_of(struct mroute *r)
{
	if (r->sink == NULL) {
		unsigned d = M.names == METRICS_NAMES_TOKENTAP ? 0 : DIALECT_NONE;
		r->sink = set_new(r, "_other", "_other", "_other", d, 0,
		    hash_of(r->name, "_other", "_other", "_other", d, 0), 1);
	}
	return r->sink;
}

struct mset *metrics_resolve(const char *route, const char *tenant,
    const char *model, const char *upstream, unsigned dialect, unsigned op,
    int *folded)
{
	struct mroute *r = route_get(route);
	const char *tl;
	const char *cand[2][2];

	*folded = 0;
	if (r == NULL)
		return NULL;
	if (M.names == METRICS_NAMES_TOKENTAP)
		dialect = op = 0;
	tl = tenant_metrics_label(M.conf, tenant);
	cand[0][0] = tl;
	cand[0][1] = model;
	cand[1][0] = tl;
	cand[1][1] = "_other";
	for (int i = 0; i < 2; i++) {
		uint64_t h = hash_of(route, cand[i][0], cand[i][1], upstream, dialect, op);
		struct mset *m = set_find(r, cand[i][0], cand[i][1], upstream, dialect, op, h);
		*folded = i > 0;
		if (m == NULL && strcmp(cand[i][0], "_other") == 0 &&
		    strcmp(cand[i][1], "_other") == 0)
			break;
		if (m == NULL && M.used + set_cost(0) <= M.max_series)
			m = set_new(r, cand[i][0], cand[i][1], upstream, dialect, op, h, 0);
		if (m != NULL) {
			m->refs++;
			return m;
		}
	}
	*folded = strcmp(cand[0][0], "_other") != 0 || strcmp(cand[0][1], "_other") != 0;
	return sink_of(r);
}

uint64_t metrics_epoch(void)
{
	return M.epoch;
}

void metrics_release(struct mset *m, uint64_t last_us)
{
	if (m == NULL || m->sink)
		return;
	if (m->refs > 0)
		m->refs--;
	if (last_us > m->last_us)
		m->last_us = last_us;
}

void metrics_move(struct mset *from, struct mset *to, long active, long stalled)
{
	if (from != NULL) {
		from->active -= active;
		from->stalled -= stalled;
	}
	if (to != NULL) {
		to->active += active;
		to->stalled += stalled;
	}
}

/* The series m takes from the budget: its own, and a requests_total pair
 * each. */
static uint64_t set_used(const struct mset *m)
{
	uint64_t n = set_cost(0);

	for (int o = 0; o < OUTCOME_COUNT; o++)
		for (int k = 0; k < CODE_COUNT; k++)
			n += m->requests[o][k] != 0;
	return n;
}

static void set_drop(struct mset *m)
{
	struct mset **p;

	for (p = &M.table[m->hash % SET_BUCKETS]; *p != NULL; p = &(*p)->hnext)
		if (*p == m) {
			*p = m->hnext;
			break;
		}
	if (m->prev != NULL)
		m->prev->next = m->next;
	else
		M.sets = m->next;
	if (m->next != NULL)
		m->next->prev = m->prev;
	M.used -= set_used(m);
	set_free(m);
	M.epoch++;
}

void metrics_sweep(uint64_t now_us, uint64_t expiration_us)
{
	struct mset *m, *next;

	if (expiration_us == 0)
		return;
	for (m = M.sets; m != NULL; m = next) {
		next = m->next;
		if (!m->sink && m->refs == 0 && m->active == 0 && m->stalled == 0 &&
		    now_us - m->last_us >= expiration_us)
			set_drop(m);
	}
}

static unsigned code_of(unsigned status)
{
	return status >= 100 && status < 600 ? status / 100 : CODE_NONE;
}

/* A requests_total pair not seen yet in m costs a series: when it does not
 * fit, the request counts under the route's _other label set. */
static struct mset *room_for(struct mset *m, unsigned outcome, unsigned code)
{
	if (m->sink || m->requests[outcome][code] != 0)
		return m;
	if (M.used + 1 <= M.max_series) {
		M.used++;
		return m;
	}
	return sink_of(m->route);
}

/* TTFO, stalls, buffering, no token, and the proxy's own overhead. */
static void request_health(struct mset *m, const struct sample *o)
{
	struct mroute *r = m->route;

	m->stalls += o->stalls;
	m->buffered += o->buffered != 0;
	m->ttft_stamped += o->ttft_stamped != 0;
	m->ttft_uncertain += o->ttft_uncertain != 0;
	if (o->no_token)
		m->no_token[o->outcome]++;
	if (o->ttfo_us >= 0)
		mhist_observe(&m->h[H_TTFO], B_TTFT, (uint64_t)o->ttfo_us);
	if (o->ttfo_server_us >= 0)
		mhist_observe(&m->h[H_TTFO_SERVER], B_TTFT, (uint64_t)o->ttfo_server_us);
	if (o->ovh_request_us >= 0)
		mhist_observe(&r->ovh[OVH_REQUEST], B_OVERHEAD, (uint64_t)o->ovh_request_us);
	if (r->ovh[OVH_READ].counts == NULL)
		return;
	/* each read at its bucket's middle (within 12 %); the bounds are the
	 * buckets' edges, so the classic counts are exact; the sum is exact */
	for (unsigned i = 0; i < VITALS_OVH_BUCKETS; i++)
		if (o->ovh_read[i] != 0)
			mhist_count(&r->ovh[OVH_READ], B_OVERHEAD, vitals_read_mid(i),
			    o->ovh_read[i]);
	r->ovh[OVH_READ].sum += o->ovh_read_sum_us;
}

void metrics_request(struct mset *m, int folded, const struct sample *o)
{
	unsigned code = code_of(o->status), outcome = o->outcome;
	struct mset *own = m;

	if (m == NULL || outcome >= OUTCOME_COUNT)
		return;
	if ((m = room_for(m, outcome, code)) == NULL)
		return;
	if (folded || m != own)
		M.folded++;
	m->requests[outcome][code]++;
	if (o->output_tokens > 0)
		m->output_tokens += (uint64_t)o->output_tokens;
	if (o->input_tokens > 0)
		m->input_tokens += (uint64_t)o->input_tokens;
	if (o->token_source == TOKENS_USAGE || o->token_source == TOKENS_CONTINUOUS) {
		m->token_events += o->token_events;
		m->token_event_tokens += o->output_tokens > 0 ? (uint64_t)o->output_tokens : 0;
	}
	for (int i = 0; i < THRESHOLDS; i++)
		if (o->exceeded & (1u << i))
			m->exceeded[i]++;
	request_health(m, o);
	if (o->ttft_us >= 0)
		mhist_observe(&m->h[H_TTFT], B_TTFT, (uint64_t)o->ttft_us);
	if (o->ttft_server_us >= 0)
		mhist_observe(&m->h[H_TTFT_SERVER], B_TTFT, (uint64_t)o->ttft_server_us);
	if (o->ttfc_us >= 0)
		mhist_observe(&m->h[H_TTFC], B_TTFT, (uint64_t)o->ttfc_us);
	if (o->tpot_us >= 0)
		mhist_observe(&m->h[H_TPOT], B_TPOT, (uint64_t)o->tpot_us);
	if (o->duration_us >= 0)
		mhist_observe(&m->h[H_DURATION], B_DURATION, (uint64_t)o->duration_us);
	if (o->input_tokens >= 0)
		mhist_observe(&m->h[H_TOKENS_IN], B_TOKENS, (uint64_t)o->input_tokens);
	if (o->output_tokens >= 0)
		mhist_observe(&m->h[H_TOKENS_OUT], B_TOKENS, (uint64_t)o->output_tokens);
	if (o->connect_us >= 0)
		mhist_observe(&m->route->connect, B_CONNECT, (uint64_t)o->connect_us);
}

/* The classic buckets of token gaps (the native ones come through
 * metrics_itl_native, counted by bucket). */
void metrics_itl(struct mset *m, const uint32_t *gaps, unsigned n)
{
	struct mhist *h;

	if (m == NULL || n == 0 || (h = &m->h[H_ITL])->counts == NULL)
		return;
	for (unsigned i = 0; i < n; i++) {
		h->counts[bucket_of(&M.b[B_TPOT], gaps[i])]++;
		h->sum += gaps[i];
	}
	h->count += n;
}

struct nhist *metrics_itl_native(struct mset *m)
{
	return m != NULL && m->h[H_ITL].counts != NULL ? &m->h[H_ITL].native : NULL;
}

void metrics_active(struct mset *m, int delta)
{
	if (m != NULL)
		m->active += delta;
}

void metrics_stall(struct mset *m, int delta)
{
	if (m == NULL)
		return;
	m->stalled += delta;
	m->stalls += delta > 0;
}

/* ---- configuration ------------------------------------------------------- */

static void reset_hists(void)
{
	for (struct mset *m = M.sets; m != NULL; m = m->next) {
		set_hists_free(m);
		set_hists_init(m);
	}
	for (struct mroute *r = M.routes; r != NULL; r = r->next) {
		route_hists_free(r);
		route_hists_init(r);
	}
}

/* What the label sets there are may export under the bounds in force. */
static void recount(void)
{
	M.used = 0;
	for (struct mroute *r = M.routes; r != NULL; r = r->next)
		M.used += route_cost();
	for (struct mset *m = M.sets; m != NULL; m = m->next)
		if (!m->sink)
			M.used += set_used(m);
}

static int ttfo_thresholds(const struct conf *c)
{
	for (size_t i = 0; i <= c->n_routes; i++) {
		const struct conf_thresholds *t = i < c->n_routes ?
		    &c->routes[i].thresholds : &c->thresholds;
		if (t->ttfo_warning_us > 0 || t->ttfo_critical_us > 0)
			return 1;
	}
	return 0;
}

void metrics_configure(const struct conf *c)
{
	struct bset nb[B_COUNT];

	make_bounds(c, nb);
	if (!M.configured)
		nhist_prepare();
	if (M.configured && c->metrics_names != (int)M.names)
		log_warn("metrics: metrics.names changes on restart only; "
		    "the names stay as they were");
	else
		M.names = (enum metrics_names)c->metrics_names;
	if (M.configured && memcmp(nb, M.b, sizeof nb) != 0) {
		log_warn("metrics: histogram bounds changed with the thresholds or "
		    "timeouts; the Prometheus histograms start anew");
		memcpy(M.b, nb, sizeof nb);
		reset_hists();
	}
	memcpy(M.b, nb, sizeof nb);
	/* at start: a reload does not change which histograms are kept */
	if (!M.configured)
		M.otlp = c->otel.metrics > 0 && c->otel.metrics_url != NULL;
	M.n_thresholds = ttfo_thresholds(c) ? THRESHOLDS : 4;
	M.max_series = c->metrics_max_series;
	if (M.conf != NULL)
		conf_unref((struct conf *)M.conf);
	M.conf = conf_ref((struct conf *)c);
	M.configured = 1;
	/* each route's folded label set is there before any request: routes
	 * that come with a reload get theirs now */
	for (size_t i = 0; i < c->n_routes; i++)
		route_get(c->routes[i].name);
	route_get("-");
	recount();
	if (M.used > M.max_series)
		log_warn("metrics: metrics.max_series %llu is below the %llu series the "
		    "routes' own label sets take; those are exported all the same",
		    (unsigned long long)M.max_series, (unsigned long long)M.used);
}

void metrics_free(void)
{
	struct mset *m, *mn;
	struct mroute *r, *rn;

	for (m = M.sets; m != NULL; m = mn) {
		mn = m->next;
		set_free(m);
	}
	for (r = M.routes; r != NULL; r = rn) {
		rn = r->next;
		route_hists_free(r);
		free(r->name);
		free(r);
	}
	if (M.conf != NULL)
		conf_unref((struct conf *)M.conf);
	memset(&M, 0, sizeof M);
}

/* ---- operation and provider (OpenTelemetry's attributes) ----------------- */

/* gen_ai.provider.name by the API the stream spoke. */
static const char *provider_name(unsigned dialect)
{
	switch (dialect) {
	case DIALECT_OPENAI:
	case DIALECT_OPENAI_RESPONSES:
		return "openai";
	case DIALECT_GEMINI:
		return "gcp.gemini";
	case DIALECT_ANTHROPIC:
	case DIALECT_DIFY:
	case DIALECT_TGI:
	case DIALECT_OLLAMA:
		return dialect_names[dialect];
	default:
		return "_other";
	}
}

const char *metrics_provider_name(unsigned dialect)
{
	return provider_name(dialect);
}

/* ---- output ----------------------------------------------------------------- */

static void set_labels(const struct mset *m, int otel_family, struct promout_labels *l)
{
	l->n = 0;
	promout_label(l, "route", m->route->name);
	promout_label(l, "tenant", m->tenant);
	promout_label(l, otel_family ? "gen_ai_request_model" : "model", m->model);
	promout_label(l, "upstream", m->upstream);
	if (M.names != METRICS_NAMES_TOKENTAP) {
		promout_label(l, "gen_ai_operation_name", dialect_op_names[m->op]);
		promout_label(l, "gen_ai_provider_name", provider_name(m->dialect));
	}
}

static void write_hist(struct promout *o, const struct promout_labels *l,
    const struct mhist *h, int bset)
{
	struct promout_hist ph = {
		.count = h->count, .sum = h->sum, .div = bset == B_TOKENS ? 1 : 1000000,
		.n_bounds = M.b[bset].n, .bounds = M.b[bset].v, .counts = h->counts,
		.native = &h->native,
	};
	promout_histogram(o, l, &ph);
}

static void write_histograms(struct promout *o)
{
	struct promout_labels l;

	for (size_t i = 0; i < UTIL_ARRAY_LEN(hfamilies); i++) {
		const struct hfamily *f = &hfamilies[i];
		if (!family_on(f) && !promout_every_family(o))
			continue;
		if (i == 0 || strcmp(hfamilies[i - 1].name, f->name) != 0)
			promout_family(o, f->name, f->help, PROMPROTO_HISTOGRAM);
		for (const struct mset *m = M.sets; m != NULL; m = m->next) {
			if (m->h[f->slot].count == 0)
				continue;
			set_labels(m, f->names == N_OTEL, &l);
			if (f->token_type != NULL)
				promout_label(&l, "gen_ai_token_type", f->token_type);
			write_hist(o, &l, &m->h[f->slot], f->bset);
		}
	}
	promout_family(o, "tokentap_upstream_connect_seconds",
	    "Time to open a new upstream connection (TCP, plus TLS), per route.",
	    PROMPROTO_HISTOGRAM);
	for (const struct mroute *r = M.routes; r != NULL; r = r->next) {
		if (r->connect.count == 0)
			continue;
		l.n = 0;
		promout_label(&l, "route", r->name);
		write_hist(o, &l, &r->connect, B_CONNECT);
	}
	promout_family(o, "tokentap_proxy_overhead_seconds",
	    "tokentap's own time, per route: stage=\"request\" from the request head "
	    "to the request written upstream, stage=\"read\" from each upstream "
	    "read to its send to the client.", PROMPROTO_HISTOGRAM);
	for (const struct mroute *r = M.routes; r != NULL; r = r->next)
		for (int i = 0; i < OVH_COUNT; i++) {
			if (r->ovh[i].count == 0)
				continue;
			l.n = 0;
			promout_label(&l, "route", r->name);
			promout_label(&l, "stage", stage_names[i]);
			write_hist(o, &l, &r->ovh[i], B_OVERHEAD);
		}
}

static void write_requests(struct promout *o)
{
	struct promout_labels l;

	promout_family(o, "tokentap_requests_total",
	    "Requests by outcome and the status class the client got.", PROMPROTO_COUNTER);
	for (const struct mset *m = M.sets; m != NULL; m = m->next)
		for (int k = 0; k < OUTCOME_COUNT; k++)
			for (int c = 0; c < CODE_COUNT; c++) {
				if (m->requests[k][c] == 0)
					continue;
				set_labels(m, 0, &l);
				promout_label(&l, "outcome", meter_outcome_name((enum meter_outcome)k));
				promout_label(&l, "code", code_names[c]);
				promout_sample(o, &l, (double)m->requests[k][c]);
			}
	promout_family(o, "tokentap_threshold_exceeded_total", "Requests over a threshold.",
	    PROMPROTO_COUNTER);
	for (const struct mset *m = M.sets; m != NULL; m = m->next)
		for (unsigned i = 0; i < M.n_thresholds; i++) {
			set_labels(m, 0, &l);
			promout_label(&l, "threshold", threshold_names[i]);
			promout_sample(o, &l, (double)m->exceeded[i]);
		}
	promout_family(o, "tokentap_no_token_requests_total",
	    "Finished requests without a token-bearing event, by outcome.",
	    PROMPROTO_COUNTER);
	for (const struct mset *m = M.sets; m != NULL; m = m->next)
		for (size_t i = 0; i < UTIL_ARRAY_LEN(no_token_outcomes); i++) {
			enum meter_outcome k = no_token_outcomes[i];
			set_labels(m, 0, &l);
			promout_label(&l, "outcome", meter_outcome_name(k));
			promout_sample(o, &l, (double)m->no_token[k]);
		}
}

/* The per-set series that are one number each: a counter (uint64_t) or a
 * gauge (long, which may dip below 0 while deltas cross), by offset. */
static double set_value(const struct mset *m, size_t off, enum promproto_type type)
{
	const char *p = (const char *)m + off;
	uint64_t u;
	long g;

	if (type == PROMPROTO_GAUGE) {
		memcpy(&g, p, sizeof g);
		return (double)g;
	}
	memcpy(&u, p, sizeof u);
	return (double)u;
}

static void write_set_series(struct promout *o)
{
	static const struct {
		const char *name, *help;
		enum promproto_type type;
		size_t off;
	} series[] = {
		{ "tokentap_output_tokens_total", "Output tokens.", PROMPROTO_COUNTER,
		  offsetof(struct mset, output_tokens) },
		{ "tokentap_input_tokens_total", "Input (prompt) tokens reported.",
		  PROMPROTO_COUNTER, offsetof(struct mset, input_tokens) },
		{ "tokentap_token_events_total", "Token-bearing events of the streams "
		  "that counted their output tokens (usage).", PROMPROTO_COUNTER,
		  offsetof(struct mset, token_events) },
		{ "tokentap_token_event_tokens_total", "The output tokens those events "
		  "carried: over tokentap_token_events_total, tokens per event.",
		  PROMPROTO_COUNTER, offsetof(struct mset, token_event_tokens) },
		{ "tokentap_active_streams", "Streams in flight.", PROMPROTO_GAUGE,
		  offsetof(struct mset, active) },
		{ "tokentap_stalled_streams", "Streams whose tokens stopped for the stall "
		  "threshold, now.", PROMPROTO_GAUGE, offsetof(struct mset, stalled) },
		{ "tokentap_stalls_total", "Stalls: token-free gaps of an open stream of at "
		  "least the stall threshold.", PROMPROTO_COUNTER, offsetof(struct mset, stalls) },
		{ "tokentap_buffered_streams_total", "Streams whose tokens came in clumps "
		  "far apart (a buffering hop).", PROMPROTO_COUNTER,
		  offsetof(struct mset, buffered) },
		{ "tokentap_ttft_stamped_total", "Requests whose TTFT the kernel's "
		  "receive time stamped (a plain upstream's read).", PROMPROTO_COUNTER,
		  offsetof(struct mset, ttft_stamped) },
		{ "tokentap_ttft_uncertain_total", "Of those, TTFTs doubted by more "
		  "than 1 ms: the first token was read merged with later bytes.",
		  PROMPROTO_COUNTER, offsetof(struct mset, ttft_uncertain) },
	};
	struct promout_labels l;

	for (size_t i = 0; i < UTIL_ARRAY_LEN(series); i++) {
		promout_family(o, series[i].name, series[i].help, series[i].type);
		for (const struct mset *m = M.sets; m != NULL; m = m->next) {
			set_labels(m, 0, &l);
			promout_sample(o, &l, set_value(m, series[i].off, series[i].type));
		}
	}
}

void metrics_write(struct promout *o)
{
	struct promout_labels none = { .n = 0 };

	write_histograms(o);
	write_requests(o);
	write_set_series(o);
	promout_family(o, "tokentap_metrics_folded_requests_total",
	    "Requests counted under their route's _other label set because "
	    "metrics.max_series was reached.", PROMPROTO_COUNTER);
	promout_sample(o, &none, (double)M.folded);
	promout_family(o, "tokentap_metrics_series",
	    "Series the label sets may export (metrics.max_series bounds them).",
	    PROMPROTO_GAUGE);
	promout_sample(o, &none, (double)M.used);
	promout_family(o, "tokentap_metrics_max_series", "metrics.max_series.",
	    PROMPROTO_GAUGE);
	promout_sample(o, &none, (double)M.max_series);
}
