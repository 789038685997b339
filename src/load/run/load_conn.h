/* SPDX-License-Identifier: Apache-2.0 */
/* One client connection of tokentap-load: it sends a request, parses the
 * response with llhttp, feeds the body to the shared meter (so the figures
 * follow docs/contract.md §4 exactly as tokentap computes them) and reports
 * how the request ended. A connection is kept alive between requests when the
 * server allows it; a kept connection that the server had closed while idle
 * gets the request once more on a fresh connection. */
#ifndef TOKENTAP_LOAD_CONN_H
#define TOKENTAP_LOAD_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loadstats.h"
#include "meter.h"

struct event_base;
struct evbuffer;
struct load_conn;
struct load_tls;

/* What a request showed besides its meter. */
struct load_conn_end {
	const uint32_t *itl;        /* its gaps between token events (µs) */
	size_t nitl;
	int reused;                 /* sent on a kept-alive connection */
	int conn_errno;             /* a connect error's errno, 0 when unknown */
	int tls_failed;             /* the TLS handshake failed */
};

/* A request ended; m has been closed with meter_end. The callee may start
 * the next request on c, but must not free c. */
typedef void (*load_conn_done_fn)(void *arg, struct load_conn *c,
    const struct meter *m, enum meter_end how, const struct load_conn_end *e);

/* What every connection of a run shares; it must outlive them. */
struct load_conn_ctx {
	struct event_base *base;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	size_t max_event_bytes;
	load_conn_done_fn done;
	/* each piece of a response body as it is read (a conversation keeps
	 * the answer's text), with the connection's arg; NULL: none */
	void (*body)(void *arg, const char *at, size_t len);
	struct loadstats *lag;      /* --lag: each stamped event's trip, or NULL */
	struct load_tls *tls;       /* https, or NULL */
	uint64_t opened;            /* connections opened, for the report */
	char rbuf[64 * 1024];       /* every read of this loop lands here */
};

struct load_conn *load_conn_new(struct load_conn_ctx *ctx, void *arg);
/* Starts a request timed from t0 (CLOCK_MONOTONIC µs, may lie in the past)
 * that ends as a timeout at t0 + timeout_us. req holds the whole request
 * and is emptied. Always reports through done, never from inside this
 * call. Returns 0, or -1 if c is busy. */
int load_conn_start(struct load_conn *c, uint64_t t0, uint64_t timeout_us,
    enum dialect_id dialect, struct evbuffer *req);
/* Closes the connection; a request in flight is dropped unreported. */
void load_conn_free(struct load_conn *c);

#endif
