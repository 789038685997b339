/* SPDX-License-Identifier: Apache-2.0 */
#include "slod.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "log.h"
#include "slo.h"
#include "statefile.h"
#include "stats.h"
#include "util.h"

/* At most one write of the state file a minute. */
#define STATE_EVERY_S 60
#define STATE_MAX (64u << 20)

static struct slo_set *set;
static struct event *state_tick;
static char *state_path;
static void (*sink)(void *arg, const struct alert_transition *t);
static void *sink_arg;

static uint64_t wall_us(void)
{
	return util_wall_ms() * 1000;
}

static void on_transition(void *arg, const struct alert_transition *t)
{
	(void)arg;
	if (sink != NULL)
		sink(sink_arg, t);
}

/* A request's end on the wall clock, from its monotonic time. */
static void on_request(void *arg, const struct sample_key *k, const struct sample *d)
{
	uint64_t now = util_now_us(), wall = wall_us();
	uint64_t ago = now > d->t_us ? now - d->t_us : 0;
	struct slo_request q = {
		k->route, k->tenant, k->model,
		/* judged from the request's last byte: a client's pace is no
		 * slow model (sample.h) */
		{ (enum meter_outcome)d->outcome,
		  { d->ttft_server_us, d->tpot_us, d->ttfo_server_us },
		  d->duration_server_us },
		wall > ago ? wall - ago : 0,
	};
	(void)arg;
	slo_record(set, &q);
}

/* ---- the state file ----------------------------------------------------- */

static int fill_state(void *arg, FILE *f)
{
	(void)arg;
	return slo_state_write(set, f);
}

static void state_write(void)
{
	if (state_path != NULL && set != NULL)
		statefile_write(state_path, "slo_state", fill_state, NULL);
}

static void on_note(void *arg, const char *msg)
{
	log_warn("slo_state %s: %s", (const char *)arg, msg);
}

/* Never refuses to start: a file that is missing or wrong is said so, and
 * the budgets start empty. (-t and the start refuse a path that is a
 * symlink or not a regular file: conf_check_paths.) */
static void state_load(void)
{
	struct slo_state_clock clk = { wall_us(), on_note, state_path };
	char why[256];
	size_t len;
	char *text;

	if (state_path == NULL)
		return;
	text = statefile_read(state_path, STATE_MAX, &len);
	if (text == NULL) {
		if (errno == ENOENT)
			log_info("slo_state %s: not there yet; the error budgets start empty",
			    state_path);
		else
			log_warn("slo_state %s: cannot read (%s); the error budgets start empty",
			    state_path, errno == ELOOP ? "a symlink" : errno == ENODEV ?
			    "not a regular file" : strerror(errno));
		return;
	}
	if (slo_state_read(set, text, len, &clk, why, sizeof why) < 0)
		log_warn("slo_state %s: corrupt, %s; the error budgets start empty",
		    state_path, why);
	else
		log_info("slo_state %s: error budgets of %zu SLO(s) read", state_path,
		    slo_count(set));
	free(text);
}

static void on_state_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (slo_dirty(set))
		state_write();
}

static void set_path(const struct conf *c)
{
	free(state_path);
	state_path = c->slo_state ? strdup(c->slo_state) : NULL;
}

/* ---- the service ---------------------------------------------------------- */

int slod_start(struct event_base *base, const struct conf *c)
{
	struct timeval tv = { STATE_EVERY_S, 0 };

	set = slo_new();
	state_tick = event_new(base, -1, EV_PERSIST, on_state_tick, NULL);
	if (set == NULL || state_tick == NULL ||
	    slo_configure(set, c, wall_us(), on_transition, NULL) < 0) {
		log_error("slo: cannot start (out of memory)");
		slod_stop();
		return -1;
	}
	set_path(c);
	state_load();
	event_add(state_tick, &tv);
	stats_on_request(on_request, NULL);
	return 0;
}

void slod_reload(const struct conf *c)
{
	if (set == NULL)
		return;
	stats_drain();          /* what finished counts under the old SLOs */
	if (slo_configure(set, c, wall_us(), on_transition, NULL) < 0) {
		log_error("slo: out of memory; the previous SLOs stay");
		return;
	}
	set_path(c);
}

void slod_stop(void)
{
	stats_on_request(NULL, NULL);
	if (set != NULL && state_path != NULL) {
		stats_drain();
		state_write();
	}
	if (state_tick != NULL)
		event_free(state_tick);
	state_tick = NULL;
	slo_free(set);
	set = NULL;
	free(state_path);
	state_path = NULL;
}

void slod_set_sink(void (*fn)(void *arg, const struct alert_transition *t), void *arg)
{
	sink = fn;
	sink_arg = arg;
}

void slod_evaluate(void)
{
	if (set != NULL)
		slo_evaluate(set, wall_us(), on_transition, NULL);
}

void slod_each_total(void (*fn)(void *arg, const char *name, uint64_t good,
    uint64_t bad), void *arg)
{
	if (set != NULL)
		slo_each_total(set, fn, arg);
}

void slod_json(struct evbuffer *out)
{
	if (set == NULL)
		evbuffer_add_printf(out, "{\"slos\":[]}\n");
	else
		slo_json(set, out, wall_us());
}

void slod_prometheus(struct promout *out)
{
	if (set != NULL)
		slo_prometheus(set, out);
}

void slod_alert_json(void *arg, struct evbuffer *out, int *first)
{
	(void)arg;
	if (set != NULL)
		slo_alert_json(set, out, first);
}

void slod_alert_prometheus(void *arg, struct promout *out)
{
	(void)arg;
	if (set != NULL)
		slo_alert_prometheus(set, out);
}
