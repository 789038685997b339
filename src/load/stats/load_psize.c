/* SPDX-License-Identifier: Apache-2.0 */
#include "load_psize.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "load_conf.h"

static const char *const rules[] = {"default", "given", "calibrated"};

size_t load_psize_bytes(uint32_t tokens, double bpt)
{
	return (size_t)((double)tokens * bpt + 0.5);
}

uint32_t load_psize_tokens(size_t bytes, double bpt)
{
	double t = (double)bytes / bpt + 0.5;

	if (!(t >= 1))
		return 1;
	return t > LOAD_CONF_MAX_TOKENS ? LOAD_CONF_MAX_TOKENS : (uint32_t)t;
}

void load_psize_init(struct load_psize *p)
{
	memset(p, 0, sizeof(*p));
	p->rule = LOAD_PSIZE_RULE_DEFAULT;
	p->bytes_per_token = LOAD_PSIZE_DEFAULT;
	p->spread = NAN;
	p->estimate = 1;
}

/* A request the target counted the prompt of. */
static int counted_prompt(const struct load_sample *s)
{
	return s->input_tokens > 0 && s->prompt_tokens > 0;
}

int load_psize_fit(const struct loadstats *st, double bpt, struct load_psize *out)
{
	double bytes = 0, tokens = 0, sum = 0, sum2 = 0;
	uint64_t n = 0;

	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		double b, r;
		if (!counted_prompt(s))
			continue;
		b = (double)load_psize_bytes(s->prompt_tokens, bpt);
		r = b / (double)s->input_tokens;
		bytes += b;
		tokens += (double)s->input_tokens;
		sum += r;
		sum2 += r * r;
		n++;
	}
	out->requests = st->n;
	out->reported = n;
	out->bytes_per_token = n > 0 ? bytes / tokens : NAN;
	out->spread = NAN;
	if (n >= 2) {
		/* the sample standard deviation, by the sums (the ratios are
		 * near each other: no cancellation worth a second pass) */
		double var = (sum2 - sum * sum / (double)n) / (double)(n - 1);
		out->spread = var > 0 ? sqrt(var) : 0;
	}
	if (n == 0 || !(out->bytes_per_token >= LOAD_PSIZE_MIN &&
	    out->bytes_per_token <= LOAD_PSIZE_MAX))
		return -1;
	return 0;
}

void load_psize_check_of(const struct loadstats *st, struct load_psize_check *out)
{
	double asked = 0, reported = 0, ratio = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		if (!loadstats_counted(s) || !counted_prompt(s))
			continue;
		asked += s->prompt_tokens;
		reported += (double)s->input_tokens;
		ratio += (double)s->input_tokens / s->prompt_tokens;
		out->requests++;
	}
	if (out->requests == 0) {
		out->asked_mean = out->reported_mean = out->ratio_mean = NAN;
		return;
	}
	out->asked_mean = asked / (double)out->requests;
	out->reported_mean = reported / (double)out->requests;
	out->ratio_mean = ratio / (double)out->requests;
}

void load_psize_check_add(struct load_psize_check *sum,
    const struct load_psize_check *k)
{
	double n0 = (double)sum->requests, n1 = (double)k->requests;

	if (k->requests == 0)
		return;
	if (sum->requests == 0) {
		*sum = *k;
		return;
	}
	/* the means weighted by their requests */
	sum->asked_mean = (sum->asked_mean * n0 + k->asked_mean * n1) / (n0 + n1);
	sum->reported_mean = (sum->reported_mean * n0 + k->reported_mean * n1) / (n0 + n1);
	sum->ratio_mean = (sum->ratio_mean * n0 + k->ratio_mean * n1) / (n0 + n1);
	sum->requests += k->requests;
}

const char *load_psize_rule_name(enum load_psize_rule r)
{
	return (size_t)r < sizeof(rules) / sizeof(rules[0]) ? rules[r] : "default";
}

int load_psize_rule_of(const char *name, enum load_psize_rule *r)
{
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (strcmp(name, rules[i]) == 0) {
			*r = (enum load_psize_rule)i;
			return 0;
		}
	return -1;
}

void load_psize_format(const struct load_psize *p, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%.3g bytes/token", p->bytes_per_token);

	if (p->rule != LOAD_PSIZE_RULE_CALIBRATED || len < 0 || (size_t)len >= n)
		return;
	if (isfinite(p->spread))
		snprintf(buf + len, n - (size_t)len, " (±%.2f, %llu requests)", p->spread,
		    (unsigned long long)p->reported);
	else
		snprintf(buf + len, n - (size_t)len, " (%llu request)",
		    (unsigned long long)p->reported);
}
