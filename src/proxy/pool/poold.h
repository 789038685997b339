/* SPDX-License-Identifier: Apache-2.0 */
/* The replica pools' main-thread side (pool.h is what workers share):
 * each loaded config's routes attached to their pools and the member sets
 * published; DNS names resolved again every dns_ttl with evdns on the
 * main loop (never a blocking resolver), a name with several addresses a
 * replica per address; active health checks (probe.c); the slow replicas
 * (TTFT p95 over health.ttft_factor times the pool's median, from the
 * statistics); each replica's state for /stats, /metrics and the alerts. */
#ifndef TOKENTAP_POOLD_H
#define TOKENTAP_POOLD_H

#include <stddef.h>

#include "config.h"

struct event_base;
struct evbuffer;
struct promout;

/* Starts the timers and the resolver on base. 0 or -1. */
int poold_start(struct event_base *base);
/* c is the config in force from now: its routes get their pools (made on
 * first use, kept across reloads by route name) and their replica sets,
 * before any worker sees c. 0, or -1 when out of memory. */
int poold_attach(struct conf *c);
void poold_stop(void);

/* `"pools":[...]` for /stats (with its leading comma): per route of the
 * config in force, its replicas and their state. */
void poold_json(struct evbuffer *out);
/* tokentap_upstream_up, tokentap_upstream_open_streams,
 * tokentap_upstream_ejections_total, with HELP and TYPE. */
void poold_prometheus(struct promout *out);
/* The replicas of route's pool that serve now, and how many it has: 0, or
 * -1 when the route has no pool. */
int poold_healthy(const char *route, size_t *healthy, size_t *total);

#endif
