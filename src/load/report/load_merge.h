/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-load merge: the documents of one plan's N shards (--shard I/N,
 * load_shard.h) joined into the document of that plan, as if one machine
 * had run it. Every figure is computed again from the union of the shards'
 * samples (every request, exactly: no percentile of percentiles); the
 * samples are set on one timeline by each shard's wall clock (its start
 * and its level's), so throughput is the work of every shard inside their
 * common window (the latest window start to the earliest window end), over
 * its length: the shards' sum while all of them ran.
 *
 * Refused, each reason named: a document that is no shard (or already a
 * merge), one saved without its samples, shard counts that differ, a shard
 * twice or missing, plans that differ (the kind, the levels, any parameter
 * of a level, the target, the dialect, the model; else the plan's digest:
 * prompts, trace or headers), and levels whose windows do not overlap
 * (shards that did not run at the same time). */
#ifndef TOKENTAP_LOAD_MERGE_H
#define TOKENTAP_LOAD_MERGE_H

#include <stdio.h>

#include "load_read.h"

struct load_merged {
	struct load_result r;        /* r.conf points at conf */
	struct load_conf conf;       /* the first shard's, unsharded */
};

/* Joins docs[0 .. n) into *m; argv: the merge's command line, kept as the
 * document's. Returns 0, or -1 with every reason written to err (*m is
 * then empty; load_merged_free is safe). Sweeps' knees are left at -1:
 * the caller judges the merged levels. */
int load_merge(struct load_merged *m, const struct load_doc *docs, size_t n,
    int argc, char **argv, FILE *err);
void load_merged_free(struct load_merged *m);

#endif
