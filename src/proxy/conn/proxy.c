/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection's I/O. Flow of one request on it:
 *
 *   C_IDLE --first byte--> C_HEAD --head parsed--> C_BODY --body done--> C_WAIT
 *   upstream:   U_CONNECT --connected--> U_HEAD --head--> U_BODY --> done
 *
 * The HTTP of the request and its books are the exchange's (exchange.c, a
 * lower layer that answers with verdicts); here are the sockets, the
 * timers, the upstream connection and backpressure (the connection's
 * state: session.h; its response held back: firsttoken.c).
 *
 * One module in three files, sharing proxy_int.h. This one is the
 * session: accept, the request's lifecycle (begun, ended, its upstream
 * released), the timers, tokentap's own errors, teardown (a lingering
 * close) and the worker's calls (proxy.h). proxy_client.c is the client
 * side: the request's head and body, held or streamed, and backpressure
 * on the client. proxy_upstream.c is the upstream side: the connection
 * taken, the response's head and body, direct reads, the tunnel, retry
 * and failover. Every function that may free the session returns -1 when
 * it did; callers return at once. */
#include "proxy.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "attempt.h"
#include "bodybuf.h"
#include "exchange.h"
#include "firsttoken.h"
#include "log.h"
#include "net.h"
#include "gauge.h"
#include "tls.h"
#include "loop.h"
#include "proxy_int.h"
#include "upstream.h"
#include "util.h"

static void session_timer(evutil_socket_t fd, short what, void *arg);

/* ---- upstream connection ---------------------------------------------- */

void release_upstream(struct session *s)
{
	if (s->up == NULL)
		return;
	upstream_release(s->up, s->us == U_BODY && exchange_reusable(&s->x) &&
	    evbuffer_get_length(bufferevent_get_output(s->up->bev)) == 0);
	s->up = NULL;
}

/* Ends the request in flight: the upstream released (to the pool when it
 * can carry another request), the books closed. */
void request_end(struct session *s, enum meter_end how)
{
	/* an attempt not judged yet is by how it ended (a client that left,
	 * or was too slow, says nothing of the replica) */
	if (how != METER_END_CLIENT && how != METER_END_CLIENT_TIMEOUT &&
	    how != METER_END_REJECTED)
		attempt_judge(&s->att, &s->x, how == METER_END_COMPLETE);
	firsttoken_release(s);       /* what waited for a token goes on as it is */
	release_upstream(s);
	bodybuf_free(&s->held);
	exchange_end(&s->x, how);
	attempt_end(&s->att);  /* after the log line: it names the replicas */
}

/* ---- teardown ---------------------------------------------------------- */

int session_close(struct session *s)
{
	if (s->x.conf != NULL)
		request_end(s, METER_END_CLIENT);
	release_upstream(s);
	bodybuf_free(&s->held);
	attempt_end(&s->att);
	if (s->hold != NULL)
		evbuffer_free(s->hold);
	if (s->ft_timer != NULL)
		event_free(s->ft_timer);
	if (s->timer != NULL)
		event_free(s->timer);
	if (s->defer_ev != NULL)
		event_free(s->defer_ev);
	if (s->rd_ev != NULL)
		event_free(s->rd_ev);
	if (s->queued_cb != NULL) {
		struct evbuffer *out = bufferevent_get_output(s->bev);
		evbuffer_remove_cb_entry(out, s->queued_cb);
		atomic_fetch_sub_explicit(&gauge_client_backlog,
		    (long)evbuffer_get_length(out), memory_order_relaxed);
	}
	if (s->bev != NULL)
		bufferevent_free(s->bev);
	TAILQ_REMOVE(&s->loop->sessions, s, link);
	s->loop->n_sessions--;
	atomic_fetch_sub(&gauge_connections, 1);
	loop_idle_check(s->loop);
	free(s);
	return -1;
}

/* Closing a socket with unread input makes the kernel send RST, which can
 * destroy the response the client has not read yet. So when the request was
 * not read whole, shut down our side and discard what still arrives for a
 * moment before closing (nginx's lingering close). */
int close_or_linger(struct session *s)
{
	int unread = s->cs == C_HEAD || s->cs == C_BODY ||
	    evbuffer_get_length(bufferevent_get_input(s->bev)) > 0;

	/* a shutdown(2) under TLS would cut the record layer: just close */
	if (!unread || s->lingering || s->tls)
		return session_close(s);
	s->lingering = 1;
	shutdown(s->fd, SHUT_WR);
	evbuffer_drain(bufferevent_get_input(s->bev),
	    evbuffer_get_length(bufferevent_get_input(s->bev)));
	client_reading(s, 1);
	timer_set(s, T_LINGER, 2000000);   /* 2 s */
	return 0;
}

/* Writes what waits in the client's output now, in this loop turn; what the
 * socket does not take is left to the bufferevent. */
int client_flush(struct session *s)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);
	/* plain TCP: write now; TLS: the OpenSSL bufferevent writes as soon as
	 * bytes are added to its output */
	if (!s->tls && evbuffer_get_length(out) > 0)
		net_write_now(s->bev);
	if (evbuffer_get_length(out) > 0) {
		bufferevent_enable(s->bev, EV_WRITE);
		return 0;
	}
	if (s->closing)
		return close_or_linger(s);
	return 0;
}

/* The client connection ends once its output is flushed. */
int client_finish(struct session *s)
{
	s->closing = 1;
	return client_flush(s);
}

/* ---- timers ------------------------------------------------------------ */

/* The timer goes off us from now; its kind and length stay. */
static void timer_arm(struct session *s, uint64_t us, uint64_t now)
{
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
	s->tarmed = now + us;
	evtimer_add(s->timer, &tv);
}

/* A timer of this kind and length from now (tlen: what a lazy timer
 * measures the silence against, whenever it re-arms). Lazy, as nginx's
 * timers are: a timer already set to go off no later than the new
 * deadline stays as it is, and going off early it re-arms for the rest
 * (session_timer); T_NONE leaves it to go off for nothing. A request moves
 * through some seven kinds (head, body, connect, first byte, idle,
 * keep-alive), and libevent's heap is touched for about two of them. */
static void timer_due(struct session *s, enum session_timer kind, uint64_t us,
    uint64_t now)
{
	s->tkind = kind;
	s->tlen = us;
	s->tdue = now + us;
	if (kind == T_NONE || (s->tarmed != 0 && s->tarmed <= s->tdue))
		return;
	timer_arm(s, us, now);
}

void timer_set(struct session *s, enum session_timer kind, uint64_t us)
{
	timer_due(s, kind, us, kind == T_NONE ? 0 : util_now_us());
}

/* The idle and body timers: progress only stamps last_progress, and the
 * timer re-arms itself for the rest when it goes off early (timer_arm:
 * the length stays what was configured; re-armed for the rest each time,
 * it shrank and cut streams that were never idle that long). No timer
 * call per event. */
void timer_lazy(struct session *s, enum session_timer kind, uint64_t us)
{
	s->last_progress = util_now_us();
	timer_due(s, kind, us, s->last_progress);
}

void timer_idle(struct session *s)
{
	timer_lazy(s, T_IDLE, s->x.route->timeouts.idle_us);
}

/* ---- errors ------------------------------------------------------------ */

/* Answers the request with tokentap's own JSON error and ends the exchange.
 * After response bytes went out, it can only close the connection. Returns
 * -1: the caller must not touch the session again (it may be lingering). */
int respond_error(struct session *s, unsigned status, const char *type,
    const char *msg, enum meter_end how)
{
	if (!s->x.head_sent)
		exchange_error(&s->x, bufferevent_get_output(s->bev), status, type, msg);
	if (s->x.conf != NULL)
		request_end(s, how);
	client_finish(s);
	return -1;
}

int respond(struct session *s, const struct exchange_verdict *v)
{
	return respond_error(s, v->status, v->type, v->msg, v->end);
}

/* ---- accept ------------------------------------------------------------ */

/* Every byte added to or taken from a client's output buffer, in the
 * backlog (only a client that lags has any: what the socket takes at once
 * never enters the buffer). */
static void queued(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)b;
	(void)arg;
	atomic_fetch_add_explicit(&gauge_client_backlog,
	    (long)info->n_added - (long)info->n_deleted, memory_order_relaxed);
}

/* At max_connections: an idle keep-alive connection (or one that has not
 * sent its first byte) of this loop, the oldest, makes room for a new
 * client. 1 when one was closed. */
static int reclaim_idle(struct loop *l, const struct session *self)
{
	struct session *t;
	TAILQ_FOREACH(t, &l->sessions, link) {
		if (t != self && t->cs == C_IDLE && !t->closing && t->x.conf == NULL &&
		    evbuffer_get_length(bufferevent_get_output(t->bev)) == 0) {
			session_close(t);
			return 1;
		}
	}
	return 0;
}

/* The request in flight starts: its I/O state here, its books there. Its
 * first byte came with the first read since the connection went idle;
 * bytes that waited in the input since the request before (pipelined) are
 * taken as coming now, when tokentap takes them up. */
void request_begin(struct session *s, struct conf *conf)
{
	uint64_t t0 = s->rx_first != 0 ? s->rx_first : util_now_us();
	int kernel = s->rx_first != 0 && s->rx_first_kernel;

	s->cs = C_HEAD;
	s->us = U_NONE;
	s->scan_pos = s->up_scan_pos = 0;
	s->req_sent = s->client_paused = s->up_paused = 0;
	s->forwarded = s->ft_armed = 0;
	bodybuf_free(&s->held);
	exchange_begin(&s->x, conf, s->loop->stats, s->client_ip, t0);
	s->x.client_tls = s->tls;
	s->x.meter.stamps_kernel = (uint32_t)kernel;
	s->x.meter.stamps_loop = (uint32_t)!kernel;
	/* bytes pipelined came with an earlier read, whose floor is gone */
	s->x.meter.t0_floor = s->rx_first != 0 ? s->rx_floor : 0;
}

void proxy_accept(struct loop *w, evutil_socket_t fd,
    const struct sockaddr *sa, int socklen, SSL_CTX *tls)
{
	struct session *s;
	int one = 1;
	long active = atomic_fetch_add(&gauge_connections, 1) + 1;

	(void)socklen;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	s = calloc(1, sizeof *s);
	if (s == NULL) {
		atomic_fetch_sub(&gauge_connections, 1);
		evutil_closesocket(fd);
		return;
	}
	s->loop = w;
	s->fd = fd;
	bodybuf_clear(&s->held);
	net_peer_ip(sa, s->client_ip, sizeof s->client_ip);
	s->proto = "http";
	TAILQ_INSERT_TAIL(&w->sessions, s, link);
	w->n_sessions++;
	/* a reload may have asked for stamps the listener was made without */
	if (loop_stamps(w))
		rxtime_enable(fd);
	if (tls != NULL) {
		SSL *ssl = SSL_new(tls);
		s->tls = 1;
		s->proto = "https";
		/* the records' reads are stamped (tls.c's socket BIO) */
		s->bev = ssl == NULL || tls_stamp_reads(ssl, fd, loop_stamps(w)) < 0 ? NULL :
		    bufferevent_openssl_socket_new(w->base, fd, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
		if (s->bev == NULL)
			SSL_free(ssl);
		else
			bufferevent_openssl_set_allow_dirty_shutdown(s->bev, 1);
	} else {
		s->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
		s->rd_ev = event_new(w->base, fd, EV_READ | EV_PERSIST, client_readable, s);
	}
	s->timer = evtimer_new(w->base, session_timer, s);
	if (s->bev != NULL)
		s->out = bufferevent_get_output(s->bev);
	if (s->bev == NULL || s->timer == NULL || (!s->tls && s->rd_ev == NULL)) {
		if (s->bev == NULL)
			evutil_closesocket(fd);
		session_close(s);
		return;
	}
	bufferevent_set_max_single_read(s->bev, 65536);
	bufferevent_setcb(s->bev, client_read, client_write, client_event, s);
	s->queued_cb = evbuffer_add_cb(bufferevent_get_output(s->bev), queued, s);
	{
		/* a client that takes nothing for timeouts.send is let go */
		uint64_t us = w->conf->timeouts.send_us;
		struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
		bufferevent_set_timeouts(s->bev, NULL, &tv);
	}
	if (s->tls)
		bufferevent_enable(s->bev, EV_READ | EV_WRITE);
	client_reading(s, 1);
	/* A new bufferevent starts with writing enabled: adding output would
	 * then arm EPOLLOUT and write a loop turn later. Plain TCP clients are
	 * written directly (client_flush); the bufferevent only finishes
	 * partial writes. */
	if (!s->tls)
		bufferevent_disable(s->bev, EV_WRITE);
	if ((uint64_t)active > w->conf->max_connections && !reclaim_idle(w, s)) {
		/* Over the limit, and no idle connection to give up: answer 503
		 * without reading the request (the connection lingers, as after
		 * any unread request). */
		request_begin(s, w->conf);
		respond_error(s, 503, "overloaded", "too many connections",
		    METER_END_REJECTED);
		return;
	}
	/* the first request must come as soon as any request head must */
	timer_set(s, T_KEEPALIVE, w->conf->timeouts.client_header_us);
}

/* ---- timers ------------------------------------------------------------ */

/* Nothing moved for the timer's length: an upload that stopped is the
 * client's (408; an upstream it streamed to goes, its request cut),
 * unless tokentap stopped reading it because the backend took none of the
 * body; anything else is the upstream's. */
static void silence(struct session *s, uint64_t now)
{
	unsigned long long ms = (now - s->last_progress) / 1000;

	if (s->tkind == T_BODY && !s->client_paused) {
		log_limited(&gauge_log[GAUGE_LOG_CLIENT_TIMEOUT], LOG_LVL_INFO,
		    "request %s: no request body bytes for %llu ms, closing",
		    s->x.request_id, ms);
		respond_error(s, 408, "request_timeout", "request body not received "
		    "within timeouts.client_body", METER_END_CLIENT_TIMEOUT);
		return;
	}
	log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_TIMEOUT], LOG_LVL_INFO,
	    "request %s: upstream idle for %llu ms, closing", s->x.request_id, ms);
	respond_error(s, 504, "gateway_timeout", "upstream idle timeout",
	    METER_END_TIMEOUT);
}

static void session_timer(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	uint64_t now = util_now_us();
	uint64_t armed = s->tarmed;
	(void)fd;
	(void)what;

	s->tarmed = 0;
	if (s->tkind == T_NONE)
		return;
	/* armed for an earlier kind's deadline (timer_due): on to this one's
	 * (armed for this one, it is up: libevent's clock, not ours, says) */
	if (s->tkind != T_BODY && s->tkind != T_IDLE && armed < s->tdue &&
	    now < s->tdue) {
		timer_arm(s, s->tdue - now, now);
		return;
	}
	switch (s->tkind) {
	case T_NONE:
		return;
	case T_KEEPALIVE:
	case T_LINGER:
		session_close(s);
		return;
	case T_HEADER:
		respond_error(s, 408, "request_timeout",
		    "request head not received within timeouts.client_header",
		    METER_END_CLIENT_TIMEOUT);
		return;
	case T_CONNECT:
		if (try_another(s, FAILOVER_CONNECT_TIMEOUT, 0) != 1)
			return;
		respond_error(s, 504, "gateway_timeout",
		    "upstream connect timed out", METER_END_TIMEOUT);
		return;
	case T_FIRST_BYTE:
		if (try_another(s, FAILOVER_FIRST_BYTE, 0) != 1)
			return;
		respond_error(s, 504, "gateway_timeout",
		    "upstream response head not received within timeouts.first_byte",
		    METER_END_TIMEOUT);
		return;
	case T_BODY:
	case T_IDLE:
		/* the client takes nothing of what waits for it: the upstream is
		 * not read meanwhile, its silence is no fault (timeouts.send is
		 * the client's limit) */
		if (now - s->last_progress < s->tlen || s->up_paused) {
			timer_arm(s, s->up_paused ? s->tlen :
			    s->tlen - (now - s->last_progress), now);
			return;
		}
		silence(s, now);
		return;
	}
}

/* ---- the worker's calls ------------------------------------------------ */

void proxy_sweep(struct loop *w, uint64_t now)
{
	struct session *s, *next;

	for (s = TAILQ_FIRST(&w->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->us != U_BODY || s->x.conf == NULL || !exchange_sweep(&s->x, now))
			continue;
		/* timeouts.token_idle: heartbeats kept it busy, tokens did not;
		 * the upstream is closed so that the backend stops */
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_TIMEOUT], LOG_LVL_INFO,
		    "request %s: no token for %llu ms, closing",
		    s->x.request_id,
		    (unsigned long long)(s->x.route->timeouts.token_idle_us / 1000));
		respond_error(s, 504, "gateway_timeout", "no token within "
		    "timeouts.token_idle", METER_END_TIMEOUT);
	}
}

void proxy_drain(struct loop *w)
{
	struct session *s, *next;
	for (s = TAILQ_FIRST(&w->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->cs == C_IDLE && !s->closing)
			session_close(s);
	}
}

void proxy_close_all(struct loop *w)
{
	struct session *s;
	while ((s = TAILQ_FIRST(&w->sessions)) != NULL) {
		/* timeouts.shutdown ran out on it */
		if (s->x.conf != NULL)
			request_end(s, METER_END_TIMEOUT);
		session_close(s);
	}
}
