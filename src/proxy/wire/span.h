/* SPDX-License-Identifier: Apache-2.0 */
/* One request's span as a worker hands it to the OTLP exporter (otel/):
 * the request's sample and group key (sample.h), the trace context it
 * ran in, and the moments a span's events mark. Fixed size: a worker
 * fills it once, at the request's end, into its bounded span queue
 * (ring.h, ring_span); the main thread encodes it. Times are the
 * monotonic clock's µs (0: did not happen); mono_end_us and wall_end_ns
 * are one moment on both clocks, so the exporter converts. Never a
 * prompt, a completion or a credential. */
#ifndef TOKENTAP_SPAN_H
#define TOKENTAP_SPAN_H

#include <stdint.h>

#include "sample.h"

#define SPAN_STALLS_MAX     8    /* stall events kept; the count is whole */
#define SPAN_ATTEMPTS_MAX   8    /* failover attempts (CONF_RETRIES_MAX) */
#define SPAN_TRACESTATE_MAX 512  /* W3C: a vendor may drop a longer one */
#define SPAN_NAME_MAX       64
#define SPAN_PATH_MAX       256  /* url.path kept (cut at a character) */
#define SPAN_HOST_MAX       128  /* the request's Host kept */

struct span_attempt {
	char upstream[SPAN_NAME_MAX];   /* the replica left */
	char reason[24];                /* failover_reason_name() */
	uint16_t status;                /* its response's, else 0 */
	uint64_t t_us;                  /* when it was left */
	uint64_t us;                    /* how long it took */
};

struct span {
	uint8_t trace_id[16];
	uint8_t span_id[8];             /* tokentap's CLIENT span: the call to
	                                 * the model, the backend's parent */
	uint8_t server_id[8];           /* tokentap's SERVER span: the request
	                                 * it received, span_id's parent */
	uint8_t parent_id[8];           /* the client's span; all zero: a root */
	uint8_t flags;                  /* W3C trace-flags sent upstream */
	uint8_t stream;                 /* the response was an event stream */
	uint8_t stream_asked;           /* the request asked for one */
	uint8_t https;                  /* the client came over TLS */
	uint8_t http10;                 /* the request was HTTP/1.0 */
	uint8_t n_stalls;               /* stall events below */
	uint8_t n_attempts;
	uint16_t tracestate_len;
	char tracestate[SPAN_TRACESTATE_MAX];
	uint8_t model_src;              /* enum meter_model_src of key.model */
	char method[16];
	/* the SERVER span's: as the client sent them (unchecked bytes: the
	 * encoder cleans them), and the client's address (tokentap's text) */
	char path[SPAN_PATH_MAX];
	char host[SPAN_HOST_MAX];
	char client[64];
	uint64_t mono_end_us, wall_end_ns;
	uint64_t t0, t_first_event, t_first_token, t_first_output;
	uint64_t stall_start[SPAN_STALLS_MAX], stall_end[SPAN_STALLS_MAX];
	struct span_attempt attempts[SPAN_ATTEMPTS_MAX];
	uint64_t stalls;                /* all of the stream's (the sample's
	                                 * are those not reported live) */
	int64_t reasoning_tokens;       /* -1: not reported */
	char response_model[METER_MODEL_MAX];  /* "": the response named none */
	uint8_t n_finish;               /* finish reasons below (meter.h: clean) */
	char finish[METER_FINISH_MAX][METER_FINISH_LEN + 1];
	struct sample_key key;
	struct sample s;
};

#endif
