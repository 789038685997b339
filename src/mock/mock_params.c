/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JSMN_STATIC
#include <jsmn.h>

#include "jsonw.h"
#include "rng.h"
#include "util.h"

/* A body with more JSON tokens than this is not scanned (defaults apply). */
#define BODY_MAX_TOKENS (1 << 20)

void mock_params_init(struct mock_params *p)
{
	memset(p, 0, sizeof *p);
	p->ttft_us = 300000;
	p->tpot_us = 20000;
	p->tokens = -1;
	p->tokens_per_chunk = 1;
	p->usage = 1;
	p->seed = 1;
	p->heartbeat_us = 1000000;
	p->clump = 1;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || v > max)
		return -1;
	*out = v;
	return 0;
}

static int set_ttft(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->ttft_us);
}

static int set_role_delay(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->role_delay_us);
}

static int set_tpot(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->tpot_us);
}

static int set_prefill(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->prefill_per_token_us);
}

static int set_ttft_per_stream(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->ttft_per_stream_us);
}

static int set_tpot_per_stream(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->tpot_per_stream_us);
}

static int set_first_chunk_tokens(struct mock_params *p, const char *v)
{
	return parse_uint(v, 1000000, &p->first_chunk_tokens);
}

static int set_keepalive(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->keepalive_us);
}

static int set_jitter(struct mock_params *p, const char *v)
{
	static const struct { const char *prefix; enum mock_jitter kind; } kinds[] = {
		{"uniform:", MOCK_JITTER_UNIFORM},
		{"normal:", MOCK_JITTER_NORMAL},
		{"exp:", MOCK_JITTER_EXP},
	};

	if (strcmp(v, "none") == 0) {
		p->jitter = MOCK_JITTER_NONE;
		p->jitter_us = 0;
		return 0;
	}
	for (size_t i = 0; i < UTIL_ARRAY_LEN(kinds); i++) {
		size_t n = strlen(kinds[i].prefix);
		if (strncmp(v, kinds[i].prefix, n) == 0) {
			if (util_parse_duration_us(v + n, &p->jitter_us) < 0)
				return -1;
			p->jitter = kinds[i].kind;
			return 0;
		}
	}
	return -1;
}

static int set_tokens(struct mock_params *p, const char *v)
{
	uint64_t n;

	if (parse_uint(v, 100000000, &n) < 0)
		return -1;
	p->tokens = (int64_t)n;
	return 0;
}

static int set_tokens_per_chunk(struct mock_params *p, const char *v)
{
	uint64_t n;

	if (parse_uint(v, 1000000, &n) < 0 || n == 0)
		return -1;
	p->tokens_per_chunk = n;
	return 0;
}

/* on/true/1 or off/false/0. Returns 0 or -1. */
static int parse_bool(const char *v, int *out)
{
	if (strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0 ||
	    strcmp(v, "1") == 0)
		*out = 1;
	else if (strcasecmp(v, "off") == 0 || strcasecmp(v, "false") == 0 ||
	    strcmp(v, "0") == 0)
		*out = 0;
	else
		return -1;
	return 0;
}

static int set_usage(struct mock_params *p, const char *v)
{
	return parse_bool(v, &p->usage);
}

static int set_continuous_usage(struct mock_params *p, const char *v)
{
	return parse_bool(v, &p->continuous_usage);
}

static int set_stamp(struct mock_params *p, const char *v)
{
	return parse_bool(v, &p->stamp);
}

static int set_framing(struct mock_params *p, const char *v)
{
	if (strcmp(v, "chunked") == 0)
		p->close_framing = 0;
	else if (strcmp(v, "close") == 0)
		p->close_framing = 1;
	else
		return -1;
	return 0;
}

static int set_fault(struct mock_params *p, const char *v)
{
	static const struct { const char *prefix; enum mock_fault kind; } kinds[] = {
		{"status:", MOCK_FAULT_STATUS},
		{"error-after:", MOCK_FAULT_ERROR},
		{"close-after:", MOCK_FAULT_CLOSE},
		{"stall-after:", MOCK_FAULT_STALL},
	};

	if (strcmp(v, "none") == 0) {
		p->fault = MOCK_FAULT_NONE;
		p->fault_arg = 0;
		return 0;
	}
	for (size_t i = 0; i < UTIL_ARRAY_LEN(kinds); i++) {
		size_t n = strlen(kinds[i].prefix);
		if (strncmp(v, kinds[i].prefix, n) != 0)
			continue;
		if (parse_uint(v + n, 100000000, &p->fault_arg) < 0)
			return -1;
		if (kinds[i].kind == MOCK_FAULT_STATUS &&
		    (p->fault_arg < 200 || p->fault_arg > 599))
			return -1;
		p->fault = kinds[i].kind;
		return 0;
	}
	return -1;
}

static int set_reasoning(struct mock_params *p, const char *v)
{
	return parse_uint(v, 100000000, &p->reasoning);
}

/* AFTER:DURATION: after AFTER tokens, none for DURATION (heartbeats go on). */
static int set_stall(struct mock_params *p, const char *v)
{
	const char *colon = strchr(v, ':');
	char after[24];

	if (strcmp(v, "none") == 0) {
		p->stall_us = 0;
		return 0;
	}
	if (colon == NULL || (size_t)(colon - v) >= sizeof after)
		return -1;
	memcpy(after, v, (size_t)(colon - v));
	after[colon - v] = '\0';
	if (parse_uint(after, 100000000, &p->stall_after) < 0 ||
	    util_parse_duration_us(colon + 1, &p->stall_us) < 0 || p->stall_us == 0)
		return -1;
	return 0;
}

static int set_heartbeat(struct mock_params *p, const char *v)
{
	return util_parse_duration_us(v, &p->heartbeat_us);
}

static int set_clump(struct mock_params *p, const char *v)
{
	uint64_t n;

	if (parse_uint(v, 10000, &n) < 0 || n == 0)
		return -1;
	p->clump = n;
	return 0;
}

/* A ratio of 0.1 to 1000 bytes a token, or 0 for the default rule
 * (body bytes / 4): a tiny one would count more tokens than a count
 * holds. */
static int set_prompt_bytes_per_token(struct mock_params *p, const char *v)
{
	char *end;
	double r = strtod(v, &end);

	if (end == v || *end != '\0' || !(r == 0 || (r >= 0.1 && r <= 1000)))
		return -1;
	p->prompt_bytes_per_token = r;
	return 0;
}

static int set_seed(struct mock_params *p, const char *v)
{
	if (parse_uint(v, UINT64_MAX, &p->seed) < 0)
		return -1;
	p->has_seed = 1;
	return 0;
}

static const struct {
	const char *name;
	int (*set)(struct mock_params *p, const char *value);
} knobs[] = {
	{"ttft", set_ttft},
	{"role-delay", set_role_delay},
	{"tpot", set_tpot},
	{"jitter", set_jitter},
	{"tokens", set_tokens},
	{"tokens-per-chunk", set_tokens_per_chunk},
	{"prefill-per-token", set_prefill},
	{"ttft-per-stream", set_ttft_per_stream},
	{"tpot-per-stream", set_tpot_per_stream},
	{"first-chunk-tokens", set_first_chunk_tokens},
	{"continuous-usage", set_continuous_usage},
	{"usage", set_usage},
	{"keepalive", set_keepalive},
	{"fault", set_fault},
	{"seed", set_seed},
	{"framing", set_framing},
	{"stamp", set_stamp},
	{"reasoning", set_reasoning},
	{"stall", set_stall},
	{"heartbeat", set_heartbeat},
	{"clump", set_clump},
	{"prompt-bytes-per-token", set_prompt_bytes_per_token},
};

int mock_params_find(const char *name, size_t len)
{
	for (size_t i = 0; i < UTIL_ARRAY_LEN(knobs); i++)
		if (util_ieq(name, len, knobs[i].name))
			return (int)i;
	return -1;
}

int mock_params_set(struct mock_params *p, int idx, const char *value)
{
	struct mock_params tmp = *p;

	/* A half-applied bad value must not leak into the defaults. */
	if (knobs[idx].set(&tmp, value) < 0)
		return -1;
	*p = tmp;
	return 0;
}

/* The index just past token i and everything nested in it. */
static int tok_skip(const jsmntok_t *t, int n, int i)
{
	int j = i + 1;

	while (j < n && t[j].start < t[i].end)
		j++;
	return j;
}

static int tok_is(const char *js, const jsmntok_t *t, const char *s)
{
	size_t len = strlen(s);
	return t->type == JSMN_STRING && (size_t)(t->end - t->start) == len &&
	    memcmp(js + t->start, s, len) == 0;
}

static int tok_true(const char *js, const jsmntok_t *t)
{
	return t->type == JSMN_PRIMITIVE && js[t->start] == 't';
}

static int64_t tok_int(const char *js, const jsmntok_t *t)
{
	char num[24];
	size_t len = (size_t)(t->end - t->start);

	if (t->type != JSMN_PRIMITIVE || len >= sizeof num ||
	    js[t->start] < '0' || js[t->start] > '9')
		return -1;
	memcpy(num, js + t->start, len);
	num[len] = '\0';
	return strtoll(num, NULL, 10);
}

/* Where the max output tokens live, per API: top level for OpenAI and
 * Anthropic, "options" for Ollama, "parameters" for TGI,
 * "generationConfig" for Gemini. */
static int is_max_tokens_key(const char *js, const jsmntok_t *k)
{
	static const char *const names[] = {
		"max_tokens", "max_completion_tokens", "max_output_tokens",
		"num_predict", "max_new_tokens", "maxOutputTokens"
	};
	for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++)
		if (tok_is(js, k, names[i]))
			return 1;
	return 0;
}

static void scan_nested(const char *js, const jsmntok_t *t, int n, int obj,
    struct mock_body *out)
{
	int i = obj + 1;

	for (int k = 0; k < t[obj].size && i + 1 < n; k++) {
		const jsmntok_t *key = &t[i], *val = &t[i + 1];
		if (tok_is(js, key, "include_usage"))
			out->include_usage = tok_true(js, val);
		else if (tok_is(js, key, "continuous_usage_stats"))
			out->continuous_usage = tok_true(js, val);
		else if (out->max_tokens < 0 && is_max_tokens_key(js, key))
			out->max_tokens = tok_int(js, val);
		i = tok_skip(t, n, i + 1);
	}
}

/* jsmn lets raw control bytes and ill-formed UTF-8 through in strings;
 * echoed into an event they could break its framing or its encoding. The
 * string's escapes are echoed as they are. */
static int echo_safe(const char *s, size_t len)
{
	int valid;

	for (size_t i = 0; i < len;) {
		if ((unsigned char)s[i] < 0x20)
			return 0;
		i += jsonw_utf8_seq(s + i, len - i, &valid);
		if (!valid)
			return 0;
	}
	return 1;
}

static void scan_top(const char *js, const jsmntok_t *t, int n,
    struct mock_body *out)
{
	int i = 1;

	for (int k = 0; k < t[0].size && i + 1 < n; k++) {
		const jsmntok_t *key = &t[i], *val = &t[i + 1];
		size_t vlen = (size_t)(val->end - val->start);
		if (tok_is(js, key, "model") && val->type == JSMN_STRING &&
		    vlen < MOCK_MODEL_MAX && echo_safe(js + val->start, vlen)) {
			memcpy(out->model, js + val->start, vlen);
			out->model[vlen] = '\0';
		} else if (tok_is(js, key, "stream")) {
			out->stream = val->type != JSMN_PRIMITIVE ||
			    js[val->start] != 'f';
		} else if (tok_is(js, key, "response_mode")) {
			out->stream = !tok_is(js, val, "blocking");
		} else if (out->max_tokens < 0 && is_max_tokens_key(js, key)) {
			out->max_tokens = tok_int(js, val);
		} else if (val->type == JSMN_OBJECT) {
			scan_nested(js, t, n, i + 1, out);
		}
		i = tok_skip(t, n, i + 1);
	}
}

/* The bytes a JSON string's content (between its quotes) decodes to: an
 * escape is one byte, \\uXXXX its UTF-8 length (a surrogate pair 4). */
static uint64_t text_bytes(const char *s, size_t len)
{
	uint64_t n = 0;

	for (size_t i = 0; i < len; i++, n++) {
		unsigned long cp;
		if (s[i] != '\\' || i + 1 >= len)
			continue;
		if (s[++i] != 'u' || i + 4 >= len) /* \n, \", ...: one byte */
			continue;
		cp = strtoul((char[5]){ s[i + 1], s[i + 2], s[i + 3], s[i + 4], 0 },
		    NULL, 16);
		i += 4;
		if (cp >= 0xd800 && cp <= 0xdbff && i + 6 < len && s[i + 1] == '\\' &&
		    s[i + 2] == 'u') {
			i += 6;        /* the pair's low half: 4 bytes in all */
			n += 3;
		} else {
			n += cp < 0x80 ? 0 : cp < 0x800 ? 1 : 2;
		}
	}
	return n;
}

/* The keys whose string values are a prompt's text, in any API's body:
 * chat messages' and parts' content and text, a completion's prompt,
 * Responses' input, TGI's inputs, Dify's query, Anthropic's system. */
static int is_prompt_key(const char *js, const jsmntok_t *k)
{
	static const char *const names[] = {
		"content", "prompt", "input", "text", "inputs", "query", "system"
	};
	for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++)
		if (tok_is(js, k, names[i]))
			return 1;
	return 0;
}

/* Every prompt key's string value, at any depth: an object's key is the
 * one string token with a child (its value). */
static uint64_t prompt_bytes(const char *js, const jsmntok_t *t, int n)
{
	uint64_t sum = 0;

	for (int i = 0; i + 1 < n; i++)
		if (t[i].type == JSMN_STRING && t[i].size == 1 &&
		    t[i + 1].type == JSMN_STRING && is_prompt_key(js, &t[i]))
			sum += text_bytes(js + t[i + 1].start,
			    (size_t)(t[i + 1].end - t[i + 1].start));
	return sum;
}

void mock_body_scan(const char *json, size_t len, struct mock_body *out)
{
	jsmn_parser parser;
	jsmntok_t *t;
	int n;

	memset(out, 0, sizeof *out);
	out->stream = 1;
	out->max_tokens = -1;
	jsmn_init(&parser);
	n = jsmn_parse(&parser, json, len, NULL, 0);
	if (n <= 0 || n > BODY_MAX_TOKENS)
		return;
	t = malloc((size_t)n * sizeof *t);
	if (t == NULL)
		return;
	jsmn_init(&parser);
	if (jsmn_parse(&parser, json, len, t, (unsigned)n) == n &&
	    t[0].type == JSMN_OBJECT) {
		scan_top(json, t, n, out);
		out->prompt_bytes = prompt_bytes(json, t, n);
	}
	free(t);
}

uint64_t mock_params_gap(const struct mock_params *p, uint64_t *rng, long others)
{
	double d = (double)p->jitter_us, j = 0, gap;

	switch (p->jitter) {
	case MOCK_JITTER_NONE:
		break;
	case MOCK_JITTER_UNIFORM:
		j = (rng_unit_open(rng) * 2 - 1) * d;
		break;
	case MOCK_JITTER_NORMAL:
		j = sqrt(-2 * log(rng_unit_open(rng))) *
		    cos(2 * M_PI * rng_unit_open(rng)) * d;
		break;
	case MOCK_JITTER_EXP:
		j = -log(rng_unit_open(rng)) * d;
		break;
	}
	gap = (double)p->tpot_us + (double)p->tpot_per_stream_us *
	    (double)(others > 0 ? others : 0) + j;
	return gap > 0 ? (uint64_t)(gap + 0.5) : 0;
}
