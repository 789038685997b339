/* SPDX-License-Identifier: Apache-2.0 */
/* The rules of docs/contract.md §4 that tell, for each event of a response
 * stream, what it means: a token, the reported token counts, the end marker,
 * an error, the model. Pure code: JSON is read with jsmn on the caller's
 * stack, nothing is allocated. */
#ifndef TOKENTAP_DIALECT_H
#define TOKENTAP_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "dialect_names.h"
#include "sse.h"

#define DIALECT_FINISH_MAX 4

struct dialect_info {
	int token;              /* token-bearing event */
	int reasoning;          /* a token event with reasoning only, no answer
	                         * text (TTFO waits for the others) */
	int end;                /* the dialect's end marker */
	int error;              /* an in-stream error */
	int keepalive;          /* DIALECT_PING, DIALECT_EMPTY, else 0 */
	unsigned n_finish;      /* finish reasons below (in the padding here) */
	int64_t output_tokens;  /* reported output count in this event, or -1 */
	int64_t input_tokens;   /* reported input count in this event, or -1 */
	int64_t reasoning_tokens; /* reported reasoning count, or -1 */
	const char *model;      /* "model" (Gemini: "modelVersion") in this event */
	size_t model_len;       /* 0 when absent */
	/* The finish reasons the event gives (OpenTelemetry's
	 * gen_ai.response.finish_reasons), each a JSON string's raw text in
	 * the event's bytes, in the order met: one per choice or candidate
	 * that finished; more than DIALECT_FINISH_MAX are left out. Only the
	 * first n_finish are set (info_reset leaves the rest: no store per
	 * event for them). */
	struct dialect_str {
		const char *s;
		size_t len;
	} finish[DIALECT_FINISH_MAX];
};

/* Events a backend sends to keep a stream alive, no token, count, end or
 * error in them (the wire report): a ping event (`event: ping`, Anthropic's
 * {"type": "ping"}), and an empty delta (an OpenAI chunk whose every
 * choice's delta has no text and no role, with no finish_reason, usage or
 * error; an Ollama line with no text that is not done). */
enum { DIALECT_PING = 1, DIALECT_EMPTY = 2 };

/* Does each token event of the dialect carry one token by its protocol
 * (TGI: one `token` object an event)? */
int dialect_one_token_per_event(enum dialect_id d);

/* The dialect `auto` picks for a request path (query string allowed). */
enum dialect_id dialect_for_path(const char *path, size_t len);
/* The OpenTelemetry gen_ai.operation.name of a request path (an index
 * into dialect_op_names), from the same table. */
enum dialect_op dialect_operation(const char *path, size_t len);
/* The dialect one event of a stream shows (`auto` on a path that names
 * none), or DIALECT_RAW when the event does not tell. */
enum dialect_id dialect_sniff(const struct sse_event *ev);
/* Does the dialect's stream end with a marker (docs/contract.md §4: [DONE],
 * message_stop, ...)? Elsewhere the end of the body is the end. */
int dialect_has_end_marker(enum dialect_id d);
/* Its marker's name ("[DONE]", "message_stop", ...), NULL where none. */
const char *dialect_end_marker(enum dialect_id d);

/* 1 (default): common OpenAI chunks are recognised without a full JSON
 * parse. Tests turn it off to compare both paths. */
extern int dialect_fast_path;
/* Events this thread classified by the fast path (for tests). */
extern _Thread_local uint64_t dialect_fast_taken;

/* Classifies one event of dialect d (not DIALECT_AUTO). */
void dialect_classify(enum dialect_id d, const struct sse_event *ev,
    struct dialect_info *out);

/* A stream's chunks repeat their bytes but for a few string values (the
 * token's text, OpenAI's "obfuscation"): the memo keeps the last chunk the
 * fast path read as a token, without those values, and the next chunk
 * that is the same but for them is the same answer, told by two or three
 * memcmp. Per stream, caller-owned; holes == 0 is empty. */
#define DIALECT_MEMO_MAX 384
#define DIALECT_MEMO_HOLES 4
struct dialect_memo {
	uint8_t holes;           /* string values left out; 0: no memo */
	uint8_t top;             /* bit i: hole i is a top-level value */
	uint16_t seg_end[DIALECT_MEMO_HOLES + 1]; /* each run's end in text */
	uint16_t model_off, model_len;            /* the model, in run 0 */
	char text[DIALECT_MEMO_MAX];              /* the constant runs */
};

/* dialect_classify with a memo of the stream's events (NULL: none). */
void dialect_classify_memo(enum dialect_id d, const struct sse_event *ev,
    struct dialect_memo *memo, struct dialect_info *out);
/* The memo's answer alone: 1 when ev is the memo's chunk but for its
 * holes, which dialect_classify_memo reads as one token and nothing else
 * (no counts, finish, error, end or keep-alive) with the model *model of
 * *model_len bytes (0: none named); 0: read it with dialect_classify_parse. */
int dialect_memo_token(enum dialect_id d, const struct sse_event *ev,
    const struct dialect_memo *memo, const char **model, size_t *model_len);
/* dialect_classify_memo but for the memo's match, for an event
 * dialect_memo_token said 0 to (the memo is kept up as there). */
void dialect_classify_parse(enum dialect_id d, const struct sse_event *ev,
    struct dialect_memo *memo, struct dialect_info *out);
/* Events this thread classified by the memo (for tests). */
extern _Thread_local uint64_t dialect_memo_taken;

/* Reads the usage of a non-streaming JSON response body of dialect d:
 * the same fields as dialect_classify, token/end/error included. */
void dialect_classify_body(enum dialect_id d, const char *json, size_t len,
    struct dialect_info *out);

/* The top-level "model" string of a request body, if the (possibly
 * truncated) JSON text shows one. Returns 1 and sets *model / *len, or 0. */
int dialect_request_model(const char *json, size_t len, const char **model,
    size_t *model_len);

/* The model named in a Gemini path "/models/{model}:streamGenerateContent".
 * Returns 1 and sets *model / *len, or 0. */
int dialect_path_model(const char *path, size_t len, const char **model,
    size_t *model_len);

#endif
