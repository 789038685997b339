/* SPDX-License-Identifier: Apache-2.0 */
#include "httphead.h"

#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "url.h"
#include "util.h"

const struct http_header *httphead_find(const struct http_header *h, size_t n,
    const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (util_ieq(h[i].name, h[i].name_len, name))
			return &h[i];
	return NULL;
}

int httphead_list_next(const char *v, size_t vlen, size_t *pos,
    const char **item, size_t *len)
{
	size_t i = *pos, s, e;

	while (i < vlen && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
		i++;
	if (i == vlen) {
		*pos = i;
		return 0;
	}
	s = i;
	while (i < vlen && v[i] != ',')
		i++;
	e = i;
	while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
		e--;
	*pos = i;
	*item = v + s;
	*len = e - s;
	return 1;
}

int httphead_list_has(const char *v, size_t vlen, const char *name, size_t len)
{
	const char *item;
	size_t pos = 0, ilen;
	while (httphead_list_next(v, vlen, &pos, &item, &ilen))
		if (ilen == len && strncasecmp(item, name, len) == 0)
			return 1;
	return 0;
}

int httphead_is_hop(const struct http_head *m, const char *name, size_t len)
{
	/* with their lengths: a strlen each was most of a header's cost */
#define HOP(s) { s, sizeof s - 1 }
	static const struct { const char *s; size_t n; } hop[] = {
		HOP("connection"), HOP("keep-alive"), HOP("proxy-connection"),
		HOP("te"), HOP("upgrade")
	};
#undef HOP
	for (size_t i = 0; i < UTIL_ARRAY_LEN(hop); i++)
		if (len == hop[i].n && strncasecmp(name, hop[i].s, len) == 0)
			return 1;
	for (size_t i = 0; i < m->n; i++)
		if (util_ieq(m->h[i].name, m->h[i].name_len, "connection") &&
		    httphead_list_has(m->h[i].value, m->h[i].value_len, name, len))
			return 1;
	return 0;
}

static int is_set_header(const struct conf_route *r, const char *name, size_t len)
{
	for (size_t i = 0; i < r->n_set_headers; i++)
		if (util_ieq(name, len, r->set_headers[i].name))
			return 1;
	return 0;
}

/* A head is written in pieces, a few dozen of them; each evbuffer_add
 * costs about a hundred instructions, so they are gathered here and added
 * at once (a piece that does not fit goes on its own, in order). */
struct head_out {
	struct evbuffer *out;
	size_t len;
	char buf[2048];
};

static void head_flush(struct head_out *o)
{
	if (o->len > 0)
		evbuffer_add(o->out, o->buf, o->len);
	o->len = 0;
}

static void put(struct head_out *o, const void *p, size_t n)
{
	if (o->len + n > sizeof o->buf) {
		head_flush(o);
		if (n > sizeof o->buf) {
			evbuffer_add(o->out, p, n);
			return;
		}
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

static void put_str(struct head_out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void write_target(struct head_out *o, const struct http_head *rq,
    const struct conf_route *r, const struct conf_upstream *to)
{
	const char *t = rq->target;
	size_t len = rq->target_len;

	if (r->strip_prefix && r->match_path_prefix != NULL) {
		size_t plen = strlen(r->match_path_prefix);
		/* a prefix "/v1/" strips to "x", so keep the slash it ended on */
		if (plen > 0 && r->match_path_prefix[plen - 1] == '/')
			plen--;
		if (plen <= rq->path_len) {
			t += plen;
			len -= plen;
		}
	}
	put(o, to->base, strlen(to->base));
	if (len == 0 || (t[0] != '/' && t[0] != '?'))
		put(o, "/", 1);
	put(o, t, len);
}

int httphead_upgrade_index(const struct conf_route *r, const char *item, size_t len)
{
	const char *slash = memchr(item, '/', len);
	size_t n = slash != NULL ? (size_t)(slash - item) : len;

	for (size_t i = 0; i < r->n_upgrades; i++)
		if (util_ieq(item, n, r->upgrades[i]))
			return (int)i;
	return -1;
}

unsigned httphead_upgrade_offer(const struct http_head *rq, const struct conf_route *r)
{
	unsigned offer = 0;
	int asked = 0;

	for (size_t i = 0; i < rq->n; i++) {
		const struct http_header *h = &rq->h[i];
		const char *item;
		size_t pos = 0, len;
		int k;

		if (util_ieq(h->name, h->name_len, "connection"))
			asked |= httphead_list_has(h->value, h->value_len, "upgrade", 7);
		else if (util_ieq(h->name, h->name_len, "upgrade"))
			while (httphead_list_next(h->value, h->value_len, &pos, &item, &len))
				if ((k = httphead_upgrade_index(r, item, len)) >= 0)
					offer |= 1u << k;
	}
	return asked ? offer : 0;
}

/* Upgrade, as the backend sees it, where the client's first one was: the
 * client's items that the route allows, in the client's order (with their
 * versions). */
static void write_upgrade(struct head_out *o, const struct http_head *rq,
    const struct conf_route *r)
{
	int first = 1;

	put(o, "Upgrade: ", 9);
	for (size_t i = 0; i < rq->n; i++) {
		const struct http_header *h = &rq->h[i];
		const char *item;
		size_t pos = 0, len;

		if (!util_ieq(h->name, h->name_len, "upgrade"))
			continue;
		while (httphead_list_next(h->value, h->value_len, &pos, &item, &len)) {
			if (httphead_upgrade_index(r, item, len) < 0)
				continue;
			if (!first)
				put(o, ", ", 2);
			put(o, item, len);
			first = 0;
		}
	}
	put(o, "\r\n", 2);
}

/* Upgrade, in a 101: the one hop-by-hop field that goes on. */
static int hop_dropped(const struct http_head *m, const struct http_header *h,
    int upgrade)
{
	if (upgrade && util_ieq(h->name, h->name_len, "upgrade"))
		return 0;
	return httphead_is_hop(m, h->name, h->name_len);
}

void httphead_write_request(struct evbuffer *out, const struct http_head *rq,
    const struct conf_route *r, const struct conf_upstream *to,
    const char *client_ip, const char *proto, const char *request_id,
    size_t request_id_len, unsigned flags, const char *traceparent)
{
	const struct http_header *xff = NULL;
	struct head_out o;
	int upgrade_written = 0;

	o.out = out;
	o.len = 0;
	put(&o, rq->method, rq->method_len);
	put(&o, " ", 1);
	write_target(&o, rq, r, to);
	put(&o, " HTTP/1.1\r\n", 11);

	for (size_t i = 0; i < rq->n; i++) {
		const struct http_header *h = &rq->h[i];
		if ((flags & HTTPHEAD_UPGRADE) && !upgrade_written &&
		    util_ieq(h->name, h->name_len, "upgrade")) {
			write_upgrade(&o, rq, r);
			upgrade_written = 1;
			continue;
		}
		if (httphead_is_hop(rq, h->name, h->name_len) ||
		    is_set_header(r, h->name, h->name_len) ||
		    util_ieq(h->name, h->name_len, "x-forwarded-proto") ||
		    util_ieq(h->name, h->name_len, "x-request-id") ||
		    ((flags & HTTPHEAD_DROP_EXPECT) && util_ieq(h->name, h->name_len, "expect")) ||
		    ((flags & HTTPHEAD_DROP_TRACEPARENT) &&
		    util_ieq(h->name, h->name_len, "traceparent")) ||
		    ((flags & HTTPHEAD_DROP_TRACESTATE) &&
		    util_ieq(h->name, h->name_len, "tracestate")))
			continue;
		if (util_ieq(h->name, h->name_len, "host") && !r->preserve_host)
			continue;
		if (util_ieq(h->name, h->name_len, "x-forwarded-for")) {
			xff = h;
			continue;
		}
		put(&o, h->name, h->name_len);
		put(&o, ": ", 2);
		put(&o, h->value, h->value_len);
		put(&o, "\r\n", 2);
	}
	if (flags & HTTPHEAD_UPGRADE)
		put(&o, "Connection: Upgrade\r\n", 21);
	if (!r->preserve_host || httphead_find(rq->h, rq->n, "host") == NULL) {
		char host[URL_HOST_LEN + 16];
		int n = url_authority(host, sizeof host, to->host, to->port,
		    url_default_port(to->tls));
		put(&o, "Host: ", 6);
		put(&o, host, n > 0 && (size_t)n < sizeof host ? (size_t)n : 0);
		put(&o, "\r\n", 2);
	}
	for (size_t i = 0; i < r->n_set_headers; i++) {
		put_str(&o, r->set_headers[i].name);
		put(&o, ": ", 2);
		put_str(&o, r->set_headers[i].value);
		put(&o, "\r\n", 2);
	}
	put(&o, "X-Forwarded-For: ", 17);
	if (xff != NULL) {
		put(&o, xff->value, xff->value_len);
		put(&o, ", ", 2);
	}
	put_str(&o, client_ip);
	put(&o, "\r\nX-Forwarded-Proto: ", 21);
	put_str(&o, proto);
	put(&o, "\r\n", 2);
	if (traceparent != NULL) {
		put(&o, "traceparent: ", 13);
		put_str(&o, traceparent);
		put(&o, "\r\n", 2);
	}
	put(&o, "X-Request-Id: ", 14);
	put(&o, request_id, request_id_len);
	put(&o, "\r\n\r\n", 4);
	head_flush(&o);
}

void httphead_write_response(struct evbuffer *out, const struct http_head *rs,
    int decode, int close)
{
	/* 1xx and 204 have no body and may not say they have (RFC 9110 §8.6,
	 * RFC 9112 §6.1); nginx drops the fields too */
	int no_framing = rs->status < 200 || rs->status == 204;
	struct head_out o;

	o.out = out;
	o.len = 0;
	/* the version is tokentap's own (RFC 9110 §6.2): an HTTP/1.0
	 * upstream's status line reaches HTTP/1.1 clients as 1.1 */
	put(&o, "HTTP/1.1", 8);
	if (rs->start_len > 8)
		put(&o, rs->start_line + 8, rs->start_len - 8);
	put(&o, "\r\n", 2);
	for (size_t i = 0; i < rs->n; i++) {
		const struct http_header *h = &rs->h[i];
		int framing = util_ieq(h->name, h->name_len, "transfer-encoding");
		if (hop_dropped(rs, h, rs->status == 101))
			continue;
		if ((decode || no_framing) && framing)
			continue;
		if (no_framing && util_ieq(h->name, h->name_len, "content-length"))
			continue;
		put(&o, h->name, h->name_len);
		put(&o, ": ", 2);
		put(&o, h->value, h->value_len);
		put(&o, "\r\n", 2);
	}
	if (rs->status == 101)
		put(&o, "Connection: Upgrade\r\n", 21);
	else if (close)
		put(&o, "Connection: close\r\n", 19);
	put(&o, "\r\n", 2);
	head_flush(&o);
}
