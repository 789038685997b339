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

/* One read of a streaming response: what the upstream sent since the last
 * turn of the loop, parsed and forwarded from this buffer in place. */
#define LOOP_READ_MAX (64 * 1024)
/* ... and while slow clients hold limits.client_backlog */
#define LOOP_READ_SMALL (4 * 1024)
/* Event priorities (libevent runs only the most urgent that are ready,
 * then polls again): the upstream reads of the requests still waiting
 * for their first token (read_order: first_token), then everything else
 * (libevent's default for a new event: LOOP_PRIORITIES / 2). A worker
 * behind reads a first token before the streams in flight, so it is less
 * often read merged with the next ones, and TTFT is timed closer. */
#define LOOP_PRIORITIES 2
enum { LOOP_URGENT = 0, LOOP_NORMAL = 1 };
/* Normal events run before the loop polls again (worker.c). */
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
