/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON document of a load_result (docs/load-schema.md, schema_version
 * 1), and the CSV of its levels. Durations in ms, rates per second, null
 * where undefined; strings through the one JSON writer (jsonw.h). */
#ifndef TOKENTAP_LOAD_JSON_H
#define TOKENTAP_LOAD_JSON_H

#include <stdio.h>

#include "load_result.h"

struct load_json_opts {
	int samples;                 /* every request (default on) */
	int itl_samples;             /* and each one's gaps */
};

void load_json_write(FILE *f, const struct load_result *r,
    const struct load_json_opts *o);
/* A level's members, without the braces (for the scenario documents),
 * each on its own line after ",\n" and indent spaces. */
void load_json_level_members(FILE *f, const struct load_result *r,
    const struct load_level *lv, const struct load_json_opts *o, int indent);
/* The plan's digest ("shard": {"plan"}): 16 hex digits, equal for the
 * shards of one plan (load_json.c says what it covers). */
void load_json_plan(const struct load_result *r, char out[20]);
/* One row per level, with a header line. */
void load_csv_write(FILE *f, const struct load_result *r);

#endif
