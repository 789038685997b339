/* SPDX-License-Identifier: Apache-2.0 */
/* Between the config's two halves: config.c (life cycle, entry points)
 * reads a file with the core's table-driven reader (yconf.h) along the
 * schema of docs/contract.md §2 in config_schema.c. Nothing outside config*.c
 * includes this. */
#ifndef TOKENTAP_CONFIG_SCHEMA_H
#define TOKENTAP_CONFIG_SCHEMA_H

#include "config.h"
#include "yconf.h"

/* The top-level mapping; a reader's user is the struct conf it fills. */
extern const struct yconf_section conf_schema;

/* otel: (config_otel.c), and what it shares with the rest: a tls map as
 * a route's, a map of names to strings. */
extern const struct yconf_section conf_otel_section;
extern const struct yconf_section conf_tls_section;
void conf_kv_put(struct yconf *ld, const struct yconf_key *k, void *base,
    struct yconf_entry *e);
/* Unset otel keys from the OTel SDKs' environment variables (env: getenv
 * or a stand-in), then the defaults; problems go to errs as
 * "environment: NAME: message". 0 or -1. */
int conf_otel_finish(struct conf *c, const char *(*env)(const char *name), FILE *errs);
void conf_otel_init(struct conf_otel *o);
void conf_otel_free(struct conf_otel *o);

/* Frees c's listen entries (config.c). */
void conf_listen_free(struct conf *c);

#endif
