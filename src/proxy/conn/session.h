/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection's state: proxy.c and its two sides
 * (proxy_client.c, proxy_upstream.c, through proxy_int.h) move its bytes
 * and run its timers, firsttoken.c holds its response until the first
 * token. Only these include it. */
#ifndef TOKENTAP_SESSION_H
#define TOKENTAP_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "attempt.h"
#include "bodybuf.h"
#include "exchange.h"

struct bufferevent;
struct event;
struct evbuffer;
struct evbuffer_cb_entry;
struct loop;
struct upconn;

enum client_state { C_IDLE, C_HEAD, C_BODY, C_WAIT, C_TUNNEL };
enum up_state { U_NONE, U_CONNECT, U_HEAD, U_BODY, U_TUNNEL };
enum session_timer {
	T_NONE, T_KEEPALIVE, T_HEADER, T_BODY, T_CONNECT, T_FIRST_BYTE, T_IDLE, T_LINGER
};

/* One client connection. The request in flight on it has its I/O state
 * here (reset by request_begin) and its HTTP and books in x (reset by
 * exchange_begin); x.conf != NULL while there is one. */
struct session {
	TAILQ_ENTRY(session) link;
	struct loop *loop;
	struct bufferevent *bev;
	struct evbuffer *out;         /* bev's output, for the hot path: its
	                               * length without the bufferevent's
	                               * cache line (session_prefetch) */
	int fd;
	int tls;                      /* the client came over TLS */
	struct event *rd_ev;          /* a plain client's reads (its bufferevent
	                               * only writes) */
	/* the times of the client's reads (CLOCK_MONOTONIC µs, the kernel's
	 * receive times where it gave them): the first since the connection
	 * went idle (the next request's t0; 0: none yet) and the newest */
	uint64_t rx_first, rx_last;
	unsigned rx_first_kernel : 1, rx_last_kernel : 1;
	/* the start's doubt (meter.h): the clock before the last read that
	 * found the socket drained (a plain client's), and what it was
	 * before rx_first's read (0: none, a connection's first request) */
	uint64_t rx_drained, rx_floor;
	struct event *defer_ev;       /* deferred backpressure (TLS upstream) */
	char client_ip[64];
	const char *proto;            /* "http" or "https" */

	struct evbuffer_cb_entry *queued_cb; /* counts the output in the backlog */
	struct event *timer;
	enum session_timer tkind;
	uint64_t tlen;
	uint64_t tdue;                /* when tkind's time is up (util_now_us) */
	uint64_t tarmed;              /* when the timer goes off; 0: it does not */
	uint64_t last_progress;
	unsigned closing : 1;         /* close once the output is flushed */
	unsigned lingering : 1;       /* shut down, discarding late input */
	unsigned dispatching : 1;     /* inside upstream_get() */
	unsigned connect_failed : 1;

	enum client_state cs;
	enum up_state us;
	size_t scan_pos, up_scan_pos;
	unsigned req_sent : 1;
	unsigned client_paused : 1;   /* backpressure on the request body */
	unsigned up_paused : 1;       /* backpressure on the response */
	unsigned up_input : 1;        /* the upstream's input may hold bytes */
	struct upconn *up;
	struct bodybuf held;          /* a request held until its body is whole */
	struct exchange x;

	/* replicas: the attempts of the request in flight, and on a route with
	 * timeouts.first_token what of its response waits for the first token */
	struct attempt att;
	unsigned forwarded : 1;       /* a response byte went to the client */
	unsigned ft_armed : 1;        /* ft_timer runs: the first-token deadline,
	                               * or the throughput probe's window */
	unsigned probing : 1;         /* health.throughput judges this attempt */
	unsigned probe_state : 2;     /* 0 before its first token, 1 its window
	                               * runs, 2 its verdict is due, 3 given */
	struct evbuffer *hold;
	struct event *ft_timer;
};

#endif
