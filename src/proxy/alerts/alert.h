/* SPDX-License-Identifier: Apache-2.0 */
/* Threshold alert rules (docs/contract.md §6), pure logic: no clock, no I/O.
 *
 * A rule exists per route (and per (route, tenant) with per_tenant) for each
 * metric and severity whose threshold is configured. The caller feeds the
 * window figures of each (route, tenant) once per evaluation, with its own
 * clock; every change to firing or back to ok is handed to a callback and
 * kept (the last ALERT_TRANSITIONS_MAX) for /alerts. */
#ifndef TOKENTAP_ALERT_H
#define TOKENTAP_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct evbuffer;
struct promout;

#define ALERT_TRANSITIONS_MAX 100

/* TTFTUncertain (ALERT_UNCERTAIN), a route's warning only: the share of
 * its kernel-stamped TTFTs doubted by more than 1 ms (docs/measurement.md,
 * "Doubt") passed thresholds.ttft_uncertain_warning: the worker reads
 * first tokens merged with later bytes, its numbers are approximate.
 * StreamStalled (ALERT_STALLED) is a warning only; its value is the number
 * of the route's streams stalled now, its threshold alerts.min_stalled.
 * ALERT_HEALTHY: a route's replicas that serve, against min_healthy
 * (PoolUnhealthy, critical only): fires below it, resolves at it. */
enum alert_metric {
	ALERT_TTFT, ALERT_TPOT, ALERT_ERROR_RATE, ALERT_TTFO, ALERT_STALLED,
	ALERT_HEALTHY, ALERT_UNCERTAIN, ALERT_METRIC_COUNT,
	ALERT_BURN_RATE   /* SLOBurnRate: slo.c's rules, not a threshold rule here */
};
enum alert_severity { ALERT_WARNING, ALERT_CRITICAL, ALERT_SEVERITY_COUNT };
enum alert_state { ALERT_OK, ALERT_PENDING, ALERT_FIRING };

/* The figures of one (route, tenant) over the window. */
struct alert_figures {
	uint64_t requests;
	uint64_t errors;
	uint64_t ttft_count;
	uint64_t tpot_count;
	double ttft_us;         /* the quantile; < 0 without samples */
	double tpot_us;
	uint64_t ttfo_count;
	double ttfo_us;
	double healthy;         /* replicas serving; < 0: no pool (a tenant's) */
	uint64_t ttft_stamped;  /* TTFTs the kernel stamped, and those of them */
	uint64_t ttft_uncertain; /* doubted by over 1 ms (sample.h) */
};

/* A rule that started firing or resolved: all a notifier sends. Values and
 * thresholds are in ms for ttft / tpot, a fraction for error_rate and a
 * count of replicas for healthy. */
struct alert_transition {
	int firing;             /* 0: resolved */
	enum alert_metric metric;
	enum alert_severity severity;
	const char *route;
	const char *tenant;     /* NULL: the rule over all of the route's tenants */
	double value;           /* < 0: the window held no sample */
	double threshold;
	uint64_t samples;
	double quantile;
	uint64_t window_us;
	uint64_t at_ms;         /* wall clock */
	uint64_t starts_at_ms;  /* when it fired */
	uint64_t ends_at_ms;    /* 0 while firing */
	/* SLOBurnRate (route and tenant NULL; value, threshold and samples are
	 * the long window's burn rate, the pair's rate and requests; window_us
	 * the long window) */
	const char *slo;
	uint64_t short_window_us;
	double short_value;
	uint64_t short_samples;
	double objective;
};

/* "TTFTHigh", "ttft", "warning" */
const char *alert_name(enum alert_metric m);
/* Is the metric a duration (ms), or a fraction or a count? */
int alert_metric_is_time(enum alert_metric m);
const char *alert_metric_name(enum alert_metric m);
const char *alert_severity_name(enum alert_severity s);

struct alert_set;

/* on_transition may be NULL. Returns NULL when out of memory. */
struct alert_set *alert_new(void (*on_transition)(void *arg,
    const struct alert_transition *t), void *arg);
void alert_free(struct alert_set *s);

/* Rules, thresholds and parameters from c. Rules whose identity
 * (alertname, severity, route, tenant) remains keep their state; a rule that
 * goes away while firing is reported resolved. Returns 0 or -1 (out of
 * memory: the old rules stay). */
int alert_configure(struct alert_set *s, const struct conf *c, uint64_t now_us,
    uint64_t wall_ms);

/* One evaluation: begin, then the figures of each route (tenant NULL) and,
 * with per_tenant, of each (route, tenant) pair, then end. Rules given no
 * figures in between are evaluated on an empty window. observe returns -1
 * for a route that is not configured (or a tenant without per_tenant). */
void alert_begin(struct alert_set *s, uint64_t now_us, uint64_t wall_ms);
int alert_observe(struct alert_set *s, const char *route, const char *tenant,
    const struct alert_figures *f);
void alert_end(struct alert_set *s);
/* StreamStalled has its own, faster cadence (a stall is news while it
 * lasts): the streams of route stalled at now. Fires when at least
 * min_stalled are (for alerts.for), resolves when none is. -1 for a route
 * that is not configured. */
int alert_observe_stalled(struct alert_set *s, const char *route,
    uint64_t stalled, uint64_t now_us, uint64_t wall_ms);

/* Rules kept elsewhere (SLOBurnRate, slo.c): listed after these in
 * /alerts (json writes its rows, each after a comma unless *first, and
 * clears *first) and in tokentap_alert_firing (prom writes its lines). */
void alert_set_outside(struct alert_set *s,
    void (*json)(void *arg, struct evbuffer *out, int *first),
    void (*prom)(void *arg, struct promout *out), void *arg);
/* A transition of such a rule: kept for /alerts and handed to the
 * callback, as this set's own are. */
void alert_report_outside(struct alert_set *s, const struct alert_transition *t);
/* The labels and figures of a rule or transition in /alerts, from
 * "alertname" to "samples" (no braces; transitions add "at" and "status"
 * before); for outside rules to write theirs alike. */
void alert_json_burn(struct evbuffer *out, const struct alert_transition *t);

/* {"rules": [...], "transitions": [...]} (docs/contract.md §5 /alerts) */
void alert_json(const struct alert_set *s, struct evbuffer *out);
/* tokentap_alert_firing, with its HELP and TYPE lines. */
struct promout;
void alert_prometheus(const struct alert_set *s, struct promout *out);

struct evbuffer;
/* A JSON number: ms to the µs, fractions to 6 decimals; null when v < 0
 * (the value of /alerts, webhooks and Alertmanager alike). */
void alert_json_value(struct evbuffer *out, double v, enum alert_metric m);

#endif
