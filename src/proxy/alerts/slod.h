/* SPDX-License-Identifier: Apache-2.0 */
/* The SLO service on the main thread: every finished request the
 * statistics apply is counted against the SLOs (slo.c); the budgets are
 * kept over SIGHUP, written to slo_state at most once a minute and at
 * exit (write, fsync, rename), and read back at start. The alerting
 * service (alertd.c) evaluates the burn-rate pairs on its tick and lists
 * them with its rules. */
#ifndef TOKENTAP_SLOD_H
#define TOKENTAP_SLOD_H

#include "alert.h"
#include "config.h"

struct event_base;
struct evbuffer;
struct promout;

/* Starts with c, the state file read if there is one (a missing or
 * corrupt one is logged and the budgets start empty). 0 or -1. */
int slod_start(struct event_base *base, const struct conf *c);
/* SLOs that keep their name keep their counts. */
void slod_reload(const struct conf *c);
/* Writes the state file, then frees everything. */
void slod_stop(void);

/* Where transitions go (alertd's ring and notifiers); NULL: nowhere. */
void slod_set_sink(void (*fn)(void *arg, const struct alert_transition *t), void *arg);
/* Evaluates the burn-rate pairs now. */
void slod_evaluate(void);

/* slo_each_total of the SLOs in force (none before the start). */
void slod_each_total(void (*fn)(void *arg, const char *name, uint64_t good,
    uint64_t bad), void *arg);

/* GET /slo */
void slod_json(struct evbuffer *out);
/* tokentap_slo_requests_total and tokentap_slo_objective */
void slod_prometheus(struct promout *out);
/* The pairs as /alerts rules and tokentap_alert_firing lines
 * (alert_set_outside's hooks; arg unused). */
void slod_alert_json(void *arg, struct evbuffer *out, int *first);
void slod_alert_prometheus(void *arg, struct promout *out);

#endif
