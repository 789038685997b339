/* SPDX-License-Identifier: Apache-2.0 */
#include "tenant.h"

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "jsonw.h"
#include "util.h"

/* Lowercase hex of a SHA-256 digest of data (out: 65 bytes). */
static void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	static const char hex[] = "0123456789abcdef";

	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

/* The API key a request carries: OpenAI-style bearer tokens, Anthropic's
 * x-api-key, Azure's api-key, Gemini's x-goog-api-key. */
static const char *api_key(const struct http_header *h, size_t n, size_t *len)
{
	static const char *const names[] = { "x-api-key", "api-key", "x-goog-api-key" };
	const struct http_header *a = httphead_find(h, n, "authorization");

	if (a != NULL && a->value_len > 7 && strncasecmp(a->value, "bearer ", 7) == 0) {
		*len = a->value_len - 7;
		return a->value + 7;
	}
	for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
		a = httphead_find(h, n, names[i]);
		if (a != NULL && a->value_len > 0) {
			*len = a->value_len;
			return a->value;
		}
	}
	return NULL;
}

void tenant_identify(const struct conf *c, const struct http_header *h,
    size_t n, char *out, size_t outlen)
{
	const struct http_header *t = NULL;
	const char *key;
	size_t len;
	char hex[65];

	if (c->tenant_header != NULL)
		t = httphead_find(h, n, c->tenant_header);
	if (t != NULL && t->value_len > 0) {
		/* any byte a client sends: clean here, once, for every output */
		jsonw_clean(out, outlen, t->value, t->value_len);
		return;
	}
	key = api_key(h, n, &len);
	if (key == NULL) {
		/* snprintf's "-", without its few hundred instructions */
		if (outlen > 1)
			memcpy(out, "-", 2);
		else if (outlen == 1)
			out[0] = '\0';
		return;
	}
	sha256_hex(key, len, hex);
	for (size_t i = 0; i < c->n_tenant_api_keys; i++) {
		if (strcmp(c->tenant_api_keys[i].value, hex) == 0) {
			snprintf(out, outlen, "%s", c->tenant_api_keys[i].name);
			return;
		}
	}
	snprintf(out, outlen, "key:%.8s", hex);
}

/* The pattern's match is linear in the value (ere.h), and the value is at
 * most the tenant's 64 bytes (exchange.h) whatever the header carried; it
 * runs on a worker once per request (the statistics' mint flags) and on
 * the main thread once per new statistics group (the /metrics label). */
int tenant_named(const struct conf *c, const char *tenant)
{
	for (size_t i = 0; i < c->n_tenant_api_keys; i++)
		if (strcmp(c->tenant_api_keys[i].name, tenant) == 0)
			return 1;
	for (size_t i = 0; i < c->n_tenant_header_values; i++)
		if (strcmp(c->tenant_header_values[i], tenant) == 0)
			return 1;
	return c->tenant_header_re_ok &&
	    ere_match(&c->tenant_header_re, tenant, strlen(tenant));
}

int tenant_model_named(const struct conf *c, const char *model, size_t len)
{
	for (size_t i = 0; i < c->n_model_names; i++)
		if (strlen(c->model_names[i]) == len && memcmp(c->model_names[i], model, len) == 0)
			return 1;
	return c->model_re_ok && ere_match(&c->model_re, model, len);
}

int tenant_models_listed(const struct conf *c)
{
	return c->n_model_names > 0 || c->model_re_ok;
}

const char *tenant_metrics_label(const struct conf *c, const char *tenant)
{
	if (strcmp(tenant, "-") == 0 || strcmp(tenant, "_other") == 0 ||
	    (c != NULL && tenant_named(c, tenant)))
		return tenant;
	if (c != NULL && c->metrics_hashed_tenants && strncmp(tenant, "key:", 4) == 0)
		return tenant;
	return "_other";
}
