/* SPDX-License-Identifier: Apache-2.0 */
/* The commands on saved documents (docs/load-schema.md), which run no
 * load: `tokentap-load report RUN.json` (the table again, and the HTML
 * page or the CSV of a CI artefact) and `tokentap-load compare A.json
 * B.json` (A/B with a bootstrap, and --fail-on rules for CI),
 * `tokentap-load merge SHARD.json ...` (the shards of one plan joined);
 * and the
 * output files every command writes. */
#ifndef TOKENTAP_LOAD_SAVED_H
#define TOKENTAP_LOAD_SAVED_H

#include <stdio.h>

/* Each takes its command's arguments (argv[0] the command's name) and
 * returns the exit status: 0 done (compare: no rule failed), 1 a rule
 * failed or an output could not be written, 2 a usage or input error. */
int load_saved_report(int argc, char **argv);
int load_saved_compare(int argc, char **argv);
/* merge: 0 done, 1 an output could not be written, 2 usage or a bad
 * document, 4 the documents are not the shards of one plan. */
int load_saved_merge(int argc, char **argv);

/* An output file: stdout for "-"; NULL (reported, naming opt) on failure. */
FILE *load_out_open(const char *opt, const char *path);
/* Closes it (flushes stdout); -1 (reported) when a write failed. */
int load_out_close(FILE *f, const char *opt, const char *path);

#endif
