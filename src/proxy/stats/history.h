/* SPDX-License-Identifier: Apache-2.0 */
/* The statistics' memory: each route's, each SLO's and the whole
 * instance's figures at fixed steps over the last hours, for the board
 * (GET /ui) and GET /stats/history. Pure: no clock, no I/O; the service
 * around it is historyd.c.
 *
 * Tiers: the finest step is fed as requests end and kept for its tier's
 * span; each coarser tier's step is a whole number of the finer one's and
 * is merged from it when it ends (10 s for an hour, 1 min for a day by
 * default). A step keeps histograms, not percentiles: TTFT, TPOT, ITL and
 * TTFO in hist.h's buckets, so a quantile over any stretch of steps is the
 * one of all their requests, within the histogram's 1 %. A closed step is
 * a few hundred bytes of varints (an idle one none); the last two of the
 * finest tier stay open, so that a request that ends a little late (the
 * drain runs every 50 ms) still finds its step. Steps are aligned on the
 * wall clock (a step of 10 s starts at :00, :10, ...), so that they mean
 * the same after a restart. */
#ifndef TOKENTAP_HISTORY_H
#define TOKENTAP_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hist.h"
#include "meter.h"

#define HISTORY_TIERS_MAX  CONF_HISTORY_STEPS_MAX
#define HISTORY_SERIES_MAX 1024       /* beyond: counted in the instance only */
#define HISTORY_NAME_MAX   64         /* a route's or SLO's name, cut */

enum history_kind { HISTORY_INSTANCE, HISTORY_ROUTE, HISTORY_SLO };

/* A finished request as the history takes it. */
struct history_req {
	enum meter_outcome outcome;
	int64_t ttft_us, tpot_us, ttfo_us;       /* -1: undefined */
	uint64_t output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;         /* tokens after the first, their time */
	int64_t concurrency;                     /* streams active at its start */
	uint64_t stalls;
	int64_t ttft_server_us;                  /* the headroom's line: -1 none */
};

/* Running sums for R² of TTFT (ms) against concurrency (headroom.h). */
struct history_r2 {
	uint64_t n, sx, sxx;
	double sy, sxy, syy;
};

/* The figures of one step, or of several merged. */
struct history_sum {
	uint64_t outcomes[OUTCOME_COUNT];        /* requests by outcome */
	uint64_t output_tokens, input_tokens, speed_tokens, speed_us;
	uint64_t stalls;
	uint64_t good, bad;                      /* an SLO's requests */
	int64_t active;                          /* at the end of the last step */
	int64_t peak;                            /* the most at once */
	struct history_r2 r2;
	struct hist_sparse ttft, tpot, itl, ttfo;
};

void history_sum_clear(struct history_sum *s);      /* keeps the memory */
void history_sum_free(struct history_sum *s);
uint64_t history_sum_requests(const struct history_sum *s);
/* dst += src, src being later in time (its active is the last). 0 or -1. */
int history_sum_merge(struct history_sum *dst, const struct history_sum *src);

/* ---- a step's bytes ------------------------------------------------------- */

struct pb;
/* Appends s's encoding (nothing at all for an empty step). */
void history_encode(struct pb *b, const struct history_sum *s);
/* Merges the step encoded in p[0..len) into s; -1 when the bytes are not a
 * step (why says what). Outcomes are read through map (the file's order
 * to ours; -1 drops one), or as ours when map is NULL. */
int history_decode(const uint8_t *p, size_t len, const int *map, size_t n_map,
    struct history_sum *s, char *why, size_t why_len);

/* ---- the store ------------------------------------------------------------ */

struct history;

struct history *history_new(const struct conf_history_step *t, size_t n);
void history_free(struct history *h);
size_t history_tiers(const struct history *h, const struct conf_history_step **t);
/* The same store re-bucketed into tiers t at now (wall µs): each new step
 * is read from the finest old tier that divides it and still covers it.
 * h is freed; NULL when memory ran out (h is kept then). */
struct history *history_retier(struct history *h, const struct conf_history_step *t,
    size_t n, uint64_t now_wall);

/* Which routes and SLOs keep a series: those keep() says yes to (names
 * cut to HISTORY_NAME_MAX - 1). A series it says no to is dropped at
 * once, and none is made for its records any more (they count in the
 * instance alone): a route a reload removes loses its series at that
 * reload. keep NULL: every one (as at first). */
void history_set_keep(struct history *h,
    int (*keep)(void *arg, enum history_kind kind, const char *name), void *arg);

/* The times the feeding functions get are on the caller's clock; this
 * offset (wall - caller) puts them on the wall clock the steps follow. */
void history_set_offset(struct history *h, int64_t offset_us);
int64_t history_offset(const struct history *h);

/* Feeding (t on the caller's clock). Routes' requests, gaps and stalls
 * count in the instance too. */
void history_request(struct history *h, const char *route, uint64_t t,
    const struct history_req *r);
void history_itl(struct history *h, const char *route, uint64_t t,
    const uint32_t *counts, const uint16_t *used, unsigned n_used, uint64_t count,
    uint64_t sum, uint64_t min, uint64_t max);
void history_stall(struct history *h, const char *route, uint64_t t);
/* A stream of the route began (+1) or ended (-1). */
void history_active(struct history *h, const char *route, uint64_t t, int delta);
/* The instance's streams now, and the most at once since the last call. */
void history_concurrency(struct history *h, uint64_t t, int64_t now, int64_t peak);
/* An SLO's requests judged since the last call. */
void history_slo(struct history *h, const char *slo, uint64_t t, uint64_t good,
    uint64_t bad);
/* Closes the steps that ended before now_wall (the wall clock, µs) but the
 * last one; the coarser tiers take theirs as they end. The reading
 * functions below take the wall clock too. */
void history_advance(struct history *h, uint64_t now_wall);
/* Bytes held: the steps, their rings and the open steps' buckets. */
size_t history_bytes(const struct history *h);

/* ---- reading -------------------------------------------------------------- */

struct history_series;

size_t history_n_series(const struct history *h);
const struct history_series *history_series_at(const struct history *h, size_t i);
const struct history_series *history_find(const struct history *h,
    enum history_kind kind, const char *name);
enum history_kind history_series_kind(const struct history_series *s);
const char *history_series_name(const struct history_series *s);
/* The route's streams now (the instance's: as last told). */
int64_t history_series_active(const struct history_series *s);

/* A query resolved: points of step_us (a whole number of the tier's step)
 * aligned on the wall clock, the last one holding now. */
struct history_view {
	size_t tier;
	uint64_t step_us;
	uint64_t first;                   /* the first point's index (t / step_us) */
	size_t points;
};
/* range 0: the finest tier's span; step 0: the finest step whose tier
 * keeps the range. -1 when they cannot be served (why: which are). */
int history_view(const struct history *h, uint64_t now_wall, uint64_t range_us,
    uint64_t step_us, struct history_view *v, char *why, size_t why_len);
/* Merges points [p0, p1) of the view of series se into s (0 or -1). */
int history_merge(const struct history *h, const struct history_series *se,
    const struct history_view *v, size_t p0, size_t p1, struct history_sum *s);
/* For /stats: the figures of the window of length window_us ending now and
 * of the one before it, on the finest tier that keeps both (its steps
 * rounding the window up). -1 when no tier does. se NULL: empty sums. */
int history_window(const struct history *h, const struct history_series *se,
    uint64_t now_wall, uint64_t window_us, struct history_sum *cur,
    struct history_sum *prev);

/* ---- the file ------------------------------------------------------------- */

/* The store as bytes (history_file.c), handed to write a piece at a time
 * (it returns 0 or -1); 0, or -1 when write failed or memory ran out. */
int history_save(const struct history *h, uint64_t now_wall,
    int (*write)(void *arg, const void *p, size_t n), void *arg);
/* How far ahead of now a file may have been written and still be read
 * (the hosts' clocks drift; as slo.h's SLO_STATE_AHEAD_US). */
#define HISTORY_AHEAD_US (60 * 1000000ull)
/* The store in the bytes p[0..len) written by history_save, moved on to
 * now (wall µs) and re-bucketed to tiers t where the file's differ; NULL
 * with why ("... at byte N") when they are not such bytes, or were written
 * more than HISTORY_AHEAD_US after now. */
struct history *history_load(const uint8_t *p, size_t len, const struct conf_history_step *t,
    size_t n, uint64_t now_wall, char *why, size_t why_len);

#endif
