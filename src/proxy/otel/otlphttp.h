/* SPDX-License-Identifier: Apache-2.0 */
/* One OTLP/HTTP signal's sender (/v1/traces or /v1/metrics) on the main
 * loop, libevent's HTTP client as the alert notifiers use it: one export
 * in flight at a time with its timeout (otel.timeout); the OTLP
 * specification's retries, and only those: 429, 502, 503 and 504 again
 * after Retry-After when the collector gives one, else an exponential
 * backoff with jitter, at most OTLPHTTP_ATTEMPTS times; every other
 * failure (refused, timed out, 400, garbage) drops the export, counted
 * and logged once a minute at most. A partial success is logged with the
 * collector's message. The header values (API keys) are never logged. */
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

struct otlphttp_counts {
	uint64_t exports_ok, exports_failed, retries;
	uint64_t items_ok;          /* spans or data points the collector took */
	uint64_t items_failed;      /* given up: an export that failed */
	uint64_t items_rejected;    /* a partial success's rejected ones */
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
/* Sends body (emptied) holding n items. 0, or -1 (not idle, no memory:
 * the items are counted failed). */
int otlphttp_send(struct otlphttp *h, struct evbuffer *body, uint64_t n);
const struct otlphttp_counts *otlphttp_counts(const struct otlphttp *h);
/* The items of the export in flight or waiting to retry. */
uint64_t otlphttp_in_flight(const struct otlphttp *h);
void otlphttp_free(struct otlphttp *h);

/* Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), from
 * now_s (Unix seconds); the delay in µs, or -1 when unreadable. */
int64_t otlphttp_retry_after(const char *v, int64_t now_s);

#endif
