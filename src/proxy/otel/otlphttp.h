/* SPDX-License-Identifier: Apache-2.0 */
/* One OTLP/HTTP signal's sender (/v1/traces or /v1/metrics) on the main
 * loop, libevent's HTTP client as the alert notifiers use it: one export
 * in flight at a time. Each attempt has a deadline, otel.timeout from its
 * start, whatever the collector trickles meanwhile, and reads at most
 * OTLPHTTP_HEAD_MAX of response head and OTLPHTTP_BODY_MAX of body: a
 * collector can neither hold an export nor grow memory. The OTLP
 * specification's retries, and only those: 429, 502, 503 and 504 again
 * after Retry-After (at most OTLPHTTP_RETRY_AFTER_MAX_US) when the
 * collector gives one, else an exponential backoff with jitter, at most
 * OTLPHTTP_ATTEMPTS times; every other failure (refused, past the
 * deadline, too large, 400, garbage) drops the export. Each failed
 * attempt is counted by its reason and logged at once (rate-limited: a
 * dead collector fills no log). A partial success is logged with the
 * collector's message. The header values (API keys) are never logged.
 * An export keeps the encoding it was written in (content type and
 * compression) until it is done, across a reload. */
#ifndef TOKENTAP_OTLPHTTP_H
#define TOKENTAP_OTLPHTTP_H

#include <stdint.h>

#include "config.h"

struct event_base;
struct evdns_base;
struct evbuffer;

#define OTLPHTTP_ATTEMPTS   5
#define OTLPHTTP_BACKOFF_US 1000000   /* then 2 s, 4 s, 8 s */
#define OTLPHTTP_BACKOFF_MAX_US 30000000
#define OTLPHTTP_RETRY_AFTER_MAX_US 60000000
/* what is read of an answer: its status line and headers, its body (a
 * partial success is a few hundred bytes) */
#define OTLPHTTP_HEAD_MAX   (64 * 1024)
#define OTLPHTTP_BODY_MAX   (64 * 1024)

/* Why an attempt failed (tokentap_otel_export_failures_total{reason}). */
enum otlphttp_reason {
	OTLPHTTP_DEADLINE,          /* no complete answer within otel.timeout */
	OTLPHTTP_TOO_LARGE,         /* a body over its bound */
	OTLPHTTP_INVALID,           /* not HTTP, malformed, a head over its bound */
	OTLPHTTP_CONNECTION,        /* refused, reset, closed early, TLS */
	OTLPHTTP_STATUS,            /* an answer other than 2xx */
	OTLPHTTP_REASONS
};
extern const char *const otlphttp_reason_names[OTLPHTTP_REASONS];

struct otlphttp_counts {
	uint64_t exports_ok, exports_failed, retries;
	uint64_t items_ok;          /* spans or data points the collector took */
	uint64_t items_failed;      /* given up: an export that failed */
	uint64_t items_rejected;    /* a partial success's rejected ones */
	uint64_t failures[OTLPHTTP_REASONS];   /* attempts, by reason */
};

struct otlphttp;

/* signal: "traces" or "metrics" (log lines, the partial success's
 * field). */
struct otlphttp *otlphttp_new(struct event_base *base, struct evdns_base *dns,
    const char *signal);
/* The URL and everything else of c's otel: (an export in flight keeps
 * the settings it started with). 0, or -1 when the URL cannot be used. */
int otlphttp_configure(struct otlphttp *h, const struct conf *c, const char *url);
/* Nothing in flight and no retry waiting: a new export may go. */
int otlphttp_idle(const struct otlphttp *h);
/* Sends body (emptied) holding n items, encoded as OTLP/JSON (json) or
 * protobuf; compressed as configured now. Its retries go as it went
 * first, whatever a reload sets meanwhile. 0, or -1 (not idle, no
 * memory: the items are counted failed). */
int otlphttp_send(struct otlphttp *h, struct evbuffer *body, uint64_t n, int json);
const struct otlphttp_counts *otlphttp_counts(const struct otlphttp *h);
/* The items of the export in flight or waiting to retry. */
uint64_t otlphttp_in_flight(const struct otlphttp *h);
void otlphttp_free(struct otlphttp *h);

/* Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), from
 * now_s (Unix seconds); the delay in µs, or -1 when unreadable. */
int64_t otlphttp_retry_after(const char *v, int64_t now_s);
/* What the sender waits for a Retry-After of v: the delay, at most
 * OTLPHTTP_RETRY_AFTER_MAX_US; -1 when unreadable (then its backoff). */
int64_t otlphttp_retry_wait(const char *v, int64_t now_s);

#endif
