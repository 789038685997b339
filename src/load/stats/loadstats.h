/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-load's raw measurements: one sample per request (warm-up ones
 * too, flagged) with the figures of docs/contract.md §4 derived from the
 * shared per-request meter, and every inter-token gap, kept whole so that
 * every figure the tool reports is computed exactly from them (load_summary.h)
 * and a later reader (compare, the HTML report) can test them. Nothing here is
 * bucketed: the client side is an independent check of tokentap's histograms.
 * Pure: no I/O, no clock. */
#ifndef TOKENTAP_LOADSTATS_H
#define TOKENTAP_LOADSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "goodput.h"
#include "meter.h"

struct load_sample {
	uint64_t seq;             /* the request's number in its level, from 0 */
	uint64_t start_us;        /* intended send time, from the level's start */
	int64_t lag_us;           /* dispatch lag: handed to a connection - intended */
	int64_t connect_us;       /* a new connection's setup (TCP, TLS); -1: kept */
	int64_t ttft_us;          /* from the intended send time; -1 undefined */
	int64_t ttfo_us;          /* the first token that is not reasoning */
	double tpot_us;           /* (last - first) / (N - first chunk's tokens) */
	int64_t itl_max_us;
	int64_t duration_us;      /* end to end: intended send to the last byte */
	int64_t first_token_us;   /* from the level's start, -1: none */
	int64_t last_token_us;
	int64_t output_tokens;
	int64_t input_tokens;     /* reported by the stream, or -1 */
	int64_t reasoning_tokens; /* reported by the stream, or -1 */
	int64_t first_chunk_tokens; /* from a usage on every chunk, or -1 */
	double output_speed;      /* tokens/s; < 0 where undefined */
	uint32_t events;          /* events the parser dispatched */
	uint32_t token_chunks;    /* of them, token-bearing */
	uint32_t prompt_tokens;   /* asked for */
	uint32_t max_tokens;
	uint32_t turn;            /* a conversation's turn, from 1; 0: none */
	uint64_t session;         /* that conversation's number in the level */
	size_t itl_off;           /* its gaps: loadstats.itl[itl_off .. + itl_n) */
	uint32_t itl_n;
	unsigned status;          /* 0: no response head */
	enum meter_outcome outcome;
	uint8_t tokens_from_usage;
	uint8_t warmup;           /* sent in the warm-up: in no figure */
	uint8_t cooldown;         /* sent after the window, to keep the load on
	                           * while its last requests end: in no figure */
	uint8_t queued;           /* open loop: waited for a free connection */
};

struct loadstats {
	struct load_sample *v;    /* every request, in the order they ended */
	size_t n, cap;
	uint32_t *itl;            /* every request's token gaps (µs), by sample */
	size_t nitl, itl_cap;
	uint32_t *lag;            /* --lag: each stamped event's trip (µs) */
	size_t nlag, lag_cap;
	/* running counts of the measured requests, for the progress line */
	uint64_t measured, errors;
	int failed;               /* memory ran out: some figures are missing */
};

/* Fills *s from a meter that meter_end has closed, its outcome by the one
 * rule (meter_outcome). level_start: the level's start (µs, the meter's
 * clock). TPOT and output speed divide by the tokens made after the first
 * token chunk as tokentap does (meter_speed_tokens); first_chunk_tokens is
 * the meter's (a usage on every chunk, or a dialect of one token an event).
 * The caller fills in the rest (seq, asks, lag, flags, gaps). */
void loadstats_sample(struct load_sample *s, const struct meter *m,
    enum meter_end how, uint64_t level_start);

/* A request the figures count: neither warm-up nor cool-down. */
static inline int loadstats_counted(const struct load_sample *s)
{
	return !s->warmup && !s->cooldown;
}

void loadstats_init(struct loadstats *st);
/* Adds one request with its n gaps (µs). Returns 0, or -1 when memory
 * ran out (st->failed is set; the request is lost to the figures). */
int loadstats_record(struct loadstats *st, const struct load_sample *s,
    const uint32_t *itl, size_t n);
/* One --lag trip. */
void loadstats_lag(struct loadstats *st, uint64_t lag_us);
/* Moves every sample and gap of src to the end of dst (a level repeated:
 * one pool of samples); src is left empty. Returns 0 or -1. */
int loadstats_merge(struct loadstats *dst, struct loadstats *src);
void loadstats_free(struct loadstats *st);

#endif
