/* SPDX-License-Identifier: Apache-2.0 */
/* What the code of one worker thread runs in: its event base and
 * resolver, its config, its statistics ring, the buffer direct reads land
 * in, its sessions and its upstream pools. A worker (worker.c) owns one
 * and runs it; proxy.c and upstream.c work in it and never see threads,
 * listeners or the main thread's commands, so the layers go one way:
 * worker -> proxy -> upstream -> loop. Data only. */
#ifndef TOKENTAP_LOOP_H
#define TOKENTAP_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "config.h"
#include "rxtime.h"

struct evdns_base;
struct session;
struct upool;
struct pool_view;
struct ring;

TAILQ_HEAD(session_list, session);
struct upconn;
TAILQ_HEAD(upconn_urgent, upconn);

/* One read of a streaming response: what the upstream sent since the last
 * turn of the loop, parsed and forwarded from this buffer in place. */
#define LOOP_READ_MAX (64 * 1024)
/* ... and while slow clients hold limits.client_backlog */
#define LOOP_READ_SMALL (4 * 1024)
/* Event priorities (libevent runs the most urgent that are ready first):
 * the upstream reads of the requests still waiting for their first token
 * (read_order: first_token), then everything else (libevent's default for
 * a new event: LOOP_PRIORITIES / 2). A worker behind reads a first token
 * before the streams in flight, so it is less often read merged with the
 * next ones, and TTFT is timed closer. */
#define LOOP_PRIORITIES 2
enum { LOOP_URGENT = 0, LOOP_NORMAL = 1 };
/* Normal reads before the urgent set is asked again (urg_ep): a first
 * token that came during a long turn waits at most this many. */
#define LOOP_NORMAL_BURST 16

struct loop {
	struct event_base *base;
	struct evdns_base *dns;
	struct conf *conf;            /* current config, own reference */
	struct session_list sessions;
	size_t n_sessions;
	struct upool *pools;          /* upstream.c's */
	struct pool_view *pool_views; /* pool.c's: the replica sets seen */
	struct ring *stats;     /* this loop's statistics records */
	char *rbuf;                   /* LOOP_READ_MAX: direct upstream reads */
	int draining;                 /* no new requests; end once idle */
	uint64_t rng;                 /* request ids */
	struct rxtime_clock clock;    /* kernel receive times to monotonic */
	/* The upstream connections of the requests that wait for their
	 * first token; every LOOP_NORMAL_BURST normal reads of one loop turn
	 * while there are any, their sockets are put in an epoll set of
	 * their own (once each; a worker whose turns stay shorter never
	 * does) and it is asked, timeout 0: a first token that came
	 * meanwhile is read at once
	 * (upstream_urgent_reads). Asking the base's own epoll set again
	 * instead (libevent's max_dispatch_interval) polled every socket
	 * still ready, level-triggered, each time: at 1,000 streams tcp_poll
	 * and sock_poll took a quarter of the worker's CPU. */
	struct upconn_urgent urgent;
	size_t n_urgent;              /* in it */
	int urg_ep;                   /* -1: none */
	unsigned normal_reads;        /* since it was last asked, this turn */
	struct timeval turn;          /* libevent's time cache: the turn's */
};

/* Are reads stamped by the kernel (timestamps: kernel)? */
static inline int loop_stamps(const struct loop *l)
{
	return l->conf->timestamps == TIMESTAMPS_KERNEL;
}

/* A draining loop ends once its last session is gone. */
static inline void loop_idle_check(struct loop *l)
{
	if (l->draining && l->n_sessions == 0)
		event_base_loopexit(l->base, NULL);
}

#endif
