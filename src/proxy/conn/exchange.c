/* SPDX-License-Identifier: Apache-2.0 */
#include "exchange.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "accesslog.h"
#include "balance.h"
#include "dialect.h"
#include "failover.h"
#include "framing.h"
#include "gauge.h"
#include "log.h"
#include "net.h"
#include "rng.h"
#include "route.h"
#include "rxtime.h"
#include "tenant.h"
#include "tracectx.h"
#include "util.h"

/* A reused connection's request is kept for one retry up to this size. */
#define RETRY_COPY_MAX (1024 * 1024)

static void stats_key_of(struct exchange *x, struct sample_key *k);
static void on_itl(void *arg, uint64_t gap);

static int verdict(struct exchange_verdict *v, unsigned status,
    const char *type, const char *msg, enum meter_end end)
{
	v->status = status;
	v->type = type;
	v->msg = msg;
	v->end = end;
	return -1;
}

static int rejected(struct exchange_verdict *v, unsigned status,
    const char *type, const char *msg)
{
	return verdict(v, status, type, msg, METER_END_REJECTED);
}

static int bad_request(struct exchange_verdict *v, const char *msg)
{
	return rejected(v, 400, "bad_request", msg);
}

static int bad_gateway(struct exchange_verdict *v, const char *msg)
{
	return verdict(v, 502, "bad_gateway", msg, METER_END_MALFORMED);
}

/* ---- llhttp callbacks -------------------------------------------------- */

static struct exchange *xchg(llhttp_t *p)
{
	return p->data;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
	struct http_head *h = xchg(p)->head;
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
	struct exchange *x = xchg(p);
	struct http_head *h = x->head;
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
		x->too_many_headers = 1;
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
	struct http_head *h = xchg(p)->head;
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
	struct exchange *x = xchg(p);
	/* a response to HEAD, a 1xx, 204 or 304 has no body whatever its
	 * header fields say (RFC 9112 §6.3); llhttp would read one by its
	 * Content-Length */
	if (p == &x->res && (x->is_head_req ||
	    framing_bodiless_status(p->status_code)))
		return 1;
	return 0;
}

/* A request body's chunk: refused as soon as its size would pass the
 * limit, before any of it is forwarded. At the last chunk the parser
 * pauses, so that the trailer section that follows can be dropped. */
static int on_chunk_header(llhttp_t *p)
{
	struct exchange *x = xchg(p);
	if (p != &x->req)
		return 0;
	if (p->content_length > x->conf->max_body_bytes - x->body_bytes) {
		x->body_too_large = 1;
		return HPE_USER;
	}
	if (p->content_length == 0) {
		x->req_trailers = 1;
		return HPE_PAUSED;
	}
	return 0;
}

static int on_req_body(llhttp_t *p, const char *at, size_t len)
{
	struct exchange *x = xchg(p);
	x->body_bytes += len;
	if (!jsonscan_done(&x->model_scan)) {
		int had = x->model_scan.found;
		jsonscan_feed(&x->model_scan, at, len);
		if (!had && x->model_scan.found)
			meter_offer_model(&x->meter, MODEL_REQUEST, x->model_scan.value,
			    x->model_scan.value_len);
	}
	return 0;
}

/* A piece of the response's body, from llhttp or the chunk decoder. */
static void res_data(void *arg, const char *at, size_t len)
{
	struct exchange *x = arg;
	meter_body(&x->meter, at, len, x->meter.now);
	if (x->decode) {
		evbuffer_add(x->client_out, at, len);
		x->bytes_out += len;
	}
}

static int on_res_body(llhttp_t *p, const char *at, size_t len)
{
	res_data(xchg(p), at, len);
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct exchange *x = xchg(p);
	if (p == &x->req)
		x->req_done = 1;
	else
		x->res_done = 1;
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
	return framing_find_head(p, len, scan_pos, max, head_len);
}

size_t exchange_skip_blank(struct evbuffer *in)
{
	size_t n, total = 0;
	do {
		size_t len = evbuffer_get_length(in);
		const char *p = (const char *)evbuffer_pullup(in,
		    (ev_ssize_t)(len < 256 ? len : 256));
		n = framing_leading_blank(p, len < 256 ? len : 256);
		evbuffer_drain(in, n);
		total += n;
	} while (n == 256);
	return total;
}

int exchange_request_line(struct exchange *x, struct evbuffer *in,
    struct exchange_verdict *v)
{
	size_t len = evbuffer_get_length(in);
	struct framing_verdict hv;
	const char *p, *nl;

	if (x->line_checked)
		return 0;
	if (len > x->conf->max_header_bytes)
		len = x->conf->max_header_bytes;
	p = (const char *)evbuffer_pullup(in, (ev_ssize_t)len);
	if (p == NULL || (nl = memchr(p, '\n', len)) == NULL)
		return 0;
	x->line_checked = 1;
	len = (size_t)(nl - p);
	if (len > 0 && p[len - 1] == '\r')
		len--;
	if (framing_request_line(p, len, &hv) == 0)
		return 0;
	return rejected(v, hv.status, hv.type, hv.msg);
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

/* The client's X-Request-Id when it is a sane token, else a new one. */
static void set_request_id(struct exchange *x, const struct http_head *rq,
    uint64_t *rng)
{
	const struct http_header *h = httphead_find(rq->h, rq->n, "x-request-id");
	if (h != NULL && h->value_len > 0 && h->value_len <= EXCHANGE_ID_MAX) {
		size_t i;
		for (i = 0; i < h->value_len; i++) {
			char c = h->value[i];
			if (!(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') &&
			    !(c >= 'A' && c <= 'Z') && c != '-' && c != '_' && c != '.')
				break;
		}
		if (i == h->value_len) {
			memcpy(x->request_id, h->value, h->value_len);
			x->request_id[h->value_len] = '\0';
			return;
		}
	}
	snprintf(x->request_id, sizeof x->request_id, "%016llx%016llx",
	    (unsigned long long)rng_next(rng), (unsigned long long)rng_next(rng));
}

/* RFC 9110 §9.2.2: a request that may be sent again without a second
 * effect. A POST may not: its generation would be billed twice. */
static int idempotent(const char *m, size_t len)
{
	static const char *const safe[] = { "GET", "HEAD", "OPTIONS", "PUT", "DELETE" };
	for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++)
		if (len == strlen(safe[i]) && memcmp(m, safe[i], len) == 0)
			return 1;
	return 0;
}

/* Copies what the access log needs out of the head before it is drained. */
static void keep_request_fields(struct exchange *x, const struct http_head *rq)
{
	size_t n = rq->method_len < sizeof x->method - 1 ? rq->method_len :
	    sizeof x->method - 1;
	memcpy(x->method, rq->method, n);
	x->method[n] = '\0';
	n = rq->target_len < EXCHANGE_TARGET_MAX ? rq->target_len : EXCHANGE_TARGET_MAX;
	memcpy(x->target, rq->target, n);
	x->target[n] = '\0';
	x->target_len = n;
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
		struct http_header *f = &h->h[i];
		if (f->value == NULL)
			f->value = f->name + f->name_len;
		while (f->value_len > 0 && (f->value[f->value_len - 1] == ' ' ||
		    f->value[f->value_len - 1] == '\t'))
			f->value_len--;
	}
}

/* 0, -1 (malformed) or -2 (too many header fields) */
static int parse_head(struct exchange *x, llhttp_t *p, struct http_head *h,
    const char *buf, size_t len)
{
	enum llhttp_errno e;

	memset(h, 0, offsetof(struct http_head, h));
	h->n = 0;
	x->head = h;
	x->too_many_headers = 0;
	e = llhttp_execute(p, buf, len);
	x->head = NULL;
	start_line(h, buf, len);
	trim_values(h);
	h->http_major = p->http_major;
	h->http_minor = p->http_minor;
	if (x->too_many_headers)
		return -2;
	return e == HPE_OK || e == HPE_PAUSED ? 0 : -1;
}

/* The method and target as sent, for the log, whatever llhttp made of
 * them (the head is not NUL-terminated: every scan is bounded). */
static void request_fields(struct http_head *rq, const char *p, size_t len)
{
	const char *q;

	rq->method = p;
	for (rq->method_len = 0; rq->method_len < len &&
	    p[rq->method_len] != ' ' && p[rq->method_len] != '\r' &&
	    p[rq->method_len] != '\n'; rq->method_len++)
		;
	if (rq->target == NULL) {
		rq->target = p + rq->method_len;
		rq->target_len = 0;
	}
	q = memchr(rq->target, '?', rq->target_len);
	rq->path_len = q ? (size_t)(q - rq->target) : rq->target_len;
}

/* balance: hash: the key of the request's replica, from hash_header's
 * value, else the tenant. */
static void affinity(struct exchange *x, const struct http_head *rq)
{
	const struct http_header *h;

	if (x->route->balance != BALANCE_HASH)
		return;
	h = x->route->hash_header == NULL ? NULL :
	    httphead_find(rq->h, rq->n, x->route->hash_header);
	if (h != NULL && h->value_len > 0)
		x->affinity = balance_key(h->value, h->value_len);
	else
		x->affinity = balance_key(x->tenant, strlen(x->tenant));
}

/* Picks the dialect and the model sources known from the request. */
static void route_meter(struct exchange *x, const struct http_head *rq)
{
	const char *model;
	size_t len;

	if (x->route->dialect == DIALECT_AUTO) {
		enum dialect_id d = dialect_for_path(rq->target, rq->path_len);
		meter_set_dialect(&x->meter, d, d == DIALECT_RAW);
		x->req_dialect = d;
		x->req_sniff = d == DIALECT_RAW;
	} else {
		meter_set_dialect(&x->meter, x->route->dialect, 0);
		x->req_dialect = x->route->dialect;
	}
	if (dialect_path_model(rq->target, rq->path_len, &model, &len))
		meter_offer_model(&x->meter, MODEL_PATH, model, len);
	x->op = (uint8_t)dialect_operation(rq->target, rq->path_len);
	x->meter.stall_us = x->route->thresholds.stall_us;
}

/* ---- trace context -------------------------------------------------------- */

static int traces_on(const struct conf *c)
{
	return c->otel.traces > 0 && c->otel.traces_url != NULL;
}

static int trace_sampled(const struct exchange *x)
{
	return x->traced == EXCHANGE_TRACE_OWN && (x->trace_flags & TRACECTX_SAMPLED);
}

/* The client's tracestate fields as one list (W3C §3.3.1.1: several
 * fields are one value), for a sampled span; none past 512 bytes, which
 * the recommendation lets a vendor drop. */
static void keep_tracestate(struct exchange *x, const struct http_head *rq)
{
	char buf[SPAN_TRACESTATE_MAX + 1];
	size_t n = 0;

	for (size_t i = 0; i < rq->n; i++) {
		const struct http_header *h = &rq->h[i];
		if (!util_ieq(h->name, h->name_len, "tracestate") || h->value_len == 0)
			continue;
		if (n + (n > 0) + h->value_len > SPAN_TRACESTATE_MAX)
			return;
		if (n > 0)
			buf[n++] = ',';
		memcpy(buf + n, h->value, h->value_len);
		n += h->value_len;
	}
	buf[n] = '\0';
	if (n > 0)
		x->tracestate = strdup(buf);
}

/* W3C Trace Context (tracectx.h): one traceparent that is exactly right
 * is the client's; a malformed one, or several, are no context and are
 * not passed on (nor their tracestate), never an error. With otel.traces
 * tokentap takes part: its span, a child of the client's, is the parent
 * the backend is sent, sampled as the client's was; a request without a
 * context starts a trace at the ratio otel.traces.sample (0: never), and
 * only a sampled one sends a traceparent. Without otel.traces the
 * client's goes on untouched and the log names it. */
static void trace_begin(struct exchange *x, const struct http_head *rq, uint64_t *rng)
{
	const struct http_header *tp = NULL, *host;
	struct tracectx t;
	size_t n = 0;
	int valid;

	for (size_t i = 0; i < rq->n; i++)
		if (util_ieq(rq->h[i].name, rq->h[i].name_len, "traceparent")) {
			tp = &rq->h[i];
			n++;
		}
	valid = n == 1 && tracectx_parse(tp->value, tp->value_len, &t) == 0;
	x->trace_drop = n > 0 && !valid;
	if (valid) {
		memcpy(x->trace_id, t.trace_id, sizeof x->trace_id);
		memcpy(x->parent_id, t.span_id, sizeof x->parent_id);
		x->trace_flags = t.flags & TRACECTX_SAMPLED;
		x->traced = EXCHANGE_TRACE_CLIENT;
	}
	if (!traces_on(x->conf))
		return;
	if (!valid) {
		if (!(x->conf->otel.sample > 0 && rng_unit(rng) < x->conf->otel.sample))
			return;
		tracectx_random(x->trace_id, sizeof x->trace_id, rng_next, rng);
		x->trace_flags = TRACECTX_SAMPLED;
	}
	/* two spans: the request received (SERVER, the client's span's
	 * child) and the call to the model (CLIENT, its child, the parent
	 * the backend is sent) */
	tracectx_random(x->server_id, sizeof x->server_id, rng_next, rng);
	tracectx_random(x->span_id, sizeof x->span_id, rng_next, rng);
	x->traced = EXCHANGE_TRACE_OWN;
	host = httphead_find(rq->h, rq->n, "host");
	if (host != NULL) {
		size_t k = host->value_len < sizeof x->trace_host - 1 ? host->value_len :
		    sizeof x->trace_host - 1;
		memcpy(x->trace_host, host->value, k);
		x->trace_host[k] = '\0';
	}
	if (valid && trace_sampled(x))
		keep_tracestate(x, rq);
}

int exchange_request_head(struct exchange *x, struct evbuffer *in,
    size_t head_len, uint64_t *rng, struct http_head *rq,
    struct exchange_verdict *v)
{
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)head_len);
	const struct http_header *expect;
	struct framing_verdict hv;
	int r;

	llhttp_init(&x->req, HTTP_REQUEST, &req_settings);
	x->req.data = x;
	jsonscan_init(&x->model_scan);
	x->head_parsed = 1;
	x->bytes_in += head_len;
	r = parse_head(x, &x->req, rq, p, head_len);
	request_fields(rq, p, head_len);
	keep_request_fields(x, rq);
	set_request_id(x, rq, rng);
	if (has_obs_fold(p, head_len))
		return bad_request(v, "obsolete header line folding");
	if (r == -2)
		return rejected(v, 431, "request_header_too_large",
		    "too many header fields");
	if (r < 0) {
		log_limited(&gauge_log[GAUGE_LOG_MALFORMED_REQUEST], LOG_LVL_INFO,
		    "client %s: malformed request: %s", x->client_ip,
		    llhttp_get_error_reason(&x->req));
		if (llhttp_get_errno(&x->req) == HPE_INVALID_TRANSFER_ENCODING)
			return rejected(v, 501, "not_implemented",
			    "only the chunked transfer coding is supported");
		return bad_request(v, "malformed request");
	}
	trace_begin(x, rq, rng);
	tenant_identify(x->conf, rq->h, rq->n, x->tenant, sizeof x->tenant);
	x->tenant_named = strcmp(x->tenant, "-") == 0 || tenant_named(x->conf, x->tenant);
	x->http10 = rq->http_major == 1 && rq->http_minor == 0;
	x->keepalive = llhttp_should_keep_alive(&x->req) && !x->http10;
	x->is_head_req = rq->method_len == 4 && memcmp(rq->method, "HEAD", 4) == 0;
	x->idempotent = idempotent(rq->method, rq->method_len);
	expect = httphead_find(rq->h, rq->n, "expect");
	x->expect_continue = expect != NULL &&
	    util_ieq(expect->value, expect->value_len, "100-continue");
	if (framing_request(rq, &hv) < 0)
		return rejected(v, hv.status, hv.type, hv.msg);
	if ((x->req.flags & F_CONTENT_LENGTH) &&
	    x->req.content_length > x->conf->max_body_bytes)
		return rejected(v, 413, "request_too_large",
		    "request body exceeds limits.max_body_bytes");
	keep_request_fields(x, rq);     /* absolute-form: now origin-form */
	x->route = route_match(x->conf, rq->target, rq->path_len, rq->h, rq->n);
	if (x->route == NULL)
		return rejected(v, 404, "no_route", "no route matches this request");
	/* a switch of protocols (a WebSocket handshake, RFC 6455 §4.1): to a
	 * protocol the route allows, on HTTP/1.1, by a request without a
	 * body, whose bytes would otherwise run into the tunnel's */
	if (!x->http10 && !(x->req.flags & F_CHUNKED) &&
	    (!(x->req.flags & F_CONTENT_LENGTH) || x->req.content_length == 0))
		x->upgrade_offer = httphead_upgrade_offer(rq, x->route) &
		    ((1u << CONF_UPGRADES_MAX) - 1);
	x->upgrade = x->upgrade_offer != 0;
	route_meter(x, rq);
	x->req_keepalive = x->keepalive;
	affinity(x, rq);
	return 0;
}

/* ---- the request on its way -------------------------------------------- */

static void drop_copy(struct exchange *x)
{
	if (x->req_copy != NULL) {
		evbuffer_free(x->req_copy);
		x->req_copy = NULL;
	}
}

static void keep_copy(struct exchange *x, struct evbuffer *src, size_t n)
{
	struct evbuffer_iovec v[8];
	int k;
	size_t done = 0;

	if (x->req_copy == NULL)
		return;
	if (evbuffer_get_length(x->req_copy) + n > RETRY_COPY_MAX) {
		drop_copy(x);
		return;
	}
	k = evbuffer_peek(src, (ev_ssize_t)n, NULL, v, 8);
	for (int i = 0; i < k && i < 8 && done < n; i++) {
		size_t take = v[i].iov_len < n - done ? v[i].iov_len : n - done;
		evbuffer_add(x->req_copy, v[i].iov_base, take);
		done += take;
	}
	if (done < n)             /* more chains than peeked: give up the copy */
		drop_copy(x);
}

/* The upstream head of *rq for replica `to`, its length kept: what a
 * copy of the request starts with. */
static void write_head(struct exchange *x, const struct http_head *rq,
    const struct conf_upstream *to, struct evbuffer *out, const char *proto)
{
	size_t before = evbuffer_get_length(out);

	/* Expect is tokentap's to answer (proxy_client.c), whether the body
	 * is held or streams */
	char tp[TRACECTX_LEN + 1];

	x->head_flags = HTTPHEAD_DROP_EXPECT | (x->upgrade ? HTTPHEAD_UPGRADE : 0);
	if (x->trace_drop)
		x->head_flags |= HTTPHEAD_DROP_TRACEPARENT | HTTPHEAD_DROP_TRACESTATE;
	if (x->traced == EXCHANGE_TRACE_OWN) {
		x->head_flags |= HTTPHEAD_DROP_TRACEPARENT;
		tracectx_format(x->trace_id, x->span_id, x->trace_flags, tp);
	}
	httphead_write_request(out, rq, x->route, to, x->client_ip, proto,
	    x->request_id, strlen(x->request_id), x->head_flags,
	    x->traced == EXCHANGE_TRACE_OWN ? tp : NULL);
	x->up_head_len = evbuffer_get_length(out) - before;
}

void exchange_write_request(struct exchange *x, const struct http_head *rq,
    const struct conf_upstream *to, struct evbuffer *out, const char *proto, int keep)
{
	size_t before = evbuffer_get_length(out);

	write_head(x, rq, to, out, proto);
	if (keep && before == 0)
		exchange_keep_request(x, out);
}

/* The client's head as parsed, its fields pointing into bytes[]. */
struct exchange_head_copy {
	struct http_head rq;
	size_t len;
	char bytes[];
};

/* A pointer into the head at from moves to the copy at to; one elsewhere
 * (a string of framing.c's own: "Host", "/") stays. */
static const char *moved(const char *p, const char *from, size_t len, const char *to)
{
	if (p == NULL || p < from || p >= from + len)
		return p;
	return to + (p - from);
}

int exchange_keep_head(struct exchange *x, const struct http_head *rq,
    struct evbuffer *in, size_t head_len)
{
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)head_len);
	struct exchange_head_copy *hc;
	struct http_head *h;

	if (x->head_copy != NULL)
		return 0;
	if (p == NULL || (hc = malloc(sizeof *hc + head_len)) == NULL)
		return -1;
	memcpy(hc->bytes, p, head_len);
	hc->len = head_len;
	h = &hc->rq;
	memcpy(h, rq, offsetof(struct http_head, h) + rq->n * sizeof rq->h[0]);
	h->n = rq->n;
	h->start_line = moved(rq->start_line, p, head_len, hc->bytes);
	h->method = moved(rq->method, p, head_len, hc->bytes);
	h->target = moved(rq->target, p, head_len, hc->bytes);
	for (size_t i = 0; i < rq->n; i++) {
		h->h[i].name = moved(rq->h[i].name, p, head_len, hc->bytes);
		h->h[i].value = moved(rq->h[i].value, p, head_len, hc->bytes);
	}
	x->head_copy = hc;
	return 0;
}

int exchange_resendable(const struct exchange *x)
{
	return x->req_copy != NULL;
}

void exchange_write_kept(struct exchange *x, const struct conf_upstream *to,
    const char *proto, struct evbuffer *out)
{
	write_head(x, &x->head_copy->rq, to, out, proto);
}

int exchange_redirect(struct exchange *x, const struct conf_upstream *to,
    const char *proto, struct evbuffer *unsent, struct evbuffer *out, int keep)
{
	struct evbuffer *body = unsent;

	if (body == NULL && x->req_copy == NULL)
		return -1;
	if (body == NULL) {
		body = x->req_copy;
		x->req_copy = NULL;
	}
	/* replicas of one URL share the head; of several, each has its own,
	 * and the body is what follows the last one's */
	if (x->head_copy != NULL) {
		evbuffer_drain(body, x->up_head_len);
		exchange_write_kept(x, to, proto, out);
	}
	evbuffer_add_buffer(out, body);
	if (body != unsent)
		evbuffer_free(body);
	if (keep)
		exchange_keep_request(x, out);
	return 0;
}

void exchange_attempt(struct exchange *x, const char *upstream, const char *why,
    unsigned status, uint64_t us)
{
	struct accesslog_attempt *a;

	if (x->n_attempts == CONF_RETRIES_MAX)
		return;
	x->attempt_t[x->n_attempts] = util_now_us();
	a = &x->attempts[x->n_attempts++];
	a->upstream = upstream;
	a->reason = why;
	a->status = status;
	a->us = us;
}

static void drop_head_copy(struct exchange *x)
{
	free(x->head_copy);
	x->head_copy = NULL;
}

void exchange_keep_request(struct exchange *x, struct evbuffer *out)
{
	drop_copy(x);
	if ((x->req_copy = evbuffer_new()) != NULL)
		keep_copy(x, out, evbuffer_get_length(out));
}

/* Bytes of tokentap's own in the request (and in its retry copy). */
static void forward_bytes(struct exchange *x, struct evbuffer *out,
    const char *p, size_t n)
{
	evbuffer_add(out, p, n);
	if (x->req_copy != NULL && evbuffer_add(x->req_copy, p, n) != 0)
		drop_copy(x);
}

/* A body's bytes: the response's through the chunk decoder while its
 * chunks are plain, then (and anything else) through llhttp. *at: where
 * a pause (the message's end) or an error stopped it. */
static enum llhttp_errno body_execute(struct exchange *x, llhttp_t *p,
    const char *buf, size_t len, const char **at)
{
	struct chunked *c = &x->res_chunks;
	enum llhttp_errno e;
	size_t n = 0;

	if (p == &x->res && c->state != CHUNKED_OFF) {
		n = chunked_feed(c, buf, len, res_data, x);
		if (c->state == CHUNKED_BAD) {
			*at = buf + n;
			return HPE_INVALID_CHUNK_SIZE;
		}
		if (c->state != CHUNKED_OFF)
			return HPE_OK;
		/* llhttp reads on from the size line the decoder stopped in */
		if (c->held_len > 0 &&
		    (e = llhttp_execute(p, c->held, c->held_len)) != HPE_OK) {
			*at = llhttp_get_error_pos(p);
			return e;
		}
		c->held_len = 0;
	}
	e = llhttp_execute(p, buf + n, len - n);
	*at = e == HPE_OK ? buf + len : llhttp_get_error_pos(p);
	return e;
}

/* Parses what `in` holds of a body with llhttp p; *used of it belongs to
 * the message: up to its end (where the parser paused) or to a framing
 * error, the bytes before which were parsed (and measured) too. */
static int parse_buffer(struct exchange *x, llhttp_t *p, struct evbuffer *in,
    size_t *used)
{
	struct evbuffer_iovec v[8];
	int n = evbuffer_peek(in, -1, NULL, v, 8);
	size_t total = 0;

	for (int i = 0; i < n && i < 8; i++) {
		const char *at, *b;
		enum llhttp_errno e = body_execute(x, p, v[i].iov_base, v[i].iov_len, &at);
		if (x->meter.ft_pending)
			meter_read_end(&x->meter, e == HPE_OK && i == n - 1 ?
			    (const char *)v[i].iov_base + v[i].iov_len : NULL);
		if (e == HPE_OK) {
			total += v[i].iov_len;
			continue;
		}
		b = v[i].iov_base;
		if (at != NULL && at >= b && at <= b + v[i].iov_len)
			total += (size_t)(at - b);
		*used = total;
		return e == HPE_PAUSED ? 0 : -1;
	}
	*used = total;
	return 0;
}

/* The trailer section of a chunked body is dropped (as nginx does): the
 * parser pauses after the last chunk's line, what follows up to the
 * message's end is read but not forwarded, and the empty line that ends
 * the message is written in its place. */
int exchange_request_body(struct exchange *x, struct evbuffer *in,
    struct evbuffer *out, struct exchange_verdict *v)
{
	size_t used = 0;
	int r, trailers;

	do {
		trailers = x->req_trailers;
		r = x->req_done ? 0 : parse_buffer(x, &x->req, in, &used);
		x->bytes_in += used;
		if (r < 0 && x->body_too_large)
			return rejected(v, 413, "request_too_large",
			    "request body exceeds limits.max_body_bytes");
		if (r < 0)
			return bad_request(v, "malformed request body");
		if (trailers) {
			evbuffer_drain(in, used);
		} else {
			keep_copy(x, in, used);
			evbuffer_remove_buffer(in, out, used);
		}
		if (x->req_trailers && !trailers)
			llhttp_resume(&x->req);      /* paused at the last chunk */
	} while (x->req_trailers && !trailers && !x->req_done);
	if (x->req_done && x->req_trailers)
		forward_bytes(x, out, "\r\n", 2);
	return 0;
}

size_t exchange_written(const struct exchange *x, size_t left)
{
	size_t kept = x->req_copy != NULL ? evbuffer_get_length(x->req_copy) : 0;

	return kept > left ? kept - left : 0;
}

struct evbuffer *exchange_take_retry(struct exchange *x, int unseen)
{
	struct evbuffer *copy = x->req_copy;

	/* never once anything of a response came back or reached the client,
	 * and never a request the backend may have acted on already */
	if (copy == NULL || x->retried || x->head_sent || x->bytes_out > 0 ||
	    (!x->idempotent && !unseen))
		return NULL;
	x->req_copy = NULL;
	x->retried = 1;
	x->meter.conn_reused = 0;
	return copy;
}

void exchange_forwarded(struct exchange *x)
{
	drop_copy(x);
	drop_head_copy(x);
}

void exchange_restart(struct exchange *x)
{
	struct meter *m = &x->meter;
	uint64_t t0 = m->t0, t_req = m->t_req, t0_floor = m->t0_floor;
	uint32_t kernel = m->stamps_kernel, loop = m->stamps_loop;
	char model[METER_MODEL_MAX];
	size_t model_len = 0;
	enum meter_model_src src = m->model_src;

	if (x->active_counted) {
		ring_active(x->stats, &x->active_key, -1);
		x->active_counted = 0;
	}
	/* a model the request named stays; one the response named goes */
	if (src > MODEL_RESPONSE) {
		model_len = m->model_len;
		memcpy(model, m->model, model_len);
	}
	meter_free(m);
	meter_init(m, t0, DIALECT_RAW);
	meter_set_dialect(m, x->req_dialect, x->req_sniff);
	m->t_req = t_req;
	m->t0_floor = t0_floor;
	/* the route's stall threshold, which meter_init cleared: a stream
	 * served by the next replica has its stalls counted too */
	m->stall_us = x->route->thresholds.stall_us;
	m->stamps_kernel = kernel;    /* the request's own, and the reads so far */
	m->stamps_loop = loop;
	if (model_len > 0)
		meter_offer_model(m, src, model, model_len);
	m->itl_fn = on_itl;
	m->itl_arg = x;
	x->n_itl = 0;
	x->status = 0;
	x->retry_status = 0;
	x->head_sent = 0;
	x->res_done = 0;
	x->decode = 0;
	x->client_out = NULL;
	x->keepalive = x->req_keepalive;
}

/* ---- the response ------------------------------------------------------ */

/* A response in a coding the meter cannot read (compress, a list of
 * codings) is forwarded unchanged and not measured: said once per route,
 * counted by cause (tokentap_unmeasured_responses_total) and in the access
 * log's unmeasured. */
static void warn_unmeasured(struct exchange *x, const struct http_header *ce)
{
	struct conf_route *r = (struct conf_route *)x->route;
	if (atomic_exchange(&r->warned_encoding, 1) == 0)
		log_warn("route %s: responses with Content-Encoding \"%.*s\" are "
		    "forwarded unmeasured (gzip, deflate, br and zstd are decoded)",
		    r->name, (int)(ce->value_len < 32 ? ce->value_len : 32), ce->value);
}

/* The 101 to an upgrade: passed on, and from here on the connection is a
 * tunnel whose bytes are not HTTP (WebSocket frames): counted, timed from
 * t0 to the close, not parsed. */
static int tunnel_head(struct exchange *x, struct evbuffer *in, size_t head_len,
    const struct http_head *rs, struct evbuffer *out)
{
	size_t before = evbuffer_get_length(out);

	drop_copy(x);
	x->status = 101;
	meter_response_head(&x->meter, 101, NULL, 0, NULL, 0, x->conf->max_event_bytes,
	    x->meter.now);
	x->keepalive = 0;
	httphead_write_response(out, rs, 0, 0);
	x->bytes_out += evbuffer_get_length(out) - before;
	evbuffer_drain(in, head_len);
	x->head_sent = 1;
	return EXCHANGE_TUNNEL;
}

int exchange_response_head(struct exchange *x, struct evbuffer *in,
    size_t head_len, struct evbuffer *out, int draining,
    struct exchange_verdict *v)
{
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)head_len);
	struct http_head rs;
	struct framing_verdict hv;
	const struct http_header *ct, *ce;
	size_t before = evbuffer_get_length(out);
	int r;

	llhttp_init(&x->res, HTTP_RESPONSE, &res_settings);
	x->res.data = x;
	chunked_start(&x->res_chunks, 0);
	r = parse_head(x, &x->res, &rs, p, head_len);
	rs.status = x->res.status_code;
	if (r < 0 || has_obs_fold(p, head_len))
		return bad_gateway(v, "malformed upstream response head");
	if (framing_response(&rs, &hv) < 0 || (rs.status == 101 &&
	    framing_switch(&rs, x->route, x->upgrade_offer, &hv) < 0))
		return bad_gateway(v, hv.msg);
	if (rs.status == 101)
		return tunnel_head(x, in, head_len, &rs, out);
	if (x->failover_ok && rs.status >= 200) {
		const struct http_header *ra = httphead_find(rs.h, rs.n, "retry-after");
		if (failover_status(x->route, rs.status, ra ? ra->value : NULL,
		    ra ? ra->value_len : 0)) {
			/* not passed on: the request goes to another replica */
			x->retry_status = rs.status;
			evbuffer_drain(in, head_len);
			return EXCHANGE_RETRY;
		}
	}
	if (rs.status < 200) {
		/* interim response (100 Continue, 103 Early Hints): passed on,
		 * but never to an HTTP/1.0 client (RFC 9110 §15.2); the backend
		 * has the request, so it is never sent again */
		if (!x->http10)
			httphead_write_response(out, &rs, 0, 0);
		x->bytes_out += evbuffer_get_length(out) - before;
		evbuffer_drain(in, head_len);
		x->res_done = 0;
		x->retried = 1;
		return EXCHANGE_INTERIM;
	}
	if (!x->held)
		drop_copy(x);
	/* a body to come, chunked: the decoder reads its plain chunks */
	chunked_start(&x->res_chunks, (x->res.flags & F_CHUNKED) && !x->res_done);
	x->status = rs.status;
	ct = httphead_find(rs.h, rs.n, "content-type");
	ce = httphead_find(rs.h, rs.n, "content-encoding");
	meter_response_head(&x->meter, rs.status, ct ? ct->value : NULL,
	    ct ? ct->value_len : 0, ce ? ce->value : NULL, ce ? ce->value_len : 0,
	    x->conf->max_event_bytes, x->meter.now);
	/* its doubt: complete where its last byte was the read's (the input
	 * ends with the newest read) */
	meter_head_read(&x->meter, evbuffer_get_length(in) == head_len);
	if (x->meter.unmeasured)
		warn_unmeasured(x, ce);
	stats_key_of(x, &x->active_key);
	ring_active(x->stats, &x->active_key, 1);
	x->active_counted = 1;
	x->decode = x->http10 && (x->res.flags & F_CHUNKED);
	x->client_out = out;
	if (llhttp_message_needs_eof(&x->res) || draining)
		x->keepalive = 0;
	httphead_write_response(out, &rs, x->decode, !x->keepalive && !x->http10);
	x->bytes_out += evbuffer_get_length(out) - before;
	evbuffer_drain(in, head_len);
	x->head_sent = 1;
	return x->res_done ? EXCHANGE_DONE : EXCHANGE_BODY;
}

int exchange_parse_body(struct exchange *x, struct evbuffer *in, size_t *used)
{
	*used = 0;
	if (x->res_done)
		return 0;
	return parse_buffer(x, &x->res, in, used);
}

int exchange_parse_mem(struct exchange *x, const char *buf, size_t len,
    size_t *used)
{
	enum llhttp_errno e;
	const char *at;

	*used = 0;
	if (x->res_done)
		return 0;
	e = body_execute(x, &x->res, buf, len, &at);
	if (x->meter.ft_pending)
		meter_read_end(&x->meter, buf + len);
	if (e == HPE_OK) {
		*used = len;
		return 0;
	}
	/* paused at the response's end, or failed: what came before counts */
	if (at != NULL && at >= buf && at <= buf + len)
		*used = (size_t)(at - buf);
	return e == HPE_PAUSED ? 0 : -1;
}

int exchange_parse_eof(struct exchange *x)
{
	enum llhttp_errno e = llhttp_finish(&x->res);
	return (e == HPE_OK || e == HPE_PAUSED) && x->res_done ? 0 : -1;
}

int exchange_reusable(const struct exchange *x)
{
	/* the request too: a backend that answered before the body ended
	 * would read the rest of it as a request */
	return x->res_done && x->req_done && x->head_sent &&
	    llhttp_should_keep_alive(&x->res);
}

/* ---- the sweep ----------------------------------------------------------- */

/* A sampled span's stall events: from the token before the gap to the
 * token (or the end) after it. */
static void trace_stall(struct exchange *x, int d)
{
	const struct meter *m = &x->meter;

	if (d > 0 && x->n_stalls < SPAN_STALLS_MAX) {
		x->stall_start[x->n_stalls] = m->stall_ref;
		x->stall_end[x->n_stalls++] = 0;
	} else if (d < 0 && x->n_stalls > 0 && x->stall_end[x->n_stalls - 1] == 0) {
		x->stall_end[x->n_stalls - 1] = m->t_end != 0 && m->t_last_token == m->stall_ref ?
		    m->t_end : m->t_last_token;
	}
}

int exchange_sweep(struct exchange *x, uint64_t now)
{
	uint64_t idle = x->route != NULL ? x->route->timeouts.token_idle_us : 0;
	int64_t gap;
	int d;

	if (x->conf == NULL)
		return 0;
	if ((d = meter_stall_sweep(&x->meter, now)) != 0) {
		struct sample_key k;
		stats_key_of(x, &k);
		ring_stall(x->stats, &k, d);
		x->vitals.stalls_live += d > 0;
		if (trace_sampled(x))
			trace_stall(x, d);
	}
	gap = meter_token_gap_us(&x->meter, now);
	return idle != 0 && gap >= 0 && (uint64_t)gap >= idle;
}

/* ---- books ------------------------------------------------------------- */

int exchange_continue(struct exchange *x, struct evbuffer *out)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (!x->expect_continue || x->http10)
		return 0;
	evbuffer_add(out, cont, sizeof cont - 1);
	x->bytes_out += sizeof cont - 1;
	return 1;
}

void exchange_error(struct exchange *x, struct evbuffer *out, unsigned status,
    const char *type, const char *msg)
{
	char body[1024];
	size_t before = evbuffer_get_length(out);
	int n = snprintf(body, sizeof body,
	    "{\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}\n", type, msg);

	evbuffer_add_printf(out, "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
	    "Content-Length: %d\r\n%sConnection: close\r\n\r\n",
	    status, net_reason(status), n,
	    status == 405 ? "Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n" : "");
	evbuffer_add(out, body, (size_t)n);
	x->status = status;
	x->bytes_out += evbuffer_get_length(out) - before;
}

/* A step the clock saw and nobody said yet: logged and counted, once. */
static void step_told(struct rxtime_clock *c)
{
	c->told = c->steps;
	atomic_fetch_add_explicit(&gauge_clock_steps, 1, memory_order_relaxed);
	log_warn("the real-time clock was stepped by %+lld ms: reads received "
	    "around the step are timed by the event loop",
	    (long long)((c->offset_ns - c->before_ns) / 1000000));
}

static inline uint64_t read_time(struct rxtime_clock *c, int64_t real, uint64_t now,
    int *kernel)
{
	uint64_t t = real != 0 ? rxtime_mono(c, real, now) : 0;

	if (c->steps != c->told)
		step_told(c);
	*kernel = t != 0;
	return t != 0 ? t : now;
}

uint64_t exchange_read_time(struct rxtime_clock *c, int64_t real, int *kernel)
{
	return read_time(c, real, util_now_us(), kernel);
}

/* Never before what the response read already nor before the request's
 * first byte: stamps and the loop's clock mixed must not run backwards. */
void exchange_read(struct exchange *x, struct rxtime_clock *c, int64_t real,
    uint64_t floor, int whole)
{
	struct meter *m = &x->meter;
	uint64_t least = m->now > m->t0 ? m->now : m->t0;
	int kernel;
	uint64_t t = read_time(c, real, util_now_us(), &kernel);

	m->now = t > least ? t : least;
	m->stamps_kernel += (uint32_t)kernel;
	m->stamps_loop += (uint32_t)!kernel;
	/* the doubt's floor: no response byte came before the request's
	 * first */
	if (floor < m->t0)
		floor = m->t0;
	/* clocks that disagree (a floor past the read's time, a stamp raised
	 * to what was read before it) leave no certainty: the time is not
	 * the stamp, and the doubt is the whole window */
	if (floor > m->now || t < least) {
		floor = m->t0;
		kernel = 0;
	}
	m->now_floor = floor;
	m->now_kernel = (uint8_t)kernel;
	m->now_whole = (uint8_t)(whole != 0);
}

void exchange_resume(struct exchange *x, uint64_t now)
{
	struct meter *m = &x->meter;

	if (now > m->now)
		m->now = now;
	m->now_floor = m->t0;
	m->now_kernel = 0;
	m->now_whole = 0;
}

void exchange_begin(struct exchange *x, struct conf *conf,
    struct ring *stats, const char *client_ip, uint64_t t0)
{
	long c, max;

	memset(x, 0, sizeof *x);
	x->conf = conf_ref(conf);
	x->stats = stats;
	x->stream_id = ring_stream_id(stats);
	x->client_ip = client_ip;
	strcpy(x->method, "-");
	strcpy(x->tenant, "-");
	meter_init(&x->meter, t0, DIALECT_RAW);
	vitals_begin(&x->vitals);
	x->meter.itl_fn = on_itl;
	x->meter.itl_arg = x;
	c = atomic_fetch_add(&gauge_streams, 1);
	x->concurrency = c;
	x->counted = 1;
	max = atomic_load(&gauge_max_streams);
	while (c + 1 > max &&
	    !atomic_compare_exchange_weak(&gauge_max_streams, &max, c + 1))
		;
	max = atomic_load(&gauge_peak_streams);
	while (c + 1 > max &&
	    !atomic_compare_exchange_weak(&gauge_peak_streams, &max, c + 1))
		;
}

static unsigned exceeded_bits(const struct exchange *x)
{
	const struct conf_thresholds *t = &x->route->thresholds;
	/* the thresholds judge the server side, as the alerts do */
	int64_t ttft = meter_ttft_server_us(&x->meter), tpot = meter_tpot_us(&x->meter);
	int64_t ttfo = meter_ttfo_server_us(&x->meter);
	unsigned bits = 0;

	if (ttft >= 0 && t->ttft_warning_us && (uint64_t)ttft > t->ttft_warning_us)
		bits |= SAMPLE_TTFT_WARNING;
	if (ttft >= 0 && t->ttft_critical_us && (uint64_t)ttft > t->ttft_critical_us)
		bits |= SAMPLE_TTFT_CRITICAL;
	if (tpot >= 0 && t->tpot_warning_us && (uint64_t)tpot > t->tpot_warning_us)
		bits |= SAMPLE_TPOT_WARNING;
	if (tpot >= 0 && t->tpot_critical_us && (uint64_t)tpot > t->tpot_critical_us)
		bits |= SAMPLE_TPOT_CRITICAL;
	if (ttfo >= 0 && t->ttfo_warning_us && (uint64_t)ttfo > t->ttfo_warning_us)
		bits |= SAMPLE_TTFO_WARNING;
	if (ttfo >= 0 && t->ttfo_critical_us && (uint64_t)ttfo > t->ttfo_critical_us)
		bits |= SAMPLE_TTFO_CRITICAL;
	return bits;
}

void exchange_abandon(struct exchange *x)
{
	drop_copy(x);
	drop_head_copy(x);
	if (x->counted) {
		atomic_fetch_sub(&gauge_streams, 1);
		x->counted = 0;
	}
	if (x->active_counted) {
		ring_active(x->stats, &x->active_key, -1);
		x->active_counted = 0;
	}
	x->n_itl = 0;
	free(x->tracestate);
	x->tracestate = NULL;
	meter_free(&x->meter);
	if (x->conf != NULL)
		conf_unref(x->conf);
	x->conf = NULL;
	x->route = NULL;
}

/* Which names the request earned (stats.h): a tenant or model the
 * operator named, or any the backend accepted (2xx); with models.names or
 * models.pattern set, those alone name models. A route's own name (no
 * model was said) is the operator's. Nothing from a request the backend
 * refused (401, 403) or that matched no route. vLLM answers an unknown
 * model 404: 50 such requests with random models took 10,400 of the
 * 20,000 series, and after about 1,100 a tenant's real model had none. */
static unsigned stats_mint(struct exchange *x)
{
	int ok = x->status >= 200 && x->status < 300;
	unsigned mint = 0;

	if (x->route == NULL || x->status == 401 || x->status == 403)
		return 0;
	if (ok || x->tenant_named)
		mint |= SAMPLE_MINT_TENANT;
	if (x->meter.model_len == 0)
		return mint | SAMPLE_MINT_MODEL;
	if (!tenant_models_listed(x->conf))
		return ok ? mint | SAMPLE_MINT_MODEL : mint;
	/* judged once per model source: this runs every 32 token gaps */
	if (x->model_named_src != (uint8_t)x->meter.model_src) {
		x->model_named = (uint8_t)tenant_model_named(x->conf, x->meter.model,
		    x->meter.model_len);
		x->model_named_src = (uint8_t)x->meter.model_src;
	}
	return x->model_named ? mint | SAMPLE_MINT_MODEL : mint;
}

/* The statistics group: route, tenant, and the best model label so far
 * (docs/contract.md §4: request body, Gemini path, first response chunk, route
 * name). */
static void stats_key_of(struct exchange *x, struct sample_key *k)
{
	const char *route = x->route ? x->route->name : "-";
	if (x->meter.model_len > 0)
		sample_key_set(k, route, x->tenant, x->meter.model, x->meter.model_len);
	else
		sample_key_set(k, route, x->tenant, route, strlen(route));
	k->dialect = (uint8_t)x->meter.dialect;
	k->op = x->op;
	k->mint = (uint8_t)stats_mint(x);
	k->stream = x->stream_id;
	/* every 32 token gaps too: a copy, not a printf */
	if (x->upstream != NULL) {
		size_t n = strnlen(x->upstream, sizeof k->upstream - 1);
		memcpy(k->upstream, x->upstream, n);
		k->upstream[n] = '\0';
	}
}

static void on_itl(void *arg, uint64_t gap)
{
	struct exchange *x = arg;
	x->itl[x->n_itl++] = gap > UINT32_MAX ? UINT32_MAX : (uint32_t)gap;
	if (x->n_itl == RING_ITL_BATCH) {
		struct sample_key k;
		stats_key_of(x, &k);
		ring_itl(x->stats, &k, x->itl, x->n_itl);
		x->n_itl = 0;
	}
}

/* Did the client ask for a stream (OpenTelemetry's gen_ai.request.stream),
 * whatever the answer? The body's top-level "stream" where it has one;
 * else the path (Gemini's :streamGenerateContent, TGI's /generate_stream)
 * or Ollama's default (it streams unless told not to); a request that
 * says nothing of it asked for what the response was. */
static int stream_asked(const struct exchange *x)
{
	size_t n = strcspn(x->target, "?");

	if (x->model_scan.stream >= 0)
		return x->model_scan.stream;
	if (memmem(x->target, n, ":streamGenerateContent", 22) != NULL ||
	    memmem(x->target, n, "/generate_stream", 16) != NULL)
		return 1;
	if (x->req_dialect == DIALECT_OLLAMA &&
	    (x->op == DIALECT_OP_CHAT || x->op == DIALECT_OP_TEXT))
		return 1;
	return x->meter.stream != 0;
}

/* A sampled request's span to the exporter (span.h): a slot of the
 * worker's span queue filled in place, or nothing when it is full (the
 * drop is counted there). Out of line, once a request: make bench's
 * callgrind names what it costs. */
_Static_assert(sizeof ((struct span *)0)->method == sizeof ((struct exchange *)0)->method,
    "a span's method is the exchange's, copied whole");

__attribute__((noinline))
static void trace_span(struct exchange *x, const struct sample_key *key,
    const struct sample *smp)
{
	struct span *sp = ring_span_slot(x->stats);
	const struct meter *m = &x->meter;
	size_t n;

	if (sp == NULL)
		return;
	memcpy(sp->trace_id, x->trace_id, sizeof sp->trace_id);
	memcpy(sp->span_id, x->span_id, sizeof sp->span_id);
	memcpy(sp->server_id, x->server_id, sizeof sp->server_id);
	memcpy(sp->parent_id, x->parent_id, sizeof sp->parent_id);
	sp->flags = x->trace_flags;
	sp->stream = (uint8_t)(m->stream != 0);
	sp->stream_asked = (uint8_t)stream_asked(x);
	sp->https = (uint8_t)x->client_tls;
	sp->http10 = (uint8_t)x->http10;
	n = x->tracestate != NULL ? strlen(x->tracestate) : 0;
	memcpy(sp->tracestate, x->tracestate != NULL ? x->tracestate : "", n);
	sp->tracestate_len = (uint16_t)n;
	memcpy(sp->method, x->method, sizeof sp->method);   /* NUL-terminated */
	n = strcspn(x->target, "?");            /* url.path: no query */
	n = n < sizeof sp->path - 1 ? n : sizeof sp->path - 1;
	memcpy(sp->path, x->target, n);
	sp->path[n] = '\0';
	memcpy(sp->host, x->trace_host, sizeof sp->host);
	snprintf(sp->client, sizeof sp->client, "%s", x->client_ip ? x->client_ip : "");
	sp->model_src = (uint8_t)m->model_src;
	sp->mono_end_us = m->t_end;
	sp->wall_end_ns = util_wall_ns() - (util_now_us() - m->t_end) * 1000;
	sp->t0 = m->t0;
	sp->t_first_event = m->t_first_event;
	sp->t_first_token = m->t_first_token;
	sp->t_first_output = m->t_first_output;
	sp->n_stalls = x->n_stalls;
	memcpy(sp->stall_start, x->stall_start, sizeof sp->stall_start);
	memcpy(sp->stall_end, x->stall_end, sizeof sp->stall_end);
	sp->n_attempts = (uint8_t)(x->n_attempts < SPAN_ATTEMPTS_MAX ? x->n_attempts :
	    SPAN_ATTEMPTS_MAX);
	for (unsigned i = 0; i < sp->n_attempts; i++) {
		const struct accesslog_attempt *a = &x->attempts[i];
		struct span_attempt *o = &sp->attempts[i];
		snprintf(o->upstream, sizeof o->upstream, "%s", a->upstream ? a->upstream : "-");
		snprintf(o->reason, sizeof o->reason, "%s", a->reason ? a->reason : "-");
		o->status = (uint16_t)a->status;
		o->t_us = x->attempt_t[i];
		o->us = a->us;
	}
	sp->stalls = m->stalls;
	sp->reasoning_tokens = meter_reasoning_tokens(m);
	n = m->response_model_len < sizeof sp->response_model ? m->response_model_len :
	    sizeof sp->response_model - 1;
	memcpy(sp->response_model, m->response_model, n);
	sp->response_model[n] = '\0';
	sp->n_finish = (uint8_t)m->n_finish;
	memcpy(sp->finish, m->finish, sizeof sp->finish);
	sp->key = *key;
	sp->s = *smp;
	ring_span_publish(x->stats);
}

void exchange_end(struct exchange *x, enum meter_end how)
{
	struct accesslog_entry e;
	struct sample_key key;
	struct sample smp;

	if (x->conf == NULL)
		return;
	meter_end(&x->meter, util_now_us());
	sample_fill(&smp, &x->meter, &x->vitals, meter_outcome(&x->meter, how),
	    x->status, x->route ? exceeded_bits(x) : 0, x->concurrency);
	/* the statistics' record first: once its access-log line is written,
	 * a request is in /stats and /metrics too */
	stats_key_of(x, &key);
	if (x->meter.stalled) {               /* it ended stalled */
		x->meter.stalled = 0;
		ring_stall(x->stats, &key, -1);
		if (trace_sampled(x))
			trace_stall(x, -1);
	}
	ring_request(x->stats, &key, &smp, x->itl, x->n_itl);
	if (trace_sampled(x))
		trace_span(x, &key, &smp);
	if (meter_unmeasured(&x->meter) != METER_MEASURED)
		atomic_fetch_add_explicit(&gauge_unmeasured[meter_unmeasured(&x->meter)], 1,
		    memory_order_relaxed);
	atomic_fetch_add_explicit(&gauge_read_times[0], x->meter.stamps_kernel,
	    memory_order_relaxed);
	atomic_fetch_add_explicit(&gauge_read_times[1], x->meter.stamps_loop,
	    memory_order_relaxed);
	memset(&e, 0, sizeof e);
	e.request_id = x->request_id;
	if (x->traced != EXCHANGE_TRACE_NONE) {
		e.trace_id = x->trace_id;
		e.span_id = x->traced == EXCHANGE_TRACE_OWN ? x->span_id : x->parent_id;
	}
	e.client = x->client_ip;
	e.route = x->route ? x->route->name : NULL;
	e.tenant = x->tenant;
	e.model = x->meter.model_len ? x->meter.model :
	    (x->route ? x->route->name : "-");
	e.method = x->method;
	e.target = x->target;
	e.target_len = x->target_len;
	e.upstream = x->upstream;
	e.attempts = x->attempts;
	e.n_attempts = x->n_attempts;
	e.m = &x->meter;
	e.s = &smp;
	e.vitals = &x->vitals;
	e.bytes_in = x->bytes_in;
	e.bytes_out = x->bytes_out;
	e.mask = x->conf->access_log_mask;
	e.n_mask = x->conf->n_access_log_mask;
	accesslog_write(&e);
	x->n_itl = 0;
	exchange_abandon(x);
}
