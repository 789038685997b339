/* SPDX-License-Identifier: Apache-2.0 */
/* Traces tokentap-load replays open-loop: requests at given time offsets
 * with given token counts (and headers), read from
 *   - a JSONL trace, one request a line:
 *       {"offset_ms": 0, "prompt_tokens": 512, "output_tokens": 128,
 *        "headers": {"X-Tenant-Id": "a"}}
 *     (Mooncake's "timestamp", "input_length", "output_length" are read as
 *     offset_ms, prompt_tokens, output_tokens; its "hash_ids" is ignored);
 *   - tokentap's own access log: a line is written when its request ended,
 *     so a request arrived at ts - duration_ms; its token counts are
 *     input_tokens and output_tokens.
 * Offsets are from the earliest request, sorted. Every problem is
 * reported as FILE:LINE:COL: message. */
#ifndef TOKENTAP_LOAD_TRACE_H
#define TOKENTAP_LOAD_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "load_conf.h"

struct load_trace_entry {
	uint64_t offset_us;
	uint32_t prompt_tokens;      /* 0: drawn from --prompt-tokens */
	uint32_t max_tokens;         /* 0: drawn from --max-tokens */
	struct load_header *headers;
	size_t nheaders;
	size_t line;                 /* where it was read */
};

struct load_trace {
	struct load_trace_entry *v;
	size_t n, cap;
	char *path;
	int access_log;              /* read from tokentap's access log */
};

/* route: with an access log, only that route's lines (NULL: all). Returns
 * 0, or -1 after reporting every problem to err (t left empty). */
int load_trace_read(struct load_trace *t, const char *path, FILE *err);
int load_trace_read_access_log(struct load_trace *t, const char *path,
    const char *route, FILE *err);
void load_trace_free(struct load_trace *t);
/* The span from the first request to the last (µs). */
uint64_t load_trace_span_us(const struct load_trace *t);
/* A replay lasts at most this long (µs), as read and at its speed. */
#define LOAD_TRACE_MAX_SPAN_US (30ull * 86400 * 1000000)
/* 0 when t replayed at speed (--trace-speed) lasts at most 30 days, else
 * -1 after saying so to err. */
int load_trace_check_speed(const struct load_trace *t, double speed, FILE *err);

/* The order of n arrivals: idx[k] is the index of the k-th earliest, the
 * earlier index first among equals (a stable sort, O(n log n)). Returns 0,
 * or -1 when memory ran out. */
int load_trace_order(const double *at, size_t n, size_t *idx);

/* "2026-11-29T16:04:31.123Z" (RFC 3339 in UTC, as tokentap writes it, any
 * number of fraction digits) as ms since the epoch. Returns 0 or -1. */
int load_trace_rfc3339_ms(const char *s, double *ms);

#endif
