/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 message heads as the proxy rewrites them: the request it sends
 * upstream and the response head it passes to the client (RFC 9110 §7.6.1
 * hop-by-hop rules). Pure: reads parsed heads, writes into an evbuffer. */
#ifndef TOKENTAP_HTTPHEAD_H
#define TOKENTAP_HTTPHEAD_H

#include <stddef.h>

#include "config.h"

struct evbuffer;

#define HTTPHEAD_MAX_HEADERS 128

/* One header field as it lies in the received head (not NUL-terminated). */
struct http_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* The first field of that name (case-insensitive), or NULL. */
const struct http_header *httphead_find(const struct http_header *h, size_t n,
    const char *name);

struct http_head {
	const char *start_line;    /* request line or status line, no CRLF */
	size_t start_len;
	const char *method;        /* request */
	size_t method_len;
	const char *target;        /* request target as sent */
	size_t target_len;
	size_t path_len;           /* target up to '?' */
	unsigned status;           /* response */
	unsigned http_major, http_minor;
	struct http_header h[HTTPHEAD_MAX_HEADERS];
	size_t n;
};

/* The next non-empty element of a comma-separated field value (RFC 9110
 * §5.6.1) from *pos, without its surrounding whitespace: 1 and *item, *len
 * set, or 0 at the end. */
int httphead_list_next(const char *v, size_t vlen, size_t *pos,
    const char **item, size_t *len);
/* Does the list contain the token name (case-insensitive)? */
int httphead_list_has(const char *v, size_t vlen, const char *name, size_t len);

/* Header fields the proxy never forwards: Connection and the fields it
 * names, Keep-Alive, Proxy-Connection, TE, Upgrade. (Transfer-Encoding is
 * framing and is decided by the caller.) */
int httphead_is_hop(const struct http_head *m, const char *name, size_t len);

/* Writes the upstream request head for a client request on route r to
 * replica `to` (its Host and base path).
 * client_ip goes to X-Forwarded-For, proto to X-Forwarded-Proto; request_id
 * is the X-Request-Id to send (the client's or a new one). flags:
 * HTTPHEAD_DROP_EXPECT: tokentap answers Expect itself (always, as nginx),
 * so the backend is not asked; HTTPHEAD_UPGRADE: the client asks to switch
 * protocols (WebSocket), so Upgrade goes on with the protocols the route
 * allows only, and Connection: Upgrade. */
#define HTTPHEAD_DROP_EXPECT 1
#define HTTPHEAD_UPGRADE     2
/* W3C Trace Context: the client's traceparent is not passed on (tokentap
 * sends its own, traceparent below, or the client's was malformed), and
 * its tracestate neither (malformed: the recommendation drops both) */
#define HTTPHEAD_DROP_TRACEPARENT 4
#define HTTPHEAD_DROP_TRACESTATE  8
/* traceparent: a field value to send, NULL: none. */
void httphead_write_request(struct evbuffer *out, const struct http_head *rq,
    const struct conf_route *r, const struct conf_upstream *to,
    const char *client_ip, const char *proto, const char *request_id,
    size_t request_id_len, unsigned flags, const char *traceparent);
/* The protocols of r->upgrades (a bit per index) that the request asks to
 * switch to (Upgrade, named in Connection); 0: none, and the request is an
 * ordinary one (RFC 9110 §7.8 lets a server ignore Upgrade: its fields are
 * hop-by-hop, dropped). A protocol no route allows, h2c by default (RFC
 * 9113 §3.1 deprecates its upgrade, and the streams in it would go
 * unmeasured), never reaches the backend. */
unsigned httphead_upgrade_offer(const struct http_head *rq, const struct conf_route *r);
/* The index in r->upgrades of an Upgrade list item (protocol["/"version]:
 * its name, without case), or -1. */
int httphead_upgrade_index(const struct conf_route *r, const char *item, size_t len);

/* Writes the response head for the client: status line and end-to-end
 * headers unchanged and in order. decode: the client gets the decoded body
 * (HTTP/1.0), so Transfer-Encoding is dropped. close: add
 * "Connection: close" because this connection ends after the response. A
 * 101 keeps its Upgrade, with Connection: Upgrade (the tunnel follows). */
void httphead_write_response(struct evbuffer *out, const struct http_head *rs,
    int decode, int close);

#endif
