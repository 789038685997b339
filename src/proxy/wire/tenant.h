/* SPDX-License-Identifier: Apache-2.0 */
/* Who is asking (docs/contract.md §2 `tenant`): the tenant header's value,
 * else the name of a known API key, else "key:" + the first 8 hex digits of
 * the key's SHA-256, else "-". The key itself is never kept. */
#ifndef TOKENTAP_TENANT_H
#define TOKENTAP_TENANT_H

#include <stddef.h>

#include "config.h"
#include "httphead.h"

void tenant_identify(const struct conf *c, const struct http_header *h,
    size_t n, char *out, size_t outlen);

/* Names the operator gave: a tenant (a tenant.api_keys name, a value in
 * tenant.header_values or matching tenant.header_pattern); a model (in
 * models.names or matching models.pattern); whether either models key is
 * set (then those alone name models). */
int tenant_named(const struct conf *c, const char *tenant);
int tenant_model_named(const struct conf *c, const char *model, size_t len);
int tenant_models_listed(const struct conf *c);

/* The tenant's label in /metrics, where clients must not decide the
 * cardinality: a tenant the operator named (a tenant.api_keys name, a
 * header value in tenant.header_values or matching tenant.header_pattern)
 * as it is, "-" (no tenant) and "_other" as they are, an unnamed key's
 * "key:..." with metrics.tenants: hashed; anything else "_other". */
const char *tenant_metrics_label(const struct conf *c, const char *tenant);

#endif
