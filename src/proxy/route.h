/* Routing: the first route whose every match key fits the request wins. */
#ifndef TOKENTAP_ROUTE_H
#define TOKENTAP_ROUTE_H

#include <stddef.h>

#include "config.h"

struct http_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* Returns the header's value (first occurrence) or NULL. */
const struct http_header *route_find_header(const struct http_header *h,
    size_t n, const char *name);

/* The route for a request, or NULL (404). path excludes the query string. */
const struct conf_route *route_match(const struct conf *c, const char *path,
    size_t path_len, const struct http_header *h, size_t n);

#endif
