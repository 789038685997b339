/* SPDX-License-Identifier: Apache-2.0 */
/* What tokentap refuses to forward: the HTTP/1.1 framing and routing rules
 * a message must meet so that tokentap, the backend and the client can only
 * agree on where it begins and ends (RFC 9110, RFC 9112). llhttp (strict)
 * checks the syntax; these checks cover what it leaves to its caller.
 * Pure: each reads a parsed head and returns a verdict, never does I/O. */
#ifndef TOKENTAP_FRAMING_H
#define TOKENTAP_FRAMING_H

#include <stddef.h>

#include "httphead.h"

/* status 0: go on; else answer it (400, 405, 501, 505 to a client; 502
 * for a response) with the JSON error type and message. */
struct framing_verdict {
	unsigned status;
	const char *type;
	const char *msg;
};

/* Scans a head for its end (an empty line) from *scan_pos, where an earlier
 * call stopped. 1: a head of *head_len bytes; 0: not yet (*scan_pos moves
 * on); -1: no end within max bytes; -2: a CR not followed by LF (RFC 9112
 * §2.2: a bare CR is an error). */
int framing_find_head(const char *p, size_t len, size_t *scan_pos,
    size_t max, size_t *head_len);

/* Bytes of empty lines (CRLF or LF) at the start of p, which RFC 9112 §2.2
 * lets a server skip before a request line. */
size_t framing_leading_blank(const char *p, size_t len);

/* A request line, without its line end: method SP target SP HTTP/1.x.
 * Checked as soon as it is complete, so that an HTTP/0.9 request or one of
 * another version is answered without waiting for a head that never comes. */
int framing_request_line(const char *line, size_t len,
    struct framing_verdict *v);

/* A parsed request head. An absolute-form target is turned into the
 * origin-form it names, and its authority becomes the Host (RFC 9112
 * §3.2.2): rq->target and the Host field then point at those bytes, and a
 * missing Host is added in rq->h. */
int framing_request(struct http_head *rq, struct framing_verdict *v);

/* A parsed response head (rs->status set). */
int framing_response(const struct http_head *rs, struct framing_verdict *v);

/* A 101 to a request on route r that offered the protocols of offer (bits
 * of r->upgrades, httphead_upgrade_offer): its Upgrade must name protocols
 * among those only (RFC 9110 §7.8: a server must not switch to one the
 * client did not name, and must say which). Else a 502: the tunnel would
 * carry bytes nobody asked for to the backend. */
int framing_switch(const struct http_head *rs, const struct conf_route *r,
    unsigned offer, struct framing_verdict *v);

/* The path part of an origin-form target (up to '?'): no dot-segments,
 * raw or percent-encoded, between '/', '\' or their encodings; no encoded
 * NUL or control byte; percent signs followed by two hex digits. 0: fine. */
int framing_path(const char *path, size_t len);

/* A Host value: uri-host [":" port] (RFC 9110 §7.2, RFC 3986 §3.2.2).
 * 0: fine. */
int framing_host(const char *h, size_t len);

/* Does a response with this status carry no body whatever its header
 * fields say (1xx, 204, 304; RFC 9112 §6.3)? */
int framing_bodiless_status(unsigned status);

#endif
