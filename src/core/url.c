/* SPDX-License-Identifier: Apache-2.0 */
/* The one URL parser (url.h): RFC 3986's http URLs, strictly, since every
 * URL here is written by an operator and a mistake is best reported when
 * the file is read. */
#include "url.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* "%XX" at s (n bytes available): the byte it stands for, or -1. */
static int pct_byte(const char *s, size_t n)
{
	int hi, lo;
	if (n < 3 || s[0] != '%' || (hi = hex_value(s[1])) < 0 || (lo = hex_value(s[2])) < 0)
		return -1;
	return hi * 16 + lo;
}

static int is_alnum(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

static int is_unreserved(char ch)
{
	return is_alnum(ch) || (ch != '\0' && strchr("-._~", ch) != NULL);
}

static int is_sub_delim(char ch)
{
	return ch != '\0' && strchr("!$&'()*+,;=", ch) != NULL;
}

/* n bytes of s, a part of user:password, decoded into a new string. */
static const char *decode_userinfo(const char *s, size_t n, char **out)
{
	char *d = malloc(n + 1);
	size_t j = 0;

	if (d == NULL)
		return "out of memory";
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch == '%') {
			int b = pct_byte(s + i, n - i);
			if (b <= 0) {   /* %00 would cut the string short */
				free(d);
				return "bad percent-encoding in the credentials";
			}
			ch = (char)b;
			i += 2;
		} else if (!is_unreserved(ch) && !is_sub_delim(ch) && ch != ':') {
			free(d);
			return "the credentials have a character that must be percent-encoded";
		}
		d[j++] = ch;
	}
	d[j] = '\0';
	*out = d;
	return NULL;
}

/* user[:password], the n bytes before '@'. */
static const char *parse_userinfo(const char *s, size_t n, struct url *u)
{
	const char *colon = memchr(s, ':', n);
	const char *problem;

	if (n == 0)
		return "empty credentials before '@'";
	problem = decode_userinfo(s, colon != NULL ? (size_t)(colon - s) : n, &u->user);
	if (problem == NULL && colon != NULL)
		problem = decode_userinfo(colon + 1, n - (size_t)(colon + 1 - s), &u->password);
	return problem;
}

/* [v6addr%zone], the n bytes of s from '['; *end gets the byte after ']'.
 * The zone is written "%25zone" (RFC 6874) or, as getaddrinfo takes it,
 * "%zone"; it is kept as "%zone". */
static const char *parse_ipv6(const char *s, size_t n, struct url *u, const char **end)
{
	const char *close = memchr(s, ']', n), *in = s + 1, *pct, *zone;
	char addr[INET6_ADDRSTRLEN];
	unsigned char bin[16];
	size_t al, zl;

	if (close == NULL)
		return "unterminated IPv6 address (expected [addr])";
	pct = memchr(in, '%', (size_t)(close - in));
	al = (size_t)((pct != NULL ? pct : close) - in);
	if (al == 0 || al >= sizeof addr)
		return "bad IPv6 address";
	memcpy(addr, in, al);
	addr[al] = '\0';
	if (inet_pton(AF_INET6, addr, bin) != 1)
		return "bad IPv6 address";
	zone = pct;
	if (pct != NULL) {
		zone = pct + 1;
		if (close - zone >= 2 && zone[0] == '2' && zone[1] == '5')
			zone += 2;
		if (zone == close)
			return "bad IPv6 zone";
		for (const char *z = zone; z < close; z++)
			if (!is_unreserved(*z))
				return "bad IPv6 zone";
	}
	zl = zone != NULL ? (size_t)(close - zone) : 0;
	if (al + 1 + zl >= sizeof u->host)
		return "the host name is too long";
	snprintf(u->host, sizeof u->host, "%s%s%.*s", addr, zone != NULL ? "%" : "", (int)zl,
	    zone != NULL ? zone : "");
	*end = close + 1;
	return NULL;
}

/* host[:port], the n bytes of s (the authority after any '@'). */
static const char *parse_hostport(const char *s, size_t n, struct url *u)
{
	const char *end = s + n, *after;
	const char *problem;
	unsigned long port = 0;

	if (n > 0 && *s == '[') {
		if ((problem = parse_ipv6(s, n, u, &after)) != NULL)
			return problem;
	} else {
		size_t hl;
		after = memchr(s, ':', n);
		if (after == NULL)
			after = end;
		hl = (size_t)(after - s);
		if (hl == 0)
			return "expected a host after the scheme";
		if (hl >= sizeof u->host)
			return "the host name is too long";
		for (size_t i = 0; i < hl; i++)
			if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
				return "the host has an invalid character";
		memcpy(u->host, s, hl);
		u->host[hl] = '\0';
	}
	u->port = url_default_port(u->tls);
	if (after == end)
		return NULL;
	if (*after != ':')
		return "unexpected character after the host";
	if (end - after < 2 || end - after > 6)
		return "bad port";
	for (const char *p = after + 1; p < end; p++) {
		if (*p < '0' || *p > '9')
			return "bad port";
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port == 0 || port > 65535)
		return "bad port";
	u->port = (unsigned)port;
	u->port_given = 1;
	return NULL;
}

/* A path or a query goes on the wire as written: no space, no control
 * byte, and every '%' an escape. */
static const char *check_target(const char *s, size_t n, int query)
{
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return query ? "the query has a space or control character" :
			    "the path has a space or control character";
		if (s[i] == '%' && pct_byte(s + i, n - i) < 0)
			return query ? "bad percent-encoding in the query" :
			    "bad percent-encoding in the path";
	}
	return NULL;
}

static const char *parse_rest(const char *s, struct url *u)
{
	const char *auth_end = s + strcspn(s, "/?"), *at, *q;
	const char *problem;

	at = memrchr(s, '@', (size_t)(auth_end - s));
	if (at != NULL) {
		if ((problem = parse_userinfo(s, (size_t)(at - s), u)) != NULL)
			return problem;
		s = at + 1;
	}
	if ((problem = parse_hostport(s, (size_t)(auth_end - s), u)) != NULL)
		return problem;
	q = auth_end + strcspn(auth_end, "?");
	if ((problem = check_target(auth_end, (size_t)(q - auth_end), 0)) != NULL)
		return problem;
	if (*q == '?' && (problem = check_target(q + 1, strlen(q + 1), 1)) != NULL)
		return problem;
	u->path = strndup(auth_end, (size_t)(q - auth_end));
	if (*q == '?')
		u->query = strdup(q + 1);
	if (u->path == NULL || (*q == '?' && u->query == NULL))
		return "out of memory";
	return NULL;
}

const char *url_parse(const char *s, struct url *u)
{
	const char *problem;

	memset(u, 0, sizeof *u);
	if (strncasecmp(s, "http://", 7) == 0) {
		s += 7;
	} else if (strncasecmp(s, "https://", 8) == 0) {
		s += 8;
		u->tls = 1;
	} else {
		return "expected an http:// or https:// URL";
	}
	if (strchr(s, '#') != NULL)
		return "must not contain a fragment";
	problem = parse_rest(s, u);
	if (problem != NULL)
		url_free(u);
	return problem;
}

void url_free(struct url *u)
{
	free(u->user);
	free(u->password);
	free(u->path);
	free(u->query);
	memset(u, 0, sizeof *u);
}

unsigned url_default_port(int tls)
{
	return tls ? 443 : 80;
}

/* s[0..n) at *at of out[0..len), as much as fits before the NUL's byte. */
static void auth_put(char *out, size_t len, size_t *at, const char *s, size_t n)
{
	if (*at + 1 < len)
		memcpy(out + *at, s, n < len - 1 - *at ? n : len - 1 - *at);
	*at += n;
}

/* What snprintf's "[%s]:%u" and its kin write, without snprintf (a Host
 * header's, every request): the same bytes, cut the same way. */
int url_authority(char *out, size_t len, const char *host, unsigned port,
    unsigned omit_port)
{
	size_t n = strlen(host), at = 0, d = 0;
	int v6 = memchr(host, ':', n) != NULL;
	char digits[12];

	if (v6)
		auth_put(out, len, &at, "[", 1);
	auth_put(out, len, &at, host, n);
	if (v6)
		auth_put(out, len, &at, "]", 1);
	if (port != omit_port) {
		do {
			digits[sizeof digits - 1 - d++] = (char)('0' + port % 10);
		} while ((port /= 10) != 0);
		digits[sizeof digits - 1 - d] = ':';
		auth_put(out, len, &at, digits + sizeof digits - 1 - d, d + 1);
	}
	if (len > 0)
		out[at < len ? at : len - 1] = '\0';
	return at > INT_MAX ? -1 : (int)at;
}
