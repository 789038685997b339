/* SPDX-License-Identifier: Apache-2.0 */
/* A JSON document of docs/load-schema.md read back into a load_result, so
 * that a saved run is reported (tokentap-load report) and compared
 * (tokentap-load compare) as a live one is: its header, its levels with
 * their figures as the document states them (never recomputed: the
 * document is the record), their SLO verdicts, tokentap's view, and every
 * sample the document holds, with its gaps where it has them.
 *
 * A member the document lacks is read as undefined (an older minor
 * version); a member of the wrong type, a JSON error, another major
 * schema version or a scenarios document is an error at FILE:LINE:COL. */
#ifndef TOKENTAP_LOAD_READ_H
#define TOKENTAP_LOAD_READ_H

#include <stdio.h>

#include "load_conf.h"
#include "load_result.h"

#define LOAD_DOC_STRINGS 16

struct load_doc {
	struct load_result r;        /* r.conf points at conf, r.argv at argv */
	struct load_conf conf;       /* the target, its dialect and model */
	char *path;
	char **argv;
	int argc;
	int has_samples;             /* every level carried its samples */
	int has_itl;                 /* and their gaps (--itl-samples) */
	char *own[LOAD_DOC_STRINGS]; /* names of a newer minor version, kept */
	size_t nown;
};

/* Reads path into *d. Returns 0, or -1 with every problem found written
 * to err (FILE:LINE:COL: what); *d is then empty (load_doc_free is safe). */
int load_read(struct load_doc *d, const char *path, FILE *err);
void load_doc_free(struct load_doc *d);

#endif
