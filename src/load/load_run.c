#include "load_run.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "load_body.h"
#include "load_conn.h"
#include "log.h"
#include "rng.h"
#include "util.h"

/* Open loop without -c: at most this many connections at once. */
#define OPEN_MAX_CONNS 1024
#define MAX_EVENT_BYTES (1024 * 1024)

struct run;

/* A virtual user (closed loop) or a connection slot (open loop). */
struct slot {
	struct run *r;
	struct load_conn *conn;
	uint32_t prompt_tokens, max_tokens;
};

struct run {
	struct event_base *base;
	const struct load_conf *conf;
	struct loadstats *st;
	struct load_conn_ctx ctx;
	enum dialect_id dialect;
	int open_loop;
	struct slot *slots;
	size_t nslots, max_slots;
	struct slot **idle;          /* open loop: slots with no request */
	size_t nidle;
	uint64_t *queue;             /* open loop: scheduled starts waiting for a slot */
	size_t qhead, qlen, qcap;
	uint64_t start, last_end;
	double next_at;              /* open loop: next arrival, µs */
	uint64_t issued, in_flight, max_in_flight;
	uint64_t rng;
	int stopping, interrupted, failed;
	struct evbuffer *req;
	struct event *deadline_ev, *arrival_ev, *progress_ev, *ramp_ev;
	struct event *sig_ev[2];
};

static void check_end(struct run *r)
{
	if (r->stopping && r->in_flight == 0 && r->qlen == 0)
		event_base_loopbreak(r->base);
}

static void stop_issuing(struct run *r)
{
	r->stopping = 1;
	if (r->deadline_ev != NULL)
		evtimer_del(r->deadline_ev);
	if (r->arrival_ev != NULL)
		evtimer_del(r->arrival_ev);
	if (r->ramp_ev != NULL)
		evtimer_del(r->ramp_ev);
	check_end(r);
}

/* A failure of our own (memory): the run ends, its figures are kept. */
static void run_failed(struct run *r, const char *what)
{
	log_error("%s: out of memory; stopping the run", what);
	r->failed = 1;
	stop_issuing(r);
}

/* Starts a request timed from t0 on slot s. */
static void launch(struct run *r, struct slot *s, uint64_t t0)
{
	s->prompt_tokens = load_conf_draw(&r->conf->prompt_tokens, &r->rng);
	s->max_tokens = load_conf_draw(&r->conf->max_tokens, &r->rng);
	if (s->conn == NULL)
		s->conn = load_conn_new(&r->ctx, s);
	if (s->conn == NULL) {
		run_failed(r, "connection");
		return;
	}
	evbuffer_drain(r->req, evbuffer_get_length(r->req));
	if (load_body_request(r->req, r->conf, s->prompt_tokens, s->max_tokens,
	    &r->rng) < 0) {
		run_failed(r, "request");
		return;
	}
	load_conn_start(s->conn, t0, r->conf->timeout_us, r->dialect, r->req);
	if (++r->in_flight > r->max_in_flight)
		r->max_in_flight = r->in_flight;
}

static void count_issued(struct run *r)
{
	if (++r->issued == r->conf->count)
		stop_issuing(r);
}

/* Closed loop: the user sends its next request now. */
static void user_next(struct run *r, struct slot *s)
{
	if (r->stopping)
		return;
	launch(r, s, util_now_us());
	count_issued(r);
}

static int queue_push(struct run *r, uint64_t t0)
{
	if (r->qlen == r->qcap) {
		size_t cap = r->qcap ? r->qcap * 2 : 1024;
		uint64_t *q = malloc(cap * sizeof(*q));
		if (q == NULL)
			return -1;
		for (size_t i = 0; i < r->qlen; i++)
			q[i] = r->queue[(r->qhead + i) % r->qcap];
		free(r->queue);
		r->queue = q;
		r->qhead = 0;
		r->qcap = cap;
	}
	r->queue[(r->qhead + r->qlen++) % r->qcap] = t0;
	return 0;
}

static uint64_t queue_pop(struct run *r)
{
	uint64_t t0 = r->queue[r->qhead];

	r->qhead = (r->qhead + 1) % r->qcap;
	r->qlen--;
	return t0;
}

/* Open loop: a request scheduled at t0 takes a free slot, a new one, or
 * waits for one (its clock already running). */
static void arrive(struct run *r, uint64_t t0)
{
	struct slot *s = NULL;

	if (r->nidle > 0)
		s = r->idle[--r->nidle];
	else if (r->nslots < r->max_slots)
		s = &r->slots[r->nslots++];
	if (s != NULL)
		launch(r, s, t0);
	else if (queue_push(r, t0) < 0)
		run_failed(r, "queue");
	count_issued(r);
}

static void slot_done(void *arg, struct load_conn *c, const struct meter *m,
    enum meter_end how, const uint32_t *itl, size_t n)
{
	struct slot *s = arg;
	struct run *r = s->r;
	struct load_sample x;

	(void)c;
	loadstats_sample(&x, m, how, m->t0 > r->start ? m->t0 - r->start : 0);
	x.prompt_tokens = s->prompt_tokens;
	x.max_tokens = s->max_tokens;
	if (loadstats_record(r->st, &x, itl, n) < 0 && !r->failed)
		run_failed(r, "samples");
	r->in_flight--;
	r->last_end = util_now_us();
	if (!r->open_loop)
		user_next(r, s);
	else if (r->qlen > 0)
		launch(r, s, queue_pop(r));
	else
		r->idle[r->nidle++] = s;
	check_end(r);
}

/* The gap to the next arrival in µs. */
static double interarrival(struct run *r)
{
	double mean = 1e6 / r->conf->rate;

	if (r->conf->uniform)
		return mean;
	return -log(1.0 - rng_unit(&r->rng)) * mean;
}

static void arm(struct event *ev, uint64_t in_us)
{
	struct timeval tv = {(time_t)(in_us / 1000000), (suseconds_t)(in_us % 1000000)};

	evtimer_add(ev, &tv);
}

static void on_arrival(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	uint64_t now = util_now_us();
	double end = r->conf->duration_us ? (double)(r->start + r->conf->duration_us) :
	    INFINITY;

	(void)fd;
	(void)what;
	/* a late timer still gives every arrival its own scheduled time */
	while (!r->stopping && r->next_at <= (double)now) {
		if (r->next_at >= end) {
			stop_issuing(r);
			return;
		}
		arrive(r, (uint64_t)r->next_at);
		r->next_at += interarrival(r);
	}
	if (!r->stopping)
		arm(r->arrival_ev, (uint64_t)ceil(r->next_at - (double)now));
}

/* --ramp: user i starts at start + i * ramp / N, so that N users do not
 * connect, and their streams do not tick, all at the same instant. */
static void on_ramp(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	uint64_t now = util_now_us(), n = r->max_slots, at;

	(void)fd;
	(void)what;
	while (!r->stopping && r->nslots < n) {
		at = r->start + r->conf->ramp_us * r->nslots / n;
		if (at > now) {
			arm(r->ramp_ev, at - now);
			return;
		}
		r->nslots++;
		user_next(r, &r->slots[r->nslots - 1]);
	}
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	stop_issuing(arg);
}

static void on_progress(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	double p95 = hist_quantile(&r->st->ttft, 0.95) / 1000.0;

	(void)fd;
	(void)what;
	fprintf(stderr, "\r%6.1fs  done %llu  in flight %llu  queued %zu  errors %llu"
	    "  p95 TTFT %.1f ms\033[K",
	    (double)(util_now_us() - r->start) / 1e6,
	    (unsigned long long)r->st->requests, (unsigned long long)r->in_flight,
	    r->qlen, (unsigned long long)loadstats_errors(r->st), p95);
	fflush(stderr);
}

/* First signal: stop issuing and let requests end; second: stop now. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct run *r = arg;

	(void)sig;
	(void)what;
	if (r->interrupted) {
		event_base_loopbreak(r->base);
		return;
	}
	r->interrupted = 1;
	stop_issuing(r);
}

struct resolve {
	struct run *r;
	int done, rc;
};

static void resolved(int err, struct evutil_addrinfo *ai, void *arg)
{
	struct resolve *rs = arg;
	struct run *r = rs->r;

	rs->done = 1;
	if (err != 0 || ai == NULL || ai->ai_addrlen > sizeof(r->ctx.addr)) {
		log_error("%s: %s", r->conf->host,
		    err != 0 ? evutil_gai_strerror(err) : "no address");
		rs->rc = -1;
	} else {
		memcpy(&r->ctx.addr, ai->ai_addr, ai->ai_addrlen);
		r->ctx.addrlen = (socklen_t)ai->ai_addrlen;
		rs->rc = 0;
	}
	if (ai != NULL)
		evutil_freeaddrinfo(ai);
	event_base_loopbreak(r->base);
}

/* The target's first address, looked up once per run. */
static int resolve(struct run *r, struct evdns_base *dns)
{
	struct evutil_addrinfo hints;
	struct resolve rs = {r, 0, -1};
	char port[8];

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	snprintf(port, sizeof(port), "%u", r->conf->port);
	evdns_getaddrinfo(dns, r->conf->host, port, &hints, resolved, &rs);
	if (!rs.done)
		event_base_dispatch(r->base);
	return rs.done ? rs.rc : -1;
}

static int setup(struct run *r, int progress)
{
	struct timeval sec = {1, 0};
	int sigs[2] = {SIGINT, SIGTERM};

	r->max_slots = r->open_loop ? (r->conf->concurrency_set ?
	    r->conf->concurrency : OPEN_MAX_CONNS) : r->conf->concurrency;
	r->slots = calloc(r->max_slots, sizeof(*r->slots));
	r->idle = calloc(r->max_slots, sizeof(*r->idle));
	r->req = evbuffer_new();
	if (r->slots == NULL || r->idle == NULL || r->req == NULL)
		return -1;
	for (size_t i = 0; i < r->max_slots; i++)
		r->slots[i].r = r;
	r->deadline_ev = evtimer_new(r->base, on_deadline, r);
	if (r->deadline_ev == NULL)
		return -1;
	if (r->open_loop) {
		r->arrival_ev = evtimer_new(r->base, on_arrival, r);
		if (r->arrival_ev == NULL)
			return -1;
	} else if (r->conf->ramp_us > 0) {
		r->ramp_ev = evtimer_new(r->base, on_ramp, r);
		if (r->ramp_ev == NULL)
			return -1;
	}
	if (progress) {
		r->progress_ev = event_new(r->base, -1, EV_PERSIST, on_progress, r);
		if (r->progress_ev == NULL || event_add(r->progress_ev, &sec) < 0)
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		r->sig_ev[i] = evsignal_new(r->base, sigs[i], on_signal, r);
		if (r->sig_ev[i] == NULL || event_add(r->sig_ev[i], NULL) < 0)
			return -1;
	}
	return 0;
}

static void teardown(struct run *r)
{
	for (size_t i = 0; i < r->max_slots && r->slots != NULL; i++)
		load_conn_free(r->slots[i].conn);
	free(r->slots);
	free(r->idle);
	free(r->queue);
	if (r->req != NULL)
		evbuffer_free(r->req);
	if (r->deadline_ev != NULL)
		event_free(r->deadline_ev);
	if (r->arrival_ev != NULL)
		event_free(r->arrival_ev);
	if (r->ramp_ev != NULL)
		event_free(r->ramp_ev);
	if (r->progress_ev != NULL)
		event_free(r->progress_ev);
	for (int i = 0; i < 2; i++)
		if (r->sig_ev[i] != NULL)
			event_free(r->sig_ev[i]);
}

static void begin(struct run *r)
{
	r->start = util_now_us();
	if (r->conf->duration_us > 0)
		arm(r->deadline_ev, r->conf->duration_us);
	if (r->open_loop) {
		r->next_at = (double)r->start;
		on_arrival(-1, 0, r);
		return;
	}
	if (r->ramp_ev != NULL) {
		on_ramp(-1, 0, r);
		return;
	}
	for (size_t i = 0; i < r->max_slots && !r->stopping; i++) {
		r->nslots++;
		user_next(r, &r->slots[i]);
	}
}

int load_run(struct event_base *base, struct evdns_base *dns,
    const struct load_conf *c, struct loadstats *st, int progress,
    struct load_run_info *info)
{
	struct run r;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	memset(info, 0, sizeof(*info));
	r.base = base;
	r.conf = c;
	r.st = st;
	r.dialect = load_conf_dialect(c);
	r.open_loop = c->rate > 0;
	r.rng = c->seed;
	r.ctx.base = base;
	r.ctx.max_event_bytes = MAX_EVENT_BYTES;
	r.ctx.done = slot_done;
	r.ctx.lag = c->lag ? &st->lag : NULL;
	if (resolve(&r, dns) < 0)
		goto done;
	if (setup(&r, progress) < 0) {
		log_error("out of memory");
		goto done;
	}
	begin(&r);
	if (!r.stopping || r.in_flight > 0 || r.qlen > 0)
		event_base_dispatch(base);
	info->elapsed_us = (r.last_end > r.start ? r.last_end : util_now_us()) - r.start;
	info->max_in_flight = r.max_in_flight;
	info->connections = r.ctx.opened;
	info->interrupted = r.interrupted;
	if (progress)
		fputs("\r\033[K", stderr);
	rc = r.failed ? -1 : 0;
done:
	teardown(&r);
	return rc;
}
