/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection's I/O, its client side (the session: proxy.c; what
 * the three files share: proxy_int.h): the request read, its head handed
 * to the exchange and sent up, its body moved to the upstream as it comes
 * or held until it is whole (request_buffering, bodybuf.c), Expect:
 * 100-continue answered, the client's reads paused while the upstream
 * takes nothing (backpressure on the client), its output's progress and
 * its end. A plain client is read by client_readable (its bufferevent
 * only writes), a TLS client by its bufferevent. */
#include <errno.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "attempt.h"
#include "bodybuf.h"
#include "exchange.h"
#include "vitals.h"
#include "log.h"
#include "gauge.h"
#include "tls.h"
#include "loop.h"
#include "proxy_int.h"
#include "upstream.h"
#include "util.h"

/* Bytes a client may pipeline while its previous response streams. */
#define PIPELINE_MAX (64 * 1024)

static int hold_request(struct session *s, const struct http_head *rq,
    size_t head_len);

/* ---- receive times (rxtime.h): a client read (first: under TLS, the
 * first read since the connection went idle, when it was not this one);
 * the first since the connection went idle is the next request's first
 * byte. */
static void client_stamp(struct session *s, int64_t first, int64_t real,
    uint64_t floor)
{
	int k;

	s->rx_last = exchange_read_time(&s->loop->clock, real, &k);
	s->rx_last_kernel = k != 0;
	if (s->rx_first != 0)
		return;
	s->rx_floor = floor;
	s->rx_first = first != 0 && first != real ?
	    exchange_read_time(&s->loop->clock, first, &k) : s->rx_last;
	s->rx_first_kernel = k != 0;
}

/* When the request's bytes so far came: the newest client read. */
static uint64_t request_read_at(const struct session *s)
{
	uint64_t t = s->rx_last != 0 ? s->rx_last : util_now_us();
	return t > s->x.meter.t0 ? t : s->x.meter.t0;
}

/* A plain client is read by client_readable, a TLS one by its bufferevent. */
void client_reading(struct session *s, int on)
{
	if (s->tls)
		(on ? bufferevent_enable : bufferevent_disable)(s->bev, EV_READ);
	else if (s->rd_ev != NULL)
		(void)(on ? event_add(s->rd_ev, NULL) : event_del(s->rd_ev));
}

/* ---- client side ------------------------------------------------------- */

void client_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	if (s->tls) {
		SSL *ssl = bufferevent_openssl_get_ssl(bev);
		uint64_t floor = tls_rx_floor(ssl);
		client_stamp(s, tls_rx_first(ssl), tls_rx_take(ssl), floor);
	}
	if (s->closing) {
		struct evbuffer *in = bufferevent_get_input(bev);
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	client_process(s);
}

/* The timer while the request is on its way: first_byte counts from the
 * request's last byte; before that, an upload only has to keep moving
 * (timeouts.client_body between two reads, as nginx's client_body_timeout). */
void timer_request(struct session *s)
{
	if (s->x.req_done)
		timer_set(s, T_FIRST_BYTE, s->x.route->timeouts.first_byte_us);
	else
		timer_lazy(s, T_BODY, s->x.route->timeouts.client_body_us);
}

/* May this request still go to another replica later? Then it is kept
 * (up to 1 MiB) as it is sent. */
int may_fail_over(const struct session *s)
{
	return attempt_more(&s->att, &s->x, FAILOVER_CONNECT);
}

/* The request stage of the proxy's overhead ends: the request went up,
 * or waits queued for its connection or its body. */
static void overhead_request(struct session *s, uint64_t now)
{
	vitals_request(&s->x.vitals, s->x.vitals.ovh_from, now);
	s->x.vitals.ovh_from = 0;
}

/* Expect: 100-continue, with the body still to come: tokentap answers it
 * itself as it starts reading the body (as nginx does; an HTTP/1.0 client
 * gets no 1xx), and the backend is not asked. Forwarded, it left the
 * client waiting for a 100 from a backend that does not send one, and
 * over a pooled connection for one that does (the head waits there for
 * the first body bytes). */
static int answer_continue(struct session *s)
{
	if (evbuffer_get_length(bufferevent_get_input(s->bev)) != 0 ||
	    !exchange_continue(&s->x, bufferevent_get_output(s->bev)))
		return 0;
	return client_flush(s);
}

static int request_head(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);
	struct exchange_verdict v;
	struct http_head rq;
	size_t head_len;
	int r;

	if (s->scan_pos == 0)
		s->x.bytes_in += exchange_skip_blank(in);
	r = exchange_find_head(in, &s->scan_pos, s->x.conf->max_header_bytes,
	    &head_len);
	if (r == -2)
		return respond_error(s, 400, "bad_request",
		    "bare CR in the request head", METER_END_REJECTED);
	if (r < 0)
		return respond_error(s, 431, "request_header_too_large",
		    "request head exceeds limits.max_header_bytes", METER_END_REJECTED);
	if (exchange_request_line(&s->x, in, &v) < 0)
		return respond(s, &v);
	if (r == 0)
		return 0;
	/* the request stage of the proxy's overhead starts: the head is here */
	s->x.vitals.ovh_from = request_read_at(s);
	if (exchange_request_head(&s->x, in, head_len, &s->loop->rng, &rq, &v) < 0)
		return respond(s, &v);
	/* replicas of several URLs each get a head of their own */
	if (s->x.route->n_upstreams > 1)
		exchange_keep_head(&s->x, &rq, in, head_len);
	if (!s->x.req_done && s->x.route->request_buffering)
		return hold_request(s, &rq, head_len);
	if (dispatch(s, 0) < 0)
		return -1;
	exchange_write_request(&s->x, &rq, &s->att.rep->target,
	    bufferevent_get_output(s->up->bev), s->proto, s->up->reused || may_fail_over(s));
	evbuffer_drain(in, head_len);
	if (s->x.req_done) {
		s->x.meter.t_req = request_read_at(s);
		s->cs = C_WAIT;
	} else {
		/* its body is the client's to send: the head waits queued */
		overhead_request(s, util_now_us());
		s->cs = C_BODY;
		return answer_continue(s);
	}
	return 0;
}

/* The whole request has left (at: the clock before the write that sent
 * its end, 0 for now): the first-byte timeout starts. */
void request_sent(struct session *s, uint64_t at)
{
	if (s->x.req_done && !s->req_sent) {
		s->req_sent = 1;
		s->x.meter.t_sent = at != 0 ? at : util_now_us();
		if (s->us == U_HEAD)
			timer_set(s, T_FIRST_BYTE, s->x.route->timeouts.first_byte_us);
	}
}

/* Sends the request bytes at hand now; what is left, the bufferevent
 * sends, and up_write follows. The request's end is timed before the
 * write that carries it, not after: on loopback the bytes are in the
 * backend's socket within the call, and the call's return is where a
 * busy host preempts the sender (the write wakes the reader), so a clock
 * read after it was late by a time slice now and then (1 to 42 ms at
 * 1,000 streams in make bench: a send phase that long, the head's and
 * the first event's as much too short). */
void request_flush(struct session *s)
{
	uint64_t before = s->x.req_done && !s->req_sent ? util_now_us() : 0;

	if (s->up != NULL && upstream_flush(s->up) == 0)
		request_sent(s, before);
	if (s->x.vitals.ovh_from != 0)
		overhead_request(s, util_now_us());
}

/* request_buffering: the request is held (its upstream head first, then
 * its body as it arrives) and no upstream connection is taken until the
 * body is whole, so slow uploads cost the backend nothing. */
static int hold_request(struct session *s, const struct http_head *rq,
    size_t head_len)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);

	/* the upload is the client's time: the stage restarts with the body */
	s->x.vitals.ovh_from = 0;
	if (bodybuf_open(&s->held) < 0)
		return respond_error(s, 503, "overloaded",
		    "cannot hold the request body", METER_END_REJECTED);
	s->x.buffered = 1;
	/* the head waits for its replica when replicas differ in host or path */
	if (s->x.head_copy == NULL)
		exchange_write_request(&s->x, rq, &s->x.route->upstreams[0], s->held.mem,
		    s->proto, 0);
	evbuffer_drain(in, head_len);
	s->cs = C_BODY;
	timer_request(s);
	return answer_continue(s);
}

/* The held request is whole: now an upstream connection, and all of it at
 * once (kept for one retry when it stayed in memory). */
static int send_held(struct session *s)
{
	struct evbuffer *out;
	int spilled = bodybuf_spilled(&s->held);

	if (dispatch(s, 0) < 0)
		return -1;
	out = bufferevent_get_output(s->up->bev);
	if (s->x.head_copy != NULL)
		exchange_write_kept(&s->x, &s->att.rep->target, s->proto, out);
	if (bodybuf_send(&s->held, out) < 0)
		return respond_error(s, 503, "overloaded",
		    "cannot send the request body", METER_END_REJECTED);
	if ((s->up->reused || may_fail_over(s)) && !spilled)
		exchange_keep_request(&s->x, out);
	bodybuf_free(&s->held);
	return 0;
}

/* A held request's body, as it arrives. */
static int hold_body(struct session *s)
{
	struct exchange_verdict v;

	if (exchange_request_body(&s->x, bufferevent_get_input(s->bev), s->held.mem,
	    &v) < 0)
		return respond(s, &v);
	/* (a body whole now goes as it is) */
	if (!s->x.req_done && bodybuf_settle(&s->held, s->x.conf->request_buffers) < 0)
		return respond_error(s, 503, "overloaded",
		    "cannot hold the request body", METER_END_REJECTED);
	s->last_progress = util_now_us();
	if (!s->x.req_done)
		return 0;
	s->x.meter.t_req = s->x.vitals.ovh_from = request_read_at(s);
	s->cs = C_WAIT;
	return send_held(s);
}

/* Moves request body bytes to the upstream as the exchange frames them. */
static int request_body(struct session *s)
{
	struct evbuffer *up;
	struct exchange_verdict v;

	if (s->x.buffered)
		return hold_body(s);
	up = bufferevent_get_output(s->up->bev);
	if (exchange_request_body(&s->x, bufferevent_get_input(s->bev), up, &v) < 0)
		return respond(s, &v);
	s->last_progress = util_now_us();
	if (s->x.req_done) {
		s->x.meter.t_req = request_read_at(s);
		s->cs = C_WAIT;
	}
	request_flush(s);
	if (evbuffer_get_length(up) > HIGH_MARK) {
		client_reading(s, 0);
		s->client_paused = 1;
	}
	return 0;
}

int client_process(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);

	for (;;) {
		size_t avail = evbuffer_get_length(in);
		switch (s->cs) {
		case C_IDLE:
			if (avail == 0)
				return 0;
			if (s->loop->draining)
				return client_finish(s);
			request_begin(s, s->loop->conf);
			timer_set(s, T_HEADER, s->x.conf->timeouts.client_header_us);
			break;
		case C_HEAD:
			if (request_head(s) < 0)
				return -1;
			if (s->cs == C_HEAD)
				return 0;
			break;
		case C_BODY:
			if (avail == 0)
				return 0;
			if (request_body(s) < 0)
				return -1;
			if (s->cs == C_BODY || s->client_paused)
				return 0;
			break;
		case C_TUNNEL:
			return tunnel_client(s);
		case C_WAIT:
			request_flush(s);
			/* Pipelined bytes wait for the response to end. */
			if (avail > PIPELINE_MAX)
				client_reading(s, 0);
			return 0;
		}
	}
}

void client_write(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct evbuffer *out = bufferevent_get_output(bev);

	s->last_progress = util_now_us();
	/* past the backlog, a paused upstream waits until its client took
	 * everything */
	if (s->up_paused && evbuffer_get_length(out) <= LOW_MARK &&
	    (evbuffer_get_length(out) == 0 || !over_backlog(s))) {
		s->up_paused = 0;
		meter_unhold(&s->x.meter, s->last_progress);
		bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
		if (s->up->direct)
			upstream_direct_read(s->up, 1);
		else
			bufferevent_enable(s->up->bev, EV_READ);
		exchange_resume(&s->x, util_now_us());
		if (upstream_input(s) < 0)
			return;
	}
	if (evbuffer_get_length(out) == 0) {
		if (!s->tls)
			bufferevent_disable(bev, EV_WRITE);
		if (s->closing)
			close_or_linger(s);
	}
}

void client_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;
	if (what & BEV_EVENT_CONNECTED)
		return;     /* a TLS listener's handshake completed */
	if (what & BEV_EVENT_TIMEOUT) {
		/* the client took nothing for timeouts.send: it is let go, and
		 * its buffer with it */
		log_limited(&gauge_log[GAUGE_LOG_CLIENT_TIMEOUT], LOG_LVL_INFO,
		    "client %s took no bytes for %llu ms, closing", s->client_ip,
		    (unsigned long long)(s->loop->conf->timeouts.send_us / 1000));
		if (s->x.conf != NULL)
			request_end(s, METER_END_CLIENT_TIMEOUT);
		session_close(s);
		return;
	}
	/* a TLS listener's client whose handshake OpenSSL refused (plain HTTP
	 * on the TLS port, no common version or cipher); one that only closed
	 * (a TCP health check: OpenSSL 3's unexpected EOF) is nothing to log */
	if (s->tls && (what & BEV_EVENT_ERROR)) {
		SSL *ssl = bufferevent_openssl_get_ssl(bev);
		unsigned long err = bufferevent_get_openssl_error(bev);
		char why[300];
		if (ssl != NULL && err != 0 && !SSL_is_init_finished(ssl) &&
		    !tls_error_is_eof(err)) {
			tls_error_text(ssl, err, why, sizeof why);
			log_limited(&gauge_log[GAUGE_LOG_CLIENT_TLS], LOG_LVL_INFO,
			    "client %s: %s", s->client_ip, why);
		}
	}
	/* EOF or error: whatever was in flight is a client abort. A client that
	 * half-closes after its request gets the same treatment as nginx gives
	 * it: the exchange cannot be delivered reliably. A partial request
	 * head is nothing to log. */
	if (s->x.conf != NULL && s->cs == C_HEAD && !s->x.head_parsed) {
		release_upstream(s);
		exchange_abandon(&s->x);
		attempt_end(&s->att);
	}
	if (s->cs == C_TUNNEL && s->x.conf != NULL) {
		/* the client ended the tunnel: a close, not an abort; what it
		 * sent last goes out before the upstream closes */
		if (s->up != NULL)
			upstream_flush(s->up);
		request_end(s, METER_END_COMPLETE);
	}
	session_close(s);
}

/* A plain client's bytes: one recvmsg(2) with the kernel's receive time,
 * into the worker's buffer and on to the bufferevent's input (a request's
 * bytes are few; a response's never pass here). */
void client_readable(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct evbuffer *in = bufferevent_get_input(s->bev);
	int64_t real = 0;
	/* the clock before the read: if it drains the socket, the next
	 * request's first byte came after this moment (its start's floor) */
	uint64_t before = util_now_us(), floor = s->rx_drained;
	ssize_t n = rxtime_recv(fd, s->loop->rbuf, LOOP_READ_MAX, 0,
	    loop_stamps(s->loop) ? &real : NULL);
	int err = errno;
	(void)what;

	if (n < LOOP_READ_MAX && !(n < 0 && err == EINTR))
		s->rx_drained = before;
	errno = err;
	if (n > 0) {
		client_stamp(s, 0, real, floor);
		evbuffer_unfreeze(in, 0);
		evbuffer_add(in, s->loop->rbuf, (size_t)n);
		evbuffer_freeze(in, 0);
		client_read(s->bev, s);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	/* as a socket bufferevent reports it: reading stops, then the event */
	client_reading(s, 0);
	client_event(s->bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF :
	    BEV_EVENT_ERROR), s);
}
