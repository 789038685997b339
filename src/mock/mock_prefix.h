/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-mock --prefix-cache WINDOW: a prefix cache in the manner of
 * vLLM's automatic prefix caching, exact enough to test against. The
 * request body is cut into blocks of MOCK_PREFIX_BLOCK bytes (16 tokens
 * at the mock's 4 bytes a token, vLLM's block size); each full block's
 * hash is chained to the one before, so a block's hash names the whole
 * body up to its end. A request's cached tokens are 16 x the leading
 * blocks whose hashes were seen within WINDOW (a hit stops at the first
 * miss); then every full block of its body is entered, or refreshed, at
 * its time. Kept in a set-associative table (MOCK_PREFIX_SETS sets of
 * MOCK_PREFIX_WAYS), a full set giving up its least recently used entry.
 * The table is pure (the caller gives the time); mock_prefix_lookup is
 * the process's one table behind a lock, for every worker. */
#ifndef TOKENTAP_MOCK_PREFIX_H
#define TOKENTAP_MOCK_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#define MOCK_PREFIX_BLOCK 64u            /* bytes: 16 tokens */
#define MOCK_PREFIX_BLOCK_TOKENS (MOCK_PREFIX_BLOCK / 4)
#define MOCK_PREFIX_SETS (1u << 16)
#define MOCK_PREFIX_WAYS 8u

struct mock_prefix_entry {
	uint64_t hash;                   /* 0: empty */
	uint64_t used_us;                /* last seen */
};

struct mock_prefix_table {
	struct mock_prefix_entry *e;     /* sets x ways */
	uint32_t sets;                   /* a power of 2 */
	uint64_t window_us;
};

/* A table of sets x MOCK_PREFIX_WAYS entries (sets a power of 2) whose
 * entries live window_us after their last use. Returns 0 or -1. */
int mock_prefix_table_init(struct mock_prefix_table *t, uint32_t sets,
    uint64_t window_us);
void mock_prefix_table_free(struct mock_prefix_table *t);
/* The chained hash of block i given the hash of block i - 1 (0 for the
 * first); never 0. */
uint64_t mock_prefix_hash(uint64_t prev, const char *block, size_t len);
/* The leading full blocks of body[0, len) found in t at now_us, every
 * full block then entered at now_us. Returns the blocks found. */
uint64_t mock_prefix_table_use(struct mock_prefix_table *t, const char *body,
    size_t len, uint64_t now_us);

/* The server's cache: off until configured. window_us > 0; cost the
 * fraction of --prefill-per-token a cached token costs. Before the
 * workers start. Returns 0 or -1 (out of memory). */
int mock_prefix_configure(uint64_t window_us, double cost);
int mock_prefix_enabled(void);
double mock_prefix_cost(void);
/* The cached tokens of a request body read at now_us (0 when off). */
uint64_t mock_prefix_lookup(const char *body, size_t len, uint64_t now_us);

#endif
