/* Upstream connections: asynchronous connect (evdns, never a blocking
 * resolver in a worker loop) and a keep-alive pool per upstream and worker.
 * While a connection serves an exchange its callbacks are the proxy's; in
 * the pool its callbacks are ours and close it when the peer does. */
#ifndef TOKENTAP_UPSTREAM_H
#define TOKENTAP_UPSTREAM_H

#include <stdint.h>
#include <sys/queue.h>

#include "config.h"

#include <event2/bufferevent.h>

struct worker;

struct upconn {
	TAILQ_ENTRY(upconn) link;
	struct upool *pool;
	struct bufferevent *bev;
	uint64_t idle_since;        /* µs, while pooled */
	int connected;
	int reused;                 /* taken from the pool */
};

/* Takes an idle pooled connection to r's upstream, or starts connecting a
 * new one (connected == 0: wait for BEV_EVENT_CONNECTED), with the caller's
 * callbacks set before connecting (a refused connect may report at once).
 * fresh: skip the pool. NULL when a socket could not be created. */
struct upconn *upstream_get(struct worker *w, const struct conf_route *r,
    int fresh, bufferevent_data_cb readcb, bufferevent_data_cb writecb,
    bufferevent_event_cb eventcb, void *arg);
/* Marks a new connection connected (TCP_NODELAY set). */
void upstream_connected(struct upconn *u);
int upstream_is_tls(const struct upconn *u);
/* Gives a connection back: to the pool if reusable, else closed. */
void upstream_release(struct upconn *u, int reusable);
/* Closes every pooled connection of the worker and frees its pools. */
void upstream_free_all(struct worker *w);

#endif
