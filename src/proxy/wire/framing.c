/* SPDX-License-Identifier: Apache-2.0 */
#include "framing.h"

#include <string.h>
#include <strings.h>

#include "util.h"

static int verdict(struct framing_verdict *v, unsigned status,
    const char *type, const char *msg)
{
	v->status = status;
	v->type = type;
	v->msg = msg;
	return -1;
}

static int bad(struct framing_verdict *v, const char *msg)
{
	return verdict(v, 400, "bad_request", msg);
}

static int bad_gateway(struct framing_verdict *v, const char *msg)
{
	return verdict(v, 502, "bad_gateway", msg);
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* ---- finding a head ---------------------------------------------------- */

int framing_find_head(const char *p, size_t len, size_t *scan_pos,
    size_t max, size_t *head_len)
{
	size_t lim = len < max ? len : max;
	size_t i = *scan_pos;

	while (i < lim) {
		const char *nl = memchr(p + i, '\n', lim - i);
		size_t k = nl ? (size_t)(nl - p) : lim;
		/* in a line, a CR may only come right before its LF */
		size_t seg = nl && k > i && p[k - 1] == '\r' ? k - 1 - i : k - i;
		const char *cr = memchr(p + i, '\r', seg);
		if (cr != NULL && (nl != NULL || cr + 1 < p + lim))
			return -2;
		if (nl == NULL) {
			i = cr != NULL ? (size_t)(cr - p) : lim;  /* a CR last: wait */
			break;
		}
		if (k + 1 >= lim || (p[k + 1] == '\r' && k + 2 >= lim)) {
			i = k;      /* decide when more bytes came */
			break;
		}
		if (p[k + 1] == '\n') {
			*head_len = k + 2;
			return 1;
		}
		if (p[k + 1] == '\r') {
			if (p[k + 2] != '\n')
				return -2;
			*head_len = k + 3;
			return 1;
		}
		i = k + 1;
	}
	*scan_pos = i;
	return len >= max ? -1 : 0;
}

size_t framing_leading_blank(const char *p, size_t len)
{
	size_t i = 0;
	for (;;) {
		if (i < len && p[i] == '\n')
			i++;
		else if (i + 1 < len && p[i] == '\r' && p[i + 1] == '\n')
			i += 2;
		else
			return i;
	}
}

/* ---- requests ---------------------------------------------------------- */

int framing_request_line(const char *line, size_t len,
    struct framing_verdict *v)
{
	size_t i = 0, t, sp;
	const char *ver;

	while (i < len && util_is_tchar((unsigned char)line[i]))
		i++;
	if (i == 0 || i == len || line[i] != ' ')
		return bad(v, "malformed request line");
	t = i + 1;
	for (sp = t; sp < len && line[sp] != ' '; sp++)
		;
	if (sp == len)
		return bad(v, "HTTP/0.9 requests are not served");
	if (sp == t)
		return bad(v, "malformed request line");
	ver = line + sp + 1;
	len -= sp + 1;
	if (len != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[6] != '.' ||
	    ver[5] < '0' || ver[5] > '9' || ver[7] < '0' || ver[7] > '9')
		return bad(v, "malformed request line");
	if (ver[5] != '1' || ver[7] > '1')
		return verdict(v, 505, "http_version_not_supported",
		    "only HTTP/1.0 and HTTP/1.1 are served");
	return 0;
}

int framing_path(const char *path, size_t len)
{
	size_t seg_len = 0, seg_dots = 0;

	for (size_t i = 0; i <= len; i++) {
		unsigned char c;
		if (i == len) {
			c = '/';
		} else if (path[i] == '%') {
			int hi, lo;
			if (i + 2 >= len)
				return -1;
			hi = hexval((unsigned char)path[i + 1]);
			lo = hexval((unsigned char)path[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		} else {
			c = (unsigned char)path[i];
		}
		if (c < 0x20 || c == 0x7f)
			return -1;
		if (c == '/' || c == '\\') {
			if (seg_len == seg_dots && (seg_dots == 1 || seg_dots == 2))
				return -1;
			seg_len = seg_dots = 0;
			continue;
		}
		if (c == '.' && seg_dots == seg_len)
			seg_dots++;
		seg_len++;
	}
	return 0;
}

static int reg_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != 0 && strchr("-._~!$&'()*+,;=", c) != NULL);
}

int framing_host(const char *h, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return -1;
	if (h[0] == '[') {
		for (i = 1; i < len && h[i] != ']'; i++)
			if (hexval((unsigned char)h[i]) < 0 && h[i] != ':' && h[i] != '.')
				return -1;
		if (i == len || i == 1)
			return -1;
		i++;
	} else {
		for (; i < len && h[i] != ':'; i++) {
			if (h[i] == '%') {
				if (i + 2 >= len || hexval((unsigned char)h[i + 1]) < 0 ||
				    hexval((unsigned char)h[i + 2]) < 0)
					return -1;
				i += 2;
			} else if (!reg_name_char((unsigned char)h[i])) {
				return -1;
			}
		}
		if (i == 0)
			return -1;
	}
	if (i == len)
		return 0;
	if (h[i] != ':' || len - i - 1 > 5)
		return -1;
	{
		unsigned port = 0;
		for (i++; i < len; i++) {
			if (h[i] < '0' || h[i] > '9')
				return -1;
			port = port * 10 + (unsigned)(h[i] - '0');
		}
		return port > 65535 ? -1 : 0;
	}
}

/* Connection may name hop-by-hop fields, but naming the fields that frame
 * or route the message would have the proxy remove them and reframe it:
 * RFC 9110 §7.6.1 lets a proxy refuse instead, and so it does. */
static int names_framing(const struct http_head *m)
{
	static const char *const framing[] = {
		"content-length", "transfer-encoding", "host"
	};
	for (size_t i = 0; i < m->n; i++) {
		if (!util_ieq(m->h[i].name, m->h[i].name_len, "connection"))
			continue;
		for (size_t k = 0; k < UTIL_ARRAY_LEN(framing); k++)
			if (httphead_list_has(m->h[i].value, m->h[i].value_len,
			    framing[k], strlen(framing[k])))
				return 1;
	}
	return 0;
}

/* Transfer-Encoding over every field of that name (RFC 9110 §5.3 joins
 * them into one list): -1 none, 0 exactly "chunked", 1 empty, 2 anything
 * else (another coding, chunked twice, chunked not last). */
static int transfer_coding(const struct http_head *m)
{
	int found = 0, codings = 0, chunked = 0;
	for (size_t i = 0; i < m->n; i++) {
		const char *item;
		size_t pos = 0, len;
		if (!util_ieq(m->h[i].name, m->h[i].name_len, "transfer-encoding"))
			continue;
		found = 1;
		while (httphead_list_next(m->h[i].value, m->h[i].value_len, &pos,
		    &item, &len)) {
			codings++;
			chunked += util_ieq(item, len, "chunked");
		}
	}
	if (!found)
		return -1;
	if (codings == 0)
		return 1;
	return codings == 1 && chunked == 1 ? 0 : 2;
}

/* Content_Length or Transfer_Encoding: a server that maps '_' to '-' (CGI,
 * some frameworks) would frame the body by a field tokentap ignored. */
static int framing_in_disguise(const struct http_header *h)
{
	char name[32];
	if (h->name_len >= sizeof name || memchr(h->name, '_', h->name_len) == NULL)
		return 0;
	for (size_t i = 0; i < h->name_len; i++)
		name[i] = h->name[i] == '_' ? '-' : h->name[i];
	return util_ieq(name, h->name_len, "content-length") ||
	    util_ieq(name, h->name_len, "transfer-encoding");
}

/* absolute-form (RFC 9112 §3.2.2): "http(s)://authority[/path][?query]"
 * becomes the origin-form "/path[?query]" and the authority the Host. */
static int absolute_form(struct http_head *rq, struct framing_verdict *v)
{
	const char *t = rq->target, *a, *end = rq->target + rq->target_len, *pe;
	struct http_header *host;

	if (rq->target_len > 7 && strncasecmp(t, "http://", 7) == 0)
		a = t + 7;
	else if (rq->target_len > 8 && strncasecmp(t, "https://", 8) == 0)
		a = t + 8;
	else
		return bad(v, "request target must be an absolute path");
	for (pe = a; pe < end && *pe != '/' && *pe != '?'; pe++)
		;
	if (memchr(a, '@', (size_t)(pe - a)) != NULL)
		return bad(v, "user information in the request target");
	if (framing_host(a, (size_t)(pe - a)) != 0)
		return bad(v, "invalid authority in the request target");
	if (pe == end) {
		rq->target = "/";
		rq->target_len = 1;
	} else if (*pe == '/') {
		rq->target = pe;
		rq->target_len = (size_t)(end - pe);
	} else {
		return bad(v, "absolute-form target with a query but no path");
	}
	host = (struct http_header *)httphead_find(rq->h, rq->n, "host");
	if (host == NULL) {
		if (rq->n == HTTPHEAD_MAX_HEADERS)
			return bad(v, "too many header fields");
		host = &rq->h[rq->n++];
		host->name = "Host";
		host->name_len = 4;
	}
	host->value = a;
	host->value_len = (size_t)(pe - a);
	return 0;
}

static int check_target(struct http_head *rq, struct framing_verdict *v)
{
	const char *q;

	if (rq->target_len == 0)
		return bad(v, "empty request target");
	if (rq->target[0] != '/' && absolute_form(rq, v) < 0)
		return -1;
	if (memchr(rq->target, '#', rq->target_len) != NULL)
		return bad(v, "fragment in the request target");
	q = memchr(rq->target, '?', rq->target_len);
	rq->path_len = q ? (size_t)(q - rq->target) : rq->target_len;
	if (framing_path(rq->target, rq->path_len) != 0)
		return bad(v, "request path with dot-segments, encoded control bytes "
		    "or broken percent-encoding");
	return 0;
}

static int check_host(const struct http_head *rq, struct framing_verdict *v)
{
	const struct http_header *host = NULL;
	for (size_t i = 0; i < rq->n; i++) {
		if (!util_ieq(rq->h[i].name, rq->h[i].name_len, "host"))
			continue;
		if (host != NULL)
			return bad(v, "more than one Host header");
		host = &rq->h[i];
	}
	if (host == NULL)
		return rq->http_minor >= 1 ? bad(v, "missing Host header") : 0;
	if (framing_host(host->value, host->value_len) != 0)
		return bad(v, "invalid Host header");
	return 0;
}

int framing_request(struct http_head *rq, struct framing_verdict *v)
{
	int te;

	if (util_ieq(rq->method, rq->method_len, "TRACE") ||
	    util_ieq(rq->method, rq->method_len, "CONNECT"))
		return verdict(v, 405, "method_not_allowed",
		    "TRACE and CONNECT are not forwarded");
	if (check_target(rq, v) < 0)
		return -1;
	for (size_t i = 0; i < rq->n; i++) {
		if (rq->h[i].name_len == 0)
			return bad(v, "empty header field name");
		if (framing_in_disguise(&rq->h[i]))
			return bad(v, "Content_Length or Transfer_Encoding header");
	}
	if (check_host(rq, v) < 0)
		return -1;
	if (names_framing(rq))
		return bad(v, "Connection names Content-Length, Transfer-Encoding or Host");
	te = transfer_coding(rq);
	if (te >= 0 && rq->http_minor == 0)
		return bad(v, "Transfer-Encoding in an HTTP/1.0 request");
	if (te >= 0 && httphead_find(rq->h, rq->n, "content-length") != NULL)
		return bad(v, "both Content-Length and Transfer-Encoding");
	if (te == 1)
		return bad(v, "empty Transfer-Encoding");
	if (te == 2)
		return verdict(v, 501, "not_implemented",
		    "only the chunked transfer coding is supported");
	return 0;
}

/* ---- responses --------------------------------------------------------- */

int framing_bodiless_status(unsigned status)
{
	return status < 200 || status == 204 || status == 304;
}

int framing_response(const struct http_head *rs, struct framing_verdict *v)
{
	if (rs->http_major != 1 || rs->http_minor > 1)
		return bad_gateway(v, "upstream response is not HTTP/1.0 or HTTP/1.1");
	if (names_framing(rs))
		return bad_gateway(v, "upstream Connection names Content-Length, "
		    "Transfer-Encoding or Host");
	if (!framing_bodiless_status(rs->status) && transfer_coding(rs) > 0)
		return bad_gateway(v, "upstream response with a transfer coding "
		    "other than chunked");
	return 0;
}

int framing_switch(const struct http_head *rs, const struct conf_route *r,
    unsigned offer, struct framing_verdict *v)
{
	int named = 0;

	if (offer == 0)
		return bad_gateway(v, "upstream switched protocols (101) but the "
		    "client asked for no upgrade");
	for (size_t i = 0; i < rs->n; i++) {
		const struct http_header *h = &rs->h[i];
		const char *item;
		size_t pos = 0, len;

		if (!util_ieq(h->name, h->name_len, "upgrade"))
			continue;
		while (httphead_list_next(h->value, h->value_len, &pos, &item, &len)) {
			int k = httphead_upgrade_index(r, item, len);
			if (k < 0 || !(offer & (1u << k)))
				return bad_gateway(v, "upstream switched to a protocol the "
				    "client did not ask for");
			named = 1;
		}
	}
	if (!named)
		return bad_gateway(v, "upstream 101 names no protocol (Upgrade)");
	return 0;
}
