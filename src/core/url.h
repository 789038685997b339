/* SPDX-License-Identifier: Apache-2.0 */
/* URLs of the HTTP servers the programs talk to: a route's upstream, a
 * notifier's webhook or Alertmanager, tokentap-load's target. One parser,
 * so that the three agree on what a URL means (the scheme in any case,
 * default ports, IPv6 literals, percent-encoding); what each one accepts
 * of the parts (credentials, a query, https) is its caller's rule. Pure. */
#ifndef TOKENTAP_URL_H
#define TOKENTAP_URL_H

#include <stddef.h>

#define URL_HOST_LEN 256

struct url {
	int tls;                    /* https:// */
	char host[URL_HOST_LEN];    /* an IPv6 literal without its brackets,
	                             * its zone after '%' ("%25" decoded) */
	unsigned port;              /* as given, else 80 or 443 */
	int port_given;
	char *user, *password;      /* of user[:password]@, percent-decoded;
	                             * NULL: not given */
	char *path;                 /* as written, percent-encoding kept; ""
	                             * when none */
	char *query;                /* after '?', as written; NULL: none */
};

/* Parses s, http[s]://[user[:password]@]host[:port][/path][?query], into
 * *u. Returns NULL, or (u then empty) a constant naming the problem, which
 * never quotes the URL: it may hold credentials. A fragment is refused:
 * it is never sent. */
const char *url_parse(const char *s, struct url *u);
void url_free(struct url *u);

/* 80 for http, 443 for https. */
unsigned url_default_port(int tls);

/* Writes host[:port] as a Host header or a URL names it: an IPv6 literal
 * in brackets, ":port" left out when port is omit_port (the scheme's
 * default, for a Host header; 0 keeps every port). Returns the length
 * snprintf would, or -1. */
int url_authority(char *out, size_t len, const char *host, unsigned port,
    unsigned omit_port);

#endif
