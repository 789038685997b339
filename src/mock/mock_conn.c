/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "util.h"

/* An idle keep-alive connection, or one that never finishes its request. */
#define IDLE_TIMEOUT_US 75000000u
/* How long a closing connection waits for the client to close too. */
#define LINGER_US 2000000u
/* Bytes a client may send ahead (pipelining) while a response runs. */
#define MAX_AHEAD (1u << 20)
#define MAX_URL 8192u

static int conn_parse(struct mock_conn *c);

static struct mock_conn *parser_conn(llhttp_t *p)
{
	return p->data;
}

static int on_message_begin(llhttp_t *p)
{
	struct mock_conn *c = parser_conn(p);

	mock_buf_reset(&c->url);
	mock_buf_free(&c->body);
	c->body_bytes = 0;
	c->hname_len = 0;
	c->hval_len = 0;
	c->params = c->w->cfg->defaults;
	c->error[0] = '\0';
	c->request_id[0] = '\0';
	c->expect_continue = 0;
	return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
	struct mock_conn *c = parser_conn(p);

	if (c->url.len + len > MAX_URL)
		return -1;
	mock_buf_add(&c->url, at, len);
	return 0;
}

static void append(char *dst, size_t cap, size_t *len, const char *at, size_t n)
{
	/* Past cap the length still grows, which marks the text as cut. */
	if (*len < cap)
		memcpy(dst + *len, at, n < cap - *len ? n : cap - *len);
	*len += n;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct mock_conn *c = parser_conn(p);

	append(c->hname, sizeof c->hname - 1, &c->hname_len, at, len);
	return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct mock_conn *c = parser_conn(p);

	append(c->hval, sizeof c->hval - 1, &c->hval_len, at, len);
	return 0;
}

/* X-Mock-* headers override the flags for this request; a bad one is kept
 * as the request's error, answered with 400 once the request is read. */
static int on_header_value_complete(llhttp_t *p)
{
	struct mock_conn *c = parser_conn(p);
	size_t nlen = c->hname_len;
	int idx;

	c->hname_len = 0;
	if (util_ieq(c->hname, nlen, "expect")) {
		c->expect_continue = util_ieq(c->hval, c->hval_len, "100-continue");
		goto done;
	}
	if (util_ieq(c->hname, nlen, "x-request-id") &&
	    c->hval_len < sizeof c->request_id) {
		memcpy(c->request_id, c->hval, c->hval_len);
		c->request_id[c->hval_len] = '\0';
		goto done;
	}
	if (nlen < 7 || nlen >= sizeof c->hname || !util_ieq(c->hname, 7, "x-mock-"))
		goto done;
	c->hname[nlen] = '\0';
	if (c->hval_len >= sizeof c->hval) {
		snprintf(c->error, sizeof c->error, "%s: value too long", c->hname);
		goto done;
	}
	c->hval[c->hval_len] = '\0';
	idx = mock_params_find(c->hname + 7, nlen - 7);
	if (idx < 0)
		snprintf(c->error, sizeof c->error, "unknown header %s", c->hname);
	else if (mock_params_set(&c->params, idx, c->hval) < 0)
		snprintf(c->error, sizeof c->error, "%s: invalid value \"%.64s\"",
		    c->hname, c->hval);
done:
	c->hval_len = 0;
	return 0;
}

/* Clients that ask (curl does above 1 KiB) wait up to a second for this
 * before sending the body: that second must not count as TTFT. */
static int on_headers_complete(llhttp_t *p)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct mock_conn *c = parser_conn(p);

	if (c->expect_continue && llhttp_get_http_minor(p) == 1 &&
	    (p->flags & (F_CONTENT_LENGTH | F_CHUNKED)) &&
	    !(p->flags & F_CONTENT_LENGTH && p->content_length == 0))
		mock_conn_send(c, cont, sizeof cont - 1);
	return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
	struct mock_conn *c = parser_conn(p);

	if (c->body.len < MOCK_BODY_KEEP)
		mock_buf_add(&c->body, at, len < MOCK_BODY_KEEP - c->body.len ?
		    len : MOCK_BODY_KEEP - c->body.len);
	c->body_bytes += len;
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct mock_conn *c = parser_conn(p);

	c->t_req_loop = util_now_us();
	c->t_req = c->rx_us != 0 && c->rx_us <= c->t_req_loop ? c->rx_us : c->t_req_loop;
	c->keep_alive = llhttp_should_keep_alive(p);
	c->http10 = llhttp_get_http_major(p) == 1 && llhttp_get_http_minor(p) == 0;
	c->method_get = llhttp_get_method(p) == HTTP_GET;
	/* One request at a time: the rest of the input waits in c->in. */
	return HPE_PAUSED;
}

static const llhttp_settings_t parser_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

void mock_conn_arm(struct mock_conn *c, uint64_t at_us)
{
	uint64_t now = util_now_us();
	uint64_t d = at_us > now ? at_us - now : 0;
	struct timeval tv = { (time_t)(d / 1000000u), (suseconds_t)(d % 1000000u) };

	event_add(c->timer, &tv);
}

void mock_conn_close(struct mock_conn *c)
{
	struct mock_worker *w = c->w;

	if (c->s.active)
		mock_stream_log(c);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (c->rev != NULL)
		event_free(c->rev);
	if (c->wev != NULL)
		event_free(c->wev);
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->fd >= 0)
		close(c->fd);
	if (c->in != NULL)
		evbuffer_free(c->in);
	if (c->out != NULL)
		evbuffer_free(c->out);
	mock_buf_free(&c->url);
	mock_buf_free(&c->body);
	free(c);
}

/* Ends a connection whose response is fully written. A client that sent
 * more than we read would get a reset from close(), which can destroy the
 * response's tail in flight: then our side shuts down and waits for the
 * client's FIN. Otherwise close() at once, which still delivers the data.
 * Returns 0, or -1 when c was freed. */
static int conn_end(struct mock_conn *c)
{
	if (evbuffer_get_length(c->in) == 0) {
		mock_conn_close(c);
		return -1;
	}
	c->state = MOCK_CONN_LINGERING;
	shutdown(c->fd, SHUT_WR);
	mock_conn_arm(c, util_now_us() + LINGER_US);
	return 0;
}

int mock_conn_send(struct mock_conn *c, const char *data, size_t len)
{
	if (evbuffer_get_length(c->out) == 0) {
		ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0) {
			data += n;
			len -= (size_t)n;
		}
		if (len == 0)
			return 0;
	}
	if (evbuffer_add(c->out, data, len) < 0)
		return -1;
	event_add(c->wev, NULL);
	return 0;
}

int mock_conn_finish(struct mock_conn *c)
{
	if (c->s.active)
		mock_stream_log(c);
	if (!c->keep_alive) {
		if (evbuffer_get_length(c->out) == 0)
			return conn_end(c);
		/* Closed once the tail is written, or when the client reads
		 * nothing for the idle timeout. */
		c->close_when_drained = 1;
		c->state = MOCK_CONN_LINGERING;
		mock_conn_arm(c, util_now_us() + IDLE_TIMEOUT_US);
		return 0;
	}
	c->state = MOCK_CONN_READING;
	mock_conn_arm(c, util_now_us() + IDLE_TIMEOUT_US);
	if (c->parsing)
		return 0;
	return conn_parse(c);
}

/* A request llhttp rejects: answered with 400 and the connection closed.
 * Returns 0, or -1 when c was freed. */
static int conn_bad_request(struct mock_conn *c, const char *why)
{
	static const char fmt[] = "HTTP/1.1 400 %s\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s";
	char body[160], msg[400];
	int n;

	snprintf(body, sizeof body, "{\"error\":{\"type\":\"invalid_request_error\","
	    "\"message\":\"malformed request: %.80s\"}}", why);
	n = snprintf(msg, sizeof msg, fmt, net_reason(400), strlen(body), body);
	c->keep_alive = 0;
	if (mock_conn_send(c, msg, (size_t)n) < 0) {
		mock_conn_close(c);
		return -1;
	}
	return mock_conn_finish(c);
}

/* Feeds buffered input to llhttp, one request at a time, until it runs
 * out of input or a response is under way. Returns 0, or -1 when c was
 * freed (c is never touched after a callee freed it). */
static int conn_parse(struct mock_conn *c)
{
	c->parsing = 1;
	while (c->state == MOCK_CONN_READING) {
		struct evbuffer_iovec v;
		llhttp_errno_t err;
		size_t used;

		if (evbuffer_peek(c->in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
			break;
		err = llhttp_execute(&c->parser, v.iov_base, v.iov_len);
		if (err == HPE_OK) {
			evbuffer_drain(c->in, v.iov_len);
			continue;
		}
		if (err != HPE_PAUSED) {
			c->parsing = 0;
			return conn_bad_request(c, llhttp_get_error_reason(&c->parser));
		}
		used = (size_t)(llhttp_get_error_pos(&c->parser) - (char *)v.iov_base);
		evbuffer_drain(c->in, used);
		llhttp_resume(&c->parser);
		c->state = MOCK_CONN_RESPONDING;
		if (mock_stream_start(c) < 0)
			return -1;
	}
	c->parsing = 0;
	return 0;
}

/* One read into c->in, with the kernel's receive time of its newest bytes
 * (c->rx_us): a request's time is when it reached this host, not when a
 * busy loop got to it, as tokentap stamps its own reads. */
static int read_stamped(struct mock_conn *c, evutil_socket_t fd)
{
	struct evbuffer_iovec v;
	int64_t real = 0;
	ssize_t n;

	if (evbuffer_reserve_space(c->in, 65536, &v, 1) < 1) {
		errno = ENOMEM;
		return -1;
	}
	n = rxtime_recv(fd, v.iov_base, v.iov_len < 65536 ? v.iov_len : 65536, 0, &real);
	if (n <= 0)
		return (int)n;
	v.iov_len = (size_t)n;
	if (evbuffer_commit_space(c->in, &v, 1) < 0) {
		errno = ENOMEM;
		return -1;
	}
	c->rx_us = rxtime_mono(&c->w->rx, real, util_now_us());
	return (int)n;
}

static void conn_read(evutil_socket_t fd, short what, void *arg)
{
	struct mock_conn *c = arg;
	int n;

	(void)what;
	n = read_stamped(c, fd);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		mock_conn_close(c);
		return;
	}
	if (c->state == MOCK_CONN_READING)
		conn_parse(c);
	else if (c->state == MOCK_CONN_LINGERING)
		evbuffer_drain(c->in, evbuffer_get_length(c->in));
	else if (evbuffer_get_length(c->in) > MAX_AHEAD)
		mock_conn_close(c);
}

static void conn_write(evutil_socket_t fd, short what, void *arg)
{
	struct mock_conn *c = arg;

	(void)what;
	if (evbuffer_write(c->out, fd) < 0 && errno != EAGAIN && errno != EINTR) {
		mock_conn_close(c);
		return;
	}
	if (evbuffer_get_length(c->out) > 0)
		return;
	event_del(c->wev);
	if (c->close_when_drained) {
		c->close_when_drained = 0;
		conn_end(c);
	}
}

static void conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mock_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == MOCK_CONN_RESPONDING)
		mock_stream_tick(c);
	else
		mock_conn_close(c);
}

int mock_conn_new(struct mock_worker *w, int fd)
{
	struct mock_conn *c = calloc(1, sizeof *c);

	if (c == NULL) {
		close(fd);
		return -1;
	}
	c->w = w;
	c->fd = fd;
	c->next = w->conns;
	if (w->conns != NULL)
		w->conns->prev = c;
	w->conns = c;
	c->rev = event_new(w->base, fd, EV_READ | EV_PERSIST, conn_read, c);
	c->wev = event_new(w->base, fd, EV_WRITE | EV_PERSIST, conn_write, c);
	c->timer = evtimer_new(w->base, conn_timer, c);
	c->in = evbuffer_new();
	c->out = evbuffer_new();
	if (c->rev == NULL || c->wev == NULL || c->timer == NULL ||
	    c->in == NULL || c->out == NULL || event_add(c->rev, NULL) < 0)
		goto fail;
	llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
	c->parser.data = c;
	c->state = MOCK_CONN_READING;
	mock_conn_arm(c, util_now_us() + IDLE_TIMEOUT_US);
	return 0;
fail:
	log_error("mock: out of memory for a connection");
	mock_conn_close(c);
	return -1;
}

void mock_conn_free_all(struct mock_worker *w)
{
	while (w->conns != NULL) {
		if (w->conns->s.active)
			w->conns->s.outcome = "shutdown";
		mock_conn_close(w->conns);
	}
}
