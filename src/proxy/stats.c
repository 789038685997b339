#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "accesslog.h"
#include "log.h"
#include "meter.h"
#include "stats_int.h"
#include "util.h"

atomic_long tokentap_active_connections;
atomic_long tokentap_active_streams;
atomic_long tokentap_max_active_streams;
atomic_long tokentap_client_backlog;

uint64_t (*stats_clock)(void) = util_now_us;

/* ---- the rings (one producer: a worker; one consumer: the main thread) -- */

enum rec_kind { REC_ACTIVE, REC_ITL, REC_REQUEST };

struct stats_rec {
	uint8_t kind;
	uint8_t outcome;
	uint8_t n_itl;
	uint8_t exceeded;
	int32_t delta;
	struct stats_key key;
	uint64_t t_us;             /* when it happened (monotonic) */
	int64_t ttft_us, tpot_us, duration_us, connect_us;
	int64_t output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	int64_t concurrency;
	uint32_t itl[STATS_ITL_BATCH];
};

#define RING_CAP 4096          /* records; about 2 MiB per worker */
#define MAX_RINGS 256
/* When the reader falls behind (a long scrape on the main thread), a full
 * ring spills into blocks the worker allocates (the only allocation, and
 * the only lock, of a worker's statistics, and only then), up to about
 * 64 MiB per worker; past that a record is dropped, counted and logged. */
#define OVF_BLOCK 1024
#define OVF_MAX_BLOCKS 128

struct ovf_block {
	struct ovf_block *next;
	unsigned n;
	struct stats_rec recs[OVF_BLOCK];
};

struct stats_ring {
	_Atomic uint64_t head;     /* next slot the worker writes */
	_Atomic uint64_t tail;     /* next slot the reader reads */
	_Atomic uint64_t dropped;
	pthread_mutex_t ovf_lock;
	struct ovf_block *ovf_first, *ovf_last;   /* under ovf_lock */
	size_t ovf_blocks;                         /* under ovf_lock */
	int filling_ovf;           /* the worker's: a slot taken in a block */
	struct stats_rec recs[RING_CAP];
};

static struct stats_ring *rings[MAX_RINGS];
static _Atomic int n_rings;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;

struct stats_ring *stats_ring_new(void)
{
	struct stats_ring *r = calloc(1, sizeof *r);
	if (r == NULL)
		return NULL;
	pthread_mutex_init(&r->ovf_lock, NULL);
	pthread_mutex_lock(&rings_lock);
	if (atomic_load(&n_rings) == MAX_RINGS) {
		pthread_mutex_unlock(&rings_lock);
		free(r);
		return NULL;
	}
	rings[atomic_load(&n_rings)] = r;
	atomic_fetch_add(&n_rings, 1);
	pthread_mutex_unlock(&rings_lock);
	return r;
}

/* A slot in a spill block, the lock held until ring_publish; NULL (the
 * record dropped, counted) past the spill's bound. */
static struct stats_rec *ovf_slot(struct stats_ring *r)
{
	struct ovf_block *b;

	pthread_mutex_lock(&r->ovf_lock);
	b = r->ovf_last;
	if (b == NULL || b->n == OVF_BLOCK) {
		if (r->ovf_blocks >= OVF_MAX_BLOCKS || (b = malloc(sizeof *b)) == NULL) {
			pthread_mutex_unlock(&r->ovf_lock);
			atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
			return NULL;
		}
		b->next = NULL;
		b->n = 0;
		if (r->ovf_last != NULL)
			r->ovf_last->next = b;
		else
			r->ovf_first = b;
		r->ovf_last = b;
		r->ovf_blocks++;
	}
	r->filling_ovf = 1;
	return &b->recs[b->n];
}

/* Claims the next slot: in the ring, or, when the reader is behind, in a
 * spill block (the proxy never waits for statistics). */
static struct stats_rec *ring_slot(struct stats_ring *r)
{
	uint64_t h, t;
	if (r == NULL)
		return NULL;
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	t = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (h - t >= RING_CAP)
		return ovf_slot(r);
	return &r->recs[h % RING_CAP];
}

static void ring_publish(struct stats_ring *r)
{
	uint64_t h;

	if (r->filling_ovf) {
		r->ovf_last->n++;
		r->filling_ovf = 0;
		pthread_mutex_unlock(&r->ovf_lock);
		return;
	}
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

void stats_key_set(struct stats_key *k, const char *route, const char *tenant,
    const char *model, size_t model_len)
{
	memset(k, 0, sizeof *k);
	snprintf(k->route, sizeof k->route, "%s", route ? route : "-");
	snprintf(k->tenant, sizeof k->tenant, "%s", tenant ? tenant : "-");
	k->upstream[0] = '-';       /* none; the exchange names its replica */
	if (model_len >= sizeof k->model)
		model_len = sizeof k->model - 1;
	memcpy(k->model, model, model_len);
	k->model[model_len] = '\0';
}

void stats_active(struct stats_ring *r, const struct stats_key *k, int delta)
{
	struct stats_rec *x = ring_slot(r);
	if (x == NULL)
		return;
	x->kind = REC_ACTIVE;
	x->delta = delta;
	x->key = *k;
	x->t_us = stats_clock();
	ring_publish(r);
}

void stats_itl(struct stats_ring *r, const struct stats_key *k,
    const uint32_t *gaps, unsigned n)
{
	struct stats_rec *x = ring_slot(r);
	if (x == NULL)
		return;
	x->kind = REC_ITL;
	x->key = *k;
	x->t_us = stats_clock();
	x->n_itl = (uint8_t)n;
	if (n > 0)
		memcpy(x->itl, gaps, n * sizeof *gaps);
	ring_publish(r);
}

void stats_request(struct stats_ring *r, const struct stats_key *k,
    const struct accesslog_entry *e, const uint32_t *gaps, unsigned n)
{
	const struct meter *m = e->m;
	struct stats_rec *x = ring_slot(r);
	int64_t out;

	if (x == NULL)
		return;
	x->kind = REC_REQUEST;
	x->key = *k;
	x->t_us = m->t_end ? m->t_end : stats_clock();
	x->outcome = (uint8_t)e->outcome;
	x->exceeded = (uint8_t)e->exceeded;
	x->ttft_us = meter_ttft_us(m);
	x->tpot_us = meter_tpot_us(m);
	x->duration_us = m->t_end > m->t0 ? (int64_t)(m->t_end - m->t0) : 0;
	x->connect_us = m->t_conn && !m->conn_reused && m->t_conn >= m->t_req && m->t_req ?
	    (int64_t)(m->t_conn - m->t_req) : -1;
	out = meter_output_tokens(m);
	x->output_tokens = out;
	x->input_tokens = meter_input_tokens(m);
	x->speed_tokens = out >= 2 && m->t_last_token > m->t_first_token ?
	    (uint64_t)(out - 1) : 0;
	x->speed_us = x->speed_tokens ? m->t_last_token - m->t_first_token : 0;
	x->concurrency = e->concurrency;
	x->n_itl = (uint8_t)n;
	if (n > 0)
		memcpy(x->itl, gaps, n * sizeof *gaps);
	ring_publish(r);
}

/* ---- the reader's state ------------------------------------------------- */

static struct stats_state state;

const struct stats_state *stats_state(void)
{
	return &state;
}

static uint64_t hash_key(const struct stats_key *k)
{
	uint64_t h = 1469598103934665603ull;
	const char *parts[4] = { k->route, k->tenant, k->model, k->upstream };
	for (int p = 0; p < 4; p++) {
		for (const unsigned char *c = (const unsigned char *)parts[p]; *c; c++)
			h = (h ^ *c) * 1099511628211ull;
		h = (h ^ 0xff) * 1099511628211ull;
	}
	return h;
}

/* A name set for the cardinality limits. */
static int name_seen(struct name_set *ns, const char *name, uint64_t max)
{
	for (size_t i = 0; i < ns->n; i++)
		if (strcmp(ns->names[i], name) == 0)
			return 1;
	if (ns->n >= max)
		return 0;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 16;
		char **v = realloc(ns->names, cap * sizeof *v);
		if (v == NULL)
			return 0;
		ns->names = v;
		ns->cap = cap;
	}
	ns->names[ns->n] = strdup(name);
	if (ns->names[ns->n] == NULL)
		return 0;
	ns->n++;
	return 1;
}

static void prom_init(struct prom_hist *p, const struct bounds *b)
{
	p->counts = calloc(b->n + 1, sizeof *p->counts);
	p->sum_us = 0;
	p->count = 0;
}

static void prom_observe(struct prom_hist *p, const struct bounds *b, uint64_t us)
{
	size_t lo = 0, hi = b->n;
	if (p->counts == NULL)
		return;
	/* the first bound >= the value: "le" is inclusive */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (b->us[mid] < us)
			lo = mid + 1;
		else
			hi = mid;
	}
	p->counts[lo]++;
	p->sum_us += us;
	p->count++;
}

static struct group *group_get(const struct stats_key *in)
{
	struct stats_key k = *in;
	struct group *g;
	uint64_t h;

	/* cardinality: new tenants and models beyond the limits are "_other" */
	if (!name_seen(&state.tenants, k.tenant, state.max_tenants))
		snprintf(k.tenant, sizeof k.tenant, "_other");
	if (!name_seen(&state.models, k.model, state.max_models))
		snprintf(k.model, sizeof k.model, "_other");
	/* replicas come from the config, but a DNS name's addresses change */
	if (!name_seen(&state.upstreams, k.upstream, STATS_UPSTREAMS_MAX))
		snprintf(k.upstream, sizeof k.upstream, "_other");
	h = hash_key(&k);
	for (g = state.table[h % GROUP_BUCKETS]; g != NULL; g = g->hnext)
		if (g->hash == h && strcmp(g->key.route, k.route) == 0 &&
		    strcmp(g->key.tenant, k.tenant) == 0 &&
		    strcmp(g->key.model, k.model) == 0 &&
		    strcmp(g->key.upstream, k.upstream) == 0)
			return g;
	g = calloc(1, sizeof *g);
	if (g == NULL)
		return NULL;
	g->key = k;
	g->hash = h;
	for (int i = 0; i < PROM_COUNT; i++)
		prom_init(&g->prom[i], &state.bounds[i]);
	for (size_t w = 0; w < state.n_windows; w++)
		g->win[w] = calloc(2 * SLICES, sizeof(struct slice));
	g->hnext = state.table[h % GROUP_BUCKETS];
	state.table[h % GROUP_BUCKETS] = g;
	g->next = state.groups;
	state.groups = g;
	state.n_groups++;
	return g;
}

/* The slice of window w that holds time t, emptied if it held an older one. */
static struct slice *slice_at(struct group *g, size_t w, uint64_t t)
{
	uint64_t idx = t / state.slice_us[w];
	struct slice *s;
	if (g->win[w] == NULL)
		return NULL;
	s = &g->win[w][idx % (2 * SLICES)];
	if (s->index != idx) {
		struct hist_sparse keep[3] = { s->ttft, s->tpot, s->itl };
		memset(s, 0, sizeof *s);
		s->ttft = keep[0];
		s->tpot = keep[1];
		s->itl = keep[2];
		hist_sparse_clear(&s->ttft);
		hist_sparse_clear(&s->tpot);
		hist_sparse_clear(&s->itl);
		s->index = idx;
	}
	return s;
}

static void apply_itl(struct group *g, const struct stats_rec *x)
{
	for (unsigned i = 0; i < x->n_itl; i++)
		prom_observe(&g->prom[PROM_ITL], &state.bounds[PROM_ITL], x->itl[i]);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, x->t_us);
		for (unsigned i = 0; s != NULL && i < x->n_itl; i++)
			hist_sparse_record(&s->itl, x->itl[i]);
	}
}

static void apply_request(struct group *g, const struct stats_rec *x)
{
	g->requests[x->outcome]++;
	if (x->output_tokens > 0)
		g->output_tokens += (uint64_t)x->output_tokens;
	if (x->input_tokens > 0)
		g->input_tokens += (uint64_t)x->input_tokens;
	for (int i = 0; i < 4; i++)
		if (x->exceeded & (1u << i))
			g->exceeded[i]++;
	if (x->ttft_us >= 0)
		prom_observe(&g->prom[PROM_TTFT], &state.bounds[PROM_TTFT], (uint64_t)x->ttft_us);
	if (x->tpot_us >= 0)
		prom_observe(&g->prom[PROM_TPOT], &state.bounds[PROM_TPOT], (uint64_t)x->tpot_us);
	prom_observe(&g->prom[PROM_DURATION], &state.bounds[PROM_DURATION],
	    (uint64_t)x->duration_us);
	if (x->connect_us >= 0)
		prom_observe(&g->prom[PROM_CONNECT], &state.bounds[PROM_CONNECT],
		    (uint64_t)x->connect_us);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, x->t_us);
		if (s == NULL)
			continue;
		s->requests++;
		s->errors += x->outcome != OUTCOME_OK;
		s->output_tokens += x->output_tokens > 0 ? (uint64_t)x->output_tokens : 0;
		s->input_tokens += x->input_tokens > 0 ? (uint64_t)x->input_tokens : 0;
		s->speed_tokens += x->speed_tokens;
		s->speed_us += x->speed_us;
		if (x->ttft_us >= 0) {
			double cx = (double)x->concurrency, cy = (double)x->ttft_us / 1000.0;
			hist_sparse_record(&s->ttft, (uint64_t)x->ttft_us);
			s->r2.n++;
			s->r2.sx += cx;
			s->r2.sy += cy;
			s->r2.sxy += cx * cy;
			s->r2.sxx += cx * cx;
			s->r2.syy += cy * cy;
		}
		if (x->tpot_us >= 0)
			hist_sparse_record(&s->tpot, (uint64_t)x->tpot_us);
	}
	apply_itl(g, x);
}

static void apply(const struct stats_rec *x)
{
	struct group *g = group_get(&x->key);
	if (g == NULL)
		return;
	switch (x->kind) {
	case REC_ACTIVE:
		g->active += x->delta;
		if (g->active > g->max_active)
			g->max_active = g->active;
		break;
	case REC_ITL:
		apply_itl(g, x);
		break;
	case REC_REQUEST:
		apply_request(g, x);
		break;
	}
}

void stats_drain(void)
{
	int n = atomic_load(&n_rings);
	for (int i = 0; i < n; i++) {
		struct stats_ring *r = rings[i];
		uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
		uint64_t dropped = atomic_exchange(&r->dropped, 0);
		struct ovf_block *b, *next;
		for (; t < h; t++)
			apply(&r->recs[t % RING_CAP]);
		atomic_store_explicit(&r->tail, t, memory_order_release);
		/* what spilled while the reader was away: the counts add up in
		 * any order, and each record carries its own time */
		pthread_mutex_lock(&r->ovf_lock);
		b = r->ovf_first;
		r->ovf_first = r->ovf_last = NULL;
		r->ovf_blocks = 0;
		pthread_mutex_unlock(&r->ovf_lock);
		for (; b != NULL; b = next) {
			next = b->next;
			for (unsigned k = 0; k < b->n; k++)
				apply(&b->recs[k]);
			free(b);
		}
		if (dropped) {
			state.dropped += dropped;
			log_warn("stats: %llu records dropped (the reader fell behind)",
			    (unsigned long long)dropped);
		}
	}
}

/* ---- configuration ------------------------------------------------------ */

static const double ttft_b[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
	0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80 };
static const double tpot_b[] = { 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05,
	0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5 };
static const double dur_b[] = { 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28,
	2.56, 5.12, 10.24, 20.48, 40.96, 81.92 };
static const double conn_b[] = { 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1,
	0.5, 1, 5 };

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void bounds_add(struct bounds *b, uint64_t us)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->us[i] == us)
			return;
	if (us != 0 && b->n < BOUNDS_MAX)
		b->us[b->n++] = us;
}

static void bounds_set(struct bounds *b, const double *sec, size_t n)
{
	b->n = 0;
	for (size_t i = 0; i < n; i++)
		bounds_add(b, (uint64_t)(sec[i] * 1e6 + 0.5));
}

/* SPEC §5: every threshold configured anywhere is a bound too, so the share
 * of requests over a threshold is exact in PromQL. */
static void make_bounds(const struct conf *c, struct bounds out[PROM_COUNT])
{
	bounds_set(&out[PROM_TTFT], ttft_b, UTIL_ARRAY_LEN(ttft_b));
	bounds_set(&out[PROM_TPOT], tpot_b, UTIL_ARRAY_LEN(tpot_b));
	bounds_set(&out[PROM_ITL], tpot_b, UTIL_ARRAY_LEN(tpot_b));
	bounds_set(&out[PROM_DURATION], dur_b, UTIL_ARRAY_LEN(dur_b));
	bounds_set(&out[PROM_CONNECT], conn_b, UTIL_ARRAY_LEN(conn_b));
	for (size_t i = 0; i <= c->n_routes; i++) {
		const struct conf_thresholds *t = i < c->n_routes ?
		    &c->routes[i].thresholds : &c->thresholds;
		bounds_add(&out[PROM_TTFT], t->ttft_warning_us);
		bounds_add(&out[PROM_TTFT], t->ttft_critical_us);
		bounds_add(&out[PROM_TPOT], t->tpot_warning_us);
		bounds_add(&out[PROM_TPOT], t->tpot_critical_us);
		bounds_add(&out[PROM_ITL], t->tpot_warning_us);
		bounds_add(&out[PROM_ITL], t->tpot_critical_us);
	}
	for (int i = 0; i < PROM_COUNT; i++)
		qsort(out[i].us, out[i].n, sizeof out[i].us[0], cmp_u64);
}

static void windows_free(struct group *g)
{
	for (size_t w = 0; w < MAX_WINDOWS; w++) {
		if (g->win[w] == NULL)
			continue;
		for (int s = 0; s < 2 * SLICES; s++) {
			hist_sparse_free(&g->win[w][s].ttft);
			hist_sparse_free(&g->win[w][s].tpot);
			hist_sparse_free(&g->win[w][s].itl);
		}
		free(g->win[w]);
		g->win[w] = NULL;
	}
}

static void group_free(struct group *g)
{
	for (int i = 0; i < PROM_COUNT; i++)
		free(g->prom[i].counts);
	windows_free(g);
	free(g);
}

static void groups_reset_windows(void)
{
	for (struct group *g = state.groups; g != NULL; g = g->next) {
		windows_free(g);
		for (size_t w = 0; w < state.n_windows; w++)
			g->win[w] = calloc(2 * SLICES, sizeof(struct slice));
	}
}

/* The windows kept: those /stats serves, and the alert rules' own when it
 * is not one of them (alerts.window is honoured whatever it is). */
static size_t windows_of(const struct conf *c, uint64_t *w)
{
	size_t n = c->n_stats_windows < MAX_WINDOWS - 1 ? c->n_stats_windows :
	    MAX_WINDOWS - 1;
	memcpy(w, c->stats_windows_us, n * sizeof *w);
	for (size_t i = 0; i < n; i++)
		if (w[i] == c->alerts_window_us)
			return n;
	w[n] = c->alerts_window_us;
	return n + 1;
}

void stats_configure(const struct conf *c)
{
	struct bounds nb[PROM_COUNT];
	uint64_t want[MAX_WINDOWS];
	size_t n = windows_of(c, want);
	int windows_changed = n != state.n_windows;

	for (size_t i = 0; !windows_changed && i < n; i++)
		windows_changed = want[i] != state.window_us[i];
	state.max_tenants = c->max_tenants;
	state.max_models = c->max_models;
	memset(nb, 0, sizeof nb);     /* compared whole below */
	make_bounds(c, nb);
	if (state.configured && memcmp(nb, state.bounds, sizeof nb) != 0) {
		log_warn("stats: histogram bounds changed with the thresholds; "
		    "the Prometheus histograms start anew");
		for (struct group *g = state.groups; g != NULL; g = g->next)
			for (int i = 0; i < PROM_COUNT; i++) {
				free(g->prom[i].counts);
				prom_init(&g->prom[i], &nb[i]);
			}
	}
	memcpy(state.bounds, nb, sizeof nb);
	state.n_served = c->n_stats_windows < n ? c->n_stats_windows : n;
	if (windows_changed) {
		state.n_windows = n;
		for (size_t i = 0; i < state.n_windows; i++) {
			state.window_us[i] = want[i];
			state.slice_us[i] = state.window_us[i] / SLICES ? state.window_us[i] / SLICES : 1;
		}
		if (state.configured)
			log_warn("stats: windows changed; window statistics start anew");
		groups_reset_windows();
	}
	state.configured = 1;
}

void stats_free(void)
{
	struct group *g, *next;
	for (g = state.groups; g != NULL; g = next) {
		next = g->next;
		group_free(g);
	}
	for (size_t i = 0; i < state.tenants.n; i++)
		free(state.tenants.names[i]);
	for (size_t i = 0; i < state.models.n; i++)
		free(state.models.names[i]);
	for (size_t i = 0; i < state.upstreams.n; i++)
		free(state.upstreams.names[i]);
	free(state.tenants.names);
	free(state.models.names);
	free(state.upstreams.names);
	for (int i = 0; i < atomic_load(&n_rings); i++)
		free(rings[i]);
	atomic_store(&n_rings, 0);
	memset(&state, 0, sizeof state);
}

int stats_window_index(const char *text)
{
	uint64_t us;
	if (util_parse_duration_us(text, &us) < 0)
		return -1;
	for (size_t i = 0; i < state.n_served; i++)
		if (state.window_us[i] == us)
			return (int)i;
	return -1;
}
