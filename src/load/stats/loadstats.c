/* SPDX-License-Identifier: Apache-2.0 */
#include "loadstats.h"

#include <stdlib.h>
#include <string.h>

static int64_t rel(uint64_t t, uint64_t origin)
{
	if (t == 0)
		return -1;
	return t > origin ? (int64_t)(t - origin) : 0;
}

void loadstats_sample(struct load_sample *s, const struct meter *m,
    enum meter_end how, uint64_t level_start)
{
	int64_t n = meter_output_tokens(m);
	/* the tokens made after the first token chunk, as tokentap counts
	 * them (a chunk is not a token; the first one's share estimated
	 * where the stream does not tell it) */
	double after = meter_speed_tokens(m);

	memset(s, 0, sizeof(*s));
	s->start_us = m->t0 > level_start ? m->t0 - level_start : 0;
	s->outcome = meter_outcome(m, how);
	s->status = m->t_head != 0 ? m->status : 0;
	s->ttft_us = meter_ttft_us(m);
	s->ttfo_us = meter_ttfo_us(m);
	s->reasoning_tokens = meter_reasoning_tokens(m);
	s->itl_max_us = m->token_events >= 2 ? (int64_t)m->itl_max_us : -1;
	s->duration_us = m->t_end >= m->t0 ? (int64_t)(m->t_end - m->t0) : -1;
	s->first_token_us = rel(m->t_first_token, level_start);
	s->last_token_us = rel(m->t_last_token, level_start);
	s->output_tokens = n;
	s->input_tokens = meter_input_tokens(m);
	s->first_chunk_tokens = m->first_event_tokens;
	s->tokens_from_usage = (uint8_t)meter_tokens_from_usage(m);
	s->events = m->events > UINT32_MAX ? UINT32_MAX : (uint32_t)m->events;
	s->token_chunks = m->token_events > UINT32_MAX ? UINT32_MAX :
	    (uint32_t)m->token_events;
	s->tpot_us = -1;
	s->output_speed = -1;
	s->connect_us = -1;
	/* docs/contract.md §4's TPOT, undefined unless tokens came after the
	 * first chunk; exact (a double), where the meter's integer µs would
	 * round down */
	if (meter_tpot_us(m) >= 0 && after > 0) {
		double span = (double)(m->t_last_token - m->t_first_token);
		s->tpot_us = span / after;
		if (span > 0)
			s->output_speed = after * 1e6 / span;
	}
}

void loadstats_init(struct loadstats *st)
{
	memset(st, 0, sizeof(*st));
}

/* Grows *v (of elem-sized items, *cap of them) to hold need. 0 or -1. */
static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 1024;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*v, c * elem);
	if (p == NULL)
		return -1;
	*v = p;
	*cap = c;
	return 0;
}

int loadstats_record(struct loadstats *st, const struct load_sample *s,
    const uint32_t *itl, size_t n)
{
	struct load_sample *x;

	if (grow((void **)&st->v, &st->cap, st->n + 1, sizeof(*st->v)) < 0 ||
	    grow((void **)&st->itl, &st->itl_cap, st->nitl + n, sizeof(*st->itl)) < 0) {
		st->failed = 1;
		return -1;
	}
	x = &st->v[st->n++];
	*x = *s;
	x->itl_off = st->nitl;
	x->itl_n = (uint32_t)n;
	if (n > 0)
		memcpy(st->itl + st->nitl, itl, n * sizeof(*itl));
	st->nitl += n;
	if (loadstats_counted(s)) {
		st->measured++;
		st->errors += s->outcome != OUTCOME_OK;
	}
	return 0;
}

void loadstats_lag(struct loadstats *st, uint64_t lag_us)
{
	if (grow((void **)&st->lag, &st->lag_cap, st->nlag + 1, sizeof(*st->lag)) < 0) {
		st->failed = 1;
		return;
	}
	st->lag[st->nlag++] = lag_us > UINT32_MAX ? UINT32_MAX : (uint32_t)lag_us;
}

int loadstats_merge(struct loadstats *dst, struct loadstats *src)
{
	size_t base = dst->nitl;

	if (grow((void **)&dst->v, &dst->cap, dst->n + src->n, sizeof(*dst->v)) < 0 ||
	    grow((void **)&dst->itl, &dst->itl_cap, dst->nitl + src->nitl,
	    sizeof(*dst->itl)) < 0 ||
	    grow((void **)&dst->lag, &dst->lag_cap, dst->nlag + src->nlag,
	    sizeof(*dst->lag)) < 0)
		return -1;
	for (size_t i = 0; i < src->n; i++) {
		dst->v[dst->n] = src->v[i];
		dst->v[dst->n++].itl_off += base;
	}
	if (src->nitl > 0)
		memcpy(dst->itl + dst->nitl, src->itl, src->nitl * sizeof(*src->itl));
	dst->nitl += src->nitl;
	if (src->nlag > 0)
		memcpy(dst->lag + dst->nlag, src->lag, src->nlag * sizeof(*src->lag));
	dst->nlag += src->nlag;
	dst->measured += src->measured;
	dst->errors += src->errors;
	dst->failed |= src->failed;
	loadstats_free(src);
	return 0;
}

void loadstats_free(struct loadstats *st)
{
	free(st->v);
	free(st->itl);
	free(st->lag);
	memset(st, 0, sizeof(*st));
}
