/* SPDX-License-Identifier: Apache-2.0 */
/* Replica pools: what the workers share about the replicas of a route.
 *
 * A pool per route name lives from the first config that names the route
 * to exit, so configs and requests may point into it whatever reloads
 * do. Its member set (the replicas with their weights) is immutable and
 * replaced whole when the config or an address changes (the main thread:
 * poold.c), with a generation number each worker's view checks once per
 * pick: a lock is taken only when the set changed. A replica's live state
 * (open streams, ejection, its trial) is atomics that every worker
 * updates without a lock, once per request and never per event. A
 * replica lives while a set or a request holds it: a stream ends on the
 * replica it started on, and counts there, whatever a reload does.
 *
 * Health: a failure (failover.h) counts against its replica;
 * health.failures of them in a row eject it for health.backoff, doubled at
 * each ejection in a row up to health.backoff_max. When that time is up the
 * replica takes one trial request: a good response head brings it back, a
 * failure ejects it again for longer. */
#ifndef TOKENTAP_POOL_H
#define TOKENTAP_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

#define POOL_NAME_MAX 200   /* a replica's name: its URL, and its address */
#define POOL_SET_MAX  256   /* replicas of one pool, addresses included */

struct replica {
	atomic_long refs;
	struct conf_upstream target;  /* url, tls, host, port, base: own copies */
	char name[POOL_NAME_MAX];     /* the access log's and the labels' `upstream` */
	char addr[64];                /* "10.0.0.1:8000"; "": connect by name */
	struct sockaddr_storage sa;   /* valid when salen > 0 */
	socklen_t salen;
	uint64_t id;                  /* hash of name (rendezvous) */

	/* live, shared by the workers */
	atomic_long open;             /* requests in flight on it */
	_Atomic uint64_t ejected_until; /* µs, CLOCK_MONOTONIC; 0: healthy */
	atomic_uint fails;            /* failures in a row */
	atomic_uint ejections;        /* ejections in a row: the backoff's exponent */
	atomic_int trial;             /* a returning replica's one request is out */
	atomic_int slow;              /* TTFT p95 over health.ttft_factor x median */
	atomic_ulong ejected_total;   /* every ejection, for /metrics */
	/* µs: a pooled connection to it was found closed or reset by the
	 * peer (a restart, likely): idle ones opened before are not reused,
	 * on any worker (upstream.c) */
	_Atomic uint64_t stale_before;

	/* the main thread's */
	double ttft_p95_ms;           /* over the last minute; < 0: no samples */
};

struct pool_member {
	struct replica *r;
	uint64_t weight;
};

struct pool_set {
	atomic_long refs;
	size_t n;
	struct pool_member m[];
};

struct pool;
struct pool_view;

/* ---- workers ---------------------------------------------------------- */

/* A replica of r's pool for a request, held (a reference) and counted
 * open: never one of tried[]; among the healthy ones by r->balance (hash:
 * on affinity), a returning replica taking one trial request (*trial set);
 * when none is healthy, the one whose ejection ends first, so a pool that
 * is all ejected still serves. NULL when every replica was tried. views:
 * the calling worker's own (loop.h). */
struct replica *pool_pick(struct pool_view **views, const struct conf_route *r,
    uint64_t affinity, struct replica *const *tried, size_t n_tried,
    uint64_t *rng, uint64_t now, int *trial);
/* The request is done with rep (it answered, or the request moved on):
 * no longer open there; a trial that gave no verdict is given back. The
 * reference stays (replica_unref). */
void pool_leave(struct replica *rep, int trial);

enum pool_health { POOL_SAME, POOL_EJECTED, POOL_BACK };
/* What an attempt said of its replica: ok (a response head that is not a
 * failure) or not; trial: the attempt was the returning replica's trial.
 * POOL_EJECTED (*for_us: how long) or POOL_BACK when that changed its
 * state (for the log). */
enum pool_health pool_report(struct replica *rep, const struct conf_health *h,
    int ok, int trial, uint64_t now, uint64_t *for_us);
/* An active check's result: a failure counts as a request's would; a
 * success brings an ejected replica back at once. */
enum pool_health pool_probe_result(struct replica *rep, const struct conf_health *h,
    int ok, uint64_t now, uint64_t *for_us);
/* The ejection after n in a row: backoff x 2^(n-1), at most backoff_max. */
uint64_t pool_backoff_us(const struct conf_health *h, unsigned n);
/* Is rep serving (not ejected, not waiting for its trial) at now? */
int pool_healthy(const struct replica *rep, uint64_t now);
/* Is host an IP literal (no DNS)? */
int pool_is_literal(const char *host);
/* How many replicas r's pool has now (0 before poold attached it). */
size_t pool_size(const struct conf_route *r);

/* Frees a worker's views (at its exit). */
void pool_views_free(struct pool_view **views);

void pool_replica_ref(struct replica *rep);
void pool_replica_unref(struct replica *rep);

/* ---- the main thread ---------------------------------------------------- */

/* The pool of a route name, made on first use; NULL when out of memory. */
struct pool *pool_get(const char *route);

/* The addresses poold knows for host:port: up to max into out, their
 * count (0: none yet, connect by name). */
typedef size_t (*pool_addrs_fn)(void *arg, const char *host, unsigned port,
    struct sockaddr_storage *out, socklen_t *lens, size_t max);

/* The member set of route r: each replica of r->upstreams, one per address
 * of a name that has several. A replica of old with the same name, URL and
 * address is kept, live state and all; new weights apply. NULL when out of
 * memory. */
struct pool_set *pool_build(const struct conf_route *r, const struct pool_set *old,
    pool_addrs_fn addrs, void *arg);
/* Publishes s as p's set (p takes the reference); the old one goes when the
 * last worker has seen the new one. */
void pool_publish(struct pool *p, struct pool_set *s);
/* p's current set, a reference (NULL when none). */
struct pool_set *pool_current(struct pool *p);
void pool_set_unref(struct pool_set *s);
/* Frees every pool (at exit, the workers gone). */
void pool_free_all(void);

/* Starts bev's connection to replica rep: its address, or its name by
 * evdns (dns) before poold has one. 0 or -1. */
struct bufferevent;
struct evdns_base;
int pool_dial(struct bufferevent *bev, struct evdns_base *dns,
    const struct replica *rep);

#endif
