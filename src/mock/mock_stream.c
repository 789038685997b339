/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_stream.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mock_conn.h"
#include "mock_prefix.h"
#include "net.h"
#include "util.h"

/* A day: caps TTFT where prefill x input tokens would overflow. */
#define MAX_TTFT_US 86400000000ull

/* Streams started and not yet logged, in every worker: --ttft-per-stream. */
static atomic_long streams_active;

/* The sequences decoding besides this one, for --tpot-per-stream: those
 * holding a slot with --slots, else every stream in progress. */
static long others_decoding(void)
{
	long n = mock_slots_enabled() ? mock_slots_held() : atomic_load(&streams_active);

	return n > 1 ? n - 1 : 0;
}

static int schedule(struct mock_conn *c, uint64_t base);

/* length < 0: a stream, chunked or ended by close. */
static void add_head(struct mock_conn *c, struct mock_buf *b, int status,
    const char *type, long long length)
{
	mock_buf_printf(b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", status,
	    net_reason((unsigned)status), type);
	if (length >= 0)
		mock_buf_printf(b, "Content-Length: %lld\r\n", length);
	else
		mock_buf_str(b, c->s.chunked ? "Cache-Control: no-cache\r\n"
		    "Transfer-Encoding: chunked\r\n" : "Cache-Control: no-cache\r\n");
	if (!c->keep_alive)
		mock_buf_str(b, "Connection: close\r\n");
	else if (c->http10)
		mock_buf_str(b, "Connection: keep-alive\r\n");
	mock_buf_str(b, "\r\n");
}

/* Each event is its own chunk, so a reader sees event boundaries. */
static void frame(const struct mock_stream *s, struct mock_buf *out,
    const struct mock_buf *ev)
{
	if (ev->len == 0)
		return;
	if (s->chunked)
		mock_buf_printf(out, "%zx\r\n", ev->len);
	mock_buf_add(out, ev->p, ev->len);
	if (s->chunked)
		mock_buf_add(out, "\r\n", 2);
}

/* Sends the worker's out buffer. Returns 0, or -1 when c was freed. The
 * write's time is read just before send(2): the earliest the bytes could
 * leave. Read after it, a mock preempted as the send woke its reader
 * stamped a token later than the reader had it (seen beside two CPU hogs:
 * a client's TTFT under the mock's). It is read after it too: on loopback
 * the bytes are in the reader's socket when send(2) returns, so the two
 * bracket their arrival, however long the mock was kept from its CPU in
 * between (a benchmark's truth, with its own width). */
static int flush(struct mock_conn *c)
{
	struct mock_buf *out = &c->w->out;
	uint64_t now = util_now_us();

	if (out->failed) {
		log_error("mock: out of memory rendering a response");
		mock_conn_close(c);
		return -1;
	}
	if (mock_conn_send(c, out->p, out->len) < 0) {
		mock_conn_close(c);
		return -1;
	}
	c->s.last_write = now;
	c->s.last_write_end = util_now_us();
	return 0;
}

static int respond(struct mock_conn *c, int status, const char *type,
    const struct mock_buf *body, const char *outcome)
{
	struct mock_buf *out = &c->w->out;

	mock_buf_reset(out);
	add_head(c, out, status, type, (long long)body->len);
	mock_buf_add(out, body->p, body->len);
	if (body->failed)
		out->failed = 1;
	c->s.status = status;
	c->s.outcome = outcome;
	if (flush(c) < 0)
		return -1;
	c->s.sent_first = c->s.sent_last = c->s.last_write;
	c->s.sent_first_end = c->s.sent_last_end = c->s.last_write_end;
	return mock_conn_finish(c);
}

static uint64_t next_wake(const struct mock_stream *s)
{
	uint64_t ka;

	if (s->phase != MOCK_PHASE_TOKENS)
		return s->due;
	if (s->stalling && s->p.heartbeat_us != 0)
		ka = s->last_write + s->p.heartbeat_us;
	else if (s->p.keepalive_us != 0 && !mock_wire_ndjson(s->w.api))
		ka = s->last_write + s->p.keepalive_us;
	else
		return s->due;
	return ka < s->due ? ka : s->due;
}

static void end_events(struct mock_conn *c, struct mock_buf *out)
{
	struct mock_stream *s = &c->s;
	struct mock_buf *ev = &c->w->ev;

	for (size_t k = 0; k < mock_wire_end_count(&s->w); k++) {
		mock_buf_reset(ev);
		mock_wire_end(&s->w, k, ev);
		frame(s, out, ev);
	}
	if (s->chunked)
		mock_buf_str(out, "0\r\n\r\n");
}

/* --stamp: the send time as an SSE comment line opening the event, so a
 * client on this host can time each event's trip (a comment is no field:
 * parsers and token counts ignore it). NDJSON has no comments. */
static void stamp(const struct mock_stream *s, struct mock_buf *ev)
{
	if (s->p.stamp && !mock_wire_ndjson(s->w.api))
		mock_buf_printf(ev, ": ts=%" PRIu64 "\n", util_now_us());
}

static int do_fault(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	struct mock_buf *out = &c->w->out, *ev = &c->w->ev;

	switch (s->p.fault) {
	case MOCK_FAULT_CLOSE:
		s->outcome = "fault_close";
		mock_conn_close(c);
		return -1;
	case MOCK_FAULT_STALL:
		s->outcome = "fault_stall";
		s->phase = MOCK_PHASE_STALL;
		event_del(c->timer);
		return 0;
	default:
		break;
	}
	for (size_t k = 0; k < mock_wire_error_count(&s->w); k++) {
		mock_buf_reset(ev);
		mock_wire_error(&s->w, k, ev);
		frame(s, out, ev);
	}
	if (s->chunked)
		mock_buf_str(out, "0\r\n\r\n");
	s->outcome = "fault_error";
	if (flush(c) < 0)
		return -1;
	return mock_conn_finish(c);
}

/* Tokens in the next event: tokens_per_chunk (the first one
 * first_chunk_tokens, when set), but an event ends where the reasoning, a
 * stall or a fault begins. */
static uint64_t next_event_tokens(const struct mock_stream *s)
{
	uint64_t sent = s->w.tokens_sent, k = s->p.tokens_per_chunk;

	if (sent == 0 && s->p.first_chunk_tokens > 0)
		k = s->p.first_chunk_tokens;
	uint64_t left = s->w.output_tokens - sent;

	if (k > left)
		k = left;
	if (k > s->fault_at - sent)
		k = s->fault_at - sent;
	if (sent < s->w.reasoning && k > s->w.reasoning - sent)
		k = s->w.reasoning - sent;
	if (s->p.stall_us != 0 && !s->stalled && sent < s->p.stall_after &&
	    k > s->p.stall_after - sent)
		k = s->p.stall_after - sent;
	return k;
}

/* Renders up to --clump token events into out (one write). Returns how
 * many; *gaps gets the schedule they stand for. */
static uint64_t render_events(struct mock_conn *c, struct mock_buf *out,
    uint64_t *gaps)
{
	struct mock_stream *s = &c->s;
	struct mock_buf *ev = &c->w->ev;
	uint64_t n = 0, k;

	*gaps = 0;
	while (n < s->p.clump && (k = next_event_tokens(s)) > 0) {
		mock_buf_reset(ev);
		stamp(s, ev);
		mock_wire_token(&s->w, k, ev);
		frame(s, out, ev);
		if (n++ > 0)
			*gaps += mock_params_gap(&s->p, &s->rng, others_decoding());
		if (s->p.stall_us != 0 && !s->stalled &&
		    s->w.tokens_sent == s->p.stall_after)
			break;
	}
	return n;
}

static int step_tokens(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	struct mock_buf *out = &c->w->out;
	uint64_t n, gaps, now;
	int ended;

	mock_buf_reset(out);
	if (s->stalling) {            /* the pause is over */
		s->stalling = 0;
		s->stalled = 1;
	}
	if (s->w.tokens_sent >= s->fault_at)
		return do_fault(c);
	n = render_events(c, out, &gaps);
	/* The end goes with the last token; a pending fault waits its turn. */
	ended = s->w.tokens_sent >= s->w.output_tokens &&
	    s->w.tokens_sent < s->fault_at;
	if (ended)
		end_events(c, out);
	if (flush(c) < 0)
		return -1;
	if (n > 0) {
		now = s->last_write;
		if (s->w.events_sent == n) {
			s->sched_first = s->due;
			s->sent_first = now;
			s->sent_first_end = s->last_write_end;
		}
		s->sched_last = s->due + gaps;
		s->sent_last = now;
		s->sent_last_end = s->last_write_end;
		if (now > s->due && now - s->due > s->late_max)
			s->late_max = now - s->due;
	}
	if (ended) {
		s->outcome = "ok";
		return mock_conn_finish(c);
	}
	s->due += gaps + mock_params_gap(&s->p, &s->rng, others_decoding());
	if (s->p.stall_us != 0 && !s->stalled && s->w.tokens_sent == s->p.stall_after) {
		/* --stall: the tokens stop, the connection stays busy */
		s->stalling = 1;
		s->due += s->p.stall_us;
	}
	mock_conn_arm(c, next_wake(s));
	return 0;
}

static int step_head(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	struct mock_buf *out = &c->w->out, *ev = &c->w->ev;

	if (s->p.fault == MOCK_FAULT_STATUS) {
		mock_buf_reset(ev);
		mock_wire_error_body(&s->w, (int)s->p.fault_arg, ev);
		return respond(c, (int)s->p.fault_arg, "application/json", ev,
		    "fault_status");
	}
	mock_buf_reset(out);
	add_head(c, out, 200, mock_wire_content_type(s->w.api), -1);
	for (size_t k = 0; k < mock_wire_pre_count(&s->w); k++) {
		mock_buf_reset(ev);
		mock_wire_pre(&s->w, k, ev);
		frame(s, out, ev);
	}
	if (flush(c) < 0)
		return -1;
	s->phase = MOCK_PHASE_TOKENS;
	s->due = s->first_due;
	if (s->p.stall_us != 0 && s->p.stall_after == 0) {
		/* --stall 0:DUR: the wait for the first token, behind heartbeats */
		s->stalling = 1;
		s->due += s->p.stall_us;
	}
	if (s->due <= util_now_us())
		return step_tokens(c);
	mock_conn_arm(c, next_wake(s));
	return 0;
}

static int step_body(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	struct mock_buf *ev = &c->w->ev;

	mock_buf_reset(ev);
	mock_wire_body(&s->w, ev);
	s->sched_first = s->sched_last = s->due;
	return respond(c, 200, "application/json", ev, "ok");
}

static int step(struct mock_conn *c)
{
	switch (c->s.phase) {
	case MOCK_PHASE_HEAD:
		return step_head(c);
	case MOCK_PHASE_TOKENS:
		return step_tokens(c);
	case MOCK_PHASE_BODY:
		return step_body(c);
	case MOCK_PHASE_STALL:
	case MOCK_PHASE_QUEUED:
		break;
	}
	return 0;
}

void mock_stream_tick(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	uint64_t now = util_now_us(), wake = next_wake(s);
	struct mock_buf *out = &c->w->out;

	if (s->phase == MOCK_PHASE_STALL)
		return;
	if (s->phase == MOCK_PHASE_QUEUED) {
		/* woken by the thread that freed a slot, or by an old timer */
		if (c->slot == MOCK_SLOT_HELD)
			schedule(c, c->slot_at);
		return;
	}
	/* A timer that fired early waits for the rest of its time. */
	if (now < wake) {
		mock_conn_arm(c, wake);
		return;
	}
	if (now >= s->due) {
		step(c);
		return;
	}
	mock_buf_reset(out);
	mock_buf_reset(&c->w->ev);
	if (s->stalling)
		mock_wire_heartbeat(&s->w, &c->w->ev);
	else
		mock_wire_keepalive(&s->w, &c->w->ev);
	frame(s, out, &c->w->ev);
	if (flush(c) < 0)
		return;
	mock_conn_arm(c, next_wake(s));
}

/* Answers GET /healthz. Returns 0 for another request, 1 when answered,
 * -1 when c was freed. */
static int healthz(struct mock_conn *c)
{
	static const struct mock_buf ok = { (char *)"ok\n", 3, 4, 0 };
	const char *u = c->url.p;

	if (!c->method_get || u == NULL || (strcmp(u, "/healthz") != 0 &&
	    strncmp(u, "/healthz?", 9) != 0))
		return 0;
	return respond(c, 200, "text/plain", &ok, NULL) < 0 ? -1 : 1;
}

/* Reads what the request asks for into s: model, token counts, usage. */
static void plan(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	struct mock_body b;
	uint64_t seed = s->p.seed;
	enum mock_api api = mock_wire_api(c->url.p ? c->url.p : "/", c->url.len);

	if (!s->p.has_seed)
		seed ^= ((uint64_t)c->w->id << 48) ^ ++c->w->requests;
	mock_body_scan(c->body.p ? c->body.p : "", c->body.len, &b);
	mock_wire_init(&s->w, api, seed);
	if (b.model[0] != '\0')
		memcpy(s->w.model, b.model, sizeof s->w.model);
	else if (api != MOCK_API_GEMINI ||
	    mock_wire_path_model(c->url.p, c->url.len, s->w.model) < 0)
		strcpy(s->w.model, "mock-1");
	s->w.created_s = util_wall_ms() / 1000;
	s->w.start_us = c->t_req;
	s->w.input_tokens = s->p.prompt_bytes_per_token > 0 ? (uint64_t)ceil(
	    (double)b.prompt_bytes / s->p.prompt_bytes_per_token) : c->body_bytes / 4;
	if (c->error[0] == '\0')
		s->cached_tokens = mock_prefix_lookup(c->body.p, c->body.len, c->t_req);
	/* cached by the body's blocks, counted by the prompt's text: never
	 * more than the prompt */
	if (s->cached_tokens > s->w.input_tokens)
		s->cached_tokens = s->w.input_tokens;
	s->w.cached_tokens = mock_prefix_enabled() ? (int64_t)s->cached_tokens : -1;
	s->w.output_tokens = s->p.tokens >= 0 ? (uint64_t)s->p.tokens :
	    b.max_tokens >= 0 ? (uint64_t)b.max_tokens : 50;
	s->w.usage = s->p.usage || (b.include_usage &&
	    (api == MOCK_API_OPENAI_CHAT || api == MOCK_API_OPENAI_LEGACY));
	s->w.continuous_usage = s->w.usage && (s->p.continuous_usage ||
	    b.continuous_usage) &&
	    (api == MOCK_API_OPENAI_CHAT || api == MOCK_API_OPENAI_LEGACY);
	s->streaming = b.stream;
	s->rng = seed ^ 0x6a09e667f3bcc908ull;
	if (s->streaming && mock_wire_has_reasoning(api))
		s->w.reasoning = s->p.reasoning < s->w.output_tokens ? s->p.reasoning :
		    s->w.output_tokens;
}

/* The response's schedule from base: the request's arrival, or when it
 * got its slot. Returns 0, or -1 when c was freed. */
static int schedule(struct mock_conn *c, uint64_t base)
{
	struct mock_stream *s = &c->s;
	uint64_t ttft, cold = s->w.input_tokens - s->cached_tokens;

	s->queue_us = base - c->t_req;
	/* a cached token prefills at --prefix-cache-cost of the price */
	ttft = s->p.ttft_us + s->p.prefill_per_token_us * cold +
	    (uint64_t)((double)s->p.prefill_per_token_us *
	    (double)s->cached_tokens * mock_prefix_cost() + 0.5) +
	    s->p.ttft_per_stream_us * (uint64_t)(s->others > 0 ? s->others : 0);
	if ((s->p.prefill_per_token_us != 0 &&
	    s->w.input_tokens > MAX_TTFT_US / s->p.prefill_per_token_us) || ttft > MAX_TTFT_US)
		ttft = MAX_TTFT_US;
	s->first_due = base + ttft;
	if (s->streaming || s->p.fault == MOCK_FAULT_STATUS) {
		s->phase = MOCK_PHASE_HEAD;
		s->due = base + (s->p.role_delay_us < ttft ? s->p.role_delay_us : ttft);
	} else {
		/* A blocking answer comes when its last token would have. */
		s->phase = MOCK_PHASE_BODY;
		s->due = s->first_due;
		for (uint64_t i = 1; i < s->events_planned; i++)
			s->due += mock_params_gap(&s->p, &s->rng, others_decoding());
	}
	if (s->due <= util_now_us())
		return step(c);
	mock_conn_arm(c, s->due);
	return 0;
}

int mock_stream_start(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	uint64_t k;
	int rc;

	memset(s, 0, sizeof *s);
	if ((rc = healthz(c)) != 0)
		return rc > 0 ? 0 : -1;
	s->active = 1;
	s->p = c->params;
	s->others = atomic_fetch_add(&streams_active, 1);
	s->status = 200;
	plan(c);
	mock_buf_free(&c->body);
	if (c->error[0] != '\0') {
		struct mock_buf *ev = &c->w->ev;
		mock_buf_reset(ev);
		mock_buf_str(ev, "{\"error\":{\"type\":\"invalid_request_error\","
		    "\"message\":");
		mock_buf_json(ev, c->error, strlen(c->error));
		mock_buf_str(ev, "}}");
		return respond(c, 400, "application/json", ev, "bad_request");
	}
	s->chunked = !s->p.close_framing && !c->http10;
	if (s->streaming && !s->chunked)
		c->keep_alive = 0;
	s->fault_at = UINT64_MAX;
	if (s->p.fault == MOCK_FAULT_ERROR || s->p.fault == MOCK_FAULT_CLOSE ||
	    s->p.fault == MOCK_FAULT_STALL)
		s->fault_at = s->p.fault_arg < s->w.output_tokens ?
		    s->p.fault_arg : s->w.output_tokens;
	k = s->p.tokens_per_chunk;
	s->events_planned = (s->w.output_tokens + k - 1) / k;
	if (s->p.first_chunk_tokens > 0 && s->w.output_tokens > 0) {
		uint64_t rest = s->w.output_tokens > s->p.first_chunk_tokens ?
		    s->w.output_tokens - s->p.first_chunk_tokens : 0;
		s->events_planned = 1 + (rest + k - 1) / k;
	}
	/* a request the server refuses at once takes no slot */
	if (mock_slots_enabled() && s->p.fault != MOCK_FAULT_STATUS &&
	    !mock_slots_acquire(c)) {
		s->phase = MOCK_PHASE_QUEUED;
		event_del(c->timer);
		return 0;
	}
	return schedule(c, c->t_req);
}

static void log_time(struct mock_buf *b, const char *name, int have,
    uint64_t t, uint64_t t0)
{
	if (have)
		mock_buf_printf(b, ",\"%s\":%" PRIu64, name, t - t0);
	else
		mock_buf_printf(b, ",\"%s\":null", name);
}

void mock_stream_log(struct mock_conn *c)
{
	struct mock_stream *s = &c->s;
	struct mock_buf b = {0};
	uint64_t n = s->w.tokens_sent, t0 = c->t_req;
	int have = s->streaming ? s->w.events_sent > 0 :
	    s->phase == MOCK_PHASE_BODY && s->sent_last > 0;
	char ts[32];

	if (s->active)
		atomic_fetch_sub(&streams_active, 1);
	s->active = 0;
	mock_slots_release(c);
	if (c->w->cfg->log_fd < 0)
		return;
	util_rfc3339_ms(util_wall_ms(), ts);
	mock_buf_printf(&b, "{\"ts\":\"%s\",\"request_id\":", ts);
	if (c->request_id[0] != '\0')
		mock_buf_json(&b, c->request_id, strlen(c->request_id));
	else
		mock_buf_str(&b, "null");
	mock_buf_str(&b, ",\"path\":");
	mock_buf_json(&b, c->url.p ? c->url.p : "", c->url.len);
	mock_buf_printf(&b, ",\"dialect\":\"%s\",\"model\":\"%s\",\"status\":%d,"
	    "\"stream\":%s,\"outcome\":\"%s\",\"tokens\":%" PRIu64 ",\"events\":%"
	    PRIu64 ",\"input_tokens\":%" PRIu64 ",\"cached_tokens\":%" PRIu64,
	    dialect_names[mock_wire_dialect(s->w.api)], s->w.model, s->status,
	    s->streaming ? "true" : "false",
	    s->outcome ? s->outcome : "client_abort", n, s->w.events_sent,
	    s->w.input_tokens, s->cached_tokens);
	log_time(&b, "sched_first_token_us", have, s->sched_first, t0);
	log_time(&b, "first_token_us", have, s->sent_first, t0);
	log_time(&b, "sched_last_token_us", have, s->sched_last, t0);
	log_time(&b, "last_token_us", have, s->sent_last, t0);
	log_time(&b, "first_token_end_us", have, s->sent_first_end, t0);
	log_time(&b, "last_token_end_us", have, s->sent_last_end, t0);
	log_time(&b, "ttft_us", have && s->streaming, s->sent_first, t0);
	if (s->streaming && n >= 2)
		mock_buf_printf(&b, ",\"tpot_us\":%.1f",
		    (double)(s->sent_last - s->sent_first) / (double)(n - 1));
	else
		mock_buf_str(&b, ",\"tpot_us\":null");
	/* CLOCK_MONOTONIC: lets a client on this host line up its own times. */
	mock_buf_printf(&b, ",\"late_max_us\":%" PRIu64 ",\"queue_us\":%" PRIu64
	    ",\"t_req_mono_us\":%" PRIu64 ",\"read_wait_us\":%" PRIu64 "}\n",
	    s->late_max, s->queue_us, t0, c->t_req_loop - t0);
	if (!b.failed && write(c->w->cfg->log_fd, b.p, b.len) < 0)
		log_warn("mock: request log: write failed");
	mock_buf_free(&b);
}
