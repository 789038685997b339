/* SPDX-License-Identifier: Apache-2.0 */
#include "ring.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

uint64_t (*ring_clock)(void) = util_now_us;

#define RING_CAP 4096          /* records; about 2 MiB per worker */
#define MAX_RINGS 256
#define OVF_BLOCK 1024
#define OVF_MAX_BLOCKS 128     /* about 64 MiB per worker */

struct ovf_block {
	struct ovf_block *next;
	unsigned n;
	struct ring_rec recs[OVF_BLOCK];
};

struct ring {
	_Atomic uint64_t head;     /* next slot the worker writes */
	_Atomic uint64_t tail;     /* next slot the reader reads */
	_Atomic uint64_t dropped;
	pthread_mutex_t ovf_lock;
	struct ovf_block *ovf_first, *ovf_last;   /* under ovf_lock */
	size_t ovf_blocks;                         /* under ovf_lock */
	/* set while the spill holds records the reader has not taken: the
	 * worker's next records go there too, never into the ring ahead of
	 * them (a stream's -1 must not be read before its +1) */
	_Atomic int ovf_pending;
	int filling_ovf;           /* the worker's: a slot taken in a block */
	unsigned index;            /* among the rings */
	uint64_t streams;          /* the worker's: stream ids handed out */
	/* the span queue (ring_span_slot): the worker's until published */
	struct span *spans;        /* RING_SPANS, at the first span */
	_Atomic uint64_t span_head, span_tail, span_dropped;
	struct ring_rec recs[RING_CAP];
};

static struct ring *rings[MAX_RINGS];
static _Atomic int n_rings;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;

struct ring *ring_new(void)
{
	struct ring *r = calloc(1, sizeof *r);
	if (r == NULL)
		return NULL;
	pthread_mutex_init(&r->ovf_lock, NULL);
	pthread_mutex_lock(&rings_lock);
	if (atomic_load(&n_rings) == MAX_RINGS) {
		pthread_mutex_unlock(&rings_lock);
		free(r);
		return NULL;
	}
	r->index = (unsigned)atomic_load(&n_rings);
	rings[r->index] = r;
	atomic_fetch_add(&n_rings, 1);
	pthread_mutex_unlock(&rings_lock);
	return r;
}

uint64_t ring_stream_id(struct ring *r)
{
	return r != NULL ? (uint64_t)(r->index + 1) << 48 | ++r->streams : 0;
}

/* A slot in a spill block, the lock held until publish; NULL (the record
 * dropped, counted) past the spill's bound. */
static struct ring_rec *ovf_slot(struct ring *r)
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
	atomic_store_explicit(&r->ovf_pending, 1, memory_order_relaxed);
	return &b->recs[b->n];
}

/* Claims the next slot: in the ring, or, when the reader is behind, in a
 * spill block (the proxy never waits for statistics). */
static struct ring_rec *slot(struct ring *r)
{
	uint64_t h, t;
	if (r == NULL)
		return NULL;
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	t = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (h - t >= RING_CAP || atomic_load_explicit(&r->ovf_pending, memory_order_relaxed))
		return ovf_slot(r);
	return &r->recs[h % RING_CAP];
}

static void publish(struct ring *r)
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

/* A gauge of the group moved by delta (kind: which one). */
static void delta_rec(struct ring *r, enum ring_kind kind,
    const struct sample_key *k, int delta)
{
	struct ring_rec *x = slot(r);
	if (x == NULL)
		return;
	x->kind = (uint8_t)kind;
	x->delta = delta;
	x->key = *k;
	x->t_us = ring_clock();
	publish(r);
}

void ring_active(struct ring *r, const struct sample_key *k, int delta)
{
	delta_rec(r, RING_ACTIVE, k, delta);
}

void ring_stall(struct ring *r, const struct sample_key *k, int delta)
{
	delta_rec(r, RING_STALL, k, delta);
}

void ring_itl(struct ring *r, const struct sample_key *k,
    const uint32_t *gaps, unsigned n)
{
	struct ring_rec *x = slot(r);
	if (x == NULL)
		return;
	x->kind = RING_ITL;
	x->key = *k;
	x->t_us = ring_clock();
	x->n_itl = (uint8_t)n;
	if (n > 0)
		memcpy(x->itl, gaps, n * sizeof *gaps);
	publish(r);
}

void ring_request(struct ring *r, const struct sample_key *k,
    const struct sample *s, const uint32_t *gaps, unsigned n)
{
	struct ring_rec *x = slot(r);

	if (x == NULL)
		return;
	x->kind = RING_REQUEST;
	x->key = *k;
	if (s->outcome == OUTCOME_REJECTED)
		x->key.mint = 0;
	x->s = *s;
	x->t_us = x->s.t_us = s->t_us ? s->t_us : ring_clock();
	x->n_itl = (uint8_t)n;
	if (n > 0)
		memcpy(x->itl, gaps, n * sizeof *gaps);
	publish(r);
}

uint64_t ring_drain(void (*fn)(void *arg, const struct ring_rec *x), void *arg)
{
	int n = atomic_load(&n_rings);
	uint64_t dropped = 0;

	for (int i = 0; i < n; i++) {
		struct ring *r = rings[i];
		uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
		struct ovf_block *b, *next;

		dropped += atomic_exchange(&r->dropped, 0);
		for (; t < h; t++)
			fn(arg, &r->recs[t % RING_CAP]);
		atomic_store_explicit(&r->tail, t, memory_order_release);
		/* what spilled while the reader was away: the counts add up in
		 * any order, and each record carries its own time */
		pthread_mutex_lock(&r->ovf_lock);
		b = r->ovf_first;
		r->ovf_first = r->ovf_last = NULL;
		r->ovf_blocks = 0;
		atomic_store_explicit(&r->ovf_pending, 0, memory_order_relaxed);
		pthread_mutex_unlock(&r->ovf_lock);
		for (; b != NULL; b = next) {
			next = b->next;
			for (unsigned k = 0; k < b->n; k++)
				fn(arg, &b->recs[k]);
			free(b);
		}
	}
	return dropped;
}

struct span *ring_span_slot(struct ring *r)
{
	uint64_t h, t;

	if (r == NULL)
		return NULL;
	if (r->spans == NULL && (r->spans = calloc(RING_SPANS, sizeof *r->spans)) == NULL) {
		atomic_fetch_add_explicit(&r->span_dropped, 1, memory_order_relaxed);
		return NULL;
	}
	h = atomic_load_explicit(&r->span_head, memory_order_relaxed);
	t = atomic_load_explicit(&r->span_tail, memory_order_acquire);
	if (h - t >= RING_SPANS) {
		atomic_fetch_add_explicit(&r->span_dropped, 1, memory_order_relaxed);
		return NULL;
	}
	return &r->spans[h % RING_SPANS];
}

void ring_span_publish(struct ring *r)
{
	uint64_t h = atomic_load_explicit(&r->span_head, memory_order_relaxed);
	atomic_store_explicit(&r->span_head, h + 1, memory_order_release);
}

uint64_t ring_span_drain(void (*fn)(void *arg, const struct span *s), void *arg,
    uint64_t max)
{
	int n = atomic_load(&n_rings);
	uint64_t dropped = 0;

	for (int i = 0; i < n; i++) {
		struct ring *r = rings[i];
		uint64_t t = atomic_load_explicit(&r->span_tail, memory_order_relaxed);
		uint64_t h = atomic_load_explicit(&r->span_head, memory_order_acquire);

		dropped += atomic_exchange(&r->span_dropped, 0);
		for (; t < h && max > 0; t++, max--)
			fn(arg, &r->spans[t % RING_SPANS]);
		atomic_store_explicit(&r->span_tail, t, memory_order_release);
	}
	return dropped;
}

void ring_free_all(void)
{
	int n = atomic_load(&n_rings);

	for (int i = 0; i < n; i++) {
		struct ovf_block *b, *next;
		for (b = rings[i]->ovf_first; b != NULL; b = next) {
			next = b->next;
			free(b);
		}
		pthread_mutex_destroy(&rings[i]->ovf_lock);
		free(rings[i]->spans);
		free(rings[i]);
		rings[i] = NULL;
	}
	atomic_store(&n_rings, 0);
}
