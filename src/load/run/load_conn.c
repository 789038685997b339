/* SPDX-License-Identifier: Apache-2.0 */
#include "load_conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <llhttp.h>

#include "load_gaps.h"
#include "load_lag.h"
#include "load_tls.h"
#include "util.h"

#define HNAME_MAX 32
#define HVALUE_MAX 256

struct load_conn {
	struct load_conn_ctx *ctx;
	void *arg;
	struct bufferevent *bev;     /* connects and writes */
	struct event *rev;           /* reads, once connected */
	struct event *timer;         /* the deadline, or a deferred failure */
	struct evbuffer *req;        /* kept for the one retry */
	llhttp_t parser;
	struct meter m;
	uint64_t now;                /* time of the read being parsed */
	int busy;
	int connected;
	int reused;                  /* the request went on a kept connection */
	int retried;
	int got_bytes;               /* some of the response has arrived */
	int complete;
	int connect_failed;          /* report a connect error from the timer */
	int cerr;                    /* a failed connect's errno */
	int tls_fail;                /* its TLS handshake failed */

	/* the response header being parsed */
	char hname[HNAME_MAX];
	size_t hname_len;
	int hname_done;
	char hvalue[HVALUE_MAX];
	size_t hvalue_len;
	char ctype[HVALUE_MAX];
	size_t ctype_len;
	int has_ctype;
	char cenc[32];             /* Content-Encoding */
	size_t cenc_len;

	struct load_gaps gaps;       /* the request's, bounded (load_gaps.h) */

	struct load_lag lag;
};

static void conn_read(struct bufferevent *bev, void *arg);
static void conn_readable(evutil_socket_t fd, short what, void *arg);
static void conn_event(struct bufferevent *bev, short what, void *arg);

/* ---- llhttp callbacks -------------------------------------------------- */

/* Appends a piece of a header's name or value to buf (cap bytes, *used
 * of them taken), cut at cap: one too long is none of those we look for. */
static int append_capped(char *buf, size_t cap, size_t *used, const char *at, size_t len)
{
	if (len > cap - *used)
		len = cap - *used;
	memcpy(buf + *used, at, len);
	*used += len;
	return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct load_conn *c = p->data;

	return append_capped(c->hname, sizeof(c->hname), &c->hname_len, at, len);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct load_conn *c = p->data;

	return append_capped(c->hvalue, sizeof(c->hvalue), &c->hvalue_len, at, len);
}

static int on_header_value_complete(llhttp_t *p)
{
	struct load_conn *c = p->data;
	size_t n = c->hvalue_len;

	while (n > 0 && (c->hvalue[n - 1] == ' ' || c->hvalue[n - 1] == '\t'))
		n--;
	if (util_ieq(c->hname, c->hname_len, "content-type")) {
		memcpy(c->ctype, c->hvalue, n);
		c->ctype_len = n;
		c->has_ctype = 1;
	} else if (util_ieq(c->hname, c->hname_len, "content-encoding")) {
		memcpy(c->cenc, c->hvalue, n < sizeof c->cenc ? n : sizeof c->cenc);
		c->cenc_len = n < sizeof c->cenc ? n : sizeof c->cenc;
	}
	c->hname_len = c->hvalue_len = 0;
	return 0;
}

static int on_headers_complete(llhttp_t *p)
{
	struct load_conn *c = p->data;

	meter_response_head(&c->m, p->status_code,
	    c->has_ctype ? c->ctype : NULL, c->ctype_len,
	    c->cenc_len ? c->cenc : NULL, c->cenc_len,
	    c->ctx->max_event_bytes, c->now);
	return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
	struct load_conn *c = p->data;

	meter_body(&c->m, at, len, c->now);
	if (c->ctx->body != NULL)
		c->ctx->body(c->arg, at, len);
	if (c->ctx->lag != NULL)
		load_lag_feed(&c->lag, at, len, c->now);
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct load_conn *c = p->data;

	c->complete = 1;
	/* nothing may follow: requests are never pipelined */
	return HPE_PAUSED;
}

static const llhttp_settings_t res_settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- connection -------------------------------------------------------- */

static void itl_gap(void *arg, uint64_t gap_us)
{
	struct load_conn *c = arg;

	load_gaps_add(&c->gaps, gap_us);
}

static void lag_record(void *arg, uint64_t lag_us)
{
	struct load_conn *c = arg;

	loadstats_lag(c->ctx->lag, lag_us);
}

static void close_bev(struct load_conn *c)
{
	if (c->rev != NULL)
		event_free(c->rev);
	c->rev = NULL;
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	c->bev = NULL;
	c->connected = 0;
}

/* An https connection: libevent's OpenSSL bufferevent connects, then
 * shakes hands; TCP_NODELAY is set once connected (as tokentap's
 * upstreams do). */
static int open_tls(struct load_conn *c)
{
	struct load_conn_ctx *x = c->ctx;
	SSL *ssl = load_tls_ssl(x->tls);

	if (ssl == NULL)
		return -1;
	c->bev = bufferevent_openssl_socket_new(x->base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		SSL_free(ssl);
		return -1;
	}
	/* a server that closes without close_notify ends the response */
	bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	bufferevent_setcb(c->bev, conn_read, NULL, conn_event, c);
	if (bufferevent_enable(c->bev, EV_READ | EV_WRITE) < 0 ||
	    bufferevent_socket_connect(c->bev, (const struct sockaddr *)&x->addr,
	    x->addrlen) < 0) {
		close_bev(c);
		return -1;
	}
	x->opened++;
	return 0;
}

/* Opens a new connection with TCP_NODELAY set before connecting. */
static int open_bev(struct load_conn *c)
{
	struct load_conn_ctx *x = c->ctx;
	int fd, one = 1;

	if (x->tls != NULL)
		return open_tls(c);
	fd = socket(x->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->bev = bufferevent_socket_new(x->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		close(fd);
		return -1;
	}
	bufferevent_setcb(c->bev, conn_read, NULL, conn_event, c);
	if (bufferevent_enable(c->bev, EV_READ | EV_WRITE) < 0 ||
	    bufferevent_socket_connect(c->bev, (const struct sockaddr *)&x->addr,
	    x->addrlen) < 0) {
		close_bev(c);
		return -1;
	}
	x->opened++;
	return 0;
}

/* Ends the request and hands it over. Last thing any path does: the done
 * callback may start the next request on c. */
static void finish(struct load_conn *c, enum meter_end how)
{
	int keep = how == METER_END_COMPLETE && c->bev != NULL &&
	    llhttp_should_keep_alive(&c->parser);
	struct load_conn_end e;

	evtimer_del(c->timer);
	/* by now a TLS 1.3 server has sent its session ticket */
	if (c->ctx->tls != NULL && c->bev != NULL && how == METER_END_COMPLETE)
		load_tls_connected(c->ctx->tls, bufferevent_openssl_get_ssl(c->bev));
	meter_end(&c->m, util_now_us());
	if (keep)
		evbuffer_drain(bufferevent_get_input(c->bev),
		    evbuffer_get_length(bufferevent_get_input(c->bev)));
	else
		close_bev(c);
	c->busy = 0;
	e.itl = c->gaps.v;
	e.nitl = c->gaps.n;
	e.reused = c->reused;
	e.conn_errno = how == METER_END_CONNECT ? c->cerr : 0;
	e.tls_failed = how == METER_END_CONNECT && c->tls_fail;
	c->ctx->done(c->arg, c, &c->m, how, &e);
}

/* Sends the request on the kept connection, or a new one. Returns 0 or -1. */
static int send_request(struct load_conn *c)
{
	struct evbuffer *out;
	size_t len = evbuffer_get_length(c->req);

	c->reused = c->bev != NULL;
	if (c->reused)
		c->m.t_conn = util_now_us();
	else if (open_bev(c) < 0)
		return -1;
	out = bufferevent_get_output(c->bev);
	if (evbuffer_add(out, evbuffer_pullup(c->req, -1), len) < 0)
		return -1;
	llhttp_init(&c->parser, HTTP_RESPONSE, &res_settings);
	c->parser.data = c;
	c->hname_len = c->hvalue_len = c->ctype_len = 0;
	c->has_ctype = 0;
	c->cenc_len = 0;
	c->got_bytes = c->complete = 0;
	return 0;
}

static void conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct load_conn *c = arg;

	(void)fd;
	(void)what;
	if (!c->busy)
		return;
	/* a connect still pending at the deadline counts as a connect error */
	if (c->connect_failed || (c->bev != NULL && !c->connected)) {
		if (!c->connect_failed)
			c->cerr = ETIMEDOUT;
		close_bev(c);
		finish(c, METER_END_CONNECT);
		return;
	}
	finish(c, METER_END_TIMEOUT);
}

/* A connection that cannot even be started is reported from the loop, so
 * a caller that starts the next request from done cannot recurse. */
static void fail_later(struct load_conn *c)
{
	struct timeval now = {0, 0};

	if (c->cerr == 0)
		c->cerr = errno;
	close_bev(c);
	c->connect_failed = 1;
	evtimer_add(c->timer, &now);
}

/* Bytes of the response, timed as read now. */
static void feed(struct load_conn *c, const char *buf, size_t len)
{
	enum llhttp_errno e;

	if (!c->busy) {
		/* bytes nobody asked for: this connection cannot be trusted */
		close_bev(c);
		return;
	}
	c->now = util_now_us();
	c->got_bytes = 1;
	e = llhttp_execute(&c->parser, buf, len);
	if (e != HPE_OK && e != HPE_PAUSED) {
		finish(c, METER_END_CLOSED);
		return;
	}
	if (c->complete)
		finish(c, METER_END_COMPLETE);
}

/* Once connected, the socket is read directly: one recv(2) per readiness
 * into the loop's buffer, without libevent's FIONREAD ioctl and buffer
 * chain per read, so the client costs the machine less than what it loads. */
static void conn_readable(evutil_socket_t fd, short what, void *arg)
{
	struct load_conn *c = arg;
	ssize_t n = recv(fd, c->ctx->rbuf, sizeof c->ctx->rbuf, 0);
	(void)what;

	if (n > 0) {
		feed(c, c->ctx->rbuf, (size_t)n);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	conn_event(c->bev, BEV_EVENT_READING |
	    (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR), c);
}

/* Until connected, for https, or when the direct read event could not be
 * set up, the bufferevent reads; its input goes through the loop's buffer
 * until it is empty or the response ended (finish may have closed bev). */
static void conn_read(struct bufferevent *bev, void *arg)
{
	struct load_conn *c = arg;
	int n;

	while (c->bev == bev && (n = evbuffer_remove(bufferevent_get_input(bev),
	    c->ctx->rbuf, sizeof c->ctx->rbuf)) > 0)
		feed(c, c->ctx->rbuf, (size_t)n);
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct load_conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		c->connected = 1;
		if (c->m.t_conn == 0)
			c->m.t_conn = util_now_us();
		if (c->ctx->tls != NULL) {
			int one = 1;
			setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one,
			    sizeof(one));
			return;        /* OpenSSL reads: no direct recv(2) */
		}
		c->rev = event_new(c->ctx->base, bufferevent_getfd(bev),
		    EV_READ | EV_PERSIST, conn_readable, c);
		if (c->rev != NULL && event_add(c->rev, NULL) == 0)
			bufferevent_disable(bev, EV_READ);
		return;
	}
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	if (!c->busy) {
		close_bev(c);     /* the server closed an idle connection */
		return;
	}
	if (!c->connected) {
		c->cerr = EVUTIL_SOCKET_ERROR();
		if (c->ctx->tls != NULL) {
			SSL *ssl = bufferevent_openssl_get_ssl(bev);
			unsigned long oe = bufferevent_get_openssl_error(bev);
			/* a refused or unreachable TCP connect is no TLS failure */
			c->tls_fail = oe != 0 || (ssl != NULL &&
			    SSL_get_verify_result(ssl) != X509_V_OK) ||
			    (c->cerr != ECONNREFUSED && c->cerr != ETIMEDOUT &&
			    c->cerr != EHOSTUNREACH && c->cerr != ENETUNREACH);
			load_tls_failed(c->ctx->tls, ssl, oe);
		}
		close_bev(c);
		finish(c, METER_END_CONNECT);
		return;
	}
	/* a kept connection the server had already closed: one more try */
	if (c->reused && !c->got_bytes && !c->retried) {
		close_bev(c);
		c->retried = 1;
		if (send_request(c) < 0)
			fail_later(c);
		return;
	}
	c->now = util_now_us();
	/* a close-delimited body ends here (llhttp reports it as complete) */
	if (what & BEV_EVENT_EOF)
		llhttp_finish(&c->parser);
	if (c->complete) {
		close_bev(c);
		finish(c, METER_END_COMPLETE);
		return;
	}
	close_bev(c);
	finish(c, METER_END_CLOSED);
}

struct load_conn *load_conn_new(struct load_conn_ctx *ctx, void *arg)
{
	struct load_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->ctx = ctx;
	c->arg = arg;
	load_gaps_init(&c->gaps, 0x9a95u);
	c->timer = evtimer_new(ctx->base, conn_timer, c);
	c->req = evbuffer_new();
	if (c->timer == NULL || c->req == NULL) {
		load_conn_free(c);
		return NULL;
	}
	return c;
}

int load_conn_start(struct load_conn *c, uint64_t t0, uint64_t timeout_us,
    enum dialect_id dialect, struct evbuffer *req)
{
	uint64_t now = util_now_us(), deadline = t0 + timeout_us, left;
	struct timeval tv;

	if (c->busy)
		return -1;
	meter_free(&c->m);
	meter_init(&c->m, t0, dialect);
	c->m.itl_fn = itl_gap;
	c->m.itl_arg = c;
	load_gaps_reset(&c->gaps);
	load_lag_init(&c->lag, lag_record, c);
	c->busy = 1;
	c->retried = c->connect_failed = 0;
	c->cerr = c->tls_fail = 0;
	evbuffer_drain(c->req, evbuffer_get_length(c->req));
	evbuffer_add_buffer(c->req, req);
	left = deadline > now ? deadline - now : 0;
	tv.tv_sec = (time_t)(left / 1000000);
	tv.tv_usec = (suseconds_t)(left % 1000000);
	evtimer_add(c->timer, &tv);
	/* queued past its deadline: it times out without being sent */
	if (left == 0)
		return 0;
	if (send_request(c) < 0)
		fail_later(c);
	return 0;
}

void load_conn_free(struct load_conn *c)
{
	if (c == NULL)
		return;
	close_bev(c);
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->req != NULL)
		evbuffer_free(c->req);
	meter_free(&c->m);
	load_gaps_free(&c->gaps);
	free(c);
}
