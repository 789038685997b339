/* The per-request meter: the timeline of SPEC §4 and what follows from it
 * (TTFT, N and its source, TPOT, ITL, outcome inputs). Pure: the proxy hands
 * it timestamps and the decoded response body; it runs the SSE parser and the
 * dialect rules over the body and keeps the points. No allocation per event. */
#ifndef TOKENTAP_METER_H
#define TOKENTAP_METER_H

#include <stddef.h>
#include <stdint.h>

#include "dialect.h"
#include "sse.h"

#define METER_MODEL_MAX 128

enum meter_parse { METER_PARSE_NONE, METER_PARSE_SSE, METER_PARSE_NDJSON };

enum meter_model_src { MODEL_NONE, MODEL_RESPONSE, MODEL_PATH, MODEL_REQUEST };

/* Called for every gap between consecutive token-bearing events (µs). */
typedef void (*meter_itl_fn)(void *arg, uint64_t gap_us);

struct meter {
	/* timeline, CLOCK_MONOTONIC µs, 0 = did not happen */
	uint64_t t0, t_req, t_conn, t_sent, t_head;
	uint64_t t_first_event, t_first_token, t_last_token, t_end;
	uint64_t tls_us;             /* handshake time inside connect */
	int conn_reused;

	enum dialect_id dialect;
	enum meter_parse parse;
	int stream;                  /* the response is an event stream */
	unsigned status;
	int end_seen;                /* the dialect's end marker */
	int error_seen;              /* an in-stream error event */
	uint64_t events;
	uint64_t token_events;
	uint64_t itl_max_us;
	int64_t reported_out;        /* -1: the stream reported none */
	int64_t reported_in;

	char model[METER_MODEL_MAX];
	size_t model_len;
	enum meter_model_src model_src;

	meter_itl_fn itl_fn;
	void *itl_arg;

	/* private */
	uint64_t now;                /* timestamp of the read being parsed */
	size_t max_event_bytes;
	struct sse_parser sse;
	char *body;                  /* non-stream JSON body, first 1 MiB */
	size_t body_len, body_cap;
};

void meter_init(struct meter *m, uint64_t t0, enum dialect_id dialect);
/* Offers the model label from a source; a stronger source wins (SPEC §4:
 * request body, then Gemini path, then first response chunk). */
void meter_offer_model(struct meter *m, enum meter_model_src src,
    const char *model, size_t len);
/* The response head: decides whether and how the body is parsed.
 * content_type / content_encoding may be NULL. */
void meter_response_head(struct meter *m, unsigned status,
    const char *content_type, size_t ct_len, int encoded,
    size_t max_event_bytes, uint64_t now);
/* Decoded response body bytes, as read at time now. */
void meter_body(struct meter *m, const char *p, size_t len, uint64_t now);
/* The response ended (or was aborted) at time now. */
void meter_end(struct meter *m, uint64_t now);
void meter_free(struct meter *m);

/* Derived figures; -1 where undefined. */
int64_t meter_ttft_us(const struct meter *m);
int64_t meter_output_tokens(const struct meter *m);
int meter_tokens_from_usage(const struct meter *m);
int64_t meter_tpot_us(const struct meter *m);
int64_t meter_input_tokens(const struct meter *m);

#endif
