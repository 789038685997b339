/* SPDX-License-Identifier: Apache-2.0 */
/* The store's insides, shared by history.c and history_file.c only. */
#ifndef TOKENTAP_HISTORY_INT_H
#define TOKENTAP_HISTORY_INT_H

#include "history.h"

/* A closed step: its encoding (history_encode). */
struct history_blob {
	uint32_t len;
	uint8_t b[];
};

struct history_series {
	enum history_kind kind;
	char name[HISTORY_NAME_MAX];
	int64_t active;                        /* streams now */
	struct history_sum open[2];            /* steps open_from and open_from + 1 */
	struct history_blob **ring[HISTORY_TIERS_MAX];   /* NULL: nothing kept yet */
	size_t n_blobs;                        /* in all its rings */
};

struct history {
	size_t n_tiers;
	struct conf_history_step tier[HISTORY_TIERS_MAX];
	uint64_t slots[HISTORY_TIERS_MAX];     /* keep / step */
	int64_t offset;                        /* wall - the feeder's clock */
	int started;
	/* The finest tier's steps open_from and open_from + 1 are open; tier
	 * k's ring holds its steps [closed[k] - slots[k], closed[k]), step i in
	 * slot i % slots[k] (closed[0] is open_from). */
	uint64_t open_from;
	uint64_t closed[HISTORY_TIERS_MAX];
	struct history_series **v;
	size_t n, cap;
	struct history_series *last;           /* the last one looked up */
	/* which routes and SLOs may have a series (NULL: all) */
	int (*keep)(void *arg, enum history_kind kind, const char *name);
	void *keep_arg;
	size_t bytes;                          /* the blobs' and rings' */
};

/* Starts the (empty) store with step idx of the finest tier as the last
 * open one. */
void history_start(struct history *h, uint64_t idx);
/* The series of kind and name, made when create and there is room. */
struct history_series *history_series_get(struct history *h, enum history_kind kind,
    const char *name, int create);
/* Keeps blob b (NULL: an empty step) as step idx of tier k, in place of
 * what the slot held. -1 when memory ran out (b is freed). */
int history_put(struct history *h, struct history_series *se, size_t k, uint64_t idx,
    struct history_blob *b);
/* s's encoding in a blob of its own; NULL for an empty step, or when
 * memory ran out (*oom set). */
struct history_blob *history_blob_of(const struct history_sum *s, int *oom);

#endif
