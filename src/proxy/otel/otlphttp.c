/* SPDX-License-Identifier: Apache-2.0 */
#include "otlphttp.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/ssl.h>

#include "json.h"
#include "jsonw.h"
#include "log.h"
#include "promout.h"
#include "rng.h"
#include "tls.h"
#include "url.h"
#include "util.h"

/* The failure lines of each signal: a few at once, then the count of
 * those left out (log.h). */
static struct log_limit traces_lines = LOG_LIMIT_INIT("otel_traces_export", 3, 60000);
static struct log_limit metrics_lines = LOG_LIMIT_INIT("otel_metrics_export", 3, 60000);

const char *const otlphttp_reason_names[OTLPHTTP_REASONS] = {
	"deadline", "too_large", "invalid", "connection", "status"
};

struct otlphttp {
	struct event_base *base;
	struct evdns_base *dns;
	const char *signal;
	/* the settings: copies, so a reload never pulls them from under an
	 * export in flight */
	char *url, *label;         /* label: the URL without its path's query */
	int https;
	char host[256];
	unsigned port;
	char *path, *host_header;
	struct conf_kv *headers;
	size_t n_headers;
	int gzip;
	uint64_t timeout_us;
	SSL_CTX *ssl;              /* a reference of the config's */

	struct evbuffer *body;     /* the export in flight or waiting to retry */
	uint64_t items;
	int body_json, body_gzip;  /* how body is encoded: its own, not h's */
	int attempts;
	int busy;                  /* a request in flight */
	int error;                 /* libevent's reason for the last failure, or -1 */
	struct evhttp_connection *conn, *spent;
	struct event *timer;       /* the retry, or freeing a spent connection */
	struct event *deadline;    /* the attempt in flight ends here */
	uint64_t rng;
	struct log_limit *lines;
	struct otlphttp_counts n;
};

static void on_timer(evutil_socket_t fd, short what, void *arg);
static void on_deadline(evutil_socket_t fd, short what, void *arg);

struct otlphttp *otlphttp_new(struct event_base *base, struct evdns_base *dns,
    const char *signal)
{
	struct otlphttp *h = calloc(1, sizeof *h);

	if (h == NULL)
		return NULL;
	h->base = base;
	h->dns = dns;
	h->signal = signal;
	h->rng = rng_seed();
	h->error = -1;
	h->lines = strcmp(signal, "traces") == 0 ? &traces_lines : &metrics_lines;
	h->timer = evtimer_new(base, on_timer, h);
	h->deadline = evtimer_new(base, on_deadline, h);
	if (h->timer == NULL || h->deadline == NULL) {
		if (h->timer != NULL)
			event_free(h->timer);
		if (h->deadline != NULL)
			event_free(h->deadline);
		free(h);
		return NULL;
	}
	return h;
}

static void free_headers(struct otlphttp *h)
{
	for (size_t i = 0; i < h->n_headers; i++) {
		free(h->headers[i].name);
		free(h->headers[i].value);
	}
	free(h->headers);
	h->headers = NULL;
	h->n_headers = 0;
}

static void free_settings(struct otlphttp *h)
{
	free(h->url);
	free(h->label);
	free(h->path);
	free(h->host_header);
	free_headers(h);
	if (h->ssl != NULL)
		SSL_CTX_free(h->ssl);
	h->url = h->label = h->path = h->host_header = NULL;
	h->ssl = NULL;
}

int otlphttp_configure(struct otlphttp *h, const struct conf *c, const char *url)
{
	const struct conf_otel *o = &c->otel;
	const struct conf_kv *hv;
	char auth[URL_HOST_LEN + 8];
	struct url u;
	size_t hn;
	int ok;

	free_settings(h);
	if (url == NULL || url_parse(url, &u) != NULL)
		return -1;
	h->url = strdup(url);
	h->https = u.tls;
	snprintf(h->host, sizeof h->host, "%s", u.host);
	h->port = u.port;
	url_authority(auth, sizeof auth, u.host, u.port, url_default_port(u.tls));
	h->host_header = strdup(auth);
	h->path = strdup(*u.path ? u.path : "/");
	url_authority(auth, sizeof auth, u.host, u.port, u.port_given ? 0 : u.port);
	if (asprintf(&h->label, "%s://%s%s", u.tls ? "https" : "http", auth, u.path) < 0)
		h->label = NULL;
	url_free(&u);
	h->gzip = o->gzip;
	h->timeout_us = o->timeout_us;
	if (h->https && o->tls_ctx != NULL && SSL_CTX_up_ref(o->tls_ctx) == 1)
		h->ssl = o->tls_ctx;
	ok = h->url && h->host_header && h->path && h->label && (!h->https || h->ssl);
	/* the signal's own variable's, else otel.headers (or the variable
	 * of both) */
	hv = o->headers;
	hn = o->n_headers;
	if (strcmp(h->signal, "traces") == 0 && o->n_traces_headers > 0) {
		hv = o->traces_headers;
		hn = o->n_traces_headers;
	} else if (strcmp(h->signal, "metrics") == 0 && o->n_metrics_headers > 0) {
		hv = o->metrics_headers;
		hn = o->n_metrics_headers;
	}
	if (ok && hn > 0) {
		h->headers = calloc(hn, sizeof *h->headers);
		ok = h->headers != NULL;
		for (size_t i = 0; ok && i < hn; i++) {
			h->headers[i].name = strdup(hv[i].name);
			h->headers[i].value = strdup(hv[i].value);
			h->n_headers = i + 1;
			ok = h->headers[i].name && h->headers[i].value;
		}
	}
	if (!ok)
		free_settings(h);
	return ok ? 0 : -1;
}

int otlphttp_idle(const struct otlphttp *h)
{
	return h->url != NULL && h->body == NULL;
}

const struct otlphttp_counts *otlphttp_counts(const struct otlphttp *h)
{
	return &h->n;
}

uint64_t otlphttp_in_flight(const struct otlphttp *h)
{
	return h->body != NULL ? h->items : 0;
}

/* A failure is logged at once, a few a minute at most, then with the
 * number not logged in between (log.h): a dead collector fills no log.
 * What the collector said is never in it, but its cleaned message. */
static void log_failure(struct otlphttp *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void log_failure(struct otlphttp *h, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_limited(h->lines, LOG_LVL_WARN, "otel: %s %s: %s", h->signal, h->label, msg);
}

static void done(struct otlphttp *h, int ok)
{
	if (ok) {
		h->n.exports_ok++;
	} else {
		h->n.exports_failed++;
		h->n.items_failed += h->items;
	}
	if (h->body != NULL)
		evbuffer_free(h->body);
	h->body = NULL;
	h->items = 0;
	h->attempts = 0;
}

/* ---- partial success ---------------------------------------------------------- */

static int pb_varint_at(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
	*v = 0;
	for (unsigned s = 0; *i < n && s < 64; s += 7) {
		uint8_t b = p[(*i)++];
		*v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* Export*ServiceResponse {1 partial_success {1 rejected, 2 error_message}}
 * in protobuf: 0, or -1 when it is not that. */
static int partial_pb(const uint8_t *p, size_t n, uint64_t *rejected, char *msg,
    size_t cap)
{
	size_t i = 0;

	while (i < n) {
		uint64_t key, len;
		if (pb_varint_at(p, n, &i, &key) < 0)
			return -1;
		if ((key & 7) == 0) {
			uint64_t v;
			if (pb_varint_at(p, n, &i, &v) < 0)
				return -1;
			if (key >> 3 == 1)
				*rejected = v;
			continue;
		}
		if ((key & 7) != 2 || pb_varint_at(p, n, &i, &len) < 0 || len > n - i)
			return -1;
		if (key >> 3 == 1 && partial_pb(p + i, (size_t)len, rejected, msg, cap) < 0)
			return -1;
		if (key >> 3 == 2)
			jsonw_clean(msg, cap, (const char *)p + i, (size_t)len);
		i += len;
	}
	return 0;
}

static int tok_is(const struct json *j, const jsmntok_t *t, const char *s)
{
	return t->type == JSMN_STRING && (size_t)(t->end - t->start) == strlen(s) &&
	    memcmp(j->s + t->start, s, strlen(s)) == 0;
}

/* {"partialSuccess": {"rejectedSpans" | "rejectedDataPoints": "N",
 * "errorMessage": "..."}} */
static void partial_json(const char *s, size_t n, uint64_t *rejected, char *msg,
    size_t cap)
{
	jsmntok_t tok[64];
	struct json j;
	int k = json_parse(&j, s, n, tok, 64), ps = -1;

	for (int i = 1; i + 1 < k; i++) {
		const jsmntok_t *t = &tok[i];
		if (t->parent == 0 && tok_is(&j, t, "partialSuccess"))
			ps = i + 1;
		if (ps < 0 || t->parent != ps || t->type != JSMN_STRING)
			continue;
		if (tok_is(&j, t, "rejectedSpans") || tok_is(&j, t, "rejectedDataPoints"))
			*rejected = strtoull(s + tok[i + 1].start, NULL, 10);
		else if (tok_is(&j, t, "errorMessage")) {
			char raw[512];
			json_unescape(raw, sizeof raw, s + tok[i + 1].start,
			    (size_t)(tok[i + 1].end - tok[i + 1].start));
			jsonw_clean(msg, cap, raw, strlen(raw));
		}
	}
}

static void partial_success(struct otlphttp *h, struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Content-Type");
	size_t n = in != NULL ? evbuffer_get_length(in) : 0;
	uint64_t rejected = 0;
	char msg[300] = "";
	const uint8_t *p;

	if (n == 0 || n > 65536 || (p = evbuffer_pullup(in, (ev_ssize_t)n)) == NULL)
		return;
	if (ct != NULL && strncasecmp(ct, "application/json", 16) == 0)
		partial_json((const char *)p, n, &rejected, msg, sizeof msg);
	else if (partial_pb(p, n, &rejected, msg, sizeof msg) < 0)
		return;            /* not a response OTLP defines: taken as success */
	if (rejected > h->items)
		rejected = h->items;
	h->n.items_rejected += rejected;
	if (rejected > 0 || msg[0] != '\0')
		log_failure(h, "partial success: %llu of %llu rejected%s%s",
		    (unsigned long long)rejected, (unsigned long long)h->items,
		    msg[0] ? ": " : "", msg);
}

/* ---- sending ------------------------------------------------------------------------- */

static void attempt(struct otlphttp *h);
static void arm(struct otlphttp *h, uint64_t us);

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct otlphttp *h = arg;
	(void)fd;
	(void)what;
	if (h->spent != NULL) {
		evhttp_connection_free(h->spent);
		h->spent = NULL;
	}
	if (!h->busy && h->body != NULL)
		attempt(h);
}

/* The attempt in flight took otel.timeout: it ends now, whatever the
 * collector is still sending. Freeing the connection frees the request
 * without calling on_response. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct otlphttp *h = arg;
	(void)fd;
	(void)what;
	if (!h->busy || h->conn == NULL)
		return;
	evhttp_connection_free(h->conn);
	h->conn = NULL;
	h->busy = 0;
	h->n.failures[OTLPHTTP_DEADLINE]++;
	log_failure(h, "no complete answer within otel.timeout (%.3g s) after %d "
	    "attempt(s); %llu item(s) dropped", (double)h->timeout_us / 1e6, h->attempts,
	    (unsigned long long)h->items);
	done(h, 0);
	arm(h, 0);
}

static void arm(struct otlphttp *h, uint64_t us)
{
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
	evtimer_add(h->timer, &tv);
}

int64_t otlphttp_retry_after(const char *v, int64_t now_s)
{
	struct tm tm;
	const char *end;
	char *e;
	long long s;

	while (v != NULL && (*v == ' ' || *v == '\t'))
		v++;
	if (v == NULL || *v == '\0')
		return -1;
	if (isdigit((unsigned char)*v)) {
		s = strtoll(v, &e, 10);
		while (*e == ' ' || *e == '\t')
			e++;
		return *e == '\0' && s >= 0 && s < 86400 * 365 ? (int64_t)s * 1000000 : -1;
	}
	memset(&tm, 0, sizeof tm);
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *end != '\0')
		return -1;
	s = (long long)timegm(&tm) - now_s;
	return s <= 0 ? 0 : (int64_t)s * 1000000;
}

int64_t otlphttp_retry_wait(const char *v, int64_t now_s)
{
	int64_t wait = otlphttp_retry_after(v, now_s);

	/* a collector asking for hours would hold the export, and the
	 * metrics intervals behind it, that long */
	return wait > (int64_t)OTLPHTTP_RETRY_AFTER_MAX_US ?
	    (int64_t)OTLPHTTP_RETRY_AFTER_MAX_US : wait;
}

/* The backoff before attempt k + 1 (k >= 1): 1 s, 2 s, 4 s ... with
 * jitter of up to a quarter, so tokentaps that failed together do not
 * come back together. */
static uint64_t backoff(struct otlphttp *h)
{
	uint64_t us = (uint64_t)OTLPHTTP_BACKOFF_US << (h->attempts - 1);
	if (us > OTLPHTTP_BACKOFF_MAX_US)
		us = OTLPHTTP_BACKOFF_MAX_US;
	return us + (uint64_t)(rng_unit(&h->rng) * (double)(us / 4));
}

/* What libevent says went wrong, before it calls on_response without
 * a request. */
static void on_error(enum evhttp_request_error error, void *arg)
{
	((struct otlphttp *)arg)->error = (int)error;
}

/* The failure of an attempt that got no answer: its reason and words. */
static enum otlphttp_reason no_answer(const struct otlphttp *h, const char **why)
{
	switch (h->error) {
	case EVREQ_HTTP_TIMEOUT:
		*why = "no complete answer within otel.timeout";
		return OTLPHTTP_DEADLINE;
	case EVREQ_HTTP_DATA_TOO_LONG:
		*why = "answer too large (a body over 64 KiB)";
		return OTLPHTTP_TOO_LARGE;
	case EVREQ_HTTP_INVALID_HEADER:
		*why = "not an HTTP answer, a malformed one, or a head over 64 KiB";
		return OTLPHTTP_INVALID;
	case EVREQ_HTTP_EOF:
		*why = "no response: closed before a complete answer, or TLS failed";
		return OTLPHTTP_CONNECTION;
	default:
		*why = "no response: refused, reset or TLS failed";
		return OTLPHTTP_CONNECTION;
	}
}

static void on_response(struct evhttp_request *req, void *arg)
{
	struct otlphttp *h = arg;
	int code = req != NULL ? evhttp_request_get_response_code(req) : 0;
	const char *why;
	int64_t wait;

	/* libevent still runs this connection's code after we return: it is
	 * freed later, from the timer. One spent before it that the timer has
	 * not freed yet (a new attempt began and ended first, on a busy host:
	 * seen leaked under ASan) is done with now. */
	if (h->conn != NULL) {
		if (h->spent != NULL)
			evhttp_connection_free(h->spent);
		h->spent = h->conn;
		h->conn = NULL;
	}
	h->busy = 0;
	evtimer_del(h->deadline);
	if (h->body == NULL)
		return;
	if (code >= 200 && code < 300) {
		partial_success(h, req);
		h->n.items_ok += h->items;
		done(h, 1);
		arm(h, 0);
		return;
	}
	if (code != 0)
		h->n.failures[OTLPHTTP_STATUS]++;
	/* the OTLP specification's retryable statuses, and only those */
	if ((code == 429 || code == 502 || code == 503 || code == 504) &&
	    h->attempts < OTLPHTTP_ATTEMPTS) {
		wait = otlphttp_retry_wait(evhttp_find_header(
		    evhttp_request_get_input_headers(req), "Retry-After"),
		    (int64_t)(util_wall_ms() / 1000));
		if (wait < 0)
			wait = (int64_t)backoff(h);
		h->n.retries++;
		arm(h, (uint64_t)wait);
		return;
	}
	if (code == 0) {
		h->n.failures[no_answer(h, &why)]++;
		log_failure(h, "%s after %d attempt(s); %llu item(s) dropped", why,
		    h->attempts, (unsigned long long)h->items);
	} else {
		log_failure(h, "HTTP %d after %d attempt(s); %llu item(s) dropped", code,
		    h->attempts, (unsigned long long)h->items);
	}
	done(h, 0);
	arm(h, 0);
}

static struct bufferevent *tls_bufferevent(struct otlphttp *h)
{
	struct bufferevent *bev;
	SSL *ssl = tls_client_ssl(h->ssl, h->host);

	if (ssl == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(h->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

/* One attempt on a fresh connection: exports are seconds apart, and a
 * new connection never inherits a broken one's state. */
static void attempt(struct otlphttp *h)
{
	struct bufferevent *bev = NULL;
	struct evhttp_request *req;
	struct evkeyvalq *hd;
	struct timeval tv = { (time_t)(h->timeout_us / 1000000),
		(suseconds_t)(h->timeout_us % 1000000) };

	h->attempts++;
	if (h->https && (bev = tls_bufferevent(h)) == NULL)
		goto fail;
	h->conn = evhttp_connection_base_bufferevent_new(h->base, h->dns, bev, h->host,
	    (ev_uint16_t)h->port);
	if (h->conn == NULL) {
		if (bev != NULL)
			bufferevent_free(bev);
		goto fail;
	}
	evhttp_connection_set_timeout_tv(h->conn, &tv);
	/* what a collector may send is bounded: the head and the body by
	 * libevent, and what waits unparsed (a line that never ends, a chunk
	 * size without its CRLF) by the buffer's high-water mark, past which
	 * nothing more is read until the deadline */
	evhttp_connection_set_max_headers_size(h->conn, OTLPHTTP_HEAD_MAX);
	evhttp_connection_set_max_body_size(h->conn, OTLPHTTP_BODY_MAX);
	bufferevent_setwatermark(evhttp_connection_get_bufferevent(h->conn), EV_READ, 0,
	    OTLPHTTP_HEAD_MAX + OTLPHTTP_BODY_MAX);
	if ((req = evhttp_request_new(on_response, h)) == NULL)
		goto fail;
	evhttp_request_set_error_cb(req, on_error);
	h->error = -1;
	hd = evhttp_request_get_output_headers(req);
	evhttp_add_header(hd, "Host", h->host_header);
	evhttp_add_header(hd, "Content-Type", h->body_json ? "application/json" :
	    "application/x-protobuf");
	if (h->body_gzip)
		evhttp_add_header(hd, "Content-Encoding", "gzip");
	evhttp_add_header(hd, "User-Agent", "tokentap/" TOKENTAP_VERSION);
	evhttp_add_header(hd, "Connection", "close");
	for (size_t i = 0; i < h->n_headers; i++) {
		evhttp_remove_header(hd, h->headers[i].name);
		evhttp_add_header(hd, h->headers[i].name, h->headers[i].value);
	}
	/* a copy: the body stays for a retry */
	evbuffer_add(evhttp_request_get_output_buffer(req),
	    evbuffer_pullup(h->body, -1), evbuffer_get_length(h->body));
	h->busy = 1;
	evtimer_add(h->deadline, &tv);
	/* on a failure libevent may already have called on_response */
	if (evhttp_make_request(h->conn, req, EVHTTP_REQ_POST, h->path) < 0 && h->busy)
		goto fail;
	return;
fail:
	h->busy = 0;
	evtimer_del(h->deadline);
	if (h->conn != NULL) {
		evhttp_connection_free(h->conn);
		h->conn = NULL;
	}
	log_failure(h, "cannot start a request; %llu item(s) dropped",
	    (unsigned long long)h->items);
	done(h, 0);
}

int otlphttp_send(struct otlphttp *h, struct evbuffer *body, uint64_t n, int json)
{
	struct evbuffer *b;

	if (!otlphttp_idle(h) || (b = evbuffer_new()) == NULL) {
		h->n.exports_failed++;
		h->n.items_failed += n;
		evbuffer_drain(body, evbuffer_get_length(body));
		return -1;
	}
	if (h->gzip ? promout_gzip(body, b) < 0 : evbuffer_add_buffer(b, body) < 0) {
		evbuffer_free(b);
		h->n.exports_failed++;
		h->n.items_failed += n;
		evbuffer_drain(body, evbuffer_get_length(body));
		return -1;
	}
	h->body = b;
	h->items = n;
	h->body_json = json;
	h->body_gzip = h->gzip;
	h->attempts = 0;
	if (!h->busy)
		attempt(h);
	return 0;
}

void otlphttp_free(struct otlphttp *h)
{
	if (h == NULL)
		return;
	/* frees the request in flight without calling on_response */
	if (h->conn != NULL)
		evhttp_connection_free(h->conn);
	if (h->spent != NULL)
		evhttp_connection_free(h->spent);
	if (h->timer != NULL)
		event_free(h->timer);
	if (h->deadline != NULL)
		event_free(h->deadline);
	if (h->body != NULL)
		evbuffer_free(h->body);
	free_settings(h);
	free(h);
}
