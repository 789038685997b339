/* SPDX-License-Identifier: Apache-2.0 */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "log.h"
#include "meter.h"
#include "metrics.h"
#include "nhist.h"
#include "ring.h"
#include "stats_int.h"
#include "util.h"

uint64_t (*stats_clock)(void) = util_now_us;

/* ---- the reader's state ------------------------------------------------- */

static struct stats_state state;

const struct stats_state *stats_state(void)
{
	return &state;
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
	struct slice *s, **sp;

	if (g == scr.g && idx != scr.t / state.slice_us[w])
		itl_flush();
	/* the slot table and each slice when first used: a group costs what
	 * its records touched */
	if (g->slot == NULL &&
	    (g->slot = calloc(state.n_windows * 2 * SLICES, sizeof *g->slot)) == NULL)
		return NULL;
	sp = &g->slot[w * 2 * SLICES + idx % (2 * SLICES)];
	if (*sp == NULL) {
		if ((*sp = calloc(1, sizeof **sp)) == NULL)
			return NULL;
		(*sp)->index = idx;
	}
	s = *sp;
	if (s->index != idx) {
		struct hist_sparse keep[8] = { s->ttft, s->tpot, s->itl, s->ttfo,
			s->ovh_request, s->ovh_read, s->ttft_server, s->ttfo_server };
		memset(s, 0, sizeof *s);
		s->ttft = keep[0];
		s->tpot = keep[1];
		s->itl = keep[2];
		s->ttfo = keep[3];
		s->ovh_request = keep[4];
		s->ovh_read = keep[5];
		s->ttft_server = keep[6];
		s->ttfo_server = keep[7];
		hist_sparse_clear(&s->ttft);
		hist_sparse_clear(&s->tpot);
		hist_sparse_clear(&s->itl);
		hist_sparse_clear(&s->ttfo);
		hist_sparse_clear(&s->ovh_request);
		hist_sparse_clear(&s->ovh_read);
		hist_sparse_clear(&s->ttft_server);
		hist_sparse_clear(&s->ttfo_server);
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
		history_itl(state.history, g->route->text, scr.t, scr.win, scr.win_used,
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
static void apply_itl(struct group *g, const struct ring_rec *x)
{
	unsigned n = x->n_itl < RING_ITL_BATCH ? x->n_itl : RING_ITL_BATCH;

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

/* What a stream was made of: tokens against events, and the wire. */
static void apply_wire(struct slice *s, const struct sample *x)
{
	const struct meter_wire *w = &x->wire;
	uint32_t *v = s->wire;

	if (x->token_source == TOKENS_USAGE || x->token_source == TOKENS_CONTINUOUS) {
		s->counted_events += x->token_events;
		s->counted_tokens += x->output_tokens > 0 ? (uint64_t)x->output_tokens : 0;
	}
	if (x->first_event_tokens >= 0) {
		s->first_told++;
		s->first_tokens += (uint64_t)x->first_event_tokens;
	}
	s->tpot_estimated += x->tpot_estimated;
	if (!w->stream)
		return;
	v[W_STREAMS]++;
	v[W_LF] += w->lf;
	v[W_CRLF] += w->crlf;
	v[W_CR] += w->cr;
	v[W_DATA_SPACE] += w->data_space;
	v[W_DATA_BARE] += w->data_bare;
	if (w->coding >= DECODE_GZIP && w->coding <= DECODE_ZSTD)
		v[W_GZIP + w->coding - DECODE_GZIP]++;
	v[W_END_SEEN] += w->end == WIRE_END_SEEN;
	v[W_END_MISSING] += w->end == WIRE_END_MISSING;
	v[W_USAGE_NONE + w->usage]++;
	v[W_COMMENTS] += w->comments;
	v[W_PINGS] += w->pings;
	v[W_EMPTY_DELTAS] += w->empty_deltas;
	v[W_KA_GAPS] += w->ka_gaps;
	v[W_KA_SPAN_MS] += (uint32_t)(w->ka_span_us / 1000);
	v[W_EVENTS] += w->events;
	v[W_EVENT_READS] += w->event_reads;
	v[W_ERRORS_2XX] += w->error_in_2xx;
}

/* The reads' overhead buckets, each read at its bucket's middle, as one
 * sparse histogram whose entries are e (on the caller's stack, never
 * freed): merged into each window's in one pass (hist_sparse_merge), the
 * same as a hist_sparse_record_n a bucket, where each of those searched. */
static void ovh_read_view(struct hist_sparse *h, struct hist_sparse_entry *e,
    const struct sample *x)
{
	memset(h, 0, sizeof *h);
	h->u.e = e;
	h->cap = VITALS_OVH_BUCKETS;
	for (unsigned i = 0; i < VITALS_OVH_BUCKETS; i++) {
		uint64_t us = vitals_read_mid(i);
		uint32_t n = x->ovh_read[i];
		unsigned b = hist_bucket(us);

		if (n == 0)
			continue;
		if (h->n > 0 && e[h->n - 1].idx == b) {
			e[h->n - 1].count += n;
		} else {
			e[h->n].idx = (uint16_t)b;
			e[h->n++].count = n;
		}
		if (h->count == 0 || us < h->min)
			h->min = us;
		if (us > h->max)
			h->max = us;
		h->count += n;
		h->sum += us * n;
	}
}

/* The stream health part of a finished request, in the windows (the
 * Prometheus side is metrics_request's). */
static void apply_health(struct group *g, uint64_t t_us, const struct sample *x)
{
	struct hist_sparse_entry e[VITALS_OVH_BUCKETS];
	struct hist_sparse ovh_read;

	ovh_read_view(&ovh_read, e, x);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, t_us);
		if (s == NULL)
			continue;
		s->stalls += x->stalls;
		s->judged += x->judged;
		s->buffered += x->buffered;
		s->ttft_stamped += x->ttft_stamped;
		s->ttft_uncertain += x->ttft_uncertain;
		s->no_token[x->outcome] += x->no_token;
		if (x->ttfo_us >= 0)
			hist_sparse_record(&s->ttfo, (uint64_t)x->ttfo_us);
		if (x->ttfo_server_us >= 0)
			hist_sparse_record(&s->ttfo_server, (uint64_t)x->ttfo_server_us);
		if (x->ovh_request_us >= 0)
			hist_sparse_record(&s->ovh_request, (uint64_t)x->ovh_request_us);
		hist_sparse_merge(&s->ovh_read, &ovh_read);
		apply_wire(s, x);
	}
}

static void apply_stall(struct group *g, const struct ring_rec *x)
{
	g->stalled += x->delta;
	metrics_stall(g->ms, x->delta);
	if (x->delta <= 0)
		return;
	if (state.history != NULL)
		history_stall(state.history, g->route->text, x->t_us);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, x->t_us);
		if (s != NULL)
			s->stalls++;
	}
}

static void apply_request(struct group *g, const struct ring_rec *r)
{
	const struct sample *x = &r->s;

	metrics_request(g->ms, g->ms_folded, x);
	for (size_t w = 0; w < state.n_windows; w++) {
		struct slice *s = slice_at(g, w, r->t_us);
		if (s == NULL)
			continue;
		s->requests++;
		s->errors += x->outcome != OUTCOME_OK;
		s->by_client += meter_outcome_client((enum meter_outcome)x->outcome);
		s->output_tokens += x->output_tokens > 0 ? (uint64_t)x->output_tokens : 0;
		s->input_tokens += x->input_tokens > 0 ? (uint64_t)x->input_tokens : 0;
		s->speed_tokens += x->speed_tokens;
		s->speed_us += x->speed_us;
		if (x->ttft_us >= 0)
			hist_sparse_record(&s->ttft, (uint64_t)x->ttft_us);
		/* the headroom's line: the server side's TTFT, which a slow
		 * client does not raise */
		if (x->ttft_server_us >= 0) {
			double cx = (double)x->concurrency;
			double cy = (double)x->ttft_server_us / 1000.0;
			hist_sparse_record(&s->ttft_server, (uint64_t)x->ttft_server_us);
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
	apply_itl(g, r);
	apply_health(g, r->t_us, x);
	if (state.history != NULL) {
		struct history_req hr = {
			(enum meter_outcome)x->outcome, x->ttft_us, x->tpot_us, x->ttfo_us,
			x->output_tokens > 0 ? (uint64_t)x->output_tokens : 0,
			x->input_tokens > 0 ? (uint64_t)x->input_tokens : 0,
			x->speed_tokens, x->speed_us, x->concurrency, x->stalls,
			x->ttft_server_us,
		};
		history_request(state.history, g->route->text, r->t_us, &hr);
	}
}

void stats_set_history(struct history *h)
{
	itl_flush();           /* empty outside a drain; in case */
	state.history = h;
}

static void (*on_request)(void *arg, const struct sample_key *k,
    const struct sample *s);
static void *on_request_arg;

void stats_on_request(void (*fn)(void *arg, const struct sample_key *k,
    const struct sample *s), void *arg)
{
	on_request = fn;
	on_request_arg = arg;
}

static void apply(void *arg, const struct ring_rec *x)
{
	struct group *g;

	(void)arg;
	if (x->kind == RING_ACTIVE || x->kind == RING_STALL)
		g = stats_group_of_stream(&state, &x->key, x->kind == RING_ACTIVE ? x->delta : 0);
	else
		g = stats_group_get(&state, &x->key);
	if (g == NULL)
		return;
	/* its waiting token gaps go to the label set they were counted for */
	if (g == scr.g && stats_group_stale(g))
		itl_flush();
	stats_group_use(&state, g);
	switch (x->kind) {
	case RING_ACTIVE:
		g->active += x->delta;
		metrics_active(g->ms, x->delta);
		if (g->active > g->max_active)
			g->max_active = g->active;
		if (state.history != NULL)
			history_active(state.history, g->route->text, x->t_us, x->delta);
		break;
	case RING_ITL:
		apply_itl(g, x);
		break;
	case RING_REQUEST:
		apply_request(g, x);
		if (on_request != NULL)
			on_request(on_request_arg, &x->key, &x->s);
		break;
	case RING_STALL:
		apply_stall(g, x);
		break;
	}
}

void stats_drain(void)
{
	uint64_t dropped;

	state.now_us = stats_clock();
	dropped = ring_drain(apply, NULL);
	if (dropped) {
		state.dropped += dropped;
		log_warn("stats: %llu records dropped (the reader fell behind)",
		    (unsigned long long)dropped);
	}
	itl_flush();
	stats_groups_sweep(&state);
}

/* ---- configuration ------------------------------------------------------ */

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
	stats_groups_forget(); /* the limits may change */
	for (size_t i = 0; !windows_changed && i < n; i++)
		windows_changed = want[i] != state.window_us[i];
	state.max_tenants = c->max_tenants;
	state.max_models = c->max_models;
	warnings_configure(c);
	metrics_configure(c);
	state.n_served = c->n_stats_windows < n ? c->n_stats_windows : n;
	if (windows_changed) {
		/* the slices go, with the slot tables sized by the old count */
		for (struct group *g = state.newest; g != NULL; g = g->older)
			stats_group_windows_free(&state, g);
		state.n_windows = n;
		state.since_ms = util_wall_ms();
		for (size_t i = 0; i < state.n_windows; i++) {
			state.window_us[i] = want[i];
			state.slice_us[i] = state.window_us[i] / SLICES ? state.window_us[i] / SLICES : 1;
		}
		if (state.configured)
			log_warn("stats: windows changed; window statistics start anew");
	}
	/* a group goes when its windows, the trend's previous one included,
	 * hold nothing (and not before its label set's expiration) */
	state.release_us = c->metrics_expiration_us;
	state.idle_us = state.release_us;
	for (size_t i = 0; i < state.n_windows; i++)
		if (2 * state.window_us[i] + state.slice_us[i] > state.idle_us)
			state.idle_us = 2 * state.window_us[i] + state.slice_us[i];
	state.configured = 1;
}

void stats_free(void)
{
	scr.g = NULL;          /* nothing waits outside a drain */
	stats_groups_free(&state);
	free(state.warnings);
	metrics_free();
	ring_free_all();
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
