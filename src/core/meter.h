/* SPDX-License-Identifier: Apache-2.0 */
/* The per-request meter: the timeline of docs/contract.md §4 and what follows
 * from it (TTFT, N and its source, TPOT, ITL, outcome inputs). Pure: the proxy
 * hands it timestamps and the decoded response body; it runs the SSE parser
 * and the dialect rules over the body and keeps the points. No allocation per
 * event. */
#ifndef TOKENTAP_METER_H
#define TOKENTAP_METER_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "dialect.h"
#include "lhist.h"
#include "sse.h"

#define METER_MODEL_MAX 128
/* Finish reasons kept (one a choice: n choices), and the bytes of each. */
#define METER_FINISH_MAX 4
#define METER_FINISH_LEN 32
/* Gaps between token reads (lhist.h: 12 %), up to 2^32 µs. */
#define METER_GAP_BUCKETS LHIST_LEN(32)

enum meter_parse { METER_PARSE_NONE, METER_PARSE_SSE, METER_PARSE_NDJSON };

enum meter_model_src { MODEL_NONE, MODEL_RESPONSE, MODEL_PATH, MODEL_REQUEST };

/* How a request ended (docs/contract.md §4); the text only where it is written
 * out (meter_outcome_name). client_abort and client_timeout are the client's
 * doing (meter_outcome_client): it left, or it was too slow. */
enum meter_outcome {
	OUTCOME_OK, OUTCOME_CLIENT_ABORT, OUTCOME_CLIENT_TIMEOUT, OUTCOME_UPSTREAM_ABORT,
	OUTCOME_UPSTREAM_ERROR, OUTCOME_TIMEOUT, OUTCOME_CONNECT_ERROR,
	OUTCOME_REJECTED, OUTCOME_COUNT
};

/* How the exchange stopped, as the transport saw it. */
enum meter_end {
	METER_END_COMPLETE,   /* the response ended by its framing, or by the
	                       * close that delimits it */
	METER_END_CLOSED,     /* the upstream closed before the response ended */
	METER_END_MALFORMED,  /* the upstream broke the HTTP framing */
	METER_END_CLIENT,     /* the client went away first */
	METER_END_CLIENT_TIMEOUT, /* the client was too slow: its request, or
	                       * taking its response, stopped for a timeout */
	METER_END_TIMEOUT,
	METER_END_CONNECT,    /* no upstream connection could be made */
	METER_END_REJECTED    /* answered before any upstream (tokentap's 4xx) */
};

/* Called for every gap between consecutive token-bearing events (µs). */
typedef void (*meter_itl_fn)(void *arg, uint64_t gap_us);

/* Why a response body is not measured: it is forwarded as it came, and
 * its figures stay null, never miscounted. */
enum meter_unmeasured {
	METER_MEASURED,
	METER_UNMEASURED_CODING,     /* a Content-Encoding not decoded */
	METER_UNMEASURED_DECODE,     /* bytes not of their coding, or past the
	                              * decoder's memory bound */
	METER_UNMEASURED_MEMORY,     /* no memory for a decoder */
	METER_UNMEASURED_COUNT
};

/* A stamped point's doubt (docs/measurement.md, "Doubt"): its bytes
 * arrived after floor and by the read's time; complete: the kernel stamped
 * that read and the point's bytes ended it, so the stamp is their own. */
struct meter_point {
	uint64_t floor;
	const char *end;             /* where its feed ended */
	uint8_t kernel, last;
};
#define PENDING_FT 1
#define PENDING_FO 2

struct meter {
	/*
	 * What a read of a streaming body writes or tests comes first, from
	 * t0 to the memo, what a request touches once after it (the cold
	 * block at the end): at 1,000 streams a worker's meters are out of
	 * its caches, and each line a read touches is a miss.
	 */
	/* timeline, CLOCK_MONOTONIC µs, 0 = did not happen (the rest of it
	 * with the cold block) */
	uint64_t t0;
	uint64_t now;                /* private: timestamp of the read being parsed */
	uint64_t t_first_event, t_first_token, t_last_token;
	uint64_t t_first_output;     /* first token event that is not reasoning */
	uint64_t t_last_event;
	/* where the times of t0 and of the response's reads came from: the
	 * kernel's receive stamps, or the event loop's clock (no stamp, a
	 * clock step, timestamps: loop); the proxy counts them */
	uint32_t stamps_kernel, stamps_loop;
	/* doubt (docs/measurement.md, "Doubt"): the bytes of the read being
	 * parsed arrived after now_floor (the last time the socket was found
	 * drained, before that read: they were not there yet) and by now;
	 * now_kernel: now is the kernel's stamp of its newest segment. The
	 * first token's read's (ft_floor, ft_kernel), and ft_last: its event
	 * ended the read (only line ends after its data), so the stamp of
	 * the newest segment is the event's own (the exchange judges the
	 * read's end, the meter its feed's: ft_pending until it did; a read
	 * not whole, a TLS one OpenSSL kept part of, is never judged:
	 * now_whole, ft_whole) */
	uint64_t now_floor;
	uint64_t ft_floor;
	uint8_t now_kernel, now_whole, ft_kernel, ft_whole, ft_last, ft_pending;
	/* ft_pending: a read's end is due (meter_read_end): a token came,
	 * the last so far (lt_end: its event's data ended there); and
	 * points_due: the first token's or the first output token's read is
	 * to be judged too (their ft_end, fo.end: where their feeds ended) */
	uint8_t points_due;
	const char *ft_end;
	const char *lt_end;
	/* the other stamped points' doubts, by the same rule: the request's
	 * first byte (t0_floor: before it the client's socket was found
	 * drained; 0: not known, docs/measurement.md), the response head,
	 * the first output token and the last token */
	uint64_t t0_floor;
	struct meter_point hd, fo, lt;

	enum dialect_id dialect;
	unsigned sniff;              /* events left to find the dialect in */
	enum meter_parse parse;
	int stream;                  /* the response is an event stream */
	int json_body;               /* a JSON body, kept (1 MiB) for its usage */
	unsigned status;
	int end_seen;                /* the dialect's end marker */
	enum decode_kind encoding;   /* the response's Content-Encoding */
	enum meter_unmeasured unmeasured; /* why the body is not read, if it is not */
	int unmeasured_body;         /* ... and body bytes came all the same */
	int error_seen;              /* an in-stream error event */
	uint64_t events;
	uint64_t token_events;
	uint64_t itl_max_us;

	/* the wire report's own (the SSE parser counts the rest): the reads
	 * that completed an event (a read's time is its identity, as for
	 * clumping), keep-alive events by kind (dialect.h), and the
	 * keep-alives of every kind (comments too) with the times of the
	 * first and the last; the parser's comments and pings seen so far */
	uint64_t event_reads, event_read_at;
	uint64_t pings, empty_deltas;
	uint64_t keepalives, ka_first, ka_last, ka_parser;

	/* clumping: token events that came in the same read as the token
	 * before them (one read, one timestamp: a gap of 0), and the gaps
	 * between the reads that carried tokens, as a histogram */
	uint64_t clumped;
	uint16_t gap_hist[METER_GAP_BUCKETS];

	/* stalls: token-free gaps of an open stream of at least stall_us
	 * (0: off), after its first token; stalled while the sweep sees one
	 * going on (meter_stall_sweep) */
	uint64_t stall_us;
	uint64_t stalls;             /* all, including those the sweep missed */
	uint64_t gap_max_us;         /* longest token-free gap, set by meter_end */
	int stalled;
	uint64_t stall_ref;          /* t_last_token when it stalled */

	/* held: tokentap stopped reading the upstream because the client had
	 * not taken what it was sent (backpressure). That time is the
	 * client's: token gaps are measured without it (meter_hold) */
	uint64_t held_us;            /* the holds that ended, in all */
	uint64_t held_from;          /* the hold going on began, else 0 */
	uint64_t held_first;         /* held_us at the first token */
	uint64_t held_last;          /* held_us at the last token */

	meter_itl_fn itl_fn;
	void *itl_arg;

	/* private */
	const char *feed, *feed_end; /* the bytes meter_body is parsing, when
	                              * the parser sees them as they came */
	size_t max_event_bytes;
	struct sse_parser sse;
	struct decoder *dec;         /* gzip / deflate: the meter reads it decoded */
	char *body;                  /* non-stream JSON body, first 1 MiB */
	size_t body_len, body_cap;
	struct dialect_memo memo;    /* the stream's last token chunk */

	/* the cold block: what a request touches once */
	uint64_t t_req, t_conn, t_sent, t_head, t_end;
	uint64_t tls_us;             /* handshake time inside connect */
	int conn_reused;
	int64_t reported_out;        /* -1: the stream reported none */
	int64_t reported_in;
	int64_t reported_reasoning;  /* -1: the stream reported none */

	/* chunks are not tokens: the events that reported an output count
	 * (and of them the token-bearing ones: continuous usage), and the
	 * tokens the first token event carried where a count or the dialect
	 * told it (-1: not told) */
	uint64_t usage_events, usage_token_events;
	int64_t first_event_tokens;

	char model[METER_MODEL_MAX];
	size_t model_len;
	enum meter_model_src model_src;
	/* the model the response itself named, whatever the label's source
	 * (OpenTelemetry's gen_ai.response.model); "" until one did */
	char response_model[METER_MODEL_MAX];
	size_t response_model_len;
	/* the finish reasons the response gave (dialect.h: a stream's
	 * finish events, or a JSON body's), each once, first seen first, at
	 * most METER_FINISH_LEN bytes of [A-Za-z0-9_.-] (a backend's bytes:
	 * any other is '_'), for OpenTelemetry's
	 * gen_ai.response.finish_reasons and the access log's finish_reason */
	unsigned n_finish;
	char finish[METER_FINISH_MAX][METER_FINISH_LEN + 1];
};

void meter_init(struct meter *m, uint64_t t0, enum dialect_id dialect);
/* The dialect the request says; sniff: the path named none (`auto`), so
 * the first events tell (dialect_sniff), and if they do not, the stream is
 * raw from its first event on. */
void meter_set_dialect(struct meter *m, enum dialect_id d, int sniff);
/* Offers the model label from a source; a stronger source wins
 * (docs/contract.md §4: request body, then Gemini path, then first response
 * chunk). */
void meter_offer_model(struct meter *m, enum meter_model_src src,
    const char *model, size_t len);
/* The response head: decides whether and how the body is parsed (a gzip,
 * deflate, br or zstd body is decoded for it; any other coding leaves it
 * unmeasured). content_type / content_encoding may be NULL. */
void meter_response_head(struct meter *m, unsigned status,
    const char *content_type, size_t ct_len, const char *content_encoding,
    size_t ce_len, size_t max_event_bytes, uint64_t now);
/* Decoded response body bytes, as read at time now. */
void meter_body(struct meter *m, const char *p, size_t len, uint64_t now);
/* The response ended (or was aborted) at time now. */
void meter_end(struct meter *m, uint64_t now);
/* Backpressure: tokentap stops reading the upstream at now until the
 * client takes what waits for it (hold), and reads again (unhold). The
 * client's time, not the model's: a token-free gap counts only the time
 * tokentap was reading (stalls, gap_max, token_idle); the gap across a hold
 * is no ITL sample (what the model made meanwhile arrives at once when
 * reading resumes), and a stream held between its first and last token
 * has no TPOT and no clumping verdict (its pace was the client's). */
void meter_hold(struct meter *m, uint64_t now);
void meter_unhold(struct meter *m, uint64_t now);
/* The time the client held the stream back, up to now (µs). */
uint64_t meter_held_us(const struct meter *m, uint64_t now);
/* 1 when the client held the stream between its first and last token. */
int meter_client_paced(const struct meter *m);
void meter_free(struct meter *m);
/* The first finish reason the response gave, NULL for none. */
const char *meter_finish_reason(const struct meter *m);
/* Why the body that came was not measured; METER_MEASURED when it was, or
 * when none came (a HEAD, a 304). */
enum meter_unmeasured meter_unmeasured(const struct meter *m);
/* "coding", "decode_error", "no_memory" (/metrics' cause, the access log's
 * unmeasured); NULL for METER_MEASURED. */
const char *meter_unmeasured_name(enum meter_unmeasured u);

/* The one outcome rule, for tokentap and tokentap-load alike: after
 * meter_end, from what the meter saw and how the exchange stopped. A
 * stream of a dialect with an end marker that ends without it was cut
 * short (upstream_abort), whatever delimited it; one cut after it is ok. */
enum meter_outcome meter_outcome(const struct meter *m, enum meter_end how);
const char *meter_outcome_name(enum meter_outcome o);
/* 1 for the client's outcomes (client_abort, client_timeout): an error of
 * the request, no failure of the route, the replica or the model. */
int meter_outcome_client(enum meter_outcome o);
/* A request that ended without any token-bearing event, counted by its
 * outcome: ok (an empty answer: a stream without a token), client_abort,
 * upstream_abort, upstream_error, timeout. A response that was no stream
 * is no empty answer, an unmeasured one tells nothing, connect_error and
 * rejected never reached a model, and a client_timeout tells nothing of
 * it (the client was too slow to send its request or take the answer). */
int meter_no_token(const struct meter *m, enum meter_outcome o);

/* Derived figures; -1 where undefined. */
int64_t meter_ttft_us(const struct meter *m);
/* TTFT's doubt: the first token truly arrived within [TTFT - doubt, TTFT]
 * (docs/measurement.md, "Doubt"). 0 where the kernel stamped the read and
 * the first token's event ended it; else the time from the read's floor
 * to its stamp. -1 where there is no TTFT. */
int64_t meter_ttft_doubt_us(const struct meter *m);
/* The doubts of the other stamped points, by the same rule: the request's
 * first byte (t0; -1 where no floor is known: a connection's first plain
 * request, bytes pipelined), the response head (-1: none), the first
 * output token and the last token (-1: no TTFO, no TTFT). */
int64_t meter_start_doubt_us(const struct meter *m);
int64_t meter_head_doubt_us(const struct meter *m);
int64_t meter_ttfo_doubt_us(const struct meter *m);
int64_t meter_last_token_doubt_us(const struct meter *m);
/* The response head was parsed at the read's time (meter_response_head);
 * ended: its last byte was the read's last. */
void meter_head_read(struct meter *m, int ended);
/* The read that carried the first token ended at `end`, in the buffer
 * the meter was fed from (NULL: in another, after it): only a chunk's
 * CRLF may lie between its feed's end and the read's. Settles ft_last;
 * the exchange calls it once that read is parsed, while ft_pending. */
void meter_read_end(struct meter *m, const char *end);
/* Time to the first output token: the first token event that is not
 * reasoning (TTFO), where TTFT counts reasoning too. */
int64_t meter_ttfo_us(const struct meter *m);
/* The server side's TTFT and TTFO: from the request's last byte read
 * (t_req), where TTFT and TTFO run from its first (t0). What the client
 * took to send its request (the client phase) is left out: the time
 * tokentap, the network to the backend and the backend took. What judges a
 * route (alerts, SLOs, headroom, slow replicas) judges these; a client's
 * pace does not page. -1 where undefined, or the request never completed;
 * 0 where the answer came before the request's end. */
int64_t meter_ttft_server_us(const struct meter *m);
int64_t meter_ttfo_server_us(const struct meter *m);
/* The duration from t_req, 0 where the request never completed. */
int64_t meter_duration_server_us(const struct meter *m);
int64_t meter_reasoning_tokens(const struct meter *m);
int64_t meter_output_tokens(const struct meter *m);
int meter_tokens_from_usage(const struct meter *m);
int64_t meter_tpot_us(const struct meter *m);
int64_t meter_input_tokens(const struct meter *m);

/* Where a stream's output count came from: none (no count, not a
 * stream), the token events (one token each, assumed), the stream's
 * usage, or a usage count on every token event (continuous usage: the
 * first event's tokens are known). */
enum meter_tokens { TOKENS_NONE, TOKENS_EVENTS, TOKENS_USAGE, TOKENS_CONTINUOUS };
enum meter_tokens meter_token_source(const struct meter *m);
/* "events", "usage", "continuous_usage" (the access log's token_source);
 * NULL for TOKENS_NONE. */
const char *meter_tokens_name(enum meter_tokens t);
/* Tokens per token event where the stream counted its tokens (N over the
 * token events), -1 where it did not. */
double meter_tokens_per_event(const struct meter *m);
/* 1 when TPOT's divisor took the first event's tokens as the mean per
 * event: the stream counted tokens that are not one per event, and told
 * nowhere how many the first event carried (meter.c). */
int meter_tpot_estimated(const struct meter *m);
/* The tokens output speed counts over the time from the first token event
 * to the last (TPOT's divisor), -1 where there is none. */
double meter_speed_tokens(const struct meter *m);

/* What the stream looked like on the wire (the wire report), for one
 * request: how its lines ended, its data fields, keep-alives, events per
 * read, whether its dialect's end marker came, where its usage came, a
 * coding, an error inside a 2xx. */
enum { WIRE_USAGE_NONE, WIRE_USAGE_FINAL, WIRE_USAGE_EVERY };
enum { WIRE_END_NONE, WIRE_END_SEEN, WIRE_END_MISSING };
struct meter_wire {
	uint8_t stream;              /* an event stream was parsed */
	uint8_t coding;              /* enum decode_kind of it */
	uint8_t end;                 /* WIRE_END_*: NONE where the dialect has no marker */
	uint8_t usage;               /* WIRE_USAGE_* */
	uint8_t error_in_2xx;        /* an error event under a 2xx head */
	uint32_t lf, crlf, cr;
	uint32_t data_space, data_bare;
	uint32_t comments, pings, empty_deltas;
	uint32_t ka_gaps;            /* keep-alive gaps, and their time in all */
	uint64_t ka_span_us;
	uint32_t events, event_reads;
};
/* After meter_end. */
void meter_wire(const struct meter *m, struct meter_wire *w);

/* Clumping. The share of the token events after the first that came in
 * the same upstream read as the token before them (< 0 with fewer than two
 * token events), the median gap between those reads (µs, -1 without one),
 * and the verdict: does the stream look buffered on its way
 * (docs/measurement.md, "Clumping", names the causes: a CDN, a proxy that
 * flushes on a timer, compression, a batching backend)? The rule, and the
 * measurements behind it, are in meter.c. */
double meter_clump_share(const struct meter *m);
int64_t meter_clump_gap_us(const struct meter *m);
/* 1 looks buffered, 0 does not, -1 too few token events to tell. */
int meter_buffered(const struct meter *m);

/* For a sweep over open streams now and then (never per event): the
 * token-free gap of an open stream since its last token at now, the time
 * the client held it back left out, or -1 (not a measured stream, no
 * token yet, or over). */
int64_t meter_token_gap_us(const struct meter *m, uint64_t now);
/* The stall state at now: +1 when the stream just stalled (a gap of
 * stall_us or more: counted), -1 when a token ended its stall, else 0. */
int meter_stall_sweep(struct meter *m, uint64_t now);

#endif
