/* SPDX-License-Identifier: Apache-2.0 */
/* What one simulated response looks like: the timing and fault knobs that
 * flags set as defaults and X-Mock-* headers override per request, the few
 * fields of a request body that shape the answer, and the seeded PRNG that
 * makes token text and jitter repeatable. */
#ifndef TOKENTAP_MOCK_PARAMS_H
#define TOKENTAP_MOCK_PARAMS_H

#include <stddef.h>
#include <stdint.h>

enum mock_jitter {
	MOCK_JITTER_NONE,
	MOCK_JITTER_UNIFORM,   /* +- d, flat */
	MOCK_JITTER_NORMAL,    /* standard deviation d */
	MOCK_JITTER_EXP        /* exponential with mean d, always added */
};

enum mock_fault {
	MOCK_FAULT_NONE,
	MOCK_FAULT_STATUS,     /* JSON error response with status fault_arg */
	MOCK_FAULT_ERROR,      /* in-stream error event after fault_arg tokens */
	MOCK_FAULT_CLOSE,      /* abrupt close after fault_arg tokens */
	MOCK_FAULT_STALL       /* silence after fault_arg tokens, connection open */
};

struct mock_params {
	uint64_t ttft_us;
	uint64_t role_delay_us;
	uint64_t tpot_us;
	uint64_t prefill_per_token_us;
	uint64_t ttft_per_stream_us;   /* extra TTFT per other stream in progress */
	uint64_t tpot_per_stream_us;   /* extra TPOT per other sequence decoding */
	uint64_t first_chunk_tokens;   /* tokens of the first token event; 0: as the rest */
	int continuous_usage;          /* a usage on every chunk (OpenAI) */
	uint64_t keepalive_us;         /* 0: no keep-alive comments */
	enum mock_jitter jitter;
	uint64_t jitter_us;
	int64_t tokens;                /* -1: the request's max tokens, else 50 */
	uint64_t tokens_per_chunk;
	int usage;
	int close_framing;             /* no Transfer-Encoding, close at the end */
	int stamp;                     /* ": ts=<send µs>" before each token event */
	enum mock_fault fault;
	uint64_t fault_arg;
	uint64_t reasoning;            /* the first N tokens are reasoning */
	uint64_t stall_after;          /* tokens before a stall (stall_us > 0) */
	uint64_t stall_us;             /* a pause of the tokens, then they go on */
	uint64_t heartbeat_us;         /* a no-token event this often in a stall */
	uint64_t clump;                /* token events written at once */
	double prompt_bytes_per_token; /* usage's prompt tokens: the prompt's text
	                                * bytes / this, rounded up; 0: body bytes / 4 */
	uint64_t seed;
	int has_seed;
};

/* The documented defaults (ttft 300ms, tpot 20ms, usage on, ...). */
void mock_params_init(struct mock_params *p);

/* The knob called name ("ttft", "role-delay", ... as the long flag, and as
 * the header "X-Mock-<name>" in any case), as an index, or -1. */
int mock_params_find(const char *name, size_t len);
/* Sets knob idx from its text form. Returns 0, or -1 when value is invalid. */
int mock_params_set(struct mock_params *p, int idx, const char *value);

#define MOCK_MODEL_MAX 128

/* The fields of a request body the mock answers to. */
struct mock_body {
	char model[MOCK_MODEL_MAX];  /* JSON string content, escapes kept; "" when absent */
	int stream;                  /* 0 for "stream": false or "response_mode": "blocking" */
	int include_usage;           /* stream_options.include_usage */
	int continuous_usage;        /* stream_options.continuous_usage_stats (vLLM) */
	int64_t max_tokens;          /* the first max-tokens field found, or -1 */
	uint64_t prompt_bytes;       /* the prompt's text: bytes of every string of
	                              * a prompt key (content, prompt, input, text,
	                              * inputs, query, system), escapes decoded */
};

/* Reads a (possibly truncated or non-JSON) request body; never fails, what
 * cannot be read keeps its default. */
void mock_body_scan(const char *json, size_t len, struct mock_body *out);

/* The gap before the next token event: tpot, plus tpot_per_stream for
 * each of the others sequences decoding besides this one, plus jitter;
 * never negative. */
uint64_t mock_params_gap(const struct mock_params *p, uint64_t *rng, long others);

#endif
