/* SPDX-License-Identifier: Apache-2.0 */
#include "load_calib.h"

#include <math.h>
#include <string.h>

#include "load_run.h"
#include "load_trace.h"
#include "log.h"

/* A trace's prompt sizes, from the smallest to the largest it gives;
 * NULL-safe: r unchanged when it gives none. */
static void trace_sizes(const struct load_trace *t, struct load_range *r)
{
	uint32_t lo = UINT32_MAX, hi = 0;

	for (size_t i = 0; t != NULL && i < t->n; i++) {
		uint32_t v = t->v[i].prompt_tokens;
		if (v == 0)
			continue;
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	if (hi > 0) {
		r->min = lo;
		r->max = hi;
	}
}

/* The calibration's run: a closed loop of n requests, no warm-up, one
 * output token each, synthetic prompts at the default ratio. */
static void calib_conf(struct load_conf *k, const struct load_conf *c, uint32_t n,
    const struct load_range *sizes)
{
	*k = *c;                /* shallow: the borrowed parts are only read */
	if (sizes != NULL)
		k->prompt_tokens = *sizes;
	else
		trace_sizes(c->trace, &k->prompt_tokens);
	k->count = n;
	k->duration_us = k->warmup_us = k->warmup_count = k->ramp_us = 0;
	k->cooldown = k->lag = 0;
	k->rate = 0;
	k->trace = NULL;
	k->prompts = NULL;
	k->prefixes = 0;
	/* single requests of synthetic words, not a conversation's turns
	 * (whose history would not be the words' bytes) */
	k->sessions = NULL;
	k->turns.min = k->turns.max = 0;
	k->max_tokens.min = k->max_tokens.max = 1;
	k->concurrency = c->concurrency > 0 && c->concurrency < n ? c->concurrency : n;
	k->bytes_per_token = LOAD_PSIZE_DEFAULT;
}

int load_calib(struct load_env *e, struct load_conf *c, uint32_t n,
    const struct load_range *sizes, struct load_psize *out)
{
	struct load_conf k;
	struct load_run_opts o;
	struct loadstats st;
	struct load_run_info info;
	char what[80];
	int rc;

	load_psize_init(out);
	calib_conf(&k, c, n, sizes);
	memset(&o, 0, sizeof(o));
	o.progress = e->progress;
	o.label = "calibrating prompt sizes";
	o.tls = e->tls;
	loadstats_init(&st);
	(void)load_run(e->base, e->dns, &k, &o, &st, &info);
	rc = load_psize_fit(&st, LOAD_PSIZE_DEFAULT, out);
	loadstats_free(&st);
	/* the target failed the pre-flight, a signal came, or nothing could
	 * be sent (load_run said why): no ratio, and nothing more to say */
	if (load_run_target_failed() != NULL || load_run_interrupted() > 0 ||
	    out->requests == 0) {
		load_psize_init(out);
		return -1;
	}
	if (rc < 0 && out->reported == 0) {
		log_warn("--calibrate: the target reported no prompt token counts in %llu "
		    "requests: prompt sizes are estimates at 4 bytes/token",
		    (unsigned long long)out->requests);
	} else if (rc < 0) {
		log_warn("--calibrate: the target's counts give %.3g bytes/token, no "
		    "tokenizer's: prompt sizes are estimates at 4 bytes/token",
		    out->bytes_per_token);
	}
	if (rc < 0) {
		out->bytes_per_token = LOAD_PSIZE_DEFAULT;
		out->spread = NAN;
		return -1;
	}
	out->rule = LOAD_PSIZE_RULE_CALIBRATED;
	out->estimate = 0;
	c->bytes_per_token = out->bytes_per_token;
	load_psize_format(out, what, sizeof what);
	log_info("prompt sizes: %s, calibrated on the target", what);
	return 0;
}
