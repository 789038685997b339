/* SPDX-License-Identifier: Apache-2.0 */
#include "history_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promproto.h"
#include "util.h"

/* ---- a step's figures ------------------------------------------------------ */

void history_sum_clear(struct history_sum *s)
{
	struct hist_sparse keep[4] = { s->ttft, s->tpot, s->itl, s->ttfo };

	memset(s, 0, sizeof *s);
	s->ttft = keep[0];
	s->tpot = keep[1];
	s->itl = keep[2];
	s->ttfo = keep[3];
	hist_sparse_clear(&s->ttft);
	hist_sparse_clear(&s->tpot);
	hist_sparse_clear(&s->itl);
	hist_sparse_clear(&s->ttfo);
}

void history_sum_free(struct history_sum *s)
{
	hist_sparse_free(&s->ttft);
	hist_sparse_free(&s->tpot);
	hist_sparse_free(&s->itl);
	hist_sparse_free(&s->ttfo);
	memset(s, 0, sizeof *s);
}

uint64_t history_sum_requests(const struct history_sum *s)
{
	uint64_t n = 0;

	for (int o = 0; o < OUTCOME_COUNT; o++)
		n += s->outcomes[o];
	return n;
}

static int sum_empty(const struct history_sum *s)
{
	return history_sum_requests(s) == 0 && s->output_tokens == 0 &&
	    s->input_tokens == 0 && s->speed_tokens == 0 && s->speed_us == 0 &&
	    s->stalls == 0 && s->good == 0 && s->bad == 0 && s->active == 0 &&
	    s->peak == 0 && s->r2.n == 0 && s->ttft.count == 0 && s->tpot.count == 0 &&
	    s->itl.count == 0 && s->ttfo.count == 0;
}

static void r2_add(struct history_r2 *d, const struct history_r2 *s)
{
	d->n += s->n;
	d->sx += s->sx;
	d->sxx += s->sxx;
	d->sy += s->sy;
	d->sxy += s->sxy;
	d->syy += s->syy;
}

int history_sum_merge(struct history_sum *dst, const struct history_sum *src)
{
	int rc = 0;

	for (int o = 0; o < OUTCOME_COUNT; o++)
		dst->outcomes[o] += src->outcomes[o];
	dst->output_tokens += src->output_tokens;
	dst->input_tokens += src->input_tokens;
	dst->speed_tokens += src->speed_tokens;
	dst->speed_us += src->speed_us;
	dst->stalls += src->stalls;
	dst->good += src->good;
	dst->bad += src->bad;
	dst->active = src->active;
	if (src->peak > dst->peak)
		dst->peak = src->peak;
	r2_add(&dst->r2, &src->r2);
	rc |= hist_sparse_merge(&dst->ttft, &src->ttft);
	rc |= hist_sparse_merge(&dst->tpot, &src->tpot);
	rc |= hist_sparse_merge(&dst->itl, &src->itl);
	rc |= hist_sparse_merge(&dst->ttfo, &src->ttfo);
	return rc;
}

/* ---- a step's bytes --------------------------------------------------------
 *
 * A varint of the fields present, then each present field in this order:
 * outcomes (a varint mask of those present, then each one's count), output
 * and input tokens, speed (tokens, µs), stalls, good, bad, active and peak
 * (zigzag), R² sums (n, Σx, Σx² as varints; Σy, Σxy, Σy² as 8-byte IEEE
 * doubles, little-endian), then the histograms TTFT, TPOT, ITL, TTFO: count,
 * sum, min, max - min, the number of buckets, and per bucket the distance
 * from the previous one's index (the first: its index) and its count. */

enum {
	F_OUTCOMES = 1 << 0, F_OUT_TOKENS = 1 << 1, F_IN_TOKENS = 1 << 2,
	F_SPEED = 1 << 3, F_STALLS = 1 << 4, F_GOOD = 1 << 5, F_BAD = 1 << 6,
	F_ACTIVE = 1 << 7, F_PEAK = 1 << 8, F_R2 = 1 << 9, F_TTFT = 1 << 10,
	F_TPOT = 1 << 11, F_ITL = 1 << 12, F_TTFO = 1 << 13, F_ALL = (1 << 14) - 1
};

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static void put_double(struct pb *b, double v)
{
	uint64_t u;
	uint8_t le[8];

	memcpy(&u, &v, sizeof u);
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(u >> (8 * i));
	pb_raw(b, le, sizeof le);
}

static void put_hist(struct pb *b, const struct hist_sparse *h)
{
	const struct hist_sparse_entry *e = hist_sparse_entries(h);
	unsigned prev = 0;

	pb_varint(b, h->count);
	pb_varint(b, h->sum);
	pb_varint(b, h->min);
	pb_varint(b, h->max - h->min);
	pb_varint(b, h->n);
	for (uint32_t i = 0; i < h->n; i++) {
		pb_varint(b, i == 0 ? e[i].idx : (unsigned)e[i].idx - prev - 1);
		pb_varint(b, e[i].count);
		prev = e[i].idx;
	}
}

void history_encode(struct pb *b, const struct history_sum *s)
{
	uint64_t fields = 0, outcomes = 0;
	const struct hist_sparse *hs[4] = { &s->ttft, &s->tpot, &s->itl, &s->ttfo };

	for (int o = 0; o < OUTCOME_COUNT; o++)
		if (s->outcomes[o])
			outcomes |= 1ull << o;
	fields |= outcomes ? F_OUTCOMES : 0;
	fields |= s->output_tokens ? F_OUT_TOKENS : 0;
	fields |= s->input_tokens ? F_IN_TOKENS : 0;
	fields |= s->speed_tokens || s->speed_us ? F_SPEED : 0;
	fields |= s->stalls ? F_STALLS : 0;
	fields |= s->good ? F_GOOD : 0;
	fields |= s->bad ? F_BAD : 0;
	fields |= s->active ? F_ACTIVE : 0;
	fields |= s->peak ? F_PEAK : 0;
	fields |= s->r2.n ? F_R2 : 0;
	for (int i = 0; i < 4; i++)
		fields |= hs[i]->count ? (uint64_t)F_TTFT << i : 0;
	if (fields == 0)
		return;
	pb_varint(b, fields);
	if (outcomes) {
		pb_varint(b, outcomes);
		for (int o = 0; o < OUTCOME_COUNT; o++)
			if (s->outcomes[o])
				pb_varint(b, s->outcomes[o]);
	}
	if (fields & F_OUT_TOKENS)
		pb_varint(b, s->output_tokens);
	if (fields & F_IN_TOKENS)
		pb_varint(b, s->input_tokens);
	if (fields & F_SPEED) {
		pb_varint(b, s->speed_tokens);
		pb_varint(b, s->speed_us);
	}
	if (fields & F_STALLS)
		pb_varint(b, s->stalls);
	if (fields & F_GOOD)
		pb_varint(b, s->good);
	if (fields & F_BAD)
		pb_varint(b, s->bad);
	if (fields & F_ACTIVE)
		pb_varint(b, zigzag(s->active));
	if (fields & F_PEAK)
		pb_varint(b, zigzag(s->peak));
	if (fields & F_R2) {
		pb_varint(b, s->r2.n);
		pb_varint(b, s->r2.sx);
		pb_varint(b, s->r2.sxx);
		put_double(b, s->r2.sy);
		put_double(b, s->r2.sxy);
		put_double(b, s->r2.syy);
	}
	for (int i = 0; i < 4; i++)
		if (hs[i]->count)
			put_hist(b, hs[i]);
}

struct rd {
	const uint8_t *p, *end, *start;
	char *why;
	size_t why_len;
};

static int rd_fail(struct rd *r, const char *what)
{
	if (r->why != NULL && r->why_len > 0)
		snprintf(r->why, r->why_len, "%s at byte %zu of a step", what,
		    (size_t)(r->p - r->start));
	return -1;
}

static int rd_varint(struct rd *r, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t c;
		if (r->p >= r->end)
			return rd_fail(r, "cut short");
		c = *r->p++;
		if (shift == 63 && c > 1)
			break;
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return rd_fail(r, "a number over 64 bits");
}

static int rd_double(struct rd *r, double *v)
{
	uint64_t u = 0;

	if (r->end - r->p < 8)
		return rd_fail(r, "cut short");
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)r->p[i] << (8 * i);
	r->p += 8;
	memcpy(v, &u, sizeof *v);
	if (!isfinite(*v))
		return rd_fail(r, "a sum that is not a number");
	return 0;
}

/* A histogram's encoding, checked whole: buckets ascending and inside the
 * layout, their counts summing to count, min and max in the first and last
 * bucket, the sum between count * min and count * max. */
static int rd_hist(struct rd *r, struct hist_sparse *h)
{
	uint64_t count, sum, min, span, n, total = 0, idx = 0, d, c;
	struct hist_sparse_entry *e;

	hist_sparse_clear(h);
	if (rd_varint(r, &count) || rd_varint(r, &sum) || rd_varint(r, &min) ||
	    rd_varint(r, &span) || rd_varint(r, &n))
		return -1;
	if (count == 0 || n == 0 || n > HIST_BUCKETS || span > UINT64_MAX - min)
		return rd_fail(r, "a histogram out of shape");
	if (n > (h->cap ? h->cap : 1)) {    /* one entry stays in place */
		e = h->cap ? realloc(h->u.e, n * sizeof *e) : malloc(n * sizeof *e);
		if (e == NULL)
			return rd_fail(r, "out of memory");
		h->u.e = e;
		h->cap = (uint32_t)n;
	}
	e = hist_sparse_entries(h);
	for (uint64_t i = 0; i < n; i++) {
		if (rd_varint(r, &d) || rd_varint(r, &c))
			return -1;
		if (d >= HIST_BUCKETS || (idx = i == 0 ? d : idx + d + 1) >= HIST_BUCKETS)
			return rd_fail(r, "a bucket past the last");
		if (c == 0 || c > UINT32_MAX)
			return rd_fail(r, "a bucket's count out of range");
		e[i].idx = (uint16_t)idx;
		e[i].count = (uint32_t)c;
		total += c;
	}
	if (total != count || hist_bucket(min) != e[0].idx ||
	    hist_bucket(min + span) != e[n - 1].idx || sum < min ||
	    (min + span != 0 && count <= UINT64_MAX / (min + span) && sum > count * (min + span)))
		return rd_fail(r, "a histogram whose totals disagree with its buckets");
	h->n = (uint32_t)n;
	h->count = count;
	h->sum = sum;
	h->min = min;
	h->max = min + span;
	return 0;
}

int history_decode(const uint8_t *p, size_t len, const int *map, size_t n_map,
    struct history_sum *s, char *why, size_t why_len)
{
	/* one step's buckets at a time (the main thread's only) */
	static struct hist_sparse tmp;
	struct rd r = { p, p + len, p, why, why_len };
	struct hist_sparse *hs[4] = { &s->ttft, &s->tpot, &s->itl, &s->ttfo };
	struct history_sum add = { 0 };
	uint64_t fields, v;
	int i;

	if (len == 0) {
		s->active = 0;             /* an empty step: nothing ran */
		return 0;
	}
	if (rd_varint(&r, &fields))
		return -1;
	if (fields == 0 || (fields & ~(uint64_t)F_ALL))
		return rd_fail(&r, "unknown fields");
	if (fields & F_OUTCOMES) {
		uint64_t mask;
		if (rd_varint(&r, &mask))
			return -1;
		if (mask == 0)
			return rd_fail(&r, "no outcome");
		for (i = 0; i < 64; i++) {
			if (!(mask & (1ull << i)))
				continue;
			if (rd_varint(&r, &v))
				return -1;
			if (map == NULL ? i >= OUTCOME_COUNT : (size_t)i >= n_map)
				return rd_fail(&r, "an unknown outcome");
			if (map == NULL)
				add.outcomes[i] = v;
			else if (map[i] >= 0)
				add.outcomes[map[i]] += v;
		}
	}
	if (((fields & F_OUT_TOKENS) && rd_varint(&r, &add.output_tokens)) ||
	    ((fields & F_IN_TOKENS) && rd_varint(&r, &add.input_tokens)) ||
	    ((fields & F_SPEED) && (rd_varint(&r, &add.speed_tokens) ||
	    rd_varint(&r, &add.speed_us))) ||
	    ((fields & F_STALLS) && rd_varint(&r, &add.stalls)) ||
	    ((fields & F_GOOD) && rd_varint(&r, &add.good)) ||
	    ((fields & F_BAD) && rd_varint(&r, &add.bad)))
		return -1;
	if (fields & F_ACTIVE) {
		if (rd_varint(&r, &v))
			return -1;
		add.active = unzigzag(v);
	}
	if (fields & F_PEAK) {
		if (rd_varint(&r, &v))
			return -1;
		add.peak = unzigzag(v);
	}
	if ((fields & F_R2) && (rd_varint(&r, &add.r2.n) || rd_varint(&r, &add.r2.sx) ||
	    rd_varint(&r, &add.r2.sxx) || rd_double(&r, &add.r2.sy) ||
	    rd_double(&r, &add.r2.sxy) || rd_double(&r, &add.r2.syy)))
		return -1;
	/* the buckets are checked whole before any is merged */
	for (i = 0; i < 4; i++) {
		if (!(fields & ((uint64_t)F_TTFT << i)))
			continue;
		if (rd_hist(&r, &tmp))
			return -1;
		if (hist_sparse_merge(hs[i], &tmp) < 0)
			return rd_fail(&r, "out of memory");
	}
	if (r.p != r.end)
		return rd_fail(&r, "bytes after the step");
	return history_sum_merge(s, &add) < 0 ? rd_fail(&r, "out of memory") : 0;
}

struct history_blob *history_blob_of(const struct history_sum *s, int *oom)
{
	static struct pb b;            /* reused: the main thread's */
	struct history_blob *blob;

	b.n = 0;
	b.oom = 0;
	history_encode(&b, s);
	if (b.oom) {
		*oom = 1;
		return NULL;
	}
	if (b.n == 0)
		return NULL;
	blob = malloc(sizeof *blob + b.n);
	if (blob == NULL) {
		*oom = 1;
		return NULL;
	}
	blob->len = (uint32_t)b.n;
	memcpy(blob->b, b.p, b.n);
	return blob;
}

/* ---- the store ------------------------------------------------------------ */

struct history *history_new(const struct conf_history_step *t, size_t n)
{
	struct history *h;

	if (conf_history_check(t, n) != NULL)
		return NULL;
	h = calloc(1, sizeof *h);
	if (h == NULL)
		return NULL;
	h->n_tiers = n;
	for (size_t i = 0; i < n; i++) {
		h->tier[i] = t[i];
		h->slots[i] = t[i].keep_us / t[i].step_us;
	}
	if (history_series_get(h, HISTORY_INSTANCE, "", 1) == NULL) {
		free(h);
		return NULL;
	}
	return h;
}

static void series_free(struct history *h, struct history_series *se)
{
	for (size_t k = 0; k < HISTORY_TIERS_MAX; k++) {
		if (se->ring[k] == NULL)
			continue;
		for (uint64_t i = 0; i < h->slots[k]; i++)
			if (se->ring[k][i] != NULL) {
				h->bytes -= sizeof *se->ring[k][i] + se->ring[k][i]->len;
				free(se->ring[k][i]);
			}
		h->bytes -= h->slots[k] * sizeof *se->ring[k];
		free(se->ring[k]);
	}
	history_sum_free(&se->open[0]);
	history_sum_free(&se->open[1]);
	free(se);
}

void history_free(struct history *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < h->n; i++)
		series_free(h, h->v[i]);
	free(h->v);
	free(h);
}

size_t history_tiers(const struct history *h, const struct conf_history_step **t)
{
	*t = h->tier;
	return h->n_tiers;
}

void history_set_offset(struct history *h, int64_t offset_us)
{
	h->offset = offset_us;
}

int64_t history_offset(const struct history *h)
{
	return h->offset;
}

/* name as a series keeps it: cut to HISTORY_NAME_MAX - 1 bytes, as
 * snprintf's "%s" would; without its ~600 instructions, three times a
 * request. */
static void name_cut(char cut[HISTORY_NAME_MAX], const char *name)
{
	size_t n = strnlen(name, HISTORY_NAME_MAX - 1);

	memcpy(cut, name, n);
	cut[n] = '\0';
}

struct history_series *history_series_get(struct history *h, enum history_kind kind,
    const char *name, int create)
{
	struct history_series *se;
	char cut[HISTORY_NAME_MAX];

	name_cut(cut, name);
	if (h->last != NULL && h->last->kind == kind && strcmp(h->last->name, cut) == 0)
		return h->last;
	for (size_t i = 0; i < h->n; i++)
		if (h->v[i]->kind == kind && strcmp(h->v[i]->name, cut) == 0)
			return h->last = h->v[i];
	if (!create || h->n >= HISTORY_SERIES_MAX ||
	    (kind != HISTORY_INSTANCE && h->keep != NULL && !h->keep(h->keep_arg, kind, cut)))
		return NULL;
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct history_series **v = realloc(h->v, cap * sizeof *v);
		if (v == NULL)
			return NULL;
		h->v = v;
		h->cap = cap;
	}
	if ((se = calloc(1, sizeof *se)) == NULL)
		return NULL;
	se->kind = kind;
	memcpy(se->name, cut, sizeof cut);
	h->v[h->n++] = se;
	return h->last = se;
}

int history_put(struct history *h, struct history_series *se, size_t k, uint64_t idx,
    struct history_blob *b)
{
	struct history_blob **slot;

	if (se->ring[k] == NULL) {
		if (b == NULL)
			return 0;
		se->ring[k] = calloc(h->slots[k], sizeof *se->ring[k]);
		if (se->ring[k] == NULL) {
			free(b);
			return -1;
		}
		h->bytes += h->slots[k] * sizeof *se->ring[k];
	}
	slot = &se->ring[k][idx % h->slots[k]];
	if (*slot != NULL) {
		h->bytes -= sizeof **slot + (*slot)->len;
		se->n_blobs--;
		free(*slot);
	}
	*slot = b;
	if (b != NULL) {
		h->bytes += sizeof *b + b->len;
		se->n_blobs++;
	}
	return 0;
}

void history_start(struct history *h, uint64_t idx)
{
	h->open_from = idx > 0 ? idx - 1 : 0;
	h->closed[0] = h->open_from;
	for (size_t k = 1; k < h->n_tiers; k++)
		h->closed[k] = h->open_from * h->tier[0].step_us / h->tier[k].step_us;
	h->started = 1;
}

/* Tier k's steps [i0, i1) merged into s, in time order: from its ring where
 * closed, else from the finer tier (the finest: its open steps). Steps
 * older than the ring are empty. */
static int merge_steps(const struct history *h, const struct history_series *se,
    size_t k, uint64_t i0, uint64_t i1, struct history_sum *s)
{
	for (uint64_t i = i0; i < i1; i++) {
		if (i < h->closed[k]) {
			const struct history_blob *b = NULL;
			if (se->ring[k] != NULL && i + h->slots[k] >= h->closed[k])
				b = se->ring[k][i % h->slots[k]];
			if (history_decode(b ? b->b : NULL, b ? b->len : 0, NULL, 0, s,
			    NULL, 0) < 0)
				return -1;
		} else if (k > 0) {
			uint64_t r = h->tier[k].step_us / h->tier[k - 1].step_us;
			if (merge_steps(h, se, k - 1, i * r, (i + 1) * r, s) < 0)
				return -1;
		} else if (i - h->open_from < 2) {
			if (history_sum_merge(s, &se->open[i - h->open_from]) < 0)
				return -1;
		}
	}
	return 0;
}

/* Tier k's step c, now that the finer tier has closed all of it. */
static void rollup(struct history *h, size_t k, uint64_t c)
{
	static struct history_sum acc;
	uint64_t r = h->tier[k].step_us / h->tier[k - 1].step_us;

	for (size_t i = 0; i < h->n; i++) {
		struct history_series *se = h->v[i];
		int oom = 0;
		if (se->ring[k - 1] == NULL) {
			history_put(h, se, k, c, NULL);
			continue;
		}
		history_sum_clear(&acc);
		if (merge_steps(h, se, k - 1, c * r, (c + 1) * r, &acc) < 0)
			continue;             /* out of memory: the slot keeps its old self */
		history_put(h, se, k, c, history_blob_of(&acc, &oom));
	}
}

/* A series with nothing kept, nothing open and nothing running goes (the
 * instance stays): a route removed by a reload leaves in a day. */
static void prune(struct history *h)
{
	size_t kept = 0;

	for (size_t i = 0; i < h->n; i++) {
		struct history_series *se = h->v[i];
		if (se->kind != HISTORY_INSTANCE && se->n_blobs == 0 && se->active == 0 &&
		    sum_empty(&se->open[0]) && sum_empty(&se->open[1])) {
			series_free(h, se);
			continue;
		}
		h->v[kept++] = se;
	}
	h->n = kept;
	h->last = NULL;
}

void history_set_keep(struct history *h,
    int (*keep)(void *arg, enum history_kind kind, const char *name), void *arg)
{
	size_t kept = 0;

	h->keep = keep;
	h->keep_arg = arg;
	for (size_t i = 0; i < h->n; i++) {
		struct history_series *se = h->v[i];
		if (se->kind != HISTORY_INSTANCE && keep != NULL &&
		    !keep(arg, se->kind, se->name)) {
			series_free(h, se);
			continue;
		}
		h->v[kept++] = se;
	}
	h->n = kept;
	h->last = NULL;
}

static void close_step(struct history *h)
{
	uint64_t idx = h->open_from;

	for (size_t i = 0; i < h->n; i++) {
		struct history_series *se = h->v[i];
		struct history_sum t = se->open[0];
		int oom = 0;
		history_put(h, se, 0, idx, history_blob_of(&se->open[0], &oom));
		se->open[0] = se->open[1];
		se->open[1] = t;
		history_sum_clear(&se->open[1]);
		/* what runs on into the new step counts in it from its start */
		se->open[1].active = se->open[1].peak = se->active;
	}
	h->open_from = h->closed[0] = idx + 1;
	for (size_t k = 1; k < h->n_tiers; k++)
		while ((h->closed[k] + 1) * h->tier[k].step_us <=
		    h->closed[k - 1] * h->tier[k - 1].step_us) {
			rollup(h, k, h->closed[k]);
			h->closed[k]++;
		}
	prune(h);
}

void history_advance(struct history *h, uint64_t now_wall)
{
	uint64_t idx, target;
	const struct conf_history_step *last;

	if (h->n_tiers == 0)
		return;
	idx = now_wall / h->tier[0].step_us;
	if (!h->started) {
		history_start(h, idx);
		return;
	}
	target = idx > 0 ? idx - 1 : 0;
	if (target <= h->open_from)
		return;
	last = &h->tier[h->n_tiers - 1];
	/* away longer than the longest span (a suspended host, a clock set
	 * forward): nothing kept is still in it */
	if ((target - h->open_from) * h->tier[0].step_us > last->keep_us + last->step_us) {
		for (size_t i = 0; i < h->n; i++) {
			struct history_series *se = h->v[i];
			for (size_t k = 0; k < h->n_tiers; k++)
				for (uint64_t j = 0; se->ring[k] != NULL && j < h->slots[k]; j++)
					history_put(h, se, k, j, NULL);
			history_sum_clear(&se->open[0]);
			history_sum_clear(&se->open[1]);
			se->open[0].active = se->open[0].peak = se->active;
			se->open[1].active = se->open[1].peak = se->active;
		}
		history_start(h, idx);
		prune(h);
		return;
	}
	while (h->open_from < target)
		close_step(h);
}

size_t history_bytes(const struct history *h)
{
	size_t n = sizeof *h + h->cap * sizeof *h->v + h->bytes;

	for (size_t i = 0; i < h->n; i++) {
		const struct history_series *se = h->v[i];
		n += sizeof *se;
		for (int j = 0; j < 2; j++)
			n += (se->open[j].ttft.cap + se->open[j].tpot.cap + se->open[j].itl.cap +
			    se->open[j].ttfo.cap) * sizeof(struct hist_sparse_entry);
	}
	return n;
}

/* ---- feeding -------------------------------------------------------------- */

/* The open step time t (the feeder's clock) falls in, the store moved on
 * to it first: 0 or 1; -1 without tiers. A step already closed (a record
 * that came late) counts in the older open one. */
static int open_slot(struct history *h, uint64_t t)
{
	int64_t w = (int64_t)t + h->offset;
	uint64_t idx;

	if (h->n_tiers == 0)
		return -1;
	idx = (uint64_t)(w > 0 ? w : 0) / h->tier[0].step_us;
	if (!h->started)
		history_start(h, idx);
	else if (idx > h->open_from + 1)
		history_advance(h, (idx + 1) * h->tier[0].step_us - 1);
	return idx <= h->open_from ? 0 : 1;
}

static void add_request(struct history_sum *s, const struct history_req *r)
{
	if ((unsigned)r->outcome < OUTCOME_COUNT)
		s->outcomes[r->outcome]++;
	s->output_tokens += r->output_tokens;
	s->input_tokens += r->input_tokens;
	s->speed_tokens += r->speed_tokens;
	s->speed_us += r->speed_us;
	s->stalls += r->stalls;
	if (r->ttft_us >= 0)
		hist_sparse_record(&s->ttft, (uint64_t)r->ttft_us);
	/* the headroom's line is the server side's TTFT (sample.h) */
	if (r->ttft_server_us >= 0) {
		if (r->concurrency >= 0) {
			uint64_t x = (uint64_t)r->concurrency;
			double y = (double)r->ttft_server_us / 1000.0;
			s->r2.n++;
			s->r2.sx += x;
			s->r2.sxx += x * x;
			s->r2.sy += y;
			s->r2.sxy += (double)x * y;
			s->r2.syy += y * y;
		}
	}
	if (r->tpot_us >= 0)
		hist_sparse_record(&s->tpot, (uint64_t)r->tpot_us);
	if (r->ttfo_us >= 0)
		hist_sparse_record(&s->ttfo, (uint64_t)r->ttfo_us);
}

/* The instance, and the route's series when there is room for it. */
static int targets(struct history *h, const char *route, struct history_series *se[2])
{
	se[0] = h->v[0];
	se[1] = route != NULL ? history_series_get(h, HISTORY_ROUTE, route, 1) : NULL;
	return se[1] != NULL ? 2 : 1;
}

void history_request(struct history *h, const char *route, uint64_t t,
    const struct history_req *r)
{
	struct history_series *se[2];
	int d = open_slot(h, t);

	if (d < 0)
		return;
	for (int i = targets(h, route, se) - 1; i >= 0; i--)
		add_request(&se[i]->open[d], r);
}

void history_itl(struct history *h, const char *route, uint64_t t,
    const uint32_t *counts, const uint16_t *used, unsigned n_used, uint64_t count,
    uint64_t sum, uint64_t min, uint64_t max)
{
	struct history_series *se[2];
	int d = open_slot(h, t);

	if (d < 0 || count == 0)
		return;
	for (int i = targets(h, route, se) - 1; i >= 0; i--)
		hist_sparse_add_counts(&se[i]->open[d].itl, counts, used, n_used, count,
		    sum, min, max);
}

void history_stall(struct history *h, const char *route, uint64_t t)
{
	struct history_series *se[2];
	int d = open_slot(h, t);

	if (d < 0)
		return;
	for (int i = targets(h, route, se) - 1; i >= 0; i--)
		se[i]->open[d].stalls++;
}

/* The series' streams now are n, at most peak at once meanwhile: the open
 * steps from slot d on see them. */
static void running(struct history_series *se, int d, int64_t n, int64_t peak)
{
	se->active = n;
	for (; d < 2; d++) {
		se->open[d].active = n;
		if (peak > se->open[d].peak)
			se->open[d].peak = peak;
		if (n > se->open[d].peak)
			se->open[d].peak = n;
	}
}

void history_active(struct history *h, const char *route, uint64_t t, int delta)
{
	struct history_series *se;
	int d = open_slot(h, t);

	if (d < 0 || (se = history_series_get(h, HISTORY_ROUTE, route, 1)) == NULL)
		return;
	/* a stream that began before its route's series was made (a route a
	 * reload removed and brought back) ends without taking it below 0 */
	running(se, d, se->active + delta > 0 ? se->active + delta : 0, 0);
}

void history_concurrency(struct history *h, uint64_t t, int64_t now, int64_t peak)
{
	int d = open_slot(h, t);

	if (d >= 0)
		running(h->v[0], d, now, peak);
}

void history_slo(struct history *h, const char *slo, uint64_t t, uint64_t good,
    uint64_t bad)
{
	struct history_series *se;
	int d = open_slot(h, t);

	if (d < 0 || (good == 0 && bad == 0) ||
	    (se = history_series_get(h, HISTORY_SLO, slo, 1)) == NULL)
		return;
	se->open[d].good += good;
	se->open[d].bad += bad;
}

/* ---- reading -------------------------------------------------------------- */

size_t history_n_series(const struct history *h)
{
	return h->n;
}

const struct history_series *history_series_at(const struct history *h, size_t i)
{
	return i < h->n ? h->v[i] : NULL;
}

const struct history_series *history_find(const struct history *h,
    enum history_kind kind, const char *name)
{
	char cut[HISTORY_NAME_MAX];

	name_cut(cut, name ? name : "");
	for (size_t i = 0; i < h->n; i++)
		if (h->v[i]->kind == kind && strcmp(h->v[i]->name, cut) == 0)
			return h->v[i];
	return NULL;
}

enum history_kind history_series_kind(const struct history_series *s)
{
	return s->kind;
}

const char *history_series_name(const struct history_series *s)
{
	return s->name;
}

int64_t history_series_active(const struct history_series *s)
{
	return s->active;
}

#define POINTS_MAX 10000

int history_view(const struct history *h, uint64_t now_wall, uint64_t range_us,
    uint64_t step_us, struct history_view *v, char *why, size_t why_len)
{
	size_t k;
	uint64_t points;

	if (h->n_tiers == 0) {
		snprintf(why, why_len, "history: none is kept (stats.history is empty)");
		return -1;
	}
	if (range_us == 0)
		range_us = h->tier[0].keep_us;
	for (k = 0; k < h->n_tiers; k++)
		if (h->tier[k].keep_us >= range_us &&
		    (step_us == 0 || step_us % h->tier[k].step_us == 0))
			break;
	if (k == h->n_tiers) {
		size_t n = (size_t)snprintf(why, why_len, "%s; kept: ",
		    range_us > h->tier[h->n_tiers - 1].keep_us ? "range: longer than kept" :
		    "step: not a multiple of a step kept over the range");
		for (size_t i = 0; i < h->n_tiers && n < why_len; i++) {
			char st[32], kt[32];
			util_duration_text(h->tier[i].step_us, st, sizeof st);
			util_duration_text(h->tier[i].keep_us, kt, sizeof kt);
			n += (size_t)snprintf(why + n, why_len - n, "%s%s steps over %s",
			    i ? ", " : "", st, kt);
		}
		return -1;
	}
	if (step_us == 0)
		step_us = h->tier[k].step_us;
	points = (range_us + step_us - 1) / step_us;
	if (points > POINTS_MAX) {
		snprintf(why, why_len, "step: too short for the range (at most %d points)",
		    POINTS_MAX);
		return -1;
	}
	if (points > now_wall / step_us + 1)
		points = now_wall / step_us + 1;
	v->tier = k;
	v->step_us = step_us;
	v->points = (size_t)points;
	v->first = now_wall / step_us + 1 - points;
	return 0;
}

int history_merge(const struct history *h, const struct history_series *se,
    const struct history_view *v, size_t p0, size_t p1, struct history_sum *s)
{
	uint64_t r = v->step_us / h->tier[v->tier].step_us;

	if (!h->started || p1 <= p0)
		return 0;
	return merge_steps(h, se, v->tier, (v->first + p0) * r, (v->first + p1) * r, s);
}

int history_window(const struct history *h, const struct history_series *se,
    uint64_t now_wall, uint64_t window_us, struct history_sum *cur,
    struct history_sum *prev)
{
	size_t k;
	uint64_t n, last, step;

	for (k = 0; k < h->n_tiers; k++)
		if (h->tier[k].keep_us >= 2 * window_us)
			break;
	if (k == h->n_tiers || window_us == 0)
		return -1;
	if (se == NULL || !h->started)
		return 0;
	step = h->tier[k].step_us;
	n = (window_us + step - 1) / step;
	last = now_wall / step;
	if (last + 1 < 2 * n)
		return 0;
	if (merge_steps(h, se, k, last + 1 - n, last + 1, cur) < 0 ||
	    merge_steps(h, se, k, last + 1 - 2 * n, last + 1 - n, prev) < 0)
		return -1;
	return 0;
}

/* ---- re-bucketing ------------------------------------------------------------ */

/* The finest tier of h whose step divides step_us and that still holds
 * the step starting at t; -1 when none. */
static int source_tier(const struct history *h, uint64_t step_us, uint64_t t)
{
	for (size_t k = 0; k < h->n_tiers; k++) {
		uint64_t s = h->tier[k].step_us;
		uint64_t oldest = h->closed[k] > h->slots[k] ? h->closed[k] - h->slots[k] : 0;
		if (step_us % s == 0 && t / s >= oldest)
			return (int)k;
	}
	return -1;
}

/* Step idx of length step_us (its start t) read from old into s. */
static int read_old(const struct history *old, const struct history_series *se,
    uint64_t step_us, uint64_t idx, struct history_sum *s)
{
	int k = source_tier(old, step_us, idx * step_us);
	uint64_t r;

	if (k < 0)
		return 0;
	r = step_us / old->tier[k].step_us;
	return merge_steps(old, se, (size_t)k, idx * r, (idx + 1) * r, s);
}

struct history *history_retier(struct history *h, const struct conf_history_step *t,
    size_t n, uint64_t now_wall)
{
	static struct history_sum acc;
	struct history *nh = history_new(t, n);
	int oom = 0;

	if (nh == NULL)
		return NULL;
	nh->offset = h->offset;
	if (!h->started || n == 0) {
		history_set_keep(nh, h->keep, h->keep_arg);
		history_free(h);
		return nh;
	}
	history_advance(h, now_wall);
	history_start(nh, now_wall / nh->tier[0].step_us);
	for (size_t i = 0; i < h->n && !oom; i++) {
		const struct history_series *old = h->v[i];
		struct history_series *se = history_series_get(nh, old->kind, old->name, 1);
		if (se == NULL) {
			oom = 1;
			break;
		}
		se->active = old->active;
		for (size_t k = 0; k < nh->n_tiers && !oom; k++) {
			uint64_t s = nh->tier[k].step_us;
			uint64_t from = nh->closed[k] > nh->slots[k] ? nh->closed[k] - nh->slots[k] : 0;
			for (uint64_t c = from; c < nh->closed[k] && !oom; c++) {
				history_sum_clear(&acc);
				oom = read_old(h, old, s, c, &acc) < 0;
				if (!oom)
					oom = history_put(nh, se, k, c, history_blob_of(&acc, &oom)) < 0;
			}
		}
		for (int d = 0; d < 2 && !oom; d++)
			oom = read_old(h, old, nh->tier[0].step_us, nh->open_from + (uint64_t)d,
			    &se->open[d]) < 0;
	}
	if (oom) {
		history_free(nh);
		return NULL;
	}
	history_set_keep(nh, h->keep, h->keep_arg);   /* h's series were kept */
	prune(nh);
	history_free(h);
	return nh;
}
