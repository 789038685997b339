/* SPDX-License-Identifier: Apache-2.0 */
/* Prompt sizes in the target's own tokens. A synthetic prompt of T tokens
 * is round(T x R) bytes of plain words, R bytes a token: 4 by default (an
 * estimate), a ratio given (--bytes-per-token), or one calibrated on the
 * target (--calibrate N): the bytes its first requests sent over the
 * prompt tokens it reported for them (usage.prompt_tokens,
 * input_tokens, prompt_eval_count, promptTokenCount: whatever the
 * dialect's stream carries). A level's prompts then report the tokens
 * asked beside the target's count of them, for every kind of prompt
 * (synthetic, a trace's, a replayed log's, a file's). Pure. */
#ifndef TOKENTAP_LOAD_PSIZE_H
#define TOKENTAP_LOAD_PSIZE_H

#include <stddef.h>
#include <stdint.h>

#include "loadstats.h"

#define LOAD_PSIZE_DEFAULT 4.0      /* bytes a token, without a better one */
/* A ratio outside these is no tokenizer's (bytes a token): a target that
 * counts so is not counting the prompt, and its ratio is not used. */
#define LOAD_PSIZE_MIN 0.5
#define LOAD_PSIZE_MAX 32.0

enum load_psize_rule {
	LOAD_PSIZE_RULE_DEFAULT,    /* 4 bytes a token */
	LOAD_PSIZE_RULE_GIVEN,      /* --bytes-per-token */
	LOAD_PSIZE_RULE_CALIBRATED  /* --calibrate: the target's own counts */
};

/* How an invocation sized its synthetic prompts. */
struct load_psize {
	enum load_psize_rule rule;
	double bytes_per_token;     /* the ratio every synthetic text used */
	double spread;              /* calibrated: the standard deviation of the
	                             * per-request ratios; NaN: under 2 requests */
	uint64_t requests;          /* --calibrate: its requests sent; 0: none */
	uint64_t reported;          /* of them, with the target's prompt count */
	int estimate;               /* not in the target's tokens: the default
	                             * rule (a calibration that got no count
	                             * falls back to it) */
};

/* A level's prompts: the tokens asked beside the target's counts. */
struct load_psize_check {
	uint64_t requests;          /* counted ones the target gave a count for */
	double asked_mean;          /* tokens asked (prefix included) */
	double reported_mean;       /* the target's count */
	double ratio_mean;          /* the mean of reported / asked */
};

/* The bytes of a synthetic text of tokens at bpt bytes a token:
 * round(tokens x bpt). */
size_t load_psize_bytes(uint32_t tokens, double bpt);

/* A text of bytes in tokens at bpt bytes a token: round(bytes / bpt), at
 * least 1, at most LOAD_CONF_MAX_TOKENS (a --prompts file's text). */
uint32_t load_psize_tokens(size_t bytes, double bpt);

/* The default rule (4 bytes a token, an estimate). */
void load_psize_init(struct load_psize *p);

/* Calibrates from st, requests whose prompts were sized at bpt bytes a
 * token: the ratio is their bytes summed over their reported tokens
 * summed (a longer prompt weighs more, as its count is the more exact).
 * Fills out's ratio, spread, requests and reported; rule and estimate
 * are the caller's. Returns 0, or -1 when no request had a count or the
 * ratio is out of [LOAD_PSIZE_MIN, LOAD_PSIZE_MAX] (out's ratio then
 * the one measured, or NaN). */
int load_psize_fit(const struct loadstats *st, double bpt, struct load_psize *out);

/* The counted requests of st that the target gave a prompt count for. */
void load_psize_check_of(const struct loadstats *st, struct load_psize_check *out);

/* Adds the check k to sum (of several levels); sum starts zeroed. */
void load_psize_check_add(struct load_psize_check *sum,
    const struct load_psize_check *k);

/* The rule's name in the JSON: "default", "given", "calibrated"; and
 * back (-1: none such). */
const char *load_psize_rule_name(enum load_psize_rule r);
int load_psize_rule_of(const char *name, enum load_psize_rule *r);

/* "3.08 bytes/token (±0.01, 8 requests)", "4 bytes/token". */
void load_psize_format(const struct load_psize *p, char *buf, size_t n);

#endif
