/* SPDX-License-Identifier: Apache-2.0 */
/* The alerting service on the main thread: every alerts.evaluate_every it
 * reads the statistics windows, runs the rules (alert.c) and hands each
 * transition to the log and the notifiers (notify.c), which never block:
 * proxy traffic runs on the worker threads and never waits for them. */
#ifndef TOKENTAP_ALERTD_H
#define TOKENTAP_ALERTD_H

#include "config.h"

struct event_base;
struct evbuffer;

/* Starts evaluating on base with c. Returns 0 or -1. */
int alertd_start(struct event_base *base, const struct conf *c);
/* A reloaded config: new rules, thresholds and notifiers; states of rules
 * that keep their name (alertname, severity, route, tenant) survive. */
void alertd_reload(const struct conf *c);
void alertd_stop(void);

/* GET /alerts: {"rules": [...], "transitions": [...]} */
void alertd_json(struct evbuffer *out);
/* tokentap_alert_firing and the notifier counters, for /metrics. */
struct promout;
void alertd_prometheus(struct promout *out);

#endif
