/* SPDX-License-Identifier: Apache-2.0 */
/* The bytes of each simulated API: the same events, in the same framing, as
 * the real services send (see tests/fixtures/streams). Rendering only:
 * when each event goes out is mock_stream's business.
 *
 * A response is: the pre-token events (role chunk, message_start, ...), one
 * event per mock_wire_token() call, then either the end events or the error
 * events. Every renderer appends exactly one event: an SSE event with its
 * blank line, or one NDJSON line. */
#ifndef TOKENTAP_MOCK_WIRE_H
#define TOKENTAP_MOCK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "dialect_names.h"
#include "mock_buf.h"
#include "mock_params.h"

/* Finer than the dialects: the request paths that answer differently. */
enum mock_api {
	MOCK_API_OPENAI_CHAT,
	MOCK_API_OPENAI_LEGACY,    /* /completions: choices[].text */
	MOCK_API_RESPONSES,
	MOCK_API_ANTHROPIC,
	MOCK_API_DIFY_CHAT,
	MOCK_API_DIFY_WORKFLOW,
	MOCK_API_GEMINI,
	MOCK_API_TGI,
	MOCK_API_OLLAMA_CHAT,
	MOCK_API_OLLAMA_GENERATE,
	MOCK_API_COUNT
};

struct mock_wire {
	enum mock_api api;
	char model[MOCK_MODEL_MAX];  /* JSON string content, escapes kept */
	uint64_t seed;               /* picks the words and the ids */
	uint64_t created_s;          /* wall clock, unix seconds */
	uint64_t start_us;           /* monotonic, for the reported durations */
	uint64_t input_tokens;
	int64_t cached_tokens;       /* of them, --prefix-cache hits; -1: no cache */
	uint64_t output_tokens;      /* the planned total */
	int usage;                   /* report token counts */
	int continuous_usage;        /* OpenAI: on every chunk too */
	uint64_t events_sent;        /* token events rendered so far */
	uint64_t tokens_sent;
	uint64_t reasoning;          /* the first tokens that are reasoning */
	int answering;               /* the answer began after reasoning */
	uint64_t seq_extra;          /* Responses: events besides the deltas */
	char id[17];                 /* hex, the root of every id in the response */
};

/* Sets the fields above from api and seed; the caller fills in the rest. */
void mock_wire_init(struct mock_wire *w, enum mock_api api, uint64_t seed);

/* The API that tokentap's `auto` would pick for this path (query allowed);
 * anything unknown is OpenAI chat. */
enum mock_api mock_wire_api(const char *path, size_t len);
enum dialect_id mock_wire_dialect(enum mock_api api);
const char *mock_wire_content_type(enum mock_api api);
int mock_wire_ndjson(enum mock_api api);
/* The model a Gemini path names ("/models/{model}:..."), JSON-safe, into
 * out (MOCK_MODEL_MAX bytes). Returns 0, or -1 when the path names none. */
int mock_wire_path_model(const char *path, size_t len, char *out);

size_t mock_wire_pre_count(const struct mock_wire *w);
void mock_wire_pre(const struct mock_wire *w, size_t k, struct mock_buf *b);
/* Does the API have a reasoning shape? (OpenAI chat, Responses, Anthropic,
 * Gemini, Ollama; legacy completions, TGI and Dify do not.) */
int mock_wire_has_reasoning(enum mock_api api);
/* The next `count` tokens as one event (advances tokens_sent): reasoning
 * while tokens_sent < reasoning (the caller does not let an event cross
 * that line), the answer after it, preceded by the events that close the
 * reasoning block where the API has them. */
void mock_wire_token(struct mock_wire *w, uint64_t count, struct mock_buf *b);
/* A no-token event for a stall: what the API sends to keep a connection
 * busy (an empty delta, a ping; a comment where it has none). */
void mock_wire_heartbeat(const struct mock_wire *w, struct mock_buf *b);
size_t mock_wire_end_count(const struct mock_wire *w);
void mock_wire_end(const struct mock_wire *w, size_t k, struct mock_buf *b);
size_t mock_wire_error_count(const struct mock_wire *w);
void mock_wire_error(const struct mock_wire *w, size_t k, struct mock_buf *b);
/* A keep-alive that is no event (an SSE comment; Dify's ping); nothing
 * for NDJSON, which has no comments. */
void mock_wire_keepalive(const struct mock_wire *w, struct mock_buf *b);

/* The whole answer to a non-streaming request, as one JSON document
 * (all output_tokens count as sent). */
void mock_wire_body(struct mock_wire *w, struct mock_buf *b);
/* The JSON error document this API returns with an HTTP error status. */
void mock_wire_error_body(const struct mock_wire *w, int status,
    struct mock_buf *b);

/* Pieces both the events and the whole bodies are made of. */
/* Tokens first..first+count-1 as a JSON string, quotes included. */
void mock_wire_text(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b);
/* Dify's "task_id", "id", ... members (no braces). */
void mock_wire_dify_ids(const struct mock_wire *w, struct mock_buf *b);
/* Dify's "metadata":{"usage":{..}} member. */
void mock_wire_dify_metadata(const struct mock_wire *w, struct mock_buf *b);
/* The Responses API's finished output message object. */
void mock_wire_responses_message(const struct mock_wire *w,
    struct mock_buf *b);
/* Ollama: '{"model":..,"created_at":..,' and the final '"done":true..}'. */
void mock_wire_ollama_begin(const struct mock_wire *w, struct mock_buf *b);
void mock_wire_ollama_done(const struct mock_wire *w, struct mock_buf *b);

#endif
