/* SPDX-License-Identifier: Apache-2.0 */
#include "load_run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "load_arrive.h"
#include "load_body.h"
#include "load_conn.h"
#include "load_prefix.h"
#include "load_prompts.h"
#include "load_psize.h"
#include "load_shard.h"
#include "load_session.h"
#include "load_summary.h"
#include "load_talk.h"
#include "load_trace.h"
#include "log.h"
#include "net.h"
#include "rng.h"
#include "util.h"

/* Open loop without -c: at most this many connections at once. */
#define OPEN_MAX_CONNS 1024
#define MAX_EVENT_BYTES (1024 * 1024)
/* The progress line's p95 TTFT: over the last this many requests. */
#define PROGRESS_SAMPLES 4096
/* The loop's lateness is sampled this often, at most SLIP_MAX times. */
#define SLIP_US 10000
/* a conversation's draws: of the seed and the session's number (talk_begin) */
#define TALK_SEED 0x7a1c5e55a10f2b3dull
#define SLIP_MAX (1u << 20)

struct run;

/* A request waiting for a connection (open loop). */
/* What a request is to the figures. */
enum phase { PH_COUNTED, PH_WARMUP, PH_COOLDOWN };

struct pending {
	uint64_t t0;
	uint64_t seq;
	size_t entry;                /* a trace's entry, or SIZE_MAX */
	enum phase phase;
};

/* A virtual user (closed loop) or a connection slot (open loop). */
struct slot {
	struct run *r;
	struct load_conn *conn;
	uint64_t seq;
	uint64_t t0;
	int64_t lag_us;
	uint32_t prompt_tokens, max_tokens;
	uint8_t phase, queued;
	uint32_t backoff_ms;         /* closed loop: after a connect error */
	struct event *backoff_ev;
	/* a conversation (--turns, --sessions, --sharegpt), or NULL */
	struct load_talk *talk;
	struct event *think_ev;      /* its next turn, due at due */
	uint64_t due;
	uint32_t turn;               /* the request's turn, from 1 */
	uint64_t session;
};

struct run {
	struct event_base *base;
	const struct load_conf *conf;
	const struct load_run_opts *opts;
	struct loadstats *st;
	struct load_conn_ctx ctx;
	enum dialect_id dialect;
	int open_loop;
	struct slot *slots;
	size_t nslots, max_slots;
	struct slot **idle;          /* open loop: slots with no request */
	size_t nidle;
	struct pending *queue;       /* open loop: requests waiting for a slot */
	size_t qhead, qlen, qcap;
	uint64_t start, last_end, stop_at;
	uint64_t window_start;       /* absolute; 0 until the warm-up ended */
	double next_at;              /* open loop: next arrival, µs */
	size_t next_entry;           /* a trace's next entry */
	uint64_t created, accepted, in_flight, max_in_flight, queued;
	uint64_t count;              /* -n: this shard's share of it; 0: none */
	uint64_t arrivals;           /* open loop: the plan's, every shard's */
	uint64_t counted_in_flight;  /* counted requests not ended (or queued) */
	uint64_t cooled;             /* cool-down requests */
	int cooling;                 /* past the window: cool-down requests */
	uint64_t rng;                /* open loop: the arrivals' (the schedule) */
	struct load_prefix_dist prefix;   /* --prefixes: each request's draw */
	size_t next_session;         /* a file's next session */
	uint64_t sessions;           /* sessions begun */
	size_t users_done;           /* users a file has no session left for */
	int stopping, failed;
	int enough;                  /* the count is reached */
	struct evbuffer *req;
	struct event *deadline_ev, *arrival_ev, *progress_ev, *ramp_ev;
	/* the loop's own lateness: a timer every SLIP_US, each period it
	 * missed recorded as how late its tick came (µs) */
	struct event *slip_ev;
	uint64_t slip_next;
	uint32_t *slip;
	size_t nslip, slip_cap;
};

/* ---- signals: one handler for the program, the run in progress told */

static struct run *current;
static int signals;
static struct event *sig_ev[2];
/* the pre-flight: on until a request succeeds; why the target failed it */
static int preflight;
static char target_failed[1024];

static void stop_issuing(struct run *r);

/* First signal: stop issuing and let requests end; second: stop now. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct event_base *base = arg;

	(void)sig;
	(void)what;
	signals++;
	if (current == NULL || signals > 1) {
		event_base_loopbreak(base);
		return;
	}
	stop_issuing(current);
}

int load_run_signals(struct event_base *base)
{
	int sigs[2] = {SIGINT, SIGTERM};

	for (int i = 0; i < 2; i++) {
		sig_ev[i] = evsignal_new(base, sigs[i], on_signal, base);
		if (sig_ev[i] == NULL || event_add(sig_ev[i], NULL) < 0)
			return -1;
	}
	return 0;
}

void load_run_signals_free(void)
{
	for (int i = 0; i < 2; i++) {
		if (sig_ev[i] != NULL)
			event_free(sig_ev[i]);
		sig_ev[i] = NULL;
	}
}

int load_run_interrupted(void)
{
	return signals + (target_failed[0] != '\0');
}

void load_run_preflight(int on)
{
	preflight = on;
}

const char *load_run_target_failed(void)
{
	return target_failed[0] ? target_failed : NULL;
}

/* What to do about an answer of this status. */
static const char *status_hint(unsigned st)
{
	if (st == 401 || st == 403)
		return "it wants credentials: -H 'Authorization: Bearer ...'";
	if (st == 404)
		return "no such path or model there: check the URL's path, --dialect "
		    "and --model";
	if (st == 400 || st == 422)
		return "it refused the request's body: check --dialect and --model";
	if (st == 429)
		return "it limits the request rate: lower -c or -r, or raise its limit";
	if (st >= 500)
		return "it failed: see its log";
	return "a streaming answer is 2xx";
}

/* The pre-flight's verdict on a request that ended (x): the first that
 * did not connect, or was answered other than 2xx, before any succeeded,
 * fails the target, and the run stops issuing. */
static void preflight_check(struct run *r, const struct load_sample *x,
    const struct load_conn_end *e)
{
	const struct load_conf *c = r->conf;
	int bad_status = x->status != 0 && (x->status < 200 || x->status > 299);

	if (!preflight || target_failed[0] != '\0')
		return;
	if (x->outcome == OUTCOME_OK) {
		preflight = 0;
		return;
	}
	if (x->outcome != OUTCOME_CONNECT_ERROR && !bad_status)
		return;
	if (x->outcome == OUTCOME_CONNECT_ERROR && e->tls_failed)
		snprintf(target_failed, sizeof target_failed, "the TLS handshake with %s:%u "
		    "failed (why: above): --cacert FILE for a private CA, --sni NAME for "
		    "another name, or --insecure", c->host, c->port);
	else if (x->outcome == OUTCOME_CONNECT_ERROR && e->conn_errno == ECONNREFUSED)
		snprintf(target_failed, sizeof target_failed, "%s:%u refused the "
		    "connection: is the server running, and listening on that port?",
		    c->host, c->port);
	else if (x->outcome == OUTCOME_CONNECT_ERROR && e->conn_errno == ETIMEDOUT)
		snprintf(target_failed, sizeof target_failed, "the connection to %s:%u "
		    "timed out: is the address right, and open to this host?", c->host,
		    c->port);
	else if (x->outcome == OUTCOME_CONNECT_ERROR)
		snprintf(target_failed, sizeof target_failed, "cannot connect to %s:%u%s%s",
		    c->host, c->port, e->conn_errno ? ": " : "",
		    e->conn_errno ? strerror(e->conn_errno) : "");
	else
		snprintf(target_failed, sizeof target_failed, "%s:%u answered HTTP %u "
		    "(%s) to the first request: %s", c->host, c->port, x->status,
		    net_reason(x->status), status_hint(x->status));
	stop_issuing(r);
}

void load_run_wait(struct event_base *base, uint64_t us)
{
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};

	if (signals > 0 || us == 0)
		return;
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* ---- the run ---------------------------------------------------------- */

static void check_end(struct run *r)
{
	if (r->stopping && r->in_flight == 0 && r->qlen == 0)
		event_base_loopbreak(r->base);
}

static void stop_issuing(struct run *r)
{
	if (r->stopping)
		return;
	r->stopping = 1;
	r->stop_at = util_now_us();
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

static void arm(struct event *ev, uint64_t in_us)
{
	struct timeval tv = {(time_t)(in_us / 1000000), (suseconds_t)(in_us % 1000000)};

	evtimer_add(ev, &tv);
}

/* The window opens at the end of a timed warm-up (its deadline was armed
 * at the start), else with the first request past the warm-up: the
 * duration counts from there. */
static void open_window(struct run *r, uint64_t t0)
{
	const struct load_conf *c = r->conf;
	uint64_t now;

	if (r->window_start != 0)
		return;
	if (c->warmup_us > 0) {
		r->window_start = r->start + c->warmup_us;
		return;
	}
	r->window_start = t0 > r->start ? t0 : r->start;
	now = util_now_us();
	if (c->duration_us > 0 && !r->stopping)
		arm(r->deadline_ev, r->window_start + c->duration_us > now ?
		    r->window_start + c->duration_us - now : 0);
}

/* The window closed (its duration, or its count): with a cool-down, the
 * load goes on until the counted requests in flight have ended. */
static void window_closed(struct run *r)
{
	if (r->conf->cooldown && r->counted_in_flight > 0 && !r->stopping)
		r->cooling = 1;
	else
		stop_issuing(r);
}

/* A new request intended at t0: in the warm-up, counted, or cool-down.
 * Counts it; the count past the warm-up may close the window. */
static enum phase created(struct run *r, uint64_t t0, uint64_t *seq)
{
	const struct load_conf *c = r->conf;
	/* the plan's number: a count counts the whole plan's (load_shard.h) */
	uint64_t g = load_shard_seq(r->created++, c->shard, c->shards);
	int warmup = c->warmup_us > 0 ? t0 < r->start + c->warmup_us :
	    g < c->warmup_count;

	*seq = g;
	if (r->cooling) {
		r->cooled++;
		return PH_COOLDOWN;
	}
	if (warmup)
		return PH_WARMUP;
	r->counted_in_flight++;
	open_window(r, t0);
	/* the caller stops the issuing once this one is in flight, or the
	 * run would end before it */
	if (++r->accepted == r->count)
		r->enough = 1;
	return PH_COUNTED;
}

/* Starts request seq, intended at t0, on slot s; entry: its trace entry. */
static void launch(struct run *r, struct slot *s, const struct pending *p,
    int queued)
{
	const struct load_conf *c = r->conf;
	const struct load_trace_entry *te = NULL;
	struct load_req rq;
	char id[64];
	uint64_t now = util_now_us();
	/* what it asks is the seed's and its seq's alone: the same on any
	 * shard, whatever was sent before it (load_shard.h) */
	uint64_t rng = load_shard_rng(c->seed, p->seq);
	/* a conversation's turn draws from its session's state (talk_begin):
	 * its seq is the timing's */
	uint64_t *draw = s->talk != NULL ? &s->talk->rng : &rng;

	memset(&rq, 0, sizeof(rq));
	if (c->trace != NULL && p->entry < c->trace->n) {
		te = &c->trace->v[p->entry];
		rq.headers = te->headers;
		rq.nheaders = te->nheaders;
	}
	if (s->talk != NULL) {
		if (load_talk_turn(s->talk, c, draw, &rq) < 0) {
			run_failed(r, "conversation");
			return;
		}
	} else if (c->prompts != NULL) {
		rq.prompt = &c->prompts->v[rng_next(draw) % c->prompts->n];
		/* the file's text at the ratio given or calibrated */
		rq.prompt_tokens = c->bytes_per_token == LOAD_PSIZE_DEFAULT ?
		    rq.prompt->tokens : load_psize_tokens(rq.prompt->text_len,
		    c->bytes_per_token);
		rq.max_tokens = rq.prompt->max_tokens;
	} else {
		rq.prompt_tokens = te && te->prompt_tokens ? te->prompt_tokens :
		    load_conf_draw(&c->prompt_tokens, draw);
	}
	if (c->prefixes > 0) {
		rq.prefix_tokens = c->prefix_tokens;
		rq.prefix_seed = load_prefix_text_seed(&r->prefix,
		    load_prefix_pick(&r->prefix, p->seq));
	}
	rq.bytes_per_token = c->bytes_per_token;
	if (te != NULL && te->max_tokens)
		rq.max_tokens = te->max_tokens;
	if (rq.max_tokens == 0)
		rq.max_tokens = load_conf_draw(&c->max_tokens, draw);
	s->seq = p->seq;
	s->t0 = p->t0;
	s->phase = (uint8_t)p->phase;
	s->lag_us = now > p->t0 ? (int64_t)(now - p->t0) : 0;
	s->queued = (uint8_t)queued;
	/* the whole prompt asked for: the shared prefix and its own part */
	s->prompt_tokens = rq.prompt_tokens + rq.prefix_tokens;
	s->max_tokens = rq.max_tokens;
	s->turn = s->talk != NULL ? s->talk->turn : 0;
	s->session = s->talk != NULL ? s->talk->session : 0;
	if (r->opts->id_prefix != NULL) {
		snprintf(id, sizeof(id), "%s-%llu", r->opts->id_prefix,
		    (unsigned long long)s->seq);
		rq.request_id = id;
	}
	if (s->conn == NULL)
		s->conn = load_conn_new(&r->ctx, s);
	if (s->conn == NULL) {
		run_failed(r, "connection");
		return;
	}
	evbuffer_drain(r->req, evbuffer_get_length(r->req));
	if (load_body_request(r->req, c, &rq, draw) < 0) {
		run_failed(r, "request");
		return;
	}
	load_conn_start(s->conn, p->t0, c->timeout_us, r->dialect, r->req);
	if (++r->in_flight > r->max_in_flight)
		r->max_in_flight = r->in_flight;
}

/* A request intended at t0 past the window's end, the deadline's timer
 * not yet run: the window closes now; none is sent unless in cool-down. */
static int past_window(struct run *r, uint64_t t0)
{
	if (r->cooling || r->window_start == 0 || r->conf->duration_us == 0 ||
	    t0 < r->window_start + r->conf->duration_us)
		return 0;
	window_closed(r);
	return !r->cooling;
}

/* Closed loop: the user sends a request intended at t0. */
static void user_send(struct run *r, struct slot *s, uint64_t t0)
{
	struct pending p = { t0, 0, SIZE_MAX, 0 };

	if (r->stopping || past_window(r, p.t0))
		return;
	p.phase = created(r, p.t0, &p.seq);
	launch(r, s, &p, 0);
	if (r->enough && !r->cooling)
		window_closed(r);
}

/* The user's next session: a file's next (its first turn due at its
 * start, or when the user is free), or one of drawn turns, due now.
 * Returns 0, or -1 when the file has none left. */
static int talk_begin(struct run *r, struct slot *s, uint64_t now)
{
	const struct load_sessions *f = r->conf->sessions;
	const struct load_session *se;

	if (f == NULL) {
		/* the session's draws are its number's and the seed's: which
		 * user holds it, and when, is the timing's */
		uint64_t rng = load_shard_rng(r->conf->seed ^ TALK_SEED, r->sessions);
		load_talk_begin(s->talk, NULL, load_conf_draw(&r->conf->turns, &rng),
		    r->sessions++);
		s->talk->rng = rng;
		s->due = now;
		return 0;
	}
	if (r->next_session >= f->n)
		return -1;
	se = &f->v[r->next_session++];
	load_talk_begin(s->talk, se, 0, r->sessions);
	s->talk->rng = load_shard_rng(r->conf->seed ^ TALK_SEED, r->sessions++);
	/* --trace-speed: the session's start, as its think times */
	s->due = r->start + (uint64_t)((double)se->start_us / r->conf->trace_speed);
	if (s->due < now)
		s->due = now;
	return 0;
}

/* Closed loop: the user sends its next request now; holding a
 * conversation, its next turn when it is due: the think time after the
 * answer before it, timed from that answer's end, so that the turn's
 * own lateness counts in its latency. */
static void user_next(struct run *r, struct slot *s)
{
	uint64_t now = util_now_us();

	if (r->stopping)
		return;
	if (s->talk == NULL) {
		user_send(r, s, now);
		return;
	}
	if (!load_talk_more(s->talk)) {
		if (talk_begin(r, s, now) < 0) {
			/* every user's file is done: so is the run */
			if (++r->users_done == r->max_slots)
				stop_issuing(r);
			return;
		}
	} else {
		s->due = s->talk->end_us + load_talk_think(s->talk, r->conf, &s->talk->rng);
	}
	if (s->due > now) {
		arm(s->think_ev, s->due - now);
		return;
	}
	user_send(r, s, s->due);
}

static void on_think(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;

	(void)fd;
	(void)what;
	user_send(s->r, s, s->due);
	check_end(s->r);
}

static void slot_body(void *arg, const char *at, size_t len)
{
	struct slot *s = arg;

	if (s->talk != NULL)
		load_talk_feed(s->talk, at, len);
}

static int queue_push(struct run *r, const struct pending *p)
{
	if (r->qlen == r->qcap) {
		size_t cap = r->qcap ? r->qcap * 2 : 1024;
		struct pending *q = malloc(cap * sizeof(*q));
		if (q == NULL)
			return -1;
		for (size_t i = 0; i < r->qlen; i++)
			q[i] = r->queue[(r->qhead + i) % r->qcap];
		free(r->queue);
		r->queue = q;
		r->qhead = 0;
		r->qcap = cap;
	}
	r->queue[(r->qhead + r->qlen++) % r->qcap] = *p;
	return 0;
}

static struct pending queue_pop(struct run *r)
{
	struct pending p = r->queue[r->qhead];

	r->qhead = (r->qhead + 1) % r->qcap;
	r->qlen--;
	return p;
}

/* Open loop: a request intended at t0 takes a free slot, a new one, or
 * waits for one (its clock already running). */
static void arrive(struct run *r, uint64_t t0, size_t entry)
{
	struct pending p = { t0, 0, entry, 0 };
	struct slot *s = NULL;

	if (past_window(r, t0))
		return;
	p.phase = created(r, t0, &p.seq);
	if (r->nidle > 0)
		s = r->idle[--r->nidle];
	else if (r->nslots < r->max_slots)
		s = &r->slots[r->nslots++];
	if (s != NULL) {
		launch(r, s, &p, 0);
	} else {
		r->queued++;
		if (queue_push(r, &p) < 0)
			run_failed(r, "queue");
	}
	if (r->enough && !r->cooling)
		window_closed(r);
}

static void on_backoff(evutil_socket_t fd, short what, void *arg)
{
	struct slot *s = arg;

	(void)fd;
	(void)what;
	user_next(s->r, s);
	check_end(s->r);
}

static void slot_done(void *arg, struct load_conn *c, const struct meter *m,
    enum meter_end how, const struct load_conn_end *e)
{
	struct slot *s = arg;
	struct run *r = s->r;
	struct load_sample x;

	(void)c;
	loadstats_sample(&x, m, how, r->start);
	x.seq = s->seq;
	x.lag_us = s->lag_us;
	x.prompt_tokens = s->prompt_tokens;
	x.max_tokens = s->max_tokens;
	x.warmup = s->phase == PH_WARMUP;
	x.cooldown = s->phase == PH_COOLDOWN;
	x.queued = s->queued;
	x.turn = s->turn;
	x.session = s->session;
	/* sent at t0 + lag; a new connection was ready at t_conn */
	if (!e->reused && m->t_conn != 0 && m->t_conn >= s->t0 + (uint64_t)s->lag_us)
		x.connect_us = (int64_t)(m->t_conn - s->t0 - (uint64_t)s->lag_us);
	if (loadstats_record(r->st, &x, e->itl, e->nitl) < 0 && !r->failed)
		run_failed(r, "samples");
	r->in_flight--;
	r->last_end = util_now_us();
	/* the answer joins the conversation, or ends it; the think time
	 * counts from its last byte's read, so that a late callback here is
	 * the next turn's dispatch lag, not a longer think */
	if (s->talk != NULL && load_talk_answered(s->talk, x.outcome == OUTCOME_OK,
	    x.duration_us >= 0 ? m->t_end : r->last_end) < 0 && !r->failed)
		run_failed(r, "conversation");
	preflight_check(r, &x, e);
	/* the last counted request ended: the cool-down has done its work */
	if (s->phase == PH_COUNTED && --r->counted_in_flight == 0 && r->cooling)
		stop_issuing(r);
	if (!r->open_loop) {
		/* a user whose connection failed waits before it tries again,
		 * 10 ms doubling to a second: a dead target is not a hot loop */
		if (x.outcome == OUTCOME_CONNECT_ERROR && !r->stopping) {
			s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : 10;
			if (s->backoff_ms > 1000)
				s->backoff_ms = 1000;
			if (s->backoff_ev == NULL)
				s->backoff_ev = evtimer_new(r->base, on_backoff, s);
			if (s->backoff_ev != NULL) {
				arm(s->backoff_ev, (uint64_t)s->backoff_ms * 1000);
				check_end(r);
				return;
			}
		} else {
			s->backoff_ms = 0;
		}
		user_next(r, s);
	} else if (r->qlen > 0) {
		struct pending p = queue_pop(r);
		launch(r, s, &p, 1);
	} else {
		r->idle[r->nidle++] = s;
	}
	check_end(r);
}

/* The open loop's next arrival time (µs), or INFINITY when there is none. */
static double next_arrival(struct run *r)
{
	const struct load_trace *t = r->conf->trace;

	if (t == NULL)
		return r->next_at + load_arrive_gap(r->conf, &r->rng);
	if (++r->next_entry >= t->n)
		return INFINITY;
	return (double)r->start + (double)t->v[r->next_entry].offset_us /
	    r->conf->trace_speed;
}

static void on_arrival(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	uint64_t now = util_now_us();

	(void)fd;
	(void)what;
	/* a late timer still gives every arrival its own intended time */
	while (!r->stopping && r->next_at <= (double)now) {
		/* every shard draws the whole schedule and sends its own */
		if (load_shard_mine(r->arrivals++, r->conf->shard, r->conf->shards))
			arrive(r, (uint64_t)r->next_at, r->conf->trace ? r->next_entry :
			    SIZE_MAX);
		r->next_at = next_arrival(r);
		if (isinf(r->next_at)) {
			stop_issuing(r);
			return;
		}
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

static void on_slip(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	uint64_t now = util_now_us();

	(void)fd;
	(void)what;
	/* a stall of 300 ms is 30 ticks late by 300, 290, ... ms: as late
	 * as a read that became ready in each would have been */
	for (; r->slip_next <= now; r->slip_next += SLIP_US) {
		if (r->nslip == r->slip_cap && r->slip_cap < SLIP_MAX) {
			size_t cap = r->slip_cap ? 2 * r->slip_cap : 1024;
			uint32_t *v = realloc(r->slip, cap * sizeof(*v));
			if (v != NULL) {
				r->slip = v;
				r->slip_cap = cap;
			}
		}
		if (r->nslip < r->slip_cap) {
			uint64_t late = now - r->slip_next;
			r->slip[r->nslip++] = late > UINT32_MAX ? UINT32_MAX : (uint32_t)late;
		}
	}
	arm(r->slip_ev, r->slip_next - now);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* p95, p99 and max (ms) of n lateness samples (µs), sorted in place. */
static void late_of(uint32_t *v, size_t n, double *p95, double *p99, double *max)
{
	double *d;

	*p95 = *p99 = *max = NAN;
	if (n == 0 || (d = malloc(n * sizeof(*d))) == NULL)
		return;
	qsort(v, n, sizeof(*v), cmp_u32);
	for (size_t i = 0; i < n; i++)
		d[i] = (double)v[i] / 1e3;
	*p95 = load_quantile(d, n, 95);
	*p99 = load_quantile(d, n, 99);
	*max = d[n - 1];
	free(d);
}

/* How late the run read: its stamped events', else its loop's. */
static void read_late(struct run *r, struct load_run_info *info)
{
	if (r->st->nlag > 0) {
		uint32_t *v = malloc(r->st->nlag * sizeof(*v));
		if (v != NULL) {
			memcpy(v, r->st->lag, r->st->nlag * sizeof(*v));
			late_of(v, r->st->nlag, &info->read_late_p95_ms, &info->read_late_p99_ms,
			    &info->read_late_max_ms);
			info->read_late_stamps = 1;
			free(v);
			return;
		}
	}
	late_of(r->slip, r->nslip, &info->read_late_p95_ms, &info->read_late_p99_ms,
	    &info->read_late_max_ms);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	window_closed(arg);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* p95 TTFT (ms) of the last measured ok requests, NaN before one. */
static double recent_ttft_p95(const struct loadstats *st)
{
	static double v[PROGRESS_SAMPLES];
	size_t n = 0;

	for (size_t i = st->n; i > 0 && n < PROGRESS_SAMPLES; i--) {
		const struct load_sample *s = &st->v[i - 1];
		if (loadstats_counted(s) && s->outcome == OUTCOME_OK && s->ttft_us >= 0)
			v[n++] = (double)s->ttft_us / 1e3;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	return load_quantile(v, n, 95);
}

static void on_progress(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	const struct load_conf *c = r->conf;
	double el = (double)(util_now_us() - r->start) / 1e6, p95;
	char left[48] = "";

	(void)fd;
	(void)what;
	if (r->stopping)
		snprintf(left, sizeof left, ", draining");
	else if (r->cooling)
		snprintf(left, sizeof left, ", cooling down");
	else if (r->window_start == 0)
		snprintf(left, sizeof left, ", warming up");
	else if (c->duration_us > 0)
		snprintf(left, sizeof left, ", %.0f s left",
		    fmax(0, (double)(r->window_start + c->duration_us - util_now_us()) / 1e6));
	else if (c->count > 0)
		snprintf(left, sizeof left, ", %llu of %llu sent",
		    (unsigned long long)r->accepted, (unsigned long long)r->count);
	p95 = recent_ttft_p95(r->st);
	fprintf(stderr, "\r%s%s%.1f s%s  done %llu  in flight %llu  queued %zu  "
	    "errors %llu  p95 TTFT ", r->opts->label ? r->opts->label : "",
	    r->opts->label ? ": " : "", el, left,
	    (unsigned long long)r->st->measured, (unsigned long long)r->in_flight,
	    r->qlen, (unsigned long long)r->st->errors);
	if (isnan(p95))
		fputs("-\033[K", stderr);
	else
		fprintf(stderr, "%.1f ms\033[K", p95);
	fflush(stderr);
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

static int setup(struct run *r)
{
	const struct load_conf *c = r->conf;
	struct timeval sec = {1, 0};

	/* a closed loop's users, and an open loop's -c, dealt to the shards */
	r->max_slots = r->open_loop && !c->concurrency_set ? OPEN_MAX_CONNS :
	    load_shard_share(0, c->concurrency, c->shard, c->shards);
	r->count = c->count ? load_shard_share(c->warmup_count, c->count, c->shard,
	    c->shards) : 0;
	r->slots = calloc(r->max_slots, sizeof(*r->slots));
	r->idle = calloc(r->max_slots, sizeof(*r->idle));
	r->req = evbuffer_new();
	if (r->slots == NULL || r->idle == NULL || r->req == NULL)
		return -1;
	for (size_t i = 0; i < r->max_slots; i++)
		r->slots[i].r = r;
	if (r->conf->turns.min > 0 || r->conf->sessions != NULL) {
		r->ctx.body = slot_body;
		for (size_t i = 0; i < r->max_slots; i++) {
			struct slot *s = &r->slots[i];
			if ((s->talk = malloc(sizeof(*s->talk))) == NULL)
				return -1;
			if (load_talk_init(s->talk, r->dialect) < 0) {
				free(s->talk);
				s->talk = NULL;
				return -1;
			}
			if ((s->think_ev = evtimer_new(r->base, on_think, s)) == NULL)
				return -1;
		}
	}
	r->deadline_ev = evtimer_new(r->base, on_deadline, r);
	r->slip_ev = evtimer_new(r->base, on_slip, r);
	if (r->deadline_ev == NULL || r->slip_ev == NULL)
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
	if (r->opts->progress) {
		r->progress_ev = event_new(r->base, -1, EV_PERSIST, on_progress, r);
		if (r->progress_ev == NULL || event_add(r->progress_ev, &sec) < 0)
			return -1;
	}
	return 0;
}

static void teardown(struct run *r)
{
	for (size_t i = 0; i < r->max_slots && r->slots != NULL; i++) {
		load_conn_free(r->slots[i].conn);
		if (r->slots[i].backoff_ev != NULL)
			event_free(r->slots[i].backoff_ev);
		if (r->slots[i].think_ev != NULL)
			event_free(r->slots[i].think_ev);
		if (r->slots[i].talk != NULL)
			load_talk_free(r->slots[i].talk);
		free(r->slots[i].talk);
	}
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
	if (r->slip_ev != NULL)
		event_free(r->slip_ev);
	free(r->slip);
}

static void begin(struct run *r)
{
	const struct load_conf *c = r->conf;

	r->start = util_now_us();
	r->slip_next = r->start + SLIP_US;
	arm(r->slip_ev, SLIP_US);
	/* without a warm-up the window opens at once (and the deadline with
	 * it); a timed warm-up's at its end */
	if (c->warmup_us > 0 && c->duration_us > 0)
		arm(r->deadline_ev, c->warmup_us + c->duration_us);
	if (c->warmup_count == 0)
		open_window(r, r->start);
	if (r->open_loop) {
		r->next_entry = 0;
		r->next_at = (double)r->start;
		if (c->trace != NULL)
			r->next_at += (double)c->trace->v[0].offset_us / c->trace_speed;
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

static double cpu_now(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The window's end: the duration after its start, or with a count the
 * last counted request's end; never past the stop. */
static void window(const struct run *r, struct load_run_info *info)
{
	const struct load_conf *c = r->conf;
	uint64_t ws = r->window_start ? r->window_start : r->start, we = 0;

	for (size_t i = 0; i < r->st->n; i++) {
		const struct load_sample *s = &r->st->v[i];
		uint64_t end = s->start_us + (s->duration_us > 0 ? (uint64_t)s->duration_us : 0);
		if (loadstats_counted(s) && r->start + end > we)
			we = r->start + end;
	}
	if (c->duration_us > 0) {
		uint64_t d = ws + c->duration_us;
		if (r->stop_at != 0 && r->stop_at < d)
			d = r->stop_at;
		we = d;
	}
	if (we < ws)
		we = ws;
	info->window_start_us = ws - r->start;
	info->window_end_us = we - r->start;
}

int load_run(struct event_base *base, struct evdns_base *dns,
    const struct load_conf *c, const struct load_run_opts *o,
    struct loadstats *st, struct load_run_info *info)
{
	struct run r;
	double cpu0 = cpu_now();
	int rc = -1;

	memset(&r, 0, sizeof(r));
	memset(info, 0, sizeof(*info));
	r.base = base;
	r.conf = c;
	r.opts = o;
	r.st = st;
	r.dialect = load_conf_dialect(c);
	r.open_loop = c->rate > 0 || c->trace != NULL;
	r.rng = c->seed;
	r.ctx.base = base;
	r.ctx.max_event_bytes = MAX_EVENT_BYTES;
	r.ctx.done = slot_done;
	r.ctx.lag = c->lag ? st : NULL;
	r.ctx.tls = o->tls;
	if (c->prefixes > 0 && load_prefix_dist_init(&r.prefix, c) < 0) {
		log_error("out of memory");
		goto done;
	}
	if ((c->turns.min > 0 || c->sessions != NULL) && !load_body_chat(c)) {
		log_error("conversations need a chat API's messages: OpenAI "
		    "/v1/chat/completions, Anthropic /v1/messages or Ollama /api/chat");
		goto done;
	}
	if (load_run_interrupted() > 0 || resolve(&r, dns) < 0)
		goto done;
	if (setup(&r) < 0) {
		log_error("out of memory");
		goto done;
	}
	current = &r;
	begin(&r);
	if (!r.stopping || r.in_flight > 0 || r.qlen > 0)
		event_base_dispatch(base);
	current = NULL;
	info->start_us = r.start;
	info->elapsed_us = (r.last_end > r.start ? r.last_end : util_now_us()) - r.start;
	window(&r, info);
	info->max_in_flight = r.max_in_flight;
	info->connections = r.ctx.opened;
	info->queued = r.queued;
	info->cooldown_requests = r.cooled;
	info->warmup_requests = r.created - r.accepted - r.cooled;
	info->interrupted = signals > 0;
	read_late(&r, info);
	if (o->progress)
		fputs("\r\033[K", stderr);
	rc = r.failed ? -1 : 0;
done:
	current = NULL;
	teardown(&r);
	load_prefix_dist_free(&r.prefix);
	info->cpu_s = cpu_now() - cpu0;
	return rc;
}
