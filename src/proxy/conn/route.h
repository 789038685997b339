/* SPDX-License-Identifier: Apache-2.0 */
/* Routing: the first route whose every match key fits the request wins. */
#ifndef TOKENTAP_ROUTE_H
#define TOKENTAP_ROUTE_H

#include <stddef.h>

#include "config.h"
#include "httphead.h"

/* The route for a request, or NULL (404). path excludes the query string. */
const struct conf_route *route_match(const struct conf *c, const char *path,
    size_t path_len, const struct http_header *h, size_t n);

#endif
