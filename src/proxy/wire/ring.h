/* SPDX-License-Identifier: Apache-2.0 */
/* The workers' records to the main thread. Workers never lock: each
 * stream's start and end, each stall, every RING_ITL_BATCH token gaps of a
 * running stream and each finished request (its sample, sample.h) become a
 * fixed-size record in the worker's own single-producer ring. The main
 * thread's statistics (stats.c) drain every ring every 50 ms and before
 * answering /stats or /metrics. When the reader falls behind, a full ring
 * spills into blocks the worker allocates (the only allocation, and the
 * only lock, of a worker's records, and only then), up to about 64 MiB per
 * worker; past that a record is dropped and counted. */
#ifndef TOKENTAP_RING_H
#define TOKENTAP_RING_H

#include <stdint.h>

#include "sample.h"
#include "span.h"

#define RING_ITL_BATCH 32

enum ring_kind { RING_ACTIVE, RING_ITL, RING_REQUEST, RING_STALL };

struct ring_rec {
	uint8_t kind;              /* enum ring_kind */
	uint8_t n_itl;
	int32_t delta;             /* RING_ACTIVE, RING_STALL: +1 or -1 */
	uint64_t t_us;             /* when it happened (monotonic) */
	struct sample_key key;
	uint32_t itl[RING_ITL_BATCH];   /* RING_ITL, RING_REQUEST: gaps, µs */
	struct sample s;           /* RING_REQUEST */
};

struct ring;

/* The clock records are stamped with (tests replace it). */
extern uint64_t (*ring_clock)(void);

/* ---- a worker's side ------------------------------------------------------ */

/* A worker's ring, registered with the reader; lives until exit. NULL when
 * memory or the ring slots ran out. */
struct ring *ring_new(void);
/* An id for a stream of r's worker, unique in the process, never 0. */
uint64_t ring_stream_id(struct ring *r);
/* A stream of this group started (+1) or ended (-1): the `active` gauges. */
void ring_active(struct ring *r, const struct sample_key *k, int delta);
/* A stream of this group stalled (+1), or its stall ended (-1): the
 * stalled-now gauges; a +1 counts a stall. */
void ring_stall(struct ring *r, const struct sample_key *k, int delta);
/* Token gaps of a running stream (n <= RING_ITL_BATCH). */
void ring_itl(struct ring *r, const struct sample_key *k,
    const uint32_t *gaps, unsigned n);
/* A finished request, with its last token gaps. key->mint is cleared for
 * a request tokentap refused. */
void ring_request(struct ring *r, const struct sample_key *k,
    const struct sample *s, const uint32_t *gaps, unsigned n);

/* A finished request's span (span.h) goes through a second queue of the
 * worker's, beside its records: bounded (RING_SPANS, allocated at the
 * first span), never spilled; when the exporter falls behind a span is
 * dropped and counted, the request is not slowed. The slot to fill, or
 * NULL (full: dropped, counted); then ring_span_publish. */
#define RING_SPANS 512
struct span *ring_span_slot(struct ring *r);
void ring_span_publish(struct ring *r);

/* ---- the main thread's ---------------------------------------------------- */

/* Calls fn for every record of every ring, in each ring's order; returns
 * the records dropped since the last drain (the reader fell behind). */
uint64_t ring_drain(void (*fn)(void *arg, const struct ring_rec *x), void *arg);
/* Calls fn for at most max spans of every worker's queue, oldest first;
 * returns the spans the workers dropped since the last call. */
uint64_t ring_span_drain(void (*fn)(void *arg, const struct span *s), void *arg,
    uint64_t max);
/* At exit, once no worker writes: frees every ring and what it spilled. */
void ring_free_all(void);

#endif
