/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection's I/O, its upstream side (the session: proxy.c; what
 * the three files share: proxy_int.h): an upstream connection taken for
 * the request, the response's head and body read and forwarded, the
 * upstream paused while the client lags; a tunnel after a 101; a pooled
 * connection that closed retried on a new one, and another replica tried
 * (failover.h) when an attempt fails or its first token is late
 * (firsttoken.c).
 *
 * A plain TCP upstream is read directly once connected: one recvmsg(2)
 * into the worker's buffer, with the kernel's receive time (rxtime.h); a
 * streaming body is parsed and sent to the client from there at once (only
 * what the client socket does not take is copied), anything else (a head,
 * a decoded body, a tunnel) goes through the bufferevent's input. A TLS
 * upstream's head is read by its bufferevent (its reads stamped by tls.c's
 * socket BIO); its streaming body the same way as a plain one's, by
 * up_readable through the same read (upstream_recv): the records one read
 * brought (OpenSSL's read-ahead), decrypted into the worker's buffer,
 * parsed and sent on from there. */
#include <errno.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "attempt.h"
#include "exchange.h"
#include "failover.h"
#include "firsttoken.h"
#include "vitals.h"
#include "log.h"
#include "net.h"
#include "gauge.h"
#include "tls.h"
#include "loop.h"
#include "proxy_int.h"
#include "upstream.h"
#include "util.h"

static void up_read(struct bufferevent *bev, void *arg);
static void up_write(struct bufferevent *bev, void *arg);
static void up_event(struct bufferevent *bev, short what, void *arg);
static void up_readable(evutil_socket_t fd, short what, void *arg);
static int upstream_closed(struct session *s, unsigned long tls_err, int err);
static int tunnel_up(struct session *s);
static int tunnel_start(struct session *s);
static int failover(struct session *s, enum failover_reason why, unsigned status);
static void first_token_late(evutil_socket_t fd, short what, void *arg);

/* ---- taking an upstream connection ------------------------------------ */

/* Takes an upstream connection for the request (fresh: never a pooled
 * one), to the replica of the attempt, picked first if there is none. A
 * connect refused at once moves on to the next replica while one may be
 * tried. -1: answered with a 502, the session may be gone. */
int dispatch(struct session *s, int fresh)
{
	struct upconn *u;

	for (;;) {
		if (s->att.rep == NULL && attempt_pick(&s->att, s->loop, &s->x) < 0)
			return respond_error(s, 502, "bad_gateway",
			    "no upstream replica to send the request to", METER_END_CONNECT);
		/* libevent may report a failed connect from inside the connect
		 * call; up_event then only notes it, and it is handled here. */
		s->dispatching = 1;
		s->connect_failed = 0;
		u = upstream_get(s->loop, s->x.route, s->att.rep, fresh, up_read, up_write,
		    up_event, s);
		s->dispatching = 0;
		if (u != NULL && s->connect_failed) {
			upstream_release(u, 0);
			u = NULL;
		}
		if (u != NULL)
			break;
		attempt_judge(&s->att, &s->x, 0);
		if (!attempt_more(&s->att, &s->x, FAILOVER_CONNECT))
			return respond_error(s, 502, "bad_gateway",
			    "cannot open a connection to the upstream", METER_END_CONNECT);
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_RETRY], LOG_LVL_INFO,
		    "request %s: upstream %s: connection refused, trying another replica",
		    s->x.request_id, s->att.rep->name);
		attempt_leave(&s->att, &s->x, FAILOVER_CONNECT, 0);
	}
	s->up = u;
	s->up_input = 0;
	s->us = U_CONNECT;
	firsttoken_arm(s, first_token_late);
	if (u->connected) {
		upstream_direct(u, up_readable, s);   /* plain TCP: read directly */
		s->x.meter.t_conn = util_now_us();
		s->x.meter.conn_reused = 1;
		s->us = U_HEAD;
		timer_request(s);
	} else {
		timer_set(s, T_CONNECT, s->x.route->timeouts.connect_us);
	}
	return 0;
}

/* ---- the response ------------------------------------------------------ */

/* The request is over and the connection carries on, or closes. */
static int next_request(struct session *s)
{
	s->cs = C_IDLE;
	s->us = U_NONE;
	if (s->loop->draining)
		return client_finish(s);
	/* the next read is the next request's first byte */
	s->rx_first = 0;
	if (s->tls)
		tls_rx_mark(bufferevent_openssl_get_ssl(s->bev));
	client_reading(s, 1);
	timer_set(s, T_KEEPALIVE, s->loop->conf->timeouts.idle_us);
	return client_process(s);
}

/* The response ended cleanly: account for it and carry on or close. A
 * backend that answered before the request body ended leaves the rest of
 * that body unread: it must not be read as the next request. */
static int response_done(struct session *s)
{
	int keep = s->x.keepalive && s->x.req_done && !s->closing;

	request_end(s, METER_END_COMPLETE);
	timer_set(s, T_NONE, 0);
	if (keep)
		return next_request(s);
	return client_finish(s);
}

/* ---- timeouts.first_token (firsttoken.c) --------------------------------- */

/* No token from this replica in time, and nothing reached the client: the
 * attempt is closed (the backend stops) and the next replica gets the
 * request; with none left, what was held goes on and the stream with it.
 * After the first token, the throughput probe's verdict: its tokens came
 * at least at health.throughput.min_rate, and the stream goes on; or not,
 * and the next replica gets it the same way. */
static void first_token_late(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	(void)fd;
	(void)what;

	s->ft_armed = 0;
	if (s->x.conf == NULL || s->forwarded)
		return;
	if (s->probing && s->x.meter.t_first_token != 0) {
		/* the throughput probe's verdict; slow with nowhere to go: kept */
		if (firsttoken_early(s))
			return;
		if (firsttoken_slow(s) && failover(s, FAILOVER_THROUGHPUT, 0) != 1)
			return;
		firsttoken_keep(s);
		client_flush(s);
		return;
	}
	log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_TIMEOUT], LOG_LVL_INFO,
	    "request %s: no token from upstream %s within timeouts.first_token",
	    s->x.request_id, s->att.rep->name);
	if (failover(s, FAILOVER_FIRST_TOKEN, 0) != 1)
		return;
	firsttoken_release(s);
	client_flush(s);
}

/* A status in retry_on: the request goes to the next replica. */
static int retry_status(struct session *s)
{
	int r = try_another(s, FAILOVER_STATUS, s->x.retry_status);
	if (r != 1)
		return r;
	/* the replicas changed meanwhile (a reload): none is left */
	return respond_error(s, 502, "bad_gateway",
	    "the upstream answered a status of retry_on and no other replica is left",
	    METER_END_MALFORMED);
}

/* A TLS upstream's streaming body is read by up_readable from here on,
 * the records of one read at a time (as a plain upstream's from its
 * connect); what its bufferevent read with the head goes first
 * (up_input). A decoded body stays with the bufferevent. */
static void tls_body_direct(struct session *s)
{
	if (upstream_is_tls(s->up) && !s->x.decode &&
	    upstream_direct_tls(s->up, up_readable, s) == 0)
		s->up_input = evbuffer_get_length(bufferevent_get_input(s->up->bev)) != 0;
}

static int response_head(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->up->bev);
	struct evbuffer *out;
	struct exchange_verdict v;
	size_t head_len;
	int r = exchange_find_head(in, &s->up_scan_pos, s->x.conf->max_header_bytes,
	    &head_len);

	if (r == 0)
		return 0;
	if (r < 0) {
		attempt_judge(&s->att, &s->x, 0);
		return respond_error(s, 502, "bad_gateway", r == -2 ?
		    "bare CR in the upstream response head" :
		    "upstream response head too large", METER_END_MALFORMED);
	}
	out = firsttoken_out(s);
	s->x.failover_ok = !s->forwarded && exchange_resendable(&s->x) &&
	    attempt_more(&s->att, &s->x, FAILOVER_STATUS);
	r = exchange_response_head(&s->x, in, head_len, out, s->loop->draining, &v);
	s->x.failover_ok = 0;
	if (r < 0) {
		attempt_judge(&s->att, &s->x, 0);
		return respond(s, &v);
	}
	s->up_scan_pos = 0;
	if (r == EXCHANGE_RETRY)
		return retry_status(s);
	if (out != s->hold || r != EXCHANGE_BODY)
		firsttoken_release(s);
	else
		firsttoken_check(s);
	/* a held stream is judged at its first token (firsttoken_check), or by
	 * missing it */
	if (r != EXCHANGE_INTERIM && s->hold == NULL)
		attempt_judge(&s->att, &s->x, !failover_unhealthy_status(s->x.status));
	if (out != s->hold)
		firsttoken_forwarded(s);
	if (r == EXCHANGE_INTERIM)
		return client_flush(s);
	if (r == EXCHANGE_TUNNEL)
		return tunnel_start(s);
	s->us = U_BODY;
	if (r == EXCHANGE_DONE) {
		if (client_flush(s) < 0)
			return -1;
		return response_done(s);
	}
	timer_idle(s);      /* a body follows */
	tls_body_direct(s);
	return 0;
}

static void deferred_pause(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	(void)fd;
	(void)what;
	if (s->up_paused && s->up != NULL)
		bufferevent_disable(s->up->bev, EV_READ);
}

/* Backpressure: stop reading the upstream until the client catches up.
 * An OpenSSL bufferevent drains the records OpenSSL already decrypted only
 * while reading stays enabled (libevent 2.1, #854): disabling it inside its
 * read callback would strand them until more bytes arrive. So a TLS
 * upstream is disabled just after the callback returns, and what it still
 * delivers waits in its input buffer. */
static void pause_upstream(struct session *s)
{
	s->up_paused = 1;
	meter_hold(&s->x.meter, util_now_us());
	bufferevent_setwatermark(s->bev, EV_WRITE, LOW_MARK, 0);
	bufferevent_enable(s->bev, EV_WRITE);
	if (s->up->direct) {
		upstream_direct_read(s->up, 0);
		return;
	}
	if (!upstream_is_tls(s->up)) {
		bufferevent_disable(s->up->bev, EV_READ);
		return;
	}
	if (s->defer_ev == NULL)
		s->defer_ev = event_new(s->loop->base, -1, 0, deferred_pause, s);
	if (s->defer_ev != NULL)
		event_active(s->defer_ev, EV_TIMEOUT, 1);
}

/* Do the clients together hold limits.client_backlog? */
int over_backlog(const struct session *s)
{
	return (uint64_t)atomic_load_explicit(&gauge_client_backlog,
	    memory_order_relaxed) > s->loop->conf->client_backlog;
}

/* Should the upstream wait for the client? When too much waits for this
 * one, or when all clients together hold limits.client_backlog and this
 * one holds any. */
static int backlogged(const struct session *s)
{
	size_t out = evbuffer_get_length(s->out);
	return out > HIGH_MARK || (out > 0 && over_backlog(s));
}

/* After a piece of the body went to the client (r: the parse's result):
 * end on a framing error, flush, end the exchange at the response's end,
 * or pause the upstream while the client lags. drained: the client's
 * output is known to be empty (the piece went out in one send), so there
 * is nothing to flush and no backlog to look at. */
static int body_forwarded(struct session *s, int r, int drained)
{
	if (r < 0) {
		request_end(s, METER_END_MALFORMED);
		return client_finish(s);
	}
	if (drained ? s->closing && close_or_linger(s) < 0 : client_flush(s) < 0)
		return -1;
	/* the proxy's own cost of this read: recv(2) (meter.now) to the
	 * client's send(2); the one clock read per read it adds */
	vitals_read(&s->x.vitals, util_now_us() - s->x.meter.now);
	if (s->x.res_done)
		return response_done(s);
	if (!drained && backlogged(s))
		pause_upstream(s);
	return 0;
}

/* Bytes for a client whose output is empty, written now: send(2), or one
 * SSL_write (all or nothing; tls_write_now says why not through the
 * bufferevent). How many went. */
static size_t client_send_now(struct session *s, const char *buf, size_t n)
{
	ssize_t w;

	if (s->tls)
		return tls_write_now(bufferevent_openssl_get_ssl(s->bev), buf, n);
	w = net_send(s->fd, buf, n, MSG_NOSIGNAL);
	return w > 0 ? (size_t)w : 0;
}

/* A piece of the body for the client: written now when nothing waits
 * before it, else (or what did not go) queued. 1: it all went. */
static int client_forward(struct session *s, const char *buf, size_t n)
{
	struct evbuffer *out = s->out;
	int tried = evbuffer_get_length(out) == 0;
	size_t sent = tried ? client_send_now(s, buf, n) : 0;

	if (sent == n)
		return 1;
	if (tried && s->tls)
		tls_queue(out, buf, n);      /* all or nothing: sent is 0 */
	else
		evbuffer_add(out, buf + sent, n - sent);
	return 0;
}

/* Forwards what the upstream sent: the same bytes, to the client, now. */
static int response_body(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->up->bev);
	struct evbuffer *out = bufferevent_get_output(s->bev);
	unsigned char *p;
	size_t used;
	int r, drained = 0;

	s->last_progress = s->x.meter.now;
	r = exchange_parse_body(&s->x, in, &used);
	if (s->x.decode) {
		evbuffer_drain(in, used);
	} else if (s->hold == NULL && s->tls && used > 0 && used <= TLS_WRITE_NOW_MAX &&
	    evbuffer_get_length(out) == 0 && (p = evbuffer_pullup(in, (ev_ssize_t)used))) {
		/* a TLS client, written as direct_body writes to it */
		drained = client_forward(s, (const char *)p, used);
		evbuffer_drain(in, used);
		s->x.bytes_out += used;
	} else {
		evbuffer_remove_buffer(in, s->hold != NULL ? s->hold : out, used);
		s->x.bytes_out += used;
	}
	if (s->hold != NULL)
		firsttoken_check(s);
	return body_forwarded(s, r, drained);
}

/* What waits in the upstream's input, read at meter.now (the read's; the
 * loop's now for the end of a TLS stream or for input left while the
 * client held it back). */
int upstream_input(struct session *s)
{
	struct evbuffer *in;

	if (s->up == NULL)
		return 0;
	in = bufferevent_get_input(s->up->bev);
	while (evbuffer_get_length(in) > 0 && !s->up_paused) {
		size_t before = evbuffer_get_length(in);
		int r;
		if (s->us == U_HEAD || s->us == U_CONNECT)
			r = response_head(s);
		else if (s->us == U_BODY)
			r = response_body(s);
		else if (s->us == U_TUNNEL)
			r = tunnel_up(s);
		else
			return 0;
		if (r < 0)
			return -1;
		if (s->up == NULL || evbuffer_get_length(in) == before)
			return 0;
	}
	return 0;
}

/* Bytes for the upstream's input, which then may hold some (up_input). A
 * socket bufferevent freezes its input's end so that only it adds there;
 * an OpenSSL one does not, and frozen, its own reads would fail (with no
 * word: the socket stays readable, the loop spins). */
static void up_buffer(struct session *s, const char *p, size_t n)
{
	struct evbuffer *in = bufferevent_get_input(s->up->bev);
	int frozen = !upstream_is_tls(s->up);

	if (frozen)
		evbuffer_unfreeze(in, 0);
	evbuffer_add(in, p, n);
	if (frozen)
		evbuffer_freeze(in, 0);
	s->up_input = 1;
}

/* The body of a streaming response, read by up_readable: parsed where it
 * was read and written to the client from there; copied to the client's
 * output buffer only when the socket does not take it all at once. */
static int direct_body(struct session *s, const char *buf, size_t n)
{
	size_t used;
	int r, drained = 0;

	s->last_progress = s->x.meter.now;
	r = exchange_parse_mem(&s->x, buf, n, &used);
	if (s->hold != NULL) {
		evbuffer_add(s->hold, buf, used);
		s->x.bytes_out += used;
		firsttoken_check(s);
	} else if (used > 0) {
		drained = client_forward(s, buf, used);
		s->x.bytes_out += used;
	}
	/* bytes past the response's end are not forwarded; kept in the input,
	 * they keep the connection out of the pool. (A socket bufferevent
	 * freezes its input's end so that only it adds there.) */
	if (used < n)
		up_buffer(s, buf + used, n - used);
	return body_forwarded(s, r, drained);
}

/* Bytes a direct read brought, in the worker's buffer: a streaming body
 * is forwarded from there; anything else goes through the bufferevent's
 * input (and while that holds bytes, so do these, after them). -1: the
 * session is gone. */
static int upstream_read(struct session *s, const char *buf, size_t n)
{
	if (s->us == U_BODY && !s->x.decode && !s->up_input)
		return direct_body(s, buf, n);
	up_buffer(s, buf, n);
	if (upstream_input(s) < 0)
		return -1;
	if (s->up != NULL)
		s->up_input = evbuffer_get_length(bufferevent_get_input(s->up->bev)) != 0;
	return 0;
}

/* Events a stream may send before its first token and keep its reads
 * first: a role event, pings, an Anthropic message's start events. A
 * stream past them that has still counted no token (a plain SSE feed, a
 * dialect that counts none) would otherwise stay first for its whole
 * life, and the urgent queue has no turn limit: it would starve the
 * worker's client side and timers. */
#define FIRST_TOKEN_DUE_EVENTS 32

/* Does the response still owe its first token (a stream's head came, or
 * is to come)? Its reads go first (read_order). */
static int first_token_due(const struct session *s)
{
	const struct meter *m = &s->x.meter;

	return s->us == U_HEAD || s->us == U_CONNECT || (s->us == U_BODY &&
	    m->stream && m->t_first_token == 0 && !s->x.res_done &&
	    !m->unmeasured && m->events < FIRST_TOKEN_DUE_EVENTS);
}

/* Is this normal read the LOOP_NORMAL_BURST-th of its loop turn? The
 * turn is told by libevent's time cache, set once a turn: a count kept
 * across turns asked the urgent set, and put each request's socket in it
 * (an epoll_ctl pair), in a worker whose turns were all short. */
static int long_turn(struct loop *l)
{
	struct timeval tv;

	event_base_gettimeofday_cached(l->base, &tv);
	if (tv.tv_sec != l->turn.tv_sec || tv.tv_usec != l->turn.tv_usec) {
		l->turn = tv;
		l->normal_reads = 0;
	}
	if (++l->normal_reads < LOOP_NORMAL_BURST)
		return 0;
	l->normal_reads = 0;
	return 1;
}

/* A direct read, plain or TLS alike (upstream_recv), into the worker's
 * buffer, with its receive time: no FIONREAD ioctl, no buffer chain
 * allocated per read (libevent's bufferevent does both). Plain: one
 * recvmsg(2) per readiness. TLS (a streaming body): the records one read
 * of the socket brought (read-ahead: all it had, up to OpenSSL's buffer;
 * libevent's bufferevent read each record's header and body apart, and
 * handed on a record or two at a time), decrypted one after another,
 * parsed and forwarded at once: a TLS client gets them in one SSL_write.
 * Bytes OpenSSL held from an earlier read (its buffer was full, or the
 * client held the stream back) came with that read, and keep its time
 * (meter.now). The read's end comes after its bytes: a close or an error
 * ends the body, a TLS one's at the loop's now (as up_event gave it), a
 * plain one's at the time of its last bytes (meter.now as it is). */
/*
 * The lines of the read's path that hang off pointers: the upstream
 * connection (its drain time, its priority) and the client's output
 * buffer (its length, before the send), asked for before the recv(2), so
 * they come in while the kernel copies the bytes instead of each stalling
 * the read when it is reached. At 1,000 streams a worker's connections are
 * far out of its caches (perf, pinned: up_readable's loads took as many
 * samples as all the rest of tokentap's code). Measured at 1,000 streams,
 * 7 runs each side by side: CPU per event 3.4 % lower. Prefetching the
 * session's own hot lines too (30 of them) cut user time a third but the
 * kernel's grew, for 75 instructions an event more; 5 of them gained
 * nothing over these 3.
 */
static inline void session_prefetch(const struct session *s)
{
	__builtin_prefetch(s->up);
	__builtin_prefetch((const char *)s->up + 64);
	__builtin_prefetch(s->out);
}

static void up_readable(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct upstream_rx r;
	struct loop *l = s->loop;
	(void)what;

	session_prefetch(s);

	/* a turn of many normal reads reads a first token that came meanwhile
	 * before it goes on (loop.h: urg_ep) */
	if (l->n_urgent > 0 && s->up->rd_prio == LOOP_NORMAL && long_turn(l))
		upstream_urgent_reads(l);
	/* past the backlog, what one read may leave waiting is small */
	upstream_recv(s->up, fd, s->loop->rbuf, over_backlog(s) ? LOOP_READ_SMALL :
	    LOOP_READ_MAX, loop_stamps(s->loop), &r);
	if (r.n > 0) {
		if (r.fresh)
			exchange_read(&s->x, &s->loop->clock, r.real, r.floor,
			    !upstream_is_tls(s->up) || r.whole);
		/* gone, or the response ended (its connection released) */
		if (upstream_read(s, s->loop->rbuf, r.n) < 0 || s->up == NULL)
			return;
		/* a tunnel (101) owes no first token: it waits its turn */
		upstream_read_urgent(s->up, first_token_due(s));
		if (s->us != U_BODY)
			return;
	}
	if (r.end == UPSTREAM_RX_MORE && !s->up_paused) {
		upstream_direct_more(s->up);
	} else if (r.end == UPSTREAM_RX_EOF || r.end == UPSTREAM_RX_ERROR) {
		if (upstream_is_tls(s->up))
			s->x.meter.now = util_now_us();
		upstream_closed(s, r.tls_err, r.sys);
	}
}

/* A TLS upstream's records, read by its bufferevent through tls.c's
 * stamped BIO. */
static void up_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	uint64_t floor;

	if (s->up == NULL)
		return;
	/* (OpenSSL may hold part of the next record: the read is not whole) */
	floor = ssl != NULL ? tls_rx_floor(ssl) : 0;
	exchange_read(&s->x, &s->loop->clock, ssl != NULL ? tls_rx_take(ssl) : 0,
	    floor, 0);
	upstream_input(s);
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct evbuffer *out = bufferevent_get_output(bev);

	if (s->client_paused && evbuffer_get_length(out) <= LOW_MARK) {
		s->client_paused = 0;
		client_reading(s, 1);
		if (client_process(s) < 0)
			return;
	}
	if (evbuffer_get_length(out) == 0)
		request_sent(s, 0);
}

/* ---- a tunnel (a 101 to an upgrade: WebSocket) ------------------------ */

/* Upstream to client: the bytes as they come, with the response's own
 * backpressure (pause_upstream; client_write resumes). */
static int tunnel_up(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->up->bev);
	size_t n = evbuffer_get_length(in);

	s->last_progress = util_now_us();
	evbuffer_add_buffer(bufferevent_get_output(s->bev), in);
	s->x.bytes_out += n;
	if (client_flush(s) < 0)
		return -1;
	if (evbuffer_get_length(bufferevent_get_output(s->bev)) > HIGH_MARK)
		pause_upstream(s);
	return 0;
}

/* Client to upstream, likewise (up_write resumes a paused client). */
int tunnel_client(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);
	struct evbuffer *up = bufferevent_get_output(s->up->bev);
	size_t n = evbuffer_get_length(in);

	if (n == 0)
		return 0;
	s->last_progress = util_now_us();
	evbuffer_add_buffer(up, in);
	s->x.bytes_in += n;
	upstream_flush(s->up);
	if (evbuffer_get_length(up) > HIGH_MARK) {
		client_reading(s, 0);
		s->client_paused = 1;
	}
	return 0;
}

/* The 101 went to the client: from here the connection carries the new
 * protocol's bytes both ways until either side closes; both close then. */
static int tunnel_start(struct session *s)
{
	s->us = U_TUNNEL;
	s->cs = C_TUNNEL;
	/* no first token to come: its reads wait their turn (read_order) */
	upstream_read_urgent(s->up, 0);
	timer_idle(s);
	client_reading(s, 1);
	if (tunnel_up(s) < 0)
		return -1;
	return tunnel_client(s);
}

/* A reused connection that closed before answering: the request again, on
 * a new connection, when the exchange still allows it. 0: on its way;
 * 1: not possible; -1: the session is gone. */
static int retry(struct session *s, int unseen)
{
	struct evbuffer *copy = exchange_take_retry(&s->x, unseen);

	if (copy == NULL)
		return 1;
	log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_RETRY], LOG_LVL_INFO,
	    "request %s: pooled upstream connection closed, retrying on a new one",
	    s->x.request_id);
	upstream_release(s->up, 0);
	s->up = NULL;
	s->req_sent = 0;
	if (dispatch(s, 1) < 0) {
		evbuffer_free(copy);
		return -1;
	}
	evbuffer_add_buffer(bufferevent_get_output(s->up->bev), copy);
	evbuffer_free(copy);
	if (may_fail_over(s))
		exchange_keep_request(&s->x, bufferevent_get_output(s->up->bev));
	return 0;
}

/* The attempt in flight is left for the next replica, when that may be
 * (failover.h) and the request is at hand: the last attempt's unwritten
 * output, or the copy kept as it was sent. t0 stays the client's. 0: on
 * its way; 1: not possible, nothing changed; -1: the session is gone. */
static int failover(struct session *s, enum failover_reason why, unsigned status)
{
	struct evbuffer *unsent = NULL;
	int unwritten = s->up != NULL && !s->up->connected;

	if (s->forwarded || s->att.rep == NULL || !attempt_more(&s->att, &s->x, why))
		return 1;
	if (unwritten && (unsent = evbuffer_new()) != NULL)
		evbuffer_add_buffer(unsent, bufferevent_get_output(s->up->bev));
	else if (!exchange_resendable(&s->x))
		return 1;
	if (status != 0)
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_RETRY], LOG_LVL_INFO,
		    "request %s: upstream %s answered %u, trying another replica",
		    s->x.request_id, s->att.rep->name, status);
	else
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_RETRY], LOG_LVL_INFO,
		    "request %s: upstream %s: %s, trying another replica",
		    s->x.request_id, s->att.rep->name, failover_reason_name(why));
	attempt_judge(&s->att, &s->x, !failover_unhealthy(why, status));
	attempt_leave(&s->att, &s->x, why, status);
	firsttoken_drop(s);
	exchange_restart(&s->x);
	if (s->up != NULL)
		upstream_release(s->up, 0);   /* closed: the backend stops */
	s->up = NULL;
	s->req_sent = s->up_paused = 0;
	s->us = U_NONE;
	s->up_scan_pos = 0;
	timer_set(s, T_NONE, 0);
	if (dispatch(s, 0) < 0) {
		if (unsent != NULL)
			evbuffer_free(unsent);
		return -1;
	}
	if (exchange_redirect(&s->x, &s->att.rep->target, s->proto, unsent,
	    bufferevent_get_output(s->up->bev), may_fail_over(s)) < 0) {
		if (unsent != NULL)
			evbuffer_free(unsent);
		return respond_error(s, 502, "bad_gateway",
		    "the request could not be sent again", METER_END_CONNECT);
	}
	if (unsent != NULL)
		evbuffer_free(unsent);
	request_flush(s);
	return 0;
}

/* failover, and when there is none the attempt's failure is judged: 1
 * tells the caller to answer as without replicas. */
int try_another(struct session *s, enum failover_reason why, unsigned status)
{
	int r = failover(s, why, status);
	if (r == 1)
		attempt_judge(&s->att, &s->x, !failover_unhealthy(why, status));
	return r;
}

/* Did the backend close before any of the request reached it? Then it
 * cannot have acted on it, and even a POST may go again (RFC 9110 9.2.2:
 * "some means to detect that the original request was never applied").
 * The proof: its FIN came first (an orderly close, or EPIPE: a reset after
 * the FIN, which our bytes reaching its closed socket draw), and that FIN
 * acknowledged none of the request's bytes written (the peer's kernel had
 * none when its program closed: a FIN carries the acknowledgement of all
 * it received). The check before reuse misses this close when its FIN is
 * still on its way, which a loaded machine's deferred loopback delivery
 * makes last hundreds of ms (1 POST in 100 after a backend restart, with
 * two CPU hogs). */
static int request_unseen(struct session *s, int err)
{
	size_t left = evbuffer_get_length(bufferevent_get_output(s->up->bev));
	size_t written = exchange_written(&s->x, left);
	long unacked = upstream_unacked(s->up);

	return (err == 0 || err == EPIPE) && written > 0 && unacked >= 0 &&
	    (size_t)unacked == written;
}

/* The upstream closed (err: the socket's error, 0 for an orderly close):
 * a close-delimited body ends here; anything else ends too early. A reused
 * connection that closes before answering is retried once on a new one,
 * when the whole request is still at hand. */
static int upstream_closed(struct session *s, unsigned long tls_err, int err)
{
	int r;

	if (s->us == U_TUNNEL) {
		/* the backend ended the tunnel: what it sent reaches the client */
		request_end(s, METER_END_COMPLETE);
		return client_finish(s);
	}
	if (s->us == U_BODY) {
		if (exchange_parse_eof(&s->x) == 0)
			return response_done(s);
		request_end(s, METER_END_CLOSED);
		return client_finish(s);
	}
	/* TLS 1.3 finishes the client's handshake before the server has
	 * checked the client certificate: its refusal arrives as an alert here */
	if (upstream_is_tls(s->up) && tls_err != 0) {
		char why[300];
		upstream_tls_error(s->up, tls_err, why, sizeof why);
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_ERROR], LOG_LVL_WARN,
		    "request %s: upstream %s: %s", s->x.request_id, s->att.rep->name, why);
		if ((r = try_another(s, FAILOVER_CONNECT, 0)) != 1)
			return r;
		return respond_error(s, 502, "bad_gateway", why, METER_END_CONNECT);
	}
	if (s->up->reused) {
		/* a keep-alive race more likely than a sick replica: the same
		 * one again on a new connection first, and no verdict; the
		 * pooled connections as old as this one are not reused */
		upstream_stale(s->up, s->att.rep);
		if ((r = retry(s, request_unseen(s, err))) <= 0)
			return r;
		r = failover(s, FAILOVER_CLOSED, 0);
	} else {
		r = try_another(s, FAILOVER_CLOSED, 0);
	}
	if (r != 1)
		return r;
	log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_ERROR], LOG_LVL_WARN,
	    "request %s: upstream %s: %s before responding (a %s connection, "
	    "the request %s)", s->x.request_id, s->att.rep->name,
	    err != 0 ? evutil_socket_error_to_string(err) : "closed the connection",
	    s->up != NULL && s->up->reused ? "reused" : "new",
	    s->req_sent ? "sent" : "not all sent");
	return respond_error(s, 502, "bad_gateway",
	    "upstream closed the connection before responding", METER_END_MALFORMED);
}

/* The upstream could not be reached: why, in the log and in the 502. */
static void connect_failed(struct session *s, struct bufferevent *bev, short what)
{
	char why[512];

	upstream_connect_error(bev, what, s->att.rep->target.host, why, sizeof why);
	log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_ERROR], LOG_LVL_WARN,
	    "request %s: upstream %s: %s", s->x.request_id, s->att.rep->name, why);
	if (try_another(s, FAILOVER_CONNECT, 0) != 1)
		return;
	respond_error(s, 502, "bad_gateway", why, METER_END_CONNECT);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;
	unsigned long tls_err;
	int err;

	if (s->dispatching) {
		/* libevent defers CONNECTED, so only a failure comes here */
		s->connect_failed = !(what & BEV_EVENT_CONNECTED);
		return;
	}
	if (what & BEV_EVENT_CONNECTED) {
		SSL *ssl = bufferevent_openssl_get_ssl(bev);
		upstream_connected(s->up, loop_stamps(s->loop));
		upstream_direct(s->up, up_readable, s);   /* plain TCP: read directly */
		s->x.meter.t_conn = util_now_us();
		if (ssl != NULL && tls_handshake_start(ssl) != 0)
			s->x.meter.tls_us = s->x.meter.t_conn - tls_handshake_start(ssl);
		s->us = U_HEAD;
		timer_request(s);
		/* plain TCP: the request goes now, timed before its write
		 * (libevent would write it after this callback, and up_write
		 * time it after); TLS: the bufferevent writes, up_write times.
		 * What libevent's write would have told up_write, it is told
		 * here: a client paused while the connect took long resumes
		 * once what it sent has gone (libevent, finding the output
		 * empty, calls no write callback) */
		if (ssl == NULL) {
			request_flush(s);
			up_write(bev, s);
		}
		return;
	}
	if (s->us == U_CONNECT) {
		connect_failed(s, bev, what);
		return;
	}
	/* EOF or error: read what is left first */
	tls_err = upstream_is_tls(s->up) ? bufferevent_get_openssl_error(bev) : 0;
	s->x.meter.now = util_now_us();
	err = what & BEV_EVENT_ERROR ? EVUTIL_SOCKET_ERROR() : 0;
	if (upstream_input(s) < 0 || s->up == NULL)
		return;
	upstream_closed(s, tls_err, err);
}
