#include "loadstats.h"

#include <stdlib.h>
#include <string.h>

void loadstats_sample(struct load_sample *s, const struct meter *m,
    enum meter_end how, uint64_t start_us)
{
	int64_t n = meter_output_tokens(m);

	memset(s, 0, sizeof(*s));
	s->start_us = start_us;
	s->outcome = meter_outcome(m, how);
	s->status = m->t_head != 0 ? m->status : 0;
	s->ttft_us = meter_ttft_us(m);
	s->ttfo_us = meter_ttfo_us(m);
	s->reasoning_tokens = meter_reasoning_tokens(m);
	s->tpot_us = meter_tpot_us(m);
	s->itl_max_us = m->token_events >= 2 ? (int64_t)m->itl_max_us : -1;
	s->duration_us = m->t_end >= m->t0 ? (int64_t)(m->t_end - m->t0) : -1;
	s->output_tokens = n;
	s->input_tokens = meter_input_tokens(m);
	s->tokens_from_usage = meter_tokens_from_usage(m);
	s->output_speed = -1;
	/* undefined, like TPOT, unless two tokens lie some time apart; the
	 * tokens TPOT divides by (meter_speed_tokens), as tokentap counts */
	if (s->tpot_us >= 0 && m->t_last_token > m->t_first_token)
		s->output_speed = meter_speed_tokens(m) * 1e6 /
		    (double)(m->t_last_token - m->t_first_token);
}

void loadstats_init(struct loadstats *st, int keep_samples)
{
	memset(st, 0, sizeof(*st));
	st->keep_samples = keep_samples;
}

static int keep(struct loadstats *st, const struct load_sample *s)
{
	if (st->nsamples == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 1024;
		struct load_sample *v = realloc(st->samples, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		st->samples = v;
		st->cap = cap;
	}
	st->samples[st->nsamples++] = *s;
	return 0;
}

void loadstats_goodput(struct loadstats *st, const struct goodput_targets *t)
{
	st->goodput = *t;
}

/* The one rule tokentap's SLOs apply too. */
static void judge(struct loadstats *st, const struct load_sample *s)
{
	struct goodput_request r = { s->outcome, { s->ttft_us, s->tpot_us }, s->duration_us };
	enum goodput_verdict v;

	if (!goodput_any(&st->goodput))
		return;
	v = goodput_judge(&st->goodput, &r);
	st->judged += v != GOODPUT_UNCOUNTED;
	st->good += v == GOODPUT_GOOD;
}

int loadstats_record(struct loadstats *st, const struct load_sample *s,
    const uint32_t *itl, size_t n)
{
	st->requests++;
	judge(st, s);
	st->outcomes[s->outcome < OUTCOME_COUNT ? s->outcome : OUTCOME_UPSTREAM_ABORT]++;
	if (s->output_tokens > 0)
		st->output_tokens += (uint64_t)s->output_tokens;
	if (s->input_tokens > 0)
		st->input_tokens += (uint64_t)s->input_tokens;
	if (s->outcome == OUTCOME_OK) {
		if (s->ttft_us >= 0)
			hist_record(&st->ttft, (uint64_t)s->ttft_us);
		if (s->ttfo_us >= 0)
			hist_record(&st->ttfo, (uint64_t)s->ttfo_us);
		if (s->tpot_us >= 0)
			hist_record(&st->tpot, (uint64_t)s->tpot_us);
		if (s->output_speed >= 0)
			hist_record(&st->speed, (uint64_t)(s->output_speed * 1000.0 + 0.5));
		if (s->duration_us >= 0)
			hist_record(&st->duration, (uint64_t)s->duration_us);
		for (size_t i = 0; i < n; i++)
			hist_record(&st->itl, itl[i]);
	}
	if (st->keep_samples)
		return keep(st, s);
	return 0;
}

uint64_t loadstats_errors(const struct loadstats *st)
{
	return st->requests - st->outcomes[OUTCOME_OK];
}

double loadstats_error_rate(const struct loadstats *st)
{
	if (st->requests == 0)
		return 0;
	return (double)loadstats_errors(st) / (double)st->requests;
}

void loadstats_quant(const struct hist *h, struct load_quant *q)
{
	memset(q, 0, sizeof(*q));
	q->count = h->count;
	if (h->count == 0)
		return;
	q->mean = hist_mean(h) / 1000.0;
	q->p50 = hist_quantile(h, 0.50) / 1000.0;
	q->p90 = hist_quantile(h, 0.90) / 1000.0;
	q->p95 = hist_quantile(h, 0.95) / 1000.0;
	q->p99 = hist_quantile(h, 0.99) / 1000.0;
	q->max = (double)h->max / 1000.0;
}

void loadstats_free(struct loadstats *st)
{
	free(st->samples);
	st->samples = NULL;
	st->nsamples = st->cap = 0;
}
