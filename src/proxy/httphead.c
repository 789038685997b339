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
	static const char *const hop[] = {
		"connection", "keep-alive", "proxy-connection", "te", "upgrade"
	};
	for (size_t i = 0; i < UTIL_ARRAY_LEN(hop); i++)
		if (util_ieq(name, len, hop[i]))
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

static void write_target(struct evbuffer *out, const struct http_head *rq,
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
	evbuffer_add(out, to->base, strlen(to->base));
	if (len == 0 || (t[0] != '/' && t[0] != '?'))
		evbuffer_add(out, "/", 1);
	evbuffer_add(out, t, len);
}

int httphead_wants_upgrade(const struct http_head *rq)
{
	const struct http_header *u = httphead_find(rq->h, rq->n, "upgrade");
	const char *item;
	size_t pos = 0, len;
	int other = 0;

	if (u == NULL)
		return 0;
	while (httphead_list_next(u->value, u->value_len, &pos, &item, &len))
		other |= !(len == 3 && strncasecmp(item, "h2c", 3) == 0);
	if (!other)
		return 0;
	for (size_t i = 0; i < rq->n; i++)
		if (util_ieq(rq->h[i].name, rq->h[i].name_len, "connection") &&
		    httphead_list_has(rq->h[i].value, rq->h[i].value_len, "upgrade", 7))
			return 1;
	return 0;
}

/* Upgrade, when the exchange switches protocols: the one hop-by-hop field
 * that goes on. */
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
    size_t request_id_len, unsigned flags)
{
	const struct http_header *xff = NULL;

	evbuffer_add(out, rq->method, rq->method_len);
	evbuffer_add(out, " ", 1);
	write_target(out, rq, r, to);
	evbuffer_add(out, " HTTP/1.1\r\n", 11);

	for (size_t i = 0; i < rq->n; i++) {
		const struct http_header *h = &rq->h[i];
		if (hop_dropped(rq, h, flags & HTTPHEAD_UPGRADE) ||
		    is_set_header(r, h->name, h->name_len) ||
		    util_ieq(h->name, h->name_len, "x-forwarded-proto") ||
		    util_ieq(h->name, h->name_len, "x-request-id") ||
		    ((flags & HTTPHEAD_DROP_EXPECT) && util_ieq(h->name, h->name_len, "expect")))
			continue;
		if (util_ieq(h->name, h->name_len, "host") && !r->preserve_host)
			continue;
		if (util_ieq(h->name, h->name_len, "x-forwarded-for")) {
			xff = h;
			continue;
		}
		evbuffer_add(out, h->name, h->name_len);
		evbuffer_add(out, ": ", 2);
		evbuffer_add(out, h->value, h->value_len);
		evbuffer_add(out, "\r\n", 2);
	}
	if (flags & HTTPHEAD_UPGRADE)
		evbuffer_add(out, "Connection: Upgrade\r\n", 21);
	if (!r->preserve_host || httphead_find(rq->h, rq->n, "host") == NULL) {
		char host[URL_HOST_LEN + 16];
		int n = url_authority(host, sizeof host, to->host, to->port,
		    url_default_port(to->tls));
		evbuffer_add(out, "Host: ", 6);
		evbuffer_add(out, host, n > 0 && (size_t)n < sizeof host ? (size_t)n : 0);
		evbuffer_add(out, "\r\n", 2);
	}
	for (size_t i = 0; i < r->n_set_headers; i++)
		evbuffer_add_printf(out, "%s: %s\r\n", r->set_headers[i].name,
		    r->set_headers[i].value);
	if (xff != NULL)
		evbuffer_add_printf(out, "X-Forwarded-For: %.*s, %s\r\n",
		    (int)xff->value_len, xff->value, client_ip);
	else
		evbuffer_add_printf(out, "X-Forwarded-For: %s\r\n", client_ip);
	evbuffer_add_printf(out, "X-Forwarded-Proto: %s\r\n", proto);
	evbuffer_add(out, "X-Request-Id: ", 14);
	evbuffer_add(out, request_id, request_id_len);
	evbuffer_add(out, "\r\n\r\n", 4);
}

void httphead_write_response(struct evbuffer *out, const struct http_head *rs,
    int decode, int close)
{
	/* 1xx and 204 have no body and may not say they have (RFC 9110 §8.6,
	 * RFC 9112 §6.1); nginx drops the fields too */
	int no_framing = rs->status < 200 || rs->status == 204;

	/* the version is tokentap's own (RFC 9110 §6.2): an HTTP/1.0
	 * upstream's status line reaches HTTP/1.1 clients as 1.1 */
	evbuffer_add(out, "HTTP/1.1", 8);
	if (rs->start_len > 8)
		evbuffer_add(out, rs->start_line + 8, rs->start_len - 8);
	evbuffer_add(out, "\r\n", 2);
	for (size_t i = 0; i < rs->n; i++) {
		const struct http_header *h = &rs->h[i];
		int framing = util_ieq(h->name, h->name_len, "transfer-encoding");
		if (hop_dropped(rs, h, rs->status == 101))
			continue;
		if ((decode || no_framing) && framing)
			continue;
		if (no_framing && util_ieq(h->name, h->name_len, "content-length"))
			continue;
		evbuffer_add(out, h->name, h->name_len);
		evbuffer_add(out, ": ", 2);
		evbuffer_add(out, h->value, h->value_len);
		evbuffer_add(out, "\r\n", 2);
	}
	if (rs->status == 101)
		evbuffer_add(out, "Connection: Upgrade\r\n", 21);
	else if (close)
		evbuffer_add(out, "Connection: close\r\n", 19);
	evbuffer_add(out, "\r\n", 2);
}
