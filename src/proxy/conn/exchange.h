/* SPDX-License-Identifier: Apache-2.0 */
/* One request/response exchange: the HTTP of it (finding and parsing heads
 * with llhttp, checking them, rewriting them, framing bodies) and its books
 * (the meter, the access log, the statistics). A lower layer under proxy.c:
 * it reads and writes the buffers it is handed and answers with verdicts;
 * it never touches a socket, a timer or a connection, and never calls up.
 *
 * The exchange lives inside the client connection's session and is reset
 * for each request by exchange_begin, in one place. */
#ifndef TOKENTAP_EXCHANGE_H
#define TOKENTAP_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "accesslog.h"
#include "chunked.h"
#include "config.h"
#include "vitals.h"
#include "httphead.h"
#include "jsonscan.h"
#include "meter.h"
#include "ring.h"
#include "span.h"

struct evbuffer;

#define EXCHANGE_ID_MAX     64
#define EXCHANGE_TARGET_MAX 1024
#define EXCHANGE_TENANT_MAX 64

/* What the proxy must do when a step of the exchange fails: answer status
 * (tokentap's own JSON error; 0 would be "just close") and end the books
 * with `end`. */
struct exchange_verdict {
	unsigned status;
	const char *type;
	const char *msg;
	enum meter_end end;
};

/* What a response head was. */
enum exchange_head {
	EXCHANGE_INTERIM,         /* a 1xx: the final head follows */
	EXCHANGE_BODY,            /* a final head; its body follows */
	EXCHANGE_DONE,            /* a final head that is the whole response */
	EXCHANGE_TUNNEL,          /* a 101 to an upgrade: bytes both ways now */
	EXCHANGE_RETRY            /* a status in retry_on, with failover_ok: the
	                           * head was read and not passed on */
};

struct exchange_head_copy;

struct exchange {
	/* what the request runs with; conf == NULL between requests */
	struct conf *conf;            /* own reference */
	struct ring *stats;           /* the worker's records */
	const char *client_ip;        /* the session's */
	unsigned client_tls : 1;      /* the client came over TLS (url.scheme) */
	const struct conf_route *route;
	struct evbuffer *client_out;  /* where a decoded body goes (HTTP/1.0) */

	llhttp_t req, res;
	struct chunked res_chunks;    /* the response body's steady state */
	struct http_head *head;       /* while a head is being parsed */
	struct json_model_scan model_scan;
	/* next to the meter's first line: a read of a streaming body writes
	 * bytes_out and tests the flags, and at 1,000 streams each line a
	 * read touches is a cache miss; the vitals too, which each read adds
	 * its own cost to */
	uint64_t bytes_out;
	struct vitals vitals;         /* overhead, live stalls */
	unsigned head_parsed : 1;     /* a request head was read */
	unsigned line_checked : 1;    /* the request line passed its check */
	unsigned req_done : 1;
	unsigned req_trailers : 1;    /* in the request's trailer section */
	unsigned body_too_large : 1;  /* a chunk would pass max_body_bytes */
	unsigned too_many_headers : 1;
	unsigned http10 : 1;
	unsigned is_head_req : 1;
	unsigned keepalive : 1;       /* the client connection may carry on */
	unsigned head_sent : 1;       /* a final response head went out */
	unsigned res_done : 1;
	unsigned decode : 1;          /* the client gets the decoded body */
	unsigned retried : 1;         /* no (further) retry */
	unsigned idempotent : 1;      /* the method may be sent twice */
	unsigned expect_continue : 1; /* Expect: 100-continue */
	unsigned buffered : 1;        /* the body is held before connecting */
	unsigned upgrade : 1;         /* the client asks to switch protocols */
	unsigned upgrade_offer : CONF_UPGRADES_MAX; /* to these (route->upgrades) */
	unsigned counted : 1;         /* in gauge_streams */
	unsigned active_counted : 1;  /* in its group's `active` */
	unsigned failover_ok : 1;     /* a status in retry_on may go elsewhere */
	unsigned held : 1;            /* the response waits for its first token
	                               * (timeouts.first_token): the request stays
	                               * at hand past the head */
	unsigned req_sniff : 1;
	unsigned req_keepalive : 1;   /* keepalive as the request left it */
	struct meter meter;
	struct evbuffer *req_copy;    /* the request, kept for one retry */
	struct exchange_head_copy *head_copy;  /* the client's head, kept so
	                              * that another replica gets its own */
	size_t up_head_len;           /* the upstream head that starts req_copy */
	unsigned head_flags;          /* HTTPHEAD_* it was written with */

	/* the replica (pool.h) and the attempts left before it */
	const char *upstream;         /* its name: the log's and the statistics' */
	uint64_t affinity;            /* balance hash: the key's hash */
	struct accesslog_attempt attempts[CONF_RETRIES_MAX];
	unsigned n_attempts;
	unsigned retry_status;        /* the head that was EXCHANGE_RETRY */
	enum dialect_id req_dialect;  /* what the request said, for a new attempt */

	uint64_t body_bytes;          /* request body, as llhttp framed it */
	uint64_t bytes_in;
	long concurrency;
	unsigned status;              /* the status the client got */
	char request_id[EXCHANGE_ID_MAX + 1];
	char method[16];
	char target[EXCHANGE_TARGET_MAX + 1];
	size_t target_len;
	char tenant[EXCHANGE_TENANT_MAX + 1];
	uint8_t op;                   /* its path's operation (dialect.h) */
	/* the statistics' mint flags (sample.h): the tenant named by the
	 * operator; the model, at the model source it was judged for */
	uint8_t tenant_named;
	uint8_t model_named, model_named_src;
	uint64_t stream_id;           /* ring_stream_id: its gauges' group */

	/* statistics: the group counted active, token gaps not yet sent */
	struct sample_key active_key;
	unsigned n_itl;
	uint32_t itl[RING_ITL_BATCH];
	/* W3C trace context (tracectx.h): the trace the request is in, the
	 * client's span (parent_id) and tokentap's (span_id, when it takes
	 * part: otel.traces); the stall events and the attempts' moments a
	 * sampled request's span (span.h) shows; a tracestate kept for it */
	uint8_t trace_id[16], span_id[8], server_id[8], parent_id[8];
	char trace_host[SPAN_HOST_MAX]; /* a traced request's Host (its SERVER span) */
	uint8_t trace_flags;          /* what goes upstream */
	uint8_t n_stalls;
	unsigned traced : 2;          /* EXCHANGE_TRACE_* */
	unsigned trace_drop : 1;      /* a malformed traceparent: not passed on */
	uint64_t stall_start[SPAN_STALLS_MAX], stall_end[SPAN_STALLS_MAX];
	uint64_t attempt_t[CONF_RETRIES_MAX];
	char *tracestate;             /* a sampled request's, NULL: none */
};

/* x->traced: no trace context; the client's passed on untouched (tokentap
 * takes no part: no otel.traces); tokentap's span in the client's trace
 * or in one it started. */
enum { EXCHANGE_TRACE_NONE, EXCHANGE_TRACE_CLIENT, EXCHANGE_TRACE_OWN };
/* Expect: 100-continue answered by tokentap (not an HTTP/1.0 client's):
 * 1 when the 100 went into out. */
int exchange_continue(struct exchange *x, struct evbuffer *out);
/* tokentap's own JSON error as the response (status, a closing head and
 * {"error":{"type","message"}}) into out, counted as the client's. */
void exchange_error(struct exchange *x, struct evbuffer *out, unsigned status,
    const char *type, const char *msg);

/* The time of a read: the kernel's receive time of its newest bytes (real,
 * CLOCK_REALTIME ns, rxtime.h) where it gave one, else the loop's clock
 * now; *kernel says which. A clock step seen is logged and counted. */
struct rxtime_clock;
uint64_t exchange_read_time(struct rxtime_clock *c, int64_t real, int *kernel);
/* A response read at that time becomes the meter's clock (meter.now) and
 * counts in the request's timestamps. floor: its bytes arrived after it
 * (the doubt's, meter.h; 0: not known, the request's start is); whole:
 * the read's bytes end where the socket read did (plain: the stamp is
 * the newest byte's; TLS: OpenSSL may hold part of a record). */
void exchange_read(struct exchange *x, struct rxtime_clock *c, int64_t real,
    uint64_t floor, int whole);
/* The upstream resumed after a pause: the bytes it held are parsed now,
 * after reads that may have moved the floor and the stamp past them, so
 * their time is now's and their doubt the whole window from t0. */
void exchange_resume(struct exchange *x, uint64_t now);

/* Starts the books of a request whose first byte came at t0: resets every
 * field (one memset), takes a reference on conf, counts the stream. */
void exchange_begin(struct exchange *x, struct conf *conf,
    struct ring *stats, const char *client_ip, uint64_t t0);
/* Closes the books: the meter's end, the outcome by the one rule
 * (meter_outcome, from how), the access log line, the statistics record;
 * then what exchange_abandon does. */
void exchange_end(struct exchange *x, enum meter_end how);
/* The same without a log line or a record (a connection that closed inside
 * a request head carried no request worth logging). */
void exchange_abandon(struct exchange *x);

/* ---- the request --------------------------------------------------------- */

/* framing_find_head on a buffer (one contiguous pull-up of the head). */
int exchange_find_head(struct evbuffer *in, size_t *scan_pos, size_t max,
    size_t *head_len);
/* Drops the empty lines a request may be preceded by; returns how many
 * bytes that was. */
size_t exchange_skip_blank(struct evbuffer *in);
/* Checks the request line, once, as soon as it is complete in `in`. */
int exchange_request_line(struct exchange *x, struct evbuffer *in,
    struct exchange_verdict *v);
/* The request head of head_len bytes at the front of `in`: parsed, checked
 * (framing.h), its tenant, request id and route found; *rq points into
 * `in`, so the caller writes the upstream head before it drains the head.
 * rng: the worker's state for new request ids. 0, or -1 and *v. */
int exchange_request_head(struct exchange *x, struct evbuffer *in,
    size_t head_len, uint64_t *rng, struct http_head *rq,
    struct exchange_verdict *v);
/* Writes the upstream request head for *rq to replica `to`; keep_copy:
 * keep the request for one retry (a pooled connection may turn out
 * closed, a replica may fail). A buffered request's head loses its Expect
 * (tokentap answered it). */
void exchange_write_request(struct exchange *x, const struct http_head *rq,
    const struct conf_upstream *to, struct evbuffer *out, const char *proto,
    int keep_copy);
/* Keeps the client's request head (rq, head_len bytes at the front of in,
 * before they are drained) so another replica's head can be written from
 * it. 0 or -1 (no memory: then the request stays on its replica). */
int exchange_keep_head(struct exchange *x, const struct http_head *rq,
    struct evbuffer *in, size_t head_len);
/* Writes the upstream head for replica `to` from the kept client head. */
void exchange_write_kept(struct exchange *x, const struct conf_upstream *to,
    const char *proto, struct evbuffer *out);
/* The request again, for replica `to`, into out (empty): a head of its own,
 * then the body: from unsent (the last attempt's output, of which nothing
 * was written: it is emptied) or else from the kept copy. keep_copy: keep
 * the new one for the next attempt. 0, or -1 when the request is not at
 * hand (not kept, or too large). */
int exchange_redirect(struct exchange *x, const struct conf_upstream *to,
    const char *proto, struct evbuffer *unsent, struct evbuffer *out, int keep_copy);
/* Is the request at hand for another attempt (kept, head and body)? */
int exchange_resendable(const struct exchange *x);
/* An attempt is left: upstream (its replica's name), why, the status that
 * was its reason, how long it took. */
void exchange_attempt(struct exchange *x, const char *upstream, const char *why,
    unsigned status, uint64_t us);
/* Forgets what the response of a left attempt set (its head, the meter's
 * response part, the active count): the next attempt starts clean, t0
 * and the request's part kept. */
void exchange_restart(struct exchange *x);
/* A response byte reached the client: nothing will be sent again, the
 * copies go. */
void exchange_forwarded(struct exchange *x);
/* Keeps what out holds now (a held request on its way) for one retry. */
void exchange_keep_request(struct exchange *x, struct evbuffer *out);
/* Moves request body bytes from in to out as llhttp frames them (the
 * trailer section of a chunked body is dropped). 0, or -1 and *v. */
int exchange_request_body(struct exchange *x, struct evbuffer *in,
    struct evbuffer *out, struct exchange_verdict *v);
/* The request kept for a retry on a new connection, when one is still
 * allowed (an idempotent method, or unseen: the backend cannot have read
 * any of it; and nothing of a response came back); NULL otherwise. The
 * caller owns and frees it. */
struct evbuffer *exchange_take_retry(struct exchange *x, int unseen);
/* The bytes of the kept request not yet handed to the socket were left
 * in its output: how many were (0 when none is kept). */
size_t exchange_written(const struct exchange *x, size_t left);

/* ---- the response -------------------------------------------------------- */

/* The response head of head_len bytes at the front of `in`: parsed and
 * checked, drained from `in`, and written to `out` (the client's output).
 * draining: the client connection ends after this response. Returns an
 * enum exchange_head, or -1 and *v. */
int exchange_response_head(struct exchange *x, struct evbuffer *in,
    size_t head_len, struct evbuffer *out, int draining,
    struct exchange_verdict *v);
/* Parses response body bytes in `in` (the meter reads the events, a
 * decoded body goes to the client); *used of them belong to the response,
 * including those before a framing error. 0, or -1 on a framing error. */
int exchange_parse_body(struct exchange *x, struct evbuffer *in, size_t *used);
/* The same for bytes in memory (a direct read). */
int exchange_parse_mem(struct exchange *x, const char *buf, size_t len,
    size_t *used);
/* The upstream closed: 0 when that ends the response (close-delimited). */
int exchange_parse_eof(struct exchange *x);
/* May the upstream connection carry another request? (The response and
 * the request both ended, and the response was keep-alive.) */
int exchange_reusable(const struct exchange *x);

/* ---- the sweep ----------------------------------------------------------- */

/* An open stream looked at now and then (never per event): a stall that
 * began or ended goes to the statistics. 1 when the stream's tokens
 * stopped for its route's timeouts.token_idle: the caller ends it. */
int exchange_sweep(struct exchange *x, uint64_t now);

#endif
