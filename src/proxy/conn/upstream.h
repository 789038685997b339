/* SPDX-License-Identifier: Apache-2.0 */
/* Upstream connections: asynchronous connect (evdns, never a blocking
 * resolver in a worker loop) and a keep-alive pool per upstream and worker.
 * While a connection serves an exchange its callbacks are the proxy's; in
 * the pool its callbacks are ours and close it when the peer does. */
#ifndef TOKENTAP_UPSTREAM_H
#define TOKENTAP_UPSTREAM_H

#include <stdint.h>
#include <sys/queue.h>

#include "config.h"
#include "loop.h"
#include "pool.h"

#include <event2/bufferevent.h>
#include <event2/event.h>

struct loop;

struct upconn {
	TAILQ_ENTRY(upconn) link;
	struct upool *pool;
	struct bufferevent *bev;
	uint64_t idle_since;        /* µs, while pooled */
	uint64_t born;              /* µs, when it connected */
	uint64_t keepalive_us;      /* its route's timeouts.upstream_keepalive */
	struct event *rd_ev;        /* direct reading (upstream_direct) */
	int connected;
	int reused;                 /* taken from the pool */
	int direct;                 /* read by rd_ev, not by the bufferevent */
	int ended;                  /* a direct TLS read met its end: the peer
	                             * closed, or it broke; never pooled */
	int rd_prio;                /* rd_ev's (loop.h: LOOP_URGENT, _NORMAL) */
	int rd_urgent;              /* ... while urgent: LOOP_URGENT with
	                             * read_order: first_token (its request's
	                             * conf), else LOOP_NORMAL */
	int tls;                    /* its pool's */
	TAILQ_ENTRY(upconn) ulink;  /* in its loop's urgent list */
	int urgent;                 /* ... while this */
	int in_urg;                 /* its socket in the loop's urg_ep */
	uint64_t drained;           /* µs before the last direct read of a
	                             * plain one that found the socket drained
	                             * (less than it asked, or EAGAIN): bytes
	                             * read later came after it (meter.h) */
};

/* Takes an idle pooled connection to replica rep of route r (one still
 * open, with nothing from the peer: checked before it is handed out), or
 * starts connecting a new one (connected == 0: wait for BEV_EVENT_CONNECTED), with
 * the caller's callbacks set before connecting (a refused connect may
 * report at once). fresh: skip the pool. NULL when a socket could not be
 * created. */
struct upconn *upstream_get(struct loop *l, const struct conf_route *r,
    struct replica *rep, int fresh, bufferevent_data_cb readcb,
    bufferevent_data_cb writecb, bufferevent_event_cb eventcb, void *arg);
/* Marks a new connection connected (TCP_NODELAY set); stamps: its reads
 * get the kernel's receive times (rxtime.h; a TLS one through tls.c's
 * socket BIO). */
void upstream_connected(struct upconn *u, int stamps);
static inline int upstream_is_tls(const struct upconn *u)
{
	return u->tls;
}

/* Plain TCP only: from now on the caller reads the socket itself with cb
 * (upstream_recv: one recvmsg(2) into its own buffer per readiness) and
 * the bufferevent reads nothing: no FIONREAD ioctl, no chain allocated per
 * read, reads as large as the caller's buffer, and the kernel's receive
 * time of each. Until the connection is released: a pooled one is watched
 * by the bufferevent again. -1: not possible (TLS, no memory). */
int upstream_direct(struct upconn *u, event_callback_fn cb, void *arg);
/* The same for a TLS connection's streaming body: cb reads it with
 * upstream_recv, OpenSSL's read-ahead on (tls_read_ahead; off again
 * when the connection is released). What OpenSSL holds already is read at
 * once (upstream_direct_more). -1: not possible (the bufferevent reads on). */
int upstream_direct_tls(struct upconn *u, event_callback_fn cb, void *arg);
/* rd_ev urgent (read before the other events ready: loop.h) while its
 * request waits for the first token, with read_order: first_token; else
 * normal. Direct reading starts urgent. */
void upstream_read_priority(struct upconn *u, int prio);
/* (inline: it is asked after every read, and changes once a request) */
static inline void upstream_read_urgent(struct upconn *u, int urgent)
{
	int p = urgent ? u->rd_urgent : LOOP_NORMAL;

	if (u->rd_prio != p)
		upstream_read_priority(u, p);
}
/* The urgent reads that are ready (loop.h: urg_ep), read now, each by its
 * rd_ev's callback, as libevent would have. */
void upstream_urgent_reads(struct loop *l);
/* How a direct read ended, after its bytes. */
enum upstream_rx_end {
	UPSTREAM_RX_WAIT,         /* for the next readiness of rd_ev */
	UPSTREAM_RX_MORE,         /* buf is full: OpenSSL may hold more
	                           * (upstream_direct_more); never plain */
	UPSTREAM_RX_EOF,          /* the peer closed */
	UPSTREAM_RX_ERROR         /* a reset, a broken record: tls_err, sys */
};
/* What one direct read brought: its bytes, their time, its end. */
struct upstream_rx {
	size_t n;                 /* bytes in buf */
	int fresh;                /* they came with a read of the socket made
	                           * now (real: its receive time, 0: none);
	                           * else OpenSSL held them from an earlier one */
	int64_t real;
	uint64_t floor;           /* they arrived after it (µs): the doubt's
	                           * floor (meter.h); 0: not known */
	int whole;                /* TLS: OpenSSL holds none of the read's
	                           * bytes (tls_read); set for TLS only, a
	                           * plain read is whole */
	enum upstream_rx_end end;
	unsigned long tls_err;    /* UPSTREAM_RX_ERROR: OpenSSL's error, 0: none */
	int sys;                  /* ... and errno */
};
/* One read of a direct connection (fd: its socket, as rd_ev hands it),
 * plain or TLS alike (HAProxy's rcv_buf): into buf (len bytes at most)
 * what one read of the socket brings, with its receive time when stamps
 * (the kernel's; a TLS one's through tls.c's socket BIO, as connected),
 * and how the read ended. Plain: one recvmsg(2). TLS: tls_read, what
 * OpenSSL holds and what one read of the socket brings; rd_ev then waits
 * for what OpenSSL waits for (the socket readable, or writable), and a
 * connection whose read met its end is not pooled. */
void upstream_recv(struct upconn *u, evutil_socket_t fd, char *buf, size_t len,
    int stamps, struct upstream_rx *r);
/* Bytes OpenSSL holds wait for no readiness of the socket: rd_ev is made
 * active for them (a direct TLS connection that stopped short of them:
 * its buffer full, or paused). Nothing on a plain one. */
void upstream_direct_more(struct upconn *u);
/* Writes what waits in the output to a connected plain upstream now, in
 * this loop turn: no EPOLLOUT round (two epoll_ctl and a loop turn) before
 * a request leaves. 0: the output is empty; 1: bytes wait, and the
 * bufferevent writes them (its write callback runs when they are gone). */
int upstream_flush(struct upconn *u);
/* Why a connect failed (BEV_EVENT_* in what): DNS, TCP, or TLS handshake
 * or certificate verification; a JSON-safe text in why
 * (jsonw_sanitize: a byte that would need escaping becomes an apostrophe). */
void upstream_connect_error(struct bufferevent *bev, short what,
    const char *host, char *why, size_t len);
/* The text of a TLS error met after the handshake (a TLS 1.3 server's
 * refusal of the client certificate arrives so), JSON-safe. */
void upstream_tls_error(struct upconn *u, unsigned long tls_err, char *why,
    size_t len);
/* Direct reading paused (0) or resumed (1): backpressure (resumed, what
 * OpenSSL holds is read at once: upstream_direct_more). */
void upstream_direct_read(struct upconn *u, int on);
/* A connection taken from the pool closed or was reset before it answered:
 * the peer restarted, likely, and the other idle connections to rep that
 * are as old are as dead. None of them is reused, on any worker. */
void upstream_stale(struct upconn *u, struct replica *rep);
/* The bytes written to a plain connection that its peer has not
 * acknowledged (SIOCOUTQ); -1: not known (TLS, an error). */
long upstream_unacked(const struct upconn *u);
/* Gives a connection back: to the pool if reusable, else closed. */
void upstream_release(struct upconn *u, int reusable);
/* Closes every pooled connection of the worker and frees its pools. */
void upstream_free_all(struct loop *l);

#endif
