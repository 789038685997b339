#include "exchange.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "accesslog.h"
#include "httpcheck.h"
#include "log.h"
#include "route.h"
#include "stats.h"
#include "tenant.h"
#include "upstream.h"
#include "util.h"
#include "worker.h"

/* A reused connection's request is kept for one retry up to this size. */
#define RETRY_COPY_MAX (1024 * 1024)

static void stats_key_of(const struct session *s, struct stats_key *k);
static void on_itl(void *arg, uint64_t gap);

/* ---- llhttp callbacks -------------------------------------------------- */

static struct session *sess(llhttp_t *p)
{
	return p->data;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
	struct http_head *h = sess(p)->head;
	if (h == NULL)
		return 0;
	if (h->target == NULL)
		h->target = at;
	h->target_len = (size_t)(at + len - h->target);
	return 0;
}

/* With the whole head in one buffer llhttp reports each field in one piece;
 * a second piece would be contiguous with the first, so it extends it. */
static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct session *s = sess(p);
	struct http_head *h = s->head;
	struct http_header *last;

	if (h == NULL)
		return 0;     /* trailers: passed through, not interpreted */
	last = h->n > 0 ? &h->h[h->n - 1] : NULL;
	if (last != NULL && last->value == NULL &&
	    last->name + last->name_len == at) {
		last->name_len += len;
		return 0;
	}
	if (h->n == HTTPHEAD_MAX_HEADERS) {
		s->too_many_headers = 1;
		return HPE_USER;
	}
	last = &h->h[h->n++];
	last->name = at;
	last->name_len = len;
	last->value = NULL;
	last->value_len = 0;
	return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct http_head *h = sess(p)->head;
	struct http_header *last;

	if (h == NULL || h->n == 0)
		return 0;
	last = &h->h[h->n - 1];
	if (last->value == NULL)
		last->value = at;
	last->value_len = (size_t)(at + len - last->value);
	return 0;
}

static int on_headers_complete(llhttp_t *p)
{
	struct session *s = sess(p);
	/* a response to HEAD, a 1xx, 204 or 304 has no body whatever its
	 * header fields say (RFC 9112 §6.3); llhttp would read one by its
	 * Content-Length */
	if (p == &s->res && (s->is_head_req ||
	    httpcheck_bodiless_status(p->status_code)))
		return 1;
	return 0;
}

/* A request body's chunk: refused as soon as its size would pass the
 * limit, before any of it is forwarded. At the last chunk the parser
 * pauses, so that the trailer section that follows can be dropped. */
static int on_chunk_header(llhttp_t *p)
{
	struct session *s = sess(p);
	if (p != &s->req)
		return 0;
	if (p->content_length > s->conf->max_body_bytes - s->body_bytes) {
		s->body_too_large = 1;
		return HPE_USER;
	}
	if (p->content_length == 0) {
		s->req_trailers = 1;
		return HPE_PAUSED;
	}
	return 0;
}

static int on_req_body(llhttp_t *p, const char *at, size_t len)
{
	struct session *s = sess(p);
	s->body_bytes += len;
	if (!s->model_scan.found) {
		jsonscan_feed(&s->model_scan, at, len);
		if (s->model_scan.found)
			meter_offer_model(&s->meter, MODEL_REQUEST, s->model_scan.value,
			    s->model_scan.value_len);
	}
	return 0;
}

static int on_res_body(llhttp_t *p, const char *at, size_t len)
{
	struct session *s = sess(p);
	meter_body(&s->meter, at, len, s->meter.now);
	if (s->decode) {
		evbuffer_add(bufferevent_get_output(s->bev), at, len);
		s->bytes_out += len;
	}
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct session *s = sess(p);
	if (p == &s->req)
		s->req_done = 1;
	else
		s->res_done = 1;
	/* stop here: bytes after the message belong to the next one */
	return HPE_PAUSED;
}

static const llhttp_settings_t req_settings = {
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_chunk_header = on_chunk_header,
	.on_body = on_req_body,
	.on_message_complete = on_message_complete,
};

static const llhttp_settings_t res_settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_res_body,
	.on_message_complete = on_message_complete,
};

/* ---- heads ------------------------------------------------------------- */

int exchange_find_head(struct evbuffer *in, size_t *scan_pos, size_t max,
    size_t *head_len)
{
	size_t len = evbuffer_get_length(in);
	size_t lim = len < max ? len : max;
	const char *p;

	if (lim == 0)
		return 0;
	p = (const char *)evbuffer_pullup(in, (ev_ssize_t)lim);
	return httpcheck_find_head(p, len, scan_pos, max, head_len);
}

size_t exchange_skip_blank(struct evbuffer *in)
{
	size_t n, total = 0;
	do {
		size_t len = evbuffer_get_length(in);
		const char *p = (const char *)evbuffer_pullup(in,
		    (ev_ssize_t)(len < 256 ? len : 256));
		n = httpcheck_leading_blank(p, len < 256 ? len : 256);
		evbuffer_drain(in, n);
		total += n;
	} while (n == 256);
	return total;
}

int exchange_request_line(struct session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);
	size_t len = evbuffer_get_length(in);
	struct httpcheck_verdict v;
	const char *p, *nl;

	if (s->line_checked)
		return 0;
	if (len > s->conf->max_header_bytes)
		len = s->conf->max_header_bytes;
	p = (const char *)evbuffer_pullup(in, (ev_ssize_t)len);
	if (p == NULL || (nl = memchr(p, '\n', len)) == NULL)
		return 0;
	s->line_checked = 1;
	len = (size_t)(nl - p);
	if (len > 0 && p[len - 1] == '\r')
		len--;
	if (httpcheck_request_line(p, len, &v) == 0)
		return 0;
	return proxy_error(s, v.status, v.type, v.msg, "rejected");
}

/* Obsolete line folding (a header line starting with SP or HTAB): Debian's
 * llhttp 8.1 accepts it (CVE-2024-27982), so it is refused here. */
static int has_obs_fold(const char *p, size_t len)
{
	for (const char *nl = memchr(p, '\n', len); nl != NULL && nl + 1 < p + len;
	    nl = memchr(nl + 1, '\n', (size_t)(p + len - nl - 1)))
		if (nl[1] == ' ' || nl[1] == '\t')
			return 1;
	return 0;
}

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x * 0x2545F4914F6CDD1Dull;
}

/* The client's X-Request-Id when it is a sane token, else a new one. */
static void set_request_id(struct session *s, const struct http_head *rq)
{
	const struct http_header *h = route_find_header(rq->h, rq->n, "x-request-id");
	if (h != NULL && h->value_len > 0 && h->value_len <= SESSION_ID_MAX) {
		size_t i;
		for (i = 0; i < h->value_len; i++) {
			char c = h->value[i];
			if (!(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') &&
			    !(c >= 'A' && c <= 'Z') && c != '-' && c != '_' && c != '.')
				break;
		}
		if (i == h->value_len) {
			memcpy(s->request_id, h->value, h->value_len);
			s->request_id[h->value_len] = '\0';
			return;
		}
	}
	snprintf(s->request_id, sizeof s->request_id, "%016llx%016llx",
	    (unsigned long long)rng_next(&s->w->rng),
	    (unsigned long long)rng_next(&s->w->rng));
}

static int bad_request(struct session *s, const char *msg)
{
	return proxy_error(s, 400, "bad_request", msg, "rejected");
}

/* Copies what the access log needs out of the head before it is drained. */
static void keep_request_fields(struct session *s, const struct http_head *rq)
{
	size_t n = rq->method_len < sizeof s->method - 1 ? rq->method_len :
	    sizeof s->method - 1;
	memcpy(s->method, rq->method, n);
	s->method[n] = '\0';
	n = rq->target_len < SESSION_TARGET_MAX ? rq->target_len : SESSION_TARGET_MAX;
	memcpy(s->target, rq->target, n);
	s->target[n] = '\0';
	s->target_len = n;
}

static int check_request(struct session *s, struct http_head *rq)
{
	struct httpcheck_verdict v;

	if (httpcheck_request(rq, &v) < 0)
		return proxy_error(s, v.status, v.type, v.msg, "rejected");
	if ((s->req.flags & F_CONTENT_LENGTH) &&
	    s->req.content_length > s->conf->max_body_bytes)
		return proxy_error(s, 413, "request_too_large",
		    "request body exceeds limits.max_body_bytes", "rejected");
	return 0;
}

static void keep_copy(struct session *s, struct evbuffer *src, size_t n)
{
	struct evbuffer_iovec v[8];
	int k;
	size_t done = 0;

	if (s->req_copy == NULL)
		return;
	if (evbuffer_get_length(s->req_copy) + n > RETRY_COPY_MAX) {
		evbuffer_free(s->req_copy);
		s->req_copy = NULL;
		return;
	}
	k = evbuffer_peek(src, (ev_ssize_t)n, NULL, v, 8);
	for (int i = 0; i < k && i < 8 && done < n; i++) {
		size_t take = v[i].iov_len < n - done ? v[i].iov_len : n - done;
		evbuffer_add(s->req_copy, v[i].iov_base, take);
		done += take;
	}
	if (done < n) {           /* more chains than peeked: give up the copy */
		evbuffer_free(s->req_copy);
		s->req_copy = NULL;
	}
}

void exchange_keep_body(struct session *s, struct evbuffer *in, size_t n)
{
	keep_copy(s, in, n);
}

void exchange_forward_bytes(struct session *s, const char *p, size_t n)
{
	evbuffer_add(bufferevent_get_output(s->up->bev), p, n);
	if (s->req_copy != NULL && evbuffer_add(s->req_copy, p, n) != 0) {
		evbuffer_free(s->req_copy);
		s->req_copy = NULL;
	}
}

static void start_line(struct http_head *h, const char *p, size_t len)
{
	const char *e = memchr(p, '\n', len);
	h->start_line = p;
	h->start_len = e ? (size_t)(e - p) : len;
	if (h->start_len > 0 && p[h->start_len - 1] == '\r')
		h->start_len--;
}

/* llhttp leaves trailing whitespace of a value in place (RFC 9110 OWS). */
static void trim_values(struct http_head *h)
{
	for (size_t i = 0; i < h->n; i++) {
		struct http_header *x = &h->h[i];
		if (x->value == NULL)
			x->value = x->name + x->name_len;
		while (x->value_len > 0 && (x->value[x->value_len - 1] == ' ' ||
		    x->value[x->value_len - 1] == '\t'))
			x->value_len--;
	}
}

static int parse_head(struct session *s, llhttp_t *p, struct http_head *h,
    const char *buf, size_t len)
{
	enum llhttp_errno e;

	memset(h, 0, offsetof(struct http_head, h));
	h->n = 0;
	s->head = h;
	s->too_many_headers = 0;
	e = llhttp_execute(p, buf, len);
	s->head = NULL;
	start_line(h, buf, len);
	trim_values(h);
	h->http_major = p->http_major;
	h->http_minor = p->http_minor;
	if (s->too_many_headers)
		return -2;
	return e == HPE_OK || e == HPE_PAUSED ? 0 : -1;
}

int exchange_request_head(struct session *s, size_t head_len)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)head_len);
	struct http_head rq;
	struct evbuffer *out;
	int r;

	llhttp_init(&s->req, HTTP_REQUEST, &req_settings);
	s->req.data = s;
	jsonscan_init(&s->model_scan);
	s->head_parsed = 1;
	s->bytes_in += head_len;
	if (has_obs_fold(p, head_len)) {
		evbuffer_drain(in, head_len);
		return bad_request(s, "obsolete header line folding");
	}
	r = parse_head(s, &s->req, &rq, p, head_len);
	/* the head is not NUL-terminated: every scan is bounded */
	rq.method = p;
	for (rq.method_len = 0; rq.method_len < head_len &&
	    p[rq.method_len] != ' ' && p[rq.method_len] != '\r' &&
	    p[rq.method_len] != '\n'; rq.method_len++)
		;
	if (rq.target == NULL) {
		rq.target = p + rq.method_len;
		rq.target_len = 0;
	}
	{
		const char *q = memchr(rq.target, '?', rq.target_len);
		rq.path_len = q ? (size_t)(q - rq.target) : rq.target_len;
	}
	keep_request_fields(s, &rq);
	set_request_id(s, &rq);
	if (r == -2) {
		evbuffer_drain(in, head_len);
		return proxy_error(s, 431, "request_header_too_large",
		    "too many header fields", "rejected");
	}
	if (r < 0) {
		log_info("client %s: malformed request: %s", s->client_ip,
		    llhttp_get_error_reason(&s->req));
		evbuffer_drain(in, head_len);
		if (llhttp_get_errno(&s->req) == HPE_INVALID_TRANSFER_ENCODING)
			return proxy_error(s, 501, "not_implemented",
			    "only the chunked transfer coding is supported", "rejected");
		return bad_request(s, "malformed request");
	}
	tenant_identify(s->conf, rq.h, rq.n, s->tenant, sizeof s->tenant);
	s->http10 = rq.http_major == 1 && rq.http_minor == 0;
	s->keepalive = llhttp_should_keep_alive(&s->req) && !s->http10;
	s->is_head_req = rq.method_len == 4 && memcmp(rq.method, "HEAD", 4) == 0;
	if (check_request(s, &rq) < 0)
		return -1;      /* lingering drains the input */
	keep_request_fields(s, &rq);     /* absolute-form: now origin-form */
	s->route = route_match(s->conf, rq.target, rq.path_len, rq.h, rq.n);
	if (s->route == NULL) {
		evbuffer_drain(in, head_len);
		return proxy_error(s, 404, "no_route", "no route matches this request",
		    "rejected");
	}
	exchange_route_meter(s, &rq);
	if (proxy_dispatch(s, 0) < 0)
		return -1;
	out = bufferevent_get_output(s->up->bev);
	httphead_write_request(out, &rq, s->route, s->client_ip, s->proto,
	    s->request_id, strlen(s->request_id));
	if (s->up->reused && (s->req_copy = evbuffer_new()) != NULL)
		keep_copy(s, out, evbuffer_get_length(out));
	evbuffer_drain(in, head_len);
	if (s->req_done) {
		s->meter.t_req = util_now_us();
		s->cs = C_WAIT;
	} else {
		s->cs = C_BODY;
	}
	return 0;
}

int exchange_response_head(struct session *s, size_t head_len)
{
	struct evbuffer *in = bufferevent_get_input(s->up->bev);
	struct evbuffer *out = bufferevent_get_output(s->bev);
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)head_len);
	struct http_head rs;
	struct httpcheck_verdict v;
	const struct http_header *ct, *ce;
	size_t before;
	int r;

	llhttp_init(&s->res, HTTP_RESPONSE, &res_settings);
	s->res.data = s;
	r = parse_head(s, &s->res, &rs, p, head_len);
	rs.status = s->res.status_code;
	if (r < 0 || has_obs_fold(p, head_len) || rs.status == 101)
		return proxy_error(s, 502, "bad_gateway",
		    "malformed upstream response head", "upstream_error");
	if (httpcheck_response(&rs, &v) < 0)
		return proxy_error(s, v.status, v.type, v.msg, "upstream_error");
	before = evbuffer_get_length(out);
	if (rs.status < 200) {
		/* interim response (100 Continue, 103 Early Hints): passed on,
		 * but never to an HTTP/1.0 client (RFC 9110 §15.2); the final
		 * response follows on the same parser state */
		if (!s->http10)
			httphead_write_response(out, &rs, 0, 0);
		s->bytes_out += evbuffer_get_length(out) - before;
		evbuffer_drain(in, head_len);
		s->up_scan_pos = 0;
		s->res_done = 0;
		s->retried = 1;    /* the backend has the request: never resend it */
		return proxy_flush(s);
	}
	if (s->req_copy != NULL) {
		evbuffer_free(s->req_copy);
		s->req_copy = NULL;
	}
	s->status = rs.status;
	ct = route_find_header(rs.h, rs.n, "content-type");
	ce = route_find_header(rs.h, rs.n, "content-encoding");
	s->meter.t_head = s->meter.now;
	meter_response_head(&s->meter, rs.status, ct ? ct->value : NULL,
	    ct ? ct->value_len : 0,
	    ce != NULL && !util_ieq(ce->value, ce->value_len, "identity"),
	    s->conf->max_event_bytes, s->meter.now);
	stats_key_of(s, &s->active_key);
	stats_active(s->w->stats, &s->active_key, 1);
	s->active_counted = 1;
	s->decode = s->http10 && (s->res.flags & F_CHUNKED);
	if (llhttp_message_needs_eof(&s->res) || s->w->draining)
		s->keepalive = 0;
	httphead_write_response(out, &rs, s->decode, !s->keepalive && !s->http10);
	s->bytes_out += evbuffer_get_length(out) - before;
	evbuffer_drain(in, head_len);
	s->head_sent = 1;
	s->us = U_BODY;
	if (s->res_done) {
		if (proxy_flush(s) < 0)
			return -1;
		return exchange_done(s);
	}
	return 0;
}

/* ---- bodies ------------------------------------------------------------ */

int exchange_parse(struct session *s, llhttp_t *p, struct evbuffer *in,
    size_t *used)
{
	struct evbuffer_iovec v[8];
	int n = evbuffer_peek(in, -1, NULL, v, 8);
	size_t total = 0;

	*used = 0;
	if ((p == &s->req && s->req_done) || (p == &s->res && s->res_done))
		return 0;
	for (int i = 0; i < n && i < 8; i++) {
		enum llhttp_errno e = llhttp_execute(p, v[i].iov_base, v[i].iov_len);
		if (e == HPE_OK) {
			total += v[i].iov_len;
			continue;
		}
		/* paused at the message's end, or failed: the bytes before that
		 * point were parsed (and measured) and belong to the message */
		const char *at = llhttp_get_error_pos(p), *b = v[i].iov_base;
		if (at != NULL && at >= b && at <= b + v[i].iov_len)
			total += (size_t)(at - b);
		if (e == HPE_PAUSED)
			break;
		*used = total;
		return -1;
	}
	*used = total;
	return 0;
}

int exchange_parse_mem(struct session *s, const char *buf, size_t len,
    size_t *used)
{
	enum llhttp_errno e;
	const char *at;

	*used = 0;
	if (s->res_done)
		return 0;
	e = llhttp_execute(&s->res, buf, len);
	if (e == HPE_OK) {
		*used = len;
		return 0;
	}
	/* paused at the response's end, or failed: what came before counts */
	at = llhttp_get_error_pos(&s->res);
	if (at != NULL && at >= buf && at <= buf + len)
		*used = (size_t)(at - buf);
	return e == HPE_PAUSED ? 0 : -1;
}

int exchange_parse_eof(struct session *s)
{
	enum llhttp_errno e = llhttp_finish(&s->res);
	return e == HPE_OK || e == HPE_PAUSED ? 0 : -1;
}

/* ---- books ------------------------------------------------------------- */

void exchange_begin(struct session *s, uint64_t t0)
{
	long c, max;

	s->status = 0;
	s->outcome = NULL;
	s->route = NULL;
	s->bytes_in = s->bytes_out = s->body_bytes = 0;
	s->head_parsed = s->head_sent = s->req_done = s->req_sent = 0;
	s->res_done = s->decode = s->retried = s->is_head_req = 0;
	s->line_checked = s->body_too_large = s->req_trailers = 0;
	s->client_paused = s->up_paused = 0;
	s->scan_pos = s->up_scan_pos = 0;
	s->request_id[0] = '\0';
	strcpy(s->method, "-");
	s->target[0] = '\0';
	s->target_len = 0;
	strcpy(s->tenant, "-");
	meter_init(&s->meter, t0, DIALECT_RAW);
	s->meter.itl_fn = on_itl;
	s->meter.itl_arg = s;
	s->n_itl = 0;
	c = atomic_fetch_add(&tokentap_active_streams, 1);
	s->concurrency = c;
	s->counted = 1;
	max = atomic_load(&tokentap_max_active_streams);
	while (c + 1 > max &&
	    !atomic_compare_exchange_weak(&tokentap_max_active_streams, &max, c + 1))
		;
}

/* Picks the dialect and the model sources known from the request. */
void exchange_route_meter(struct session *s, const struct http_head *rq)
{
	const char *model;
	size_t len;

	s->meter.dialect = s->route->dialect == DIALECT_AUTO ?
	    dialect_for_path(rq->target, rq->path_len) : s->route->dialect;
	if (dialect_path_model(rq->target, rq->path_len, &model, &len))
		meter_offer_model(&s->meter, MODEL_PATH, model, len);
}

static unsigned exceeded_bits(const struct session *s)
{
	const struct conf_thresholds *t = &s->route->thresholds;
	int64_t ttft = meter_ttft_us(&s->meter), tpot = meter_tpot_us(&s->meter);
	unsigned bits = 0;

	if (ttft >= 0 && t->ttft_warning_us && (uint64_t)ttft > t->ttft_warning_us)
		bits |= ACCESSLOG_TTFT_WARNING;
	if (ttft >= 0 && t->ttft_critical_us && (uint64_t)ttft > t->ttft_critical_us)
		bits |= ACCESSLOG_TTFT_CRITICAL;
	if (tpot >= 0 && t->tpot_warning_us && (uint64_t)tpot > t->tpot_warning_us)
		bits |= ACCESSLOG_TPOT_WARNING;
	if (tpot >= 0 && t->tpot_critical_us && (uint64_t)tpot > t->tpot_critical_us)
		bits |= ACCESSLOG_TPOT_CRITICAL;
	return bits;
}

static void release_upstream(struct session *s)
{
	int reusable;

	if (s->up == NULL)
		return;
	reusable = s->res_done && s->req_done && s->us == U_BODY &&
	    evbuffer_get_length(bufferevent_get_output(s->up->bev)) == 0 &&
	    llhttp_should_keep_alive(&s->res);
	upstream_release(s->up, reusable);
	s->up = NULL;
}

/* Ends the exchange's accounting without a log line (a connection that
 * closed inside a request head carried no request worth logging). */
void exchange_abandon(struct session *s)
{
	release_upstream(s);
	if (s->req_copy != NULL) {
		evbuffer_free(s->req_copy);
		s->req_copy = NULL;
	}
	if (s->counted) {
		atomic_fetch_sub(&tokentap_active_streams, 1);
		s->counted = 0;
	}
	if (s->active_counted) {
		stats_active(s->w->stats, &s->active_key, -1);
		s->active_counted = 0;
	}
	s->n_itl = 0;
	meter_free(&s->meter);
	if (s->conf != NULL)
		conf_unref(s->conf);
	s->conf = NULL;
	s->route = NULL;
	proxy_timer(s, T_NONE, 0);
}

/* The statistics group: route, tenant, and the best model label so far
 * (SPEC §4: request body, Gemini path, first response chunk, route name). */
static void stats_key_of(const struct session *s, struct stats_key *k)
{
	const char *route = s->route ? s->route->name : "-";
	if (s->meter.model_len > 0)
		stats_key_set(k, route, s->tenant, s->meter.model, s->meter.model_len);
	else
		stats_key_set(k, route, s->tenant, route, strlen(route));
}

static void on_itl(void *arg, uint64_t gap)
{
	struct session *s = arg;
	s->itl[s->n_itl++] = gap > UINT32_MAX ? UINT32_MAX : (uint32_t)gap;
	if (s->n_itl == STATS_ITL_BATCH) {
		struct stats_key k;
		stats_key_of(s, &k);
		stats_itl(s->w->stats, &k, s->itl, s->n_itl);
		s->n_itl = 0;
	}
}

void exchange_end(struct session *s, const char *outcome)
{
	struct accesslog_entry e;
	struct stats_key key;

	if (s->conf == NULL)
		return;
	meter_end(&s->meter, util_now_us());
	s->outcome = outcome;
	memset(&e, 0, sizeof e);
	e.request_id = s->request_id;
	e.client = s->client_ip;
	e.route = s->route ? s->route->name : NULL;
	e.tenant = s->tenant;
	e.model = s->meter.model_len ? s->meter.model :
	    (s->route ? s->route->name : "-");
	e.method = s->method;
	e.target = s->target;
	e.target_len = s->target_len;
	e.status = s->status;
	e.outcome = outcome;
	e.upstream = s->route ? s->route->upstream : NULL;
	e.m = &s->meter;
	e.bytes_in = s->bytes_in;
	e.bytes_out = s->bytes_out;
	e.concurrency = s->concurrency;
	e.exceeded = s->route ? exceeded_bits(s) : 0;
	accesslog_write(&e);
	stats_key_of(s, &key);
	stats_request(s->w->stats, &key, &e, s->itl, s->n_itl);
	s->n_itl = 0;
	exchange_abandon(s);
}

/* The response ended cleanly: account for it and carry on or close. */
int exchange_done(struct session *s)
{
	const char *outcome = "ok";
	if (s->status >= 400 || s->meter.error_seen)
		outcome = "upstream_error";
	/* the backend answered before the request body ended: the rest of
	 * it must not be read as the next request */
	if (!s->req_done)
		s->keepalive = 0;
	exchange_end(s, outcome);
	if (s->keepalive && !s->closing)
		return proxy_next_request(s);
	return proxy_finish(s);
}

int exchange_retry(struct session *s)
{
	struct evbuffer *copy = s->req_copy;

	if (copy == NULL || s->retried || s->head_sent || s->us == U_BODY ||
	    s->bytes_out > 0)
		return 1;
	s->req_copy = NULL;
	s->retried = 1;
	log_info("request %s: pooled upstream connection closed, retrying on a new one",
	    s->request_id);
	upstream_release(s->up, 0);
	s->up = NULL;
	s->meter.conn_reused = 0;
	s->req_sent = 0;
	if (proxy_dispatch(s, 1) < 0) {
		evbuffer_free(copy);
		return -1;
	}
	evbuffer_add_buffer(bufferevent_get_output(s->up->bev), copy);
	evbuffer_free(copy);
	return 0;
}

const char *exchange_reason(unsigned status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

void exchange_client_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], buf, (socklen_t)len);
			return;
		}
		inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)len);
	} else if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
		    (socklen_t)len);
	} else {
		snprintf(buf, len, "-");
	}
}
