#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "accesslog.h"
#include "health.h"
#include "history.h"
#include "log.h"
#include "meter.h"
#include "metrics.h"
#include "nhist.h"
#include "stats_int.h"
#include "util.h"

atomic_long tokentap_active_connections;
atomic_long tokentap_active_streams;
atomic_long tokentap_max_active_streams;
atomic_long tokentap_peak_active_streams;
atomic_long tokentap_client_backlog;

uint64_t (*stats_clock)(void) = util_now_us;

/* ---- the rings (one producer: a worker; one consumer: the main thread) -- */

enum rec_kind { REC_ACTIVE, REC_ITL, REC_REQUEST, REC_STALL };

struct stats_rec {
	uint8_t kind;
	uint8_t outcome;
	uint8_t n_itl;
	uint8_t exceeded;
	uint16_t status;
	int32_t delta;
	struct stats_key key;
	uint64_t t_us;             /* when it happened (monotonic) */
	int64_t ttft_us, tpot_us, duration_us, connect_us;
	int64_t output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	int64_t concurrency;
	uint32_t itl[STATS_ITL_BATCH];
	/* stream health (REC_REQUEST) */
	int64_t ttfo_us;
	uint8_t no_token, judged, buffered;
	uint64_t stalls;           /* those not reported live */
	int64_t ovh_request_us;    /* -1: none */
	uint64_t ovh_read_sum_us;
	uint16_t ovh_read[HEALTH_OVH_BUCKETS];
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

/* s cut to cap - 1 bytes into the zeroed dst, as snprintf would. */
static void key_part(char *dst, size_t cap, const char *s)
{
	memcpy(dst, s, strnlen(s, cap - 1));
}

void stats_key_set(struct stats_key *k, const char *route, const char *tenant,
    const char *model, size_t model_len)
{
	/* no snprintf: a key is built for every batch of token gaps */
	memset(k, 0, sizeof *k);
	key_part(k->route, sizeof k->route, route ? route : "-");
	key_part(k->tenant, sizeof k->tenant, tenant ? tenant : "-");
	k->upstream[0] = '-';       /* none; the exchange names its replica */
	if (model_len >= sizeof k->model)
		model_len = sizeof k->model - 1;
	memcpy(k->model, model, model_len);
	k->model[model_len] = '\0';
}

/* A gauge of the group moved by delta (kind: which one). */
static void ring_delta(struct stats_ring *r, enum rec_kind kind,
    const struct stats_key *k, int delta)
{
	struct stats_rec *x = ring_slot(r);
	if (x == NULL)
		return;
	x->kind = (uint8_t)kind;
	x->delta = delta;
	x->key = *k;
	x->t_us = stats_clock();
	ring_publish(r);
}

void stats_active(struct stats_ring *r, const struct stats_key *k, int delta)
{
	ring_delta(r, REC_ACTIVE, k, delta);
}

void stats_stall(struct stats_ring *r, const struct stats_key *k, int delta)
{
	ring_delta(r, REC_STALL, k, delta);
}

/* The stream health figures of a finished request. */
static void health_fields(struct stats_rec *x, const struct accesslog_entry *e)
{
	const struct meter *m = e->m;
	const struct health *h = e->health;
	int buffered = meter_buffered(m);

	x->ttfo_us = meter_ttfo_us(m);
	x->no_token = (uint8_t)meter_no_token(m, e->outcome);
	x->judged = buffered >= 0;
	x->buffered = buffered > 0;
	x->stalls = m->stalls - (h != NULL && h->stalls_live <= m->stalls ?
	    h->stalls_live : m->stalls);
	x->ovh_request_us = h != NULL ? h->ovh_request_us : -1;
	x->ovh_read_sum_us = h != NULL ? h->ovh_read_sum_us : 0;
	if (h != NULL)
		memcpy(x->ovh_read, h->ovh_read_hist, sizeof x->ovh_read);
	else
		memset(x->ovh_read, 0, sizeof x->ovh_read);
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
	x->key.unverified |= e->outcome == OUTCOME_REJECTED;
	x->outcome = (uint8_t)e->outcome;
	x->exceeded = (uint8_t)e->exceeded;
	x->status = (uint16_t)e->status;
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
	health_fields(x, e);
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
	return ((h ^ k->dialect) * 1099511628211ull ^ k->op) * 1099511628211ull;
}

/* A name set for the cardinality limits; a name is added only when mint. */
static int name_seen(struct name_set *ns, const char *name, uint64_t max, int mint)
{
	for (size_t i = 0; i < ns->n; i++)
		if (strcmp(ns->names[i], name) == 0)
			return 1;
	if (ns->n >= max || !mint)
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

static struct group *group_find(const struct stats_key *k, uint64_t *h);
static struct group *group_new(const struct stats_key *k, uint64_t h);

/* The group the last record's key went to: records come in runs of one
 * stream's. Where a key goes changes only when another key mints a name,
 * and that call takes this one's place. Forgotten when the limits may
 * change and when the state is reset. */
static struct {
	struct stats_key in;
	struct group *g;
} last_group;

static struct group *group_get(const struct stats_key *in)
{
	struct stats_key k = *in;
	struct group *g;
	uint64_t h;

	if (last_group.g != NULL && memcmp(&last_group.in, in, sizeof *in) == 0)
		return last_group.g;
	/* cardinality: new tenants and models beyond the limits, or named by
	 * a request that proved nothing, are "_other" */
	if (!name_seen(&state.tenants, k.tenant, state.max_tenants, !k.unverified))
		snprintf(k.tenant, sizeof k.tenant, "_other");
	if (!name_seen(&state.models, k.model, state.max_models, !k.unverified))
		snprintf(k.model, sizeof k.model, "_other");
	k.unverified = 0;
	/* replicas come from the config, but a DNS name's addresses change */
	if (!name_seen(&state.upstreams, k.upstream, STATS_UPSTREAMS_MAX, 1))
		snprintf(k.upstream, sizeof k.upstream, "_other");
	g = group_find(&k, &h);
	if (g == NULL)
		g = group_new(&k, h);
	if (g != NULL) {
		last_group.in = *in;
		last_group.g = g;
	}
	return g;
}

static struct group *group_find(const struct stats_key *k, uint64_t *hp)
{
	uint64_t h = hash_key(k);
	struct group *g;

	*hp = h;
	for (g = state.table[h % GROUP_BUCKETS]; g != NULL; g = g->hnext)
		if (g->hash == h && strcmp(g->key.route, k->route) == 0 &&
		    strcmp(g->key.tenant, k->tenant) == 0 &&
		    strcmp(g->key.model, k->model) == 0 && g->key.dialect == k->dialect &&
		    g->key.op == k->op && strcmp(g->key.upstream, k->upstream) == 0)
			return g;
	return NULL;
}

static struct group *group_new(const struct stats_key *k, uint64_t h)
{
	struct group *g = calloc(1, sizeof *g);

	if (g == NULL)
		return NULL;
	g->key = *k;
	g->hash = h;
	g->ms = metrics_resolve(k->route, k->tenant, k->model, k->upstream, k->dialect, k->op,
	    &g->ms_folded);
	for (size_t w = 0; w < state.n_windows; w++)
		g->win[w] = calloc(2 * SLICES, sizeof(struct slice));
	g->hnext = state.table[h % GROUP_BUCKETS];
	state.table[h % GROUP_BUCKETS] = g;
	g->next = state.groups;
	state.groups = g;
	state.n_groups++;
	return g;
}

/* ---- token gaps: the drain's scratch ------------------------------------- */

/* Native buckets of whole µs from 1 to 2^32 - 1 (nhist_index_us): 2,048. */
#define NH_SPAN 2112

/* During a drain, one group's token gaps gather here, counted by bucket
 * (the windows' and the native histogram's) in dense arrays, with the
 * buckets used listed; they go to the group once, when a batch is another
 * group's or falls in other slices, when a slice of the group is taken
 * for another time, and when the drain ends. A gap then costs two array
 * increments, where it cost a search in each of three windows and in the
 * native histogram. Outside a drain the scratch is empty. */
static struct {
	struct group *g;               /* whose gaps, NULL: none */
	uint64_t t;                    /* a time inside their slices */
	uint64_t count, sum, min, max;
	uint32_t win[HIST_BUCKETS];
	uint16_t win_used[HIST_BUCKETS];
	unsigned n_win;
	uint64_t zero;
	int32_t nh_base;               /* nhist_index_us(1) */
	uint32_t nh[NH_SPAN];
	uint16_t nh_used[NH_SPAN];
	unsigned n_nh;
} scr;

static void itl_flush(void);

/* The slice of window w that holds time t, emptied if it held an older one.
 * Gaps of the group waiting for another slice go to theirs first, so that
 * a slice never takes them after it was emptied for a later time. */
static struct slice *slice_at(struct group *g, size_t w, uint64_t t)
{
	uint64_t idx = t / state.slice_us[w];
	struct slice *s;

	if (g == scr.g && idx != scr.t / state.slice_us[w])
		itl_flush();
	if (g->win[w] == NULL)
		return NULL;
	s = &g->win[w][idx % (2 * SLICES)];
	if (s->index != idx) {
		struct hist_sparse keep[6] = { s->ttft, s->tpot, s->itl, s->ttfo,
			s->ovh_request, s->ovh_read };
		memset(s, 0, sizeof *s);
		s->ttft = keep[0];
		s->tpot = keep[1];
		s->itl = keep[2];
		s->ttfo = keep[3];
		s->ovh_request = keep[4];
		s->ovh_read = keep[5];
		hist_sparse_clear(&s->ttft);
		hist_sparse_clear(&s->tpot);
		hist_sparse_clear(&s->itl);
		hist_sparse_clear(&s->ttfo);
		hist_sparse_clear(&s->ovh_request);
		hist_sparse_clear(&s->ovh_read);
		s->index = idx;
	}
	return s;
}

/* The scratch's gaps into their group's windows and native histogram. */
static void itl_flush(void)
{
	struct group *g = scr.g;
	struct nhist *nh;

	if (g == NULL)
		return;
	scr.g = NULL;                  /* slice_at below sees nothing waiting */
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, scr.t);
		if (s != NULL)
			hist_sparse_add_counts(&s->itl, scr.win, scr.win_used, scr.n_win,
			    scr.count, scr.sum, scr.min, scr.max);
	}
	if ((nh = metrics_itl_native(g->ms)) != NULL) {
		nh->zero_count += scr.zero;
		for (unsigned i = 0; i < scr.n_nh; i++)
			nhist_add_index(nh, scr.nh_base + scr.nh_used[i],
			    scr.nh[scr.nh_used[i]]);
	}
	/* a drain's gaps at most 50 ms apart: the step of the first holds them */
	if (state.history != NULL)
		history_itl(state.history, g->key.route, scr.t, scr.win, scr.win_used,
		    scr.n_win, scr.count, scr.sum, scr.min, scr.max);
	for (unsigned i = 0; i < scr.n_win; i++)
		scr.win[scr.win_used[i]] = 0;
	for (unsigned i = 0; i < scr.n_nh; i++)
		scr.nh[scr.nh_used[i]] = 0;
	scr.n_win = scr.n_nh = 0;
	scr.count = scr.sum = scr.min = scr.max = scr.zero = 0;
}

/* A batch of token gaps: the classic Prometheus buckets now, the rest
 * through the scratch. */
static void apply_itl(struct group *g, const struct stats_rec *x)
{
	unsigned n = x->n_itl < STATS_ITL_BATCH ? x->n_itl : STATS_ITL_BATCH;

	metrics_itl(g->ms, x->itl, n);
	if (n == 0)
		return;
	for (size_t w = 0; scr.g == g && w < state.n_windows; w++)
		if (x->t_us / state.slice_us[w] != scr.t / state.slice_us[w])
			itl_flush();
	if (scr.g != g) {
		itl_flush();
		scr.g = g;
		scr.t = x->t_us;
		scr.nh_base = nhist_index_us(1);
	}
	for (unsigned i = 0; i < n; i++) {
		uint32_t v = x->itl[i];
		unsigned b = hist_bucket(v);
		if (scr.win[b]++ == 0)
			scr.win_used[scr.n_win++] = (uint16_t)b;
		if (scr.count == 0 || v < scr.min)
			scr.min = v;
		if (v > scr.max)
			scr.max = v;
		scr.count++;
		scr.sum += v;
		if (v == 0) {
			scr.zero++;
			continue;
		}
		b = (unsigned)(nhist_index_us(v) - scr.nh_base);
		if (scr.nh[b]++ == 0)
			scr.nh_used[scr.n_nh++] = (uint16_t)b;
	}
}

/* The stream health part of a finished request, in the windows (the
 * Prometheus side is metrics_request's). */
static void apply_health(struct group *g, const struct stats_rec *x)
{
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, x->t_us);
		if (s == NULL)
			continue;
		s->stalls += x->stalls;
		s->judged += x->judged;
		s->buffered += x->buffered;
		s->no_token[x->outcome] += x->no_token;
		if (x->ttfo_us >= 0)
			hist_sparse_record(&s->ttfo, (uint64_t)x->ttfo_us);
		if (x->ovh_request_us >= 0)
			hist_sparse_record(&s->ovh_request, (uint64_t)x->ovh_request_us);
		for (unsigned i = 0; i < HEALTH_OVH_BUCKETS; i++)
			if (x->ovh_read[i] != 0)
				hist_sparse_record_n(&s->ovh_read, health_read_mid(i),
				    x->ovh_read[i]);
	}
}

static void apply_stall(struct group *g, const struct stats_rec *x)
{
	g->stalled += x->delta;
	metrics_stall(g->ms, x->delta);
	if (x->delta <= 0)
		return;
	if (state.history != NULL)
		history_stall(state.history, g->key.route, x->t_us);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, x->t_us);
		if (s != NULL)
			s->stalls++;
	}
}

static void apply_request(struct group *g, const struct stats_rec *x)
{
	struct metrics_obs o = {
		.outcome = x->outcome, .status = x->status, .exceeded = x->exceeded,
		.ttft_us = x->ttft_us, .tpot_us = x->tpot_us, .duration_us = x->duration_us,
		.connect_us = x->connect_us, .output_tokens = x->output_tokens,
		.input_tokens = x->input_tokens, .ttfo_us = x->ttfo_us,
		.ovh_request_us = x->ovh_request_us, .no_token = x->no_token,
		.buffered = x->buffered, .stalls = x->stalls, .ovh_read = x->ovh_read,
		.ovh_read_sum_us = x->ovh_read_sum_us,
	};

	metrics_request(g->ms, g->ms_folded, &o);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, x->t_us);
		if (s == NULL)
			continue;
		s->requests++;
		s->errors += x->outcome != OUTCOME_OK;
		s->aborts += x->outcome == OUTCOME_CLIENT_ABORT;
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
	apply_health(g, x);
	if (state.history != NULL) {
		struct history_req hr = {
			(enum meter_outcome)x->outcome, x->ttft_us, x->tpot_us, x->ttfo_us,
			x->output_tokens > 0 ? (uint64_t)x->output_tokens : 0,
			x->input_tokens > 0 ? (uint64_t)x->input_tokens : 0,
			x->speed_tokens, x->speed_us, x->concurrency, x->stalls,
		};
		history_request(state.history, g->key.route, x->t_us, &hr);
	}
}

void stats_set_history(struct history *h)
{
	itl_flush();           /* empty outside a drain; in case */
	state.history = h;
}

static void (*on_request)(void *arg, const struct stats_done *d);
static void *on_request_arg;

void stats_on_request(void (*fn)(void *arg, const struct stats_done *d), void *arg)
{
	on_request = fn;
	on_request_arg = arg;
}

static void tell_done(const struct stats_rec *x)
{
	struct stats_done d = { &x->key, x->outcome, x->ttft_us, x->tpot_us,
		x->ttfo_us, x->duration_us, x->t_us };
	if (on_request != NULL)
		on_request(on_request_arg, &d);
}

static void apply(const struct stats_rec *x)
{
	struct group *g = group_get(&x->key);
	if (g == NULL)
		return;
	switch (x->kind) {
	case REC_ACTIVE:
		g->active += x->delta;
		metrics_active(g->ms, x->delta);
		if (g->active > g->max_active)
			g->max_active = g->active;
		if (state.history != NULL)
			history_active(state.history, g->key.route, x->t_us, x->delta);
		break;
	case REC_ITL:
		apply_itl(g, x);
		break;
	case REC_REQUEST:
		apply_request(g, x);
		tell_done(x);
		break;
	case REC_STALL:
		apply_stall(g, x);
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
	itl_flush();
}

/* ---- configuration ------------------------------------------------------ */

static void windows_free(struct group *g)
{
	for (size_t w = 0; w < MAX_WINDOWS; w++) {
		if (g->win[w] == NULL)
			continue;
		for (int s = 0; s < 2 * SLICES; s++) {
			hist_sparse_free(&g->win[w][s].ttft);
			hist_sparse_free(&g->win[w][s].tpot);
			hist_sparse_free(&g->win[w][s].itl);
			hist_sparse_free(&g->win[w][s].ttfo);
			hist_sparse_free(&g->win[w][s].ovh_request);
			hist_sparse_free(&g->win[w][s].ovh_read);
		}
		free(g->win[w]);
		g->win[w] = NULL;
	}
}

static void group_free(struct group *g)
{
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

/* The routes' ttft_warning, for the headroom figure of /stats. */
static void warnings_configure(const struct conf *c)
{
	struct route_warning *w = calloc(c->n_routes ? c->n_routes : 1, sizeof *w);

	if (w == NULL)
		return;          /* the old ones stay */
	for (size_t i = 0; i < c->n_routes; i++) {
		snprintf(w[i].route, sizeof w[i].route, "%s", c->routes[i].name);
		w[i].ttft_warning_us = c->routes[i].thresholds.ttft_warning_us;
	}
	free(state.warnings);
	state.warnings = w;
	state.n_warnings = c->n_routes;
}

void stats_configure(const struct conf *c)
{
	uint64_t want[MAX_WINDOWS];
	size_t n = windows_of(c, want);
	int windows_changed = n != state.n_windows;

	itl_flush();           /* empty outside a drain; in case */
	last_group.g = NULL;   /* the limits may change */
	for (size_t i = 0; !windows_changed && i < n; i++)
		windows_changed = want[i] != state.window_us[i];
	state.max_tenants = c->max_tenants;
	state.max_models = c->max_models;
	warnings_configure(c);
	metrics_configure(c);
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
	scr.g = NULL;          /* nothing waits outside a drain */
	last_group.g = NULL;
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
	free(state.warnings);
	metrics_free();
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
