/* tokentap-load's statistics: one sample per finished request, derived from
 * the shared per-request meter with the definitions of SPEC §4, and the
 * run's histograms. Pure: no I/O, no clock. Latency figures (TTFT, TPOT,
 * ITL, output speed) are taken over requests with outcome ok; counts and
 * throughput over every request. */
#ifndef TOKENTAP_LOADSTATS_H
#define TOKENTAP_LOADSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "goodput.h"
#include "hist.h"
#include "meter.h"

struct load_sample {
	uint64_t start_us;        /* (scheduled) start, from the run's start */
	int64_t ttft_us;          /* -1 where undefined */
	int64_t ttfo_us;          /* the first token that is not reasoning */
	int64_t reasoning_tokens; /* reported by the stream, or -1 */
	int64_t tpot_us;
	int64_t itl_max_us;
	int64_t duration_us;
	int64_t output_tokens;
	int64_t input_tokens;
	double output_speed;      /* tokens/s; < 0 where undefined */
	int tokens_from_usage;
	unsigned status;          /* 0: no response head */
	uint32_t prompt_tokens;   /* asked for */
	uint32_t max_tokens;
	enum meter_outcome outcome;
};

struct loadstats {
	uint64_t requests;
	uint64_t outcomes[OUTCOME_COUNT];
	uint64_t output_tokens;
	uint64_t input_tokens;
	struct hist ttft;
	struct hist ttfo;
	struct hist tpot;
	struct hist itl;
	struct hist speed;        /* output speed in 1/1000 tokens/s */
	struct hist duration;
	struct hist lag;          /* --lag: each stamped event, server send to client read */
	/* goodput: requests judged against per-request targets (goodput.h) */
	struct goodput_targets goodput;   /* none set: not judged */
	uint64_t good, judged;
	int keep_samples;
	struct load_sample *samples;
	size_t nsamples, cap;
};

/* A histogram's figures in ms (speed: tokens/s); zeros when count is 0. */
struct load_quant {
	uint64_t count;
	double mean, p50, p90, p95, p99, max;
};

/* Fills *s from a meter that meter_end has closed, its outcome by the one
 * rule (meter_outcome). start_us is the sample's start relative to the
 * run; the token asks are left for the caller. */
void loadstats_sample(struct load_sample *s, const struct meter *m,
    enum meter_end how, uint64_t start_us);

void loadstats_init(struct loadstats *st, int keep_samples);
/* Judges every request recorded from now on against t (goodput). */
void loadstats_goodput(struct loadstats *st, const struct goodput_targets *t);
/* Adds one request with its ITL gaps (µs; n of them). Returns 0, or -1 when
 * the sample could not be kept (it is still counted). */
int loadstats_record(struct loadstats *st, const struct load_sample *s,
    const uint32_t *itl, size_t n);
/* Not-ok requests over all requests; 0 when there were none. */
double loadstats_error_rate(const struct loadstats *st);
uint64_t loadstats_errors(const struct loadstats *st);
void loadstats_quant(const struct hist *h, struct load_quant *q);
void loadstats_free(struct loadstats *st);

#endif
