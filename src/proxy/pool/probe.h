/* SPDX-License-Identifier: Apache-2.0 */
/* Active health checks (route health.path): a GET of the path on one
 * replica, on the main thread's loop, over its own connection (plain or
 * TLS as the replica is), answered within health.timeout with a 2xx or
 * failed. Off the workers entirely. */
#ifndef TOKENTAP_PROBE_H
#define TOKENTAP_PROBE_H

#include "config.h"
#include "pool.h"

struct event_base;
struct evdns_base;

/* done(arg, rep, ok, why) is called once, from the loop, never from inside
 * probe_start; why says what failed ("" when ok). The probe holds c and
 * rep until then. -1 when it could not start (then done is not called). */
int probe_start(struct event_base *base, struct evdns_base *dns, struct conf *c,
    const struct conf_route *r, struct replica *rep,
    void (*done)(void *arg, struct replica *rep, int ok, const char *why), void *arg);
/* Ends every probe on its way (at exit): done is called with ok -1, no
 * verdict. */
void probe_stop_all(void);

#endif
