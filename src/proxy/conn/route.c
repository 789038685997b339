/* SPDX-License-Identifier: Apache-2.0 */
#include "route.h"

#include <string.h>
#include <strings.h>

#include "util.h"

/* Host matches without its port and without case. */
static int host_matches(const char *want, const struct http_header *host)
{
	size_t len;
	const char *colon;

	if (host == NULL)
		return 0;
	len = host->value_len;
	colon = memchr(host->value, ':', len);
	if (colon != NULL && host->value[0] != '[')
		len = (size_t)(colon - host->value);
	return util_ieq(host->value, len, want);
}

static int route_fits(const struct conf_route *r, const char *path,
    size_t path_len, const struct http_header *h, size_t n)
{
	if (r->match_path_prefix != NULL) {
		size_t plen = strlen(r->match_path_prefix);
		if (path_len < plen || memcmp(path, r->match_path_prefix, plen) != 0)
			return 0;
	}
	if (r->match_host != NULL &&
	    !host_matches(r->match_host, httphead_find(h, n, "host")))
		return 0;
	for (size_t i = 0; i < r->n_match_headers; i++) {
		const struct http_header *v =
		    httphead_find(h, n, r->match_headers[i].name);
		const char *want = r->match_headers[i].value;
		if (v == NULL || v->value_len != strlen(want) ||
		    memcmp(v->value, want, v->value_len) != 0)
			return 0;
	}
	return 1;
}

const struct conf_route *route_match(const struct conf *c, const char *path,
    size_t path_len, const struct http_header *h, size_t n)
{
	for (size_t i = 0; i < c->n_routes; i++)
		if (route_fits(&c->routes[i], path, path_len, h, n))
			return &c->routes[i];
	return NULL;
}
