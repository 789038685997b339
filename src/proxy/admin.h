/* SPDX-License-Identifier: Apache-2.0 */
/* The admin HTTP server (docs/contract.md §5) on admin.address, run by the
 * main thread's event loop so it never competes with proxy traffic. */
#ifndef TOKENTAP_ADMIN_H
#define TOKENTAP_ADMIN_H

#include "config.h"

struct event_base;


/* Binds admin.address of c. Returns 0 or -1 (logged). */
int admin_start(struct event_base *base, struct conf *c);
/* Takes a reloaded config (token; a new address is bound anew). */
int admin_reload(struct conf *c);
/* /healthz answers 503 from now on. */
void admin_set_draining(void);
void admin_stop(void);
/* Every series /metrics has, the workers' records drained first: the one
 * list /metrics and the OTLP metrics export (otel.h) both write. */
struct promout;
void admin_series(struct promout *o);

#endif
