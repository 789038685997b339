/* Between the config's two halves: config.c (life cycle, entry points)
 * reads a file with the core's table-driven reader (yconf.h) along the
 * schema of SPEC §2 in config_schema.c. Nothing outside config*.c
 * includes this. */
#ifndef TOKENTAP_CONFIG_SCHEMA_H
#define TOKENTAP_CONFIG_SCHEMA_H

#include "config.h"
#include "yconf.h"

/* The top-level mapping; a reader's user is the struct conf it fills. */
extern const struct yconf_section conf_schema;

/* Frees c's listen entries (config.c). */
void conf_listen_free(struct conf *c);

#endif
