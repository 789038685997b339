/* SPDX-License-Identifier: Apache-2.0 */
#include "alertd.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "alert.h"
#include "log.h"
#include "notify.h"
#include "slod.h"
#include "poold.h"
#include "stats.h"
#include "util.h"

/* Below this an evaluation timer would only burn the main thread. */
#define MIN_EVERY_US 10000
/* StreamStalled is looked at this often, whatever evaluate_every says: a
 * stall is news while it lasts (the workers' sweep sees it within 250 ms). */
#define STALL_EVERY_US 500000

static struct event *tick, *stall_tick;
static struct alert_set *rules;
static struct notify_set *notifiers;
/* A reference: the routes and parameters the rules were built from. The
 * count is the only part of a config that ever changes. */
static struct conf *conf;

static void on_transition(void *arg, const struct alert_transition *t)
{
	(void)arg;
	notify_transition(notifiers, t);
}

/* SLOBurnRate: the SLO service's pairs, into the same ring and notifiers. */
static void on_slo_transition(void *arg, const struct alert_transition *t)
{
	(void)arg;
	if (rules != NULL)
		alert_report_outside(rules, t);
}

/* Statistics keys are cut at SAMPLE_ROUTE_MAX - 1 bytes; ask with the name
 * cut the same way. */
static void stats_name(const char *route, char out[SAMPLE_ROUTE_MAX])
{
	snprintf(out, SAMPLE_ROUTE_MAX, "%s", route);
}

static void observe(const char *route, const char *tenant)
{
	struct stats_view v;
	struct alert_figures f;
	char key[SAMPLE_ROUTE_MAX];

	stats_name(route, key);
	stats_route_view(key, tenant, conf->alerts_window_us, conf->alerts_quantile, &v);
	/* a user who pressed stop, or a client too slow to send its request
	 * or take its answer, is no failure of the route: such requests are
	 * left out of the error rate (and of its samples) */
	f.requests = v.requests - v.by_client;
	f.errors = v.errors - v.by_client;
	f.ttft_count = v.ttft_count;
	f.tpot_count = v.tpot_count;
	f.ttft_us = v.ttft_q;
	f.tpot_us = v.tpot_q;
	f.ttfo_count = v.ttfo_count;
	f.ttfo_us = v.ttfo_q;
	f.healthy = -1;
	f.ttft_stamped = v.ttft_stamped;
	f.ttft_uncertain = v.ttft_uncertain;
	if (tenant == NULL) {
		size_t healthy, total;
		if (poold_healthy(route, &healthy, &total) == 0 && total > 0)
			f.healthy = (double)healthy;
	}
	alert_observe(rules, route, tenant, &f);
}

static void observe_tenant(void *arg, const char *route, const char *tenant)
{
	char key[SAMPLE_ROUTE_MAX];
	(void)arg;
	for (size_t i = 0; i < conf->n_routes; i++) {
		stats_name(conf->routes[i].name, key);
		if (strcmp(key, route) == 0) {
			observe(conf->routes[i].name, tenant);
			return;
		}
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	stats_drain();
	alert_begin(rules, util_now_us(), util_wall_ms());
	for (size_t i = 0; i < conf->n_routes; i++)
		observe(conf->routes[i].name, NULL);
	if (conf->alerts_per_tenant)
		stats_each_route_tenant(conf->alerts_window_us, observe_tenant, NULL);
	alert_end(rules);
	slod_evaluate();
}

static void on_stall_tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_now_us(), wall = util_wall_ms();
	char key[SAMPLE_ROUTE_MAX];

	(void)fd;
	(void)what;
	(void)arg;
	stats_drain();
	for (size_t i = 0; i < conf->n_routes; i++) {
		stats_name(conf->routes[i].name, key);
		alert_observe_stalled(rules, conf->routes[i].name,
		    stats_route_stalled(key), now, wall);
	}
}

static void schedule(const struct conf *c)
{
	uint64_t us = c->alerts_evaluate_every_us;
	struct timeval tv;

	if (us < MIN_EVERY_US)
		us = MIN_EVERY_US;
	tv.tv_sec = (time_t)(us / 1000000);
	tv.tv_usec = (suseconds_t)(us % 1000000);
	event_del(tick);
	event_add(tick, &tv);
}

int alertd_start(struct event_base *base, const struct conf *c)
{
	rules = alert_new(on_transition, NULL);
	notifiers = notify_new(base);
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	stall_tick = event_new(base, -1, EV_PERSIST, on_stall_tick, NULL);
	if (rules == NULL || notifiers == NULL || tick == NULL || stall_tick == NULL ||
	    alert_configure(rules, c, util_now_us(), util_wall_ms()) < 0) {
		log_error("alerts: cannot start (out of memory)");
		alertd_stop();
		return -1;
	}
	if (notify_configure(notifiers, c) < 0)
		log_error("alerts: some notifiers are not working (see above)");
	alert_set_outside(rules, slod_alert_json, slod_alert_prometheus, NULL);
	slod_set_sink(on_slo_transition, NULL);
	conf = conf_ref((struct conf *)c);
	schedule(c);
	event_add(stall_tick, &(struct timeval){ 0, STALL_EVERY_US });
	return 0;
}

void alertd_reload(const struct conf *c)
{
	if (rules == NULL)
		return;
	if (notify_configure(notifiers, c) < 0)
		log_error("alerts: some notifiers are not working (see above)");
	if (alert_configure(rules, c, util_now_us(), util_wall_ms()) < 0) {
		log_error("alerts: out of memory; the previous rules stay");
		return;
	}
	if (c->alerts_evaluate_every_us != conf->alerts_evaluate_every_us)
		schedule(c);
	conf_unref(conf);
	conf = conf_ref((struct conf *)c);
}

void alertd_stop(void)
{
	slod_set_sink(NULL, NULL);
	if (tick != NULL)
		event_free(tick);
	tick = NULL;
	if (stall_tick != NULL)
		event_free(stall_tick);
	stall_tick = NULL;
	notify_free(notifiers);
	notifiers = NULL;
	alert_free(rules);
	rules = NULL;
	if (conf != NULL)
		conf_unref(conf);
	conf = NULL;
}

void alertd_json(struct evbuffer *out)
{
	if (rules == NULL) {
		evbuffer_add_printf(out, "{\"rules\":[],\"transitions\":[]}\n");
		return;
	}
	alert_json(rules, out);
}

void alertd_prometheus(struct promout *out)
{
	if (rules == NULL)
		return;
	alert_prometheus(rules, out);
	notify_prometheus(notifiers, out);
}
