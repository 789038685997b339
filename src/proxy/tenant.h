/* Who is asking (SPEC §2 `tenant`): the tenant header's value, else the name
 * of a known API key, else "key:" + the first 8 hex digits of the key's
 * SHA-256, else "-". The key itself is never kept. */
#ifndef TOKENTAP_TENANT_H
#define TOKENTAP_TENANT_H

#include <stddef.h>

#include "config.h"
#include "httphead.h"

void tenant_identify(const struct conf *c, const struct http_header *h,
    size_t n, char *out, size_t outlen);

#endif
