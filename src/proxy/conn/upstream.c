/* SPDX-License-Identifier: Apache-2.0 */
#include "upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <linux/sockios.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "gauge.h"
#include "jsonw.h"
#include "log.h"
#include "net.h"
#include "rxtime.h"
#include "tls.h"
#include "util.h"
#include "loop.h"

/* Backends close idle keep-alive connections after a few seconds (Node and
 * uvicorn: 5 s). Dropping ours earlier (timeouts.upstream_keepalive,
 * default 4 s) avoids sending a request on a connection the peer is
 * closing: a request that is not idempotent is not sent again. How many
 * idle ones a worker keeps for a replica is limits.upstream_keepalive (as
 * nginx's keepalive N): past it, a released connection is closed. */

TAILQ_HEAD(upconn_list, upconn);

struct upool {
	struct upool *next;
	struct loop *w;
	char host[256];            /* the replica's host: Host, and SNI by default */
	char addr[64];             /* the address it connects to; "": by name */
	unsigned port;
	int tls;
	char sni[256];
	SSL_SESSION *session;      /* resumed by the next new connection */
	struct upconn_list idle;
	size_t n_idle;
};

/* The name a TLS connection to rep sends and verifies: route tls.sni, else
 * the replica's host. */
static const char *peer_name(const struct conf_route *r, const struct replica *rep)
{
	return r->tls.sni ? r->tls.sni : rep->target.host;
}

/* Connections are pooled per replica address and TLS peer name: a
 * connection is only ever reused for the peer it was opened to. */
static struct upool *pool_for(struct loop *w, const struct conf_route *r,
    const struct replica *rep)
{
	struct upool *p;
	const char *sni = rep->target.tls ? peer_name(r, rep) : "";
	for (p = w->pools; p != NULL; p = p->next)
		if (p->port == rep->target.port && p->tls == rep->target.tls &&
		    strcmp(p->addr, rep->addr) == 0 &&
		    strcmp(p->host, rep->target.host) == 0 && strcmp(p->sni, sni) == 0)
			return p;
	p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->w = w;
	snprintf(p->host, sizeof p->host, "%s", rep->target.host);
	snprintf(p->addr, sizeof p->addr, "%s", rep->addr);
	p->port = rep->target.port;
	p->tls = rep->target.tls;
	snprintf(p->sni, sizeof p->sni, "%s", sni);
	TAILQ_INIT(&p->idle);
	p->next = w->pools;
	w->pools = p;
	return p;
}

/* The newest TLS session of the pool's connections, for the next
 * handshake (tls_session_fn; pools outlive their connections). */
static void keep_session(void *arg, SSL_SESSION *s)
{
	struct upool *p = arg;
	SSL_SESSION_free(p->session);
	p->session = s;
}

/* u in its loop's urgent list, or out of it (and its socket out of the
 * urgent epoll set). A new one goes first: the sockets not yet in the set
 * are the list's head, so that upstream_urgent_reads adds them and stops
 * at the first already in (not a walk of every request still waiting, on
 * every long turn). */
static void urgent_set(struct upconn *u, int on)
{
	struct loop *l = u->pool->w;

	if (u->urgent == on || u->rd_ev == NULL)
		return;
	u->urgent = on;
	if (on) {
		TAILQ_INSERT_HEAD(&l->urgent, u, ulink);
		l->n_urgent++;
		return;
	}
	TAILQ_REMOVE(&l->urgent, u, ulink);
	l->n_urgent--;
	if (u->in_urg)
		epoll_ctl(l->urg_ep, EPOLL_CTL_DEL, event_get_fd(u->rd_ev), NULL);
	u->in_urg = 0;
}

/* The most ready urgent sockets read at once. */
#define URGENT_BATCH 32

void upstream_urgent_reads(struct loop *l)
{
	struct epoll_event ev[URGENT_BATCH];
	struct upconn *u;
	int n;

	if (l->urg_ep < 0)
		return;
	/* those not yet in the set: the head (urgent_set); one that could not
	 * be added stays out, and before those added, to be tried again */
	TAILQ_FOREACH(u, &l->urgent, ulink) {
		struct epoll_event add = { .events = EPOLLIN, .data.ptr = u };
		if (u->in_urg)
			break;
		u->in_urg = epoll_ctl(l->urg_ep, EPOLL_CTL_ADD,
		    event_get_fd(u->rd_ev), &add) == 0;
	}
	n = epoll_wait(l->urg_ep, ev, URGENT_BATCH, 0);

	/* a read frees at most its own connection (its response ended), and
	 * each is in ev once: the others stay valid */
	for (int i = 0; i < n; i++) {
		struct event *e = ((struct upconn *)ev[i].data.ptr)->rd_ev;
		/* not while its reads are paused, or OpenSSL waits to write */
		if (event_pending(e, EV_READ, NULL))
			event_get_callback(e)(event_get_fd(e), EV_READ,
			    event_get_callback_arg(e));
	}
}

static void upconn_free(struct upconn *u)
{
	urgent_set(u, 0);
	if (u->rd_ev != NULL)
		event_free(u->rd_ev);
	if (u->bev != NULL)
		bufferevent_free(u->bev);
	free(u);
}

static void unpool(struct upconn *u)
{
	TAILQ_REMOVE(&u->pool->idle, u, link);
	u->pool->n_idle--;
}

/* A pooled connection must stay silent: data or EOF from it means the peer
 * is done with it (or broke the protocol), so it is closed. */
static void pooled_read(struct bufferevent *bev, void *arg)
{
	struct upconn *u = arg;
	(void)bev;
	unpool(u);
	upconn_free(u);
}

static void pooled_event(struct bufferevent *bev, short what, void *arg)
{
	(void)what;
	pooled_read(bev, arg);
}

/* The peer of a pooled connection closed or reset it (a restart, most
 * likely): connections to rep opened until now are not reused. */
static void mark_stale(struct replica *rep, uint64_t now)
{
	uint64_t was = atomic_load_explicit(&rep->stale_before, memory_order_relaxed);
	while (was < now && !atomic_compare_exchange_weak_explicit(&rep->stale_before,
	    &was, now, memory_order_relaxed, memory_order_relaxed))
		;
}

long upstream_unacked(const struct upconn *u)
{
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	int n;

	if (u->pool->tls || fd < 0 || ioctl(fd, SIOCOUTQ, &n) != 0)
		return -1;
	return n;
}

/* Bytes from the peer that no response took: in the input, or under TLS
 * still in OpenSSL's buffer (a record, or the start of one, that came
 * with the response's end). The next response on the connection would
 * begin with them. */
static int unread(struct upconn *u)
{
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);

	return evbuffer_get_length(bufferevent_get_input(u->bev)) != 0 ||
	    (ssl != NULL && SSL_has_pending(ssl));
}

/* Is a pooled connection still open, with nothing from its peer? The
 * pool's callbacks close one whose peer closed, reset or spoke, but only
 * when the loop gets to it: after a backend's restart its FIN (or RST)
 * may wait behind the very request that is about to use the connection,
 * and a POST is not sent twice. One non-blocking recv(2) MSG_PEEK tells
 * (about 1 µs, once per reuse; nothing per event). 1: open (and silent,
 * or a TLS peer's records: a late session ticket is no reason to drop it);
 * 0: closed or reset; -1: a plain peer spoke out of turn, or a TLS peer's
 * bytes wait in OpenSSL's buffer (unread: the start of a record, which no
 * read callback reports). */
static int pooled_state(struct upconn *u)
{
	char c;
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	ssize_t n;

	if (fd < 0)
		return 0;
	if (unread(u))
		return -1;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return u->pool->tls ? 1 : -1;
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 1 : 0;
}

struct upconn *upstream_get(struct loop *w, const struct conf_route *r,
    struct replica *rep, int fresh, bufferevent_data_cb readcb,
    bufferevent_data_cb writecb, bufferevent_event_cb eventcb, void *arg)
{
	struct upool *p = pool_for(w, r, rep);
	struct upconn *u;
	uint64_t now = util_now_us();
	uint64_t stale = atomic_load_explicit(&rep->stale_before, memory_order_relaxed);

	if (p == NULL)
		return NULL;
	/* newest first: the one the peer is least likely to have dropped; once
	 * one is found dead, the older ones go without a look */
	while (!fresh && (u = TAILQ_FIRST(&p->idle)) != NULL) {
		int state = 0;
		unpool(u);
		if (now - u->idle_since < u->keepalive_us && u->born > stale &&
		    (state = pooled_state(u)) == 0) {
			log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_RETRY], LOG_LVL_INFO,
			    "upstream %s: a pooled connection was closed by the peer; "
			    "not reusing the older ones", rep->name);
			mark_stale(rep, now);
			stale = now;
		}
		if (state == 1) {
			bufferevent_set_timeouts(u->bev, NULL, NULL);
			bufferevent_setcb(u->bev, readcb, writecb, eventcb, arg);
			/* plain TCP: the caller writes the request itself
			 * (upstream_flush) and arms EV_WRITE only for what the
			 * socket did not take */
			bufferevent_enable(u->bev, p->tls ? EV_READ | EV_WRITE : EV_READ);
			u->reused = 1;
			u->keepalive_us = r->timeouts.upstream_keepalive_us;
			return u;
		}
		upconn_free(u);
	}
	u = calloc(1, sizeof *u);
	if (u == NULL)
		return NULL;
	u->pool = p;
	u->tls = p->tls;
	u->keepalive_us = r->timeouts.upstream_keepalive_us;
	if (rep->target.tls) {
		SSL *ssl = tls_client_new(r, peer_name(r, rep), p->session,
		    keep_session, p);
		if (ssl == NULL)
			goto fail;
		u->bev = bufferevent_openssl_socket_new(w->base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (u->bev == NULL) {
			SSL_free(ssl);
			goto fail;
		}
		/* a peer that closes without close_notify ends the stream */
		bufferevent_openssl_set_allow_dirty_shutdown(u->bev, 1);
	} else {
		u->bev = bufferevent_socket_new(w->base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (u->bev == NULL)
		goto fail;
	bufferevent_set_max_single_read(u->bev, 65536);
	bufferevent_setcb(u->bev, readcb, writecb, eventcb, arg);
	bufferevent_enable(u->bev, EV_READ | EV_WRITE);
	if (pool_dial(u->bev, w->dns, rep) < 0)
		goto fail;
	return u;
fail:
	upconn_free(u);
	return NULL;
}

void upstream_connected(struct upconn *u, int stamps)
{
	int one = 1;
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);

	if (fd >= 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (stamps)
			rxtime_enable(fd);
		/* the records' reads stamped: libevent's socket BIO goes */
		if (ssl != NULL)
			tls_stamp_reads(ssl, fd, stamps);
	}
	u->connected = 1;
	u->born = util_now_us();
}

void upstream_stale(struct upconn *u, struct replica *rep)
{
	struct upconn *o, *next;

	if (!u->reused || rep == NULL)
		return;
	mark_stale(rep, util_now_us());
	/* this worker's idle ones now; the other workers' when they look */
	for (o = TAILQ_FIRST(&u->pool->idle); o != NULL; o = next) {
		next = TAILQ_NEXT(o, link);
		if (o->born <= rep->stale_before) {
			unpool(o);
			upconn_free(o);
		}
	}
}

void upstream_read_priority(struct upconn *u, int p)
{
	urgent_set(u, p == LOOP_URGENT);
	/* (refused while the event is active: the next read tries again) */
	if (u->rd_ev != NULL && event_priority_set(u->rd_ev, p) == 0)
		u->rd_prio = p;
}

/* rd_ev reads fd with cb from now on, and the bufferevent reads nothing;
 * urgent, as a connection taken for a request waits for its first token
 * (event_assign gave it the default priority). */
static int read_with(struct upconn *u, evutil_socket_t fd, event_callback_fn cb,
    void *arg)
{
	if (u->rd_ev == NULL)
		u->rd_ev = event_new(u->pool->w->base, fd, EV_READ | EV_PERSIST, cb, arg);
	else
		event_assign(u->rd_ev, u->pool->w->base, fd, EV_READ | EV_PERSIST, cb, arg);
	if (u->rd_ev == NULL)
		return -1;
	u->rd_prio = LOOP_NORMAL;
	u->rd_urgent = u->pool->w->conf->read_order == READ_ORDER_FIRST_TOKEN ?
	    LOOP_URGENT : LOOP_NORMAL;
	upstream_read_urgent(u, 1);
	if (event_add(u->rd_ev, NULL) != 0)
		return -1;
	bufferevent_disable(u->bev, EV_READ);
	u->direct = 1;
	return 0;
}

int upstream_direct(struct upconn *u, event_callback_fn cb, void *arg)
{
	evutil_socket_t fd = bufferevent_getfd(u->bev);

	if (u->pool->tls || fd < 0)
		return -1;
	return read_with(u, fd, cb, arg);
}

int upstream_direct_tls(struct upconn *u, event_callback_fn cb, void *arg)
{
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);

	if (ssl == NULL || fd < 0 || tls_read_ahead(ssl, 1) < 0)
		return -1;
	if (read_with(u, fd, cb, arg) < 0) {
		tls_read_ahead(ssl, 0);
		return -1;
	}
	upstream_direct_more(u);
	return 0;
}

/* The event rd_ev waits for: EV_READ, or EV_WRITE while OpenSSL must
 * write before it reads on. Added as it was (not while paused). */
static void wait_for(struct upconn *u, short what)
{
	int added = event_pending(u->rd_ev, EV_READ | EV_WRITE, NULL) != 0;

	if ((event_get_events(u->rd_ev) & (EV_READ | EV_WRITE)) == what)
		return;
	event_del(u->rd_ev);
	event_assign(u->rd_ev, u->pool->w->base, event_get_fd(u->rd_ev),
	    what | EV_PERSIST, event_get_callback(u->rd_ev),
	    event_get_callback_arg(u->rd_ev));
	event_priority_set(u->rd_ev, u->rd_prio);
	if (added)
		event_add(u->rd_ev, NULL);
}

/* A direct TLS connection's read: tls_read, and what rd_ev waits for. */
static void tls_recv(struct upconn *u, char *buf, size_t len, struct upstream_rx *r)
{
	struct tls_read t;

	tls_read(bufferevent_openssl_get_ssl(u->bev), buf, len, &t);
	if (t.end == TLS_READ_EOF || t.end == TLS_READ_ERROR)
		u->ended = 1;
	else
		wait_for(u, t.end == TLS_READ_WRITABLE ? EV_WRITE : EV_READ);
	r->n = t.n;
	r->fresh = t.fresh;
	r->real = t.real;
	r->floor = t.floor;
	r->whole = t.whole;
	r->end = t.end == TLS_READ_FULL ? UPSTREAM_RX_MORE :
	    t.end == TLS_READ_EOF ? UPSTREAM_RX_EOF :
	    t.end == TLS_READ_ERROR ? UPSTREAM_RX_ERROR : UPSTREAM_RX_WAIT;
	r->tls_err = t.err;
	r->sys = t.sys;
}

void upstream_recv(struct upconn *u, evutil_socket_t fd, char *buf, size_t len,
    int stamps, struct upstream_rx *r)
{
	uint64_t before;
	ssize_t n;

	if (u->pool->tls) {
		tls_recv(u, buf, len, r);
		return;
	}
	r->real = 0;
	r->floor = u->drained;
	/* a clock read before the read (vDSO, tens of ns): if it drains the
	 * socket, whatever comes later arrived after this moment */
	before = util_now_us();
	n = rxtime_recv(fd, buf, len, 0, stamps ? &r->real : NULL);
	r->n = n > 0 ? (size_t)n : 0;
	r->fresh = n > 0;
	r->tls_err = 0;
	r->sys = n < 0 ? errno : 0;
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR)))
		r->end = UPSTREAM_RX_WAIT;
	else
		r->end = n == 0 ? UPSTREAM_RX_EOF : UPSTREAM_RX_ERROR;
	if (r->sys != EINTR && (n < 0 || (size_t)n < len))
		u->drained = before;
}

void upstream_direct_more(struct upconn *u)
{
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);

	if (ssl != NULL && SSL_has_pending(ssl))
		event_active(u->rd_ev, EV_READ, 1);
}

int upstream_flush(struct upconn *u)
{
	if (evbuffer_get_length(bufferevent_get_output(u->bev)) == 0)
		return 0;
	/* TLS, or still connecting: the bufferevent writes (EV_WRITE is on) */
	if (u->pool->tls || !u->connected)
		return 1;
	if (net_write_now(u->bev) == 0)
		return 0;
	bufferevent_enable(u->bev, EV_WRITE);
	return 1;
}

void upstream_direct_read(struct upconn *u, int on)
{
	if (!on) {
		event_del(u->rd_ev);
		return;
	}
	event_add(u->rd_ev, NULL);
	upstream_direct_more(u);
}

void upstream_release(struct upconn *u, int reusable)
{
	struct upool *p = u->pool;
	struct timeval tv = { (time_t)(u->keepalive_us / 1000000),
	    (suseconds_t)(u->keepalive_us % 1000000) };
	int direct = u->direct;

	u->direct = 0;
	if (direct && p->tls)
		tls_read_ahead(bufferevent_openssl_get_ssl(u->bev), 0);
	if (!reusable || u->ended || !u->connected ||
	    p->n_idle >= p->w->conf->upstream_keepalive || p->w->draining ||
	    unread(u)) {
		upconn_free(u);
		return;
	}
	u->idle_since = util_now_us();
	bufferevent_setcb(u->bev, pooled_read, NULL, pooled_event, u);
	bufferevent_set_timeouts(u->bev, &tv, NULL);
	if (!p->tls)
		bufferevent_disable(u->bev, EV_WRITE);
	bufferevent_enable(u->bev, EV_READ);
	/* only now: the descriptor never leaves epoll's read set in between
	 * (an epoll_ctl pair less per request) */
	if (direct) {
		urgent_set(u, 0);
		event_del(u->rd_ev);
	}
	TAILQ_INSERT_HEAD(&p->idle, u, link);
	p->n_idle++;
}

void upstream_connect_error(struct bufferevent *bev, short what,
    const char *host, char *why, size_t len)
{
	int sock_err = EVUTIL_SOCKET_ERROR();
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long tls_err = ssl ? bufferevent_get_openssl_error(bev) : 0;
	int dns = bufferevent_socket_get_dns_error(bev);

	if (dns)
		snprintf(why, len, "cannot resolve %s: %s", host,
		    evutil_gai_strerror(dns));
	else if (ssl != NULL && (tls_err != 0 ||
	    SSL_get_verify_result(ssl) != X509_V_OK))
		tls_error_text(ssl, tls_err, why, len);
	else if (what & BEV_EVENT_EOF)
		snprintf(why, len, "connection closed during the TLS handshake");
	else
		snprintf(why, len, "cannot connect: %s",
		    evutil_socket_error_to_string(sock_err));
	ERR_clear_error();
	jsonw_sanitize(why, '\'');    /* it goes into a JSON string as it is */
}

void upstream_tls_error(struct upconn *u, unsigned long tls_err, char *why,
    size_t len)
{
	tls_error_text(bufferevent_openssl_get_ssl(u->bev), tls_err, why, len);
	ERR_clear_error();
	jsonw_sanitize(why, '\'');    /* it goes into a JSON string as it is */
}

void upstream_free_all(struct loop *w)
{
	struct upool *p, *next;
	struct upconn *u;
	for (p = w->pools; p != NULL; p = next) {
		next = p->next;
		while ((u = TAILQ_FIRST(&p->idle)) != NULL) {
			unpool(u);
			upconn_free(u);
		}
		SSL_SESSION_free(p->session);
		free(p);
	}
	w->pools = NULL;
}
