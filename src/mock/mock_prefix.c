/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_prefix.h"

#include <pthread.h>
#include <stdlib.h>

int mock_prefix_table_init(struct mock_prefix_table *t, uint32_t sets,
    uint64_t window_us)
{
	t->e = calloc((size_t)sets * MOCK_PREFIX_WAYS, sizeof *t->e);
	t->sets = sets;
	t->window_us = window_us;
	return t->e != NULL ? 0 : -1;
}

void mock_prefix_table_free(struct mock_prefix_table *t)
{
	free(t->e);
	t->e = NULL;
}

/* FNV-1a over the block, seeded by the hash before it, then mixed
 * (splitmix64's finaliser) so the set index's low bits are good. */
uint64_t mock_prefix_hash(uint64_t prev, const char *block, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ prev;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)block[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h != 0 ? h : 1;
}

static struct mock_prefix_entry *set_of(struct mock_prefix_table *t, uint64_t h)
{
	return &t->e[(size_t)(h & (t->sets - 1)) * MOCK_PREFIX_WAYS];
}

static int live(const struct mock_prefix_table *t,
    const struct mock_prefix_entry *e, uint64_t now_us)
{
	return e->hash != 0 && now_us - e->used_us <= t->window_us;
}

/* Enters h at now_us: refreshes it, or takes an empty or expired way,
 * else the least recently used one. Returns 1 when h was live before. */
static int enter(struct mock_prefix_table *t, uint64_t h, uint64_t now_us)
{
	struct mock_prefix_entry *set = set_of(t, h), *victim = &set[0];

	for (unsigned i = 0; i < MOCK_PREFIX_WAYS; i++) {
		struct mock_prefix_entry *e = &set[i];
		if (e->hash == h) {
			int was = live(t, e, now_us);
			e->used_us = now_us;
			return was;
		}
		if (!live(t, e, now_us)) {
			if (live(t, victim, now_us))
				victim = e;
		} else if (live(t, victim, now_us) && e->used_us < victim->used_us) {
			victim = e;
		}
	}
	victim->hash = h;
	victim->used_us = now_us;
	return 0;
}

uint64_t mock_prefix_table_use(struct mock_prefix_table *t, const char *body,
    size_t len, uint64_t now_us)
{
	uint64_t h = 0, hits = 0;
	int chain = 1;

	for (size_t off = 0; off + MOCK_PREFIX_BLOCK <= len; off += MOCK_PREFIX_BLOCK) {
		h = mock_prefix_hash(h, body + off, MOCK_PREFIX_BLOCK);
		if (enter(t, h, now_us) && chain)
			hits++;
		else
			chain = 0;
	}
	return hits;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mock_prefix_table table;
static double cost_of_cached;

int mock_prefix_configure(uint64_t window_us, double cost)
{
	mock_prefix_table_free(&table);
	cost_of_cached = cost;
	return mock_prefix_table_init(&table, MOCK_PREFIX_SETS, window_us);
}

int mock_prefix_enabled(void)
{
	return table.e != NULL;
}

double mock_prefix_cost(void)
{
	return cost_of_cached;
}

uint64_t mock_prefix_lookup(const char *body, size_t len, uint64_t now_us)
{
	uint64_t blocks;

	if (table.e == NULL)
		return 0;
	pthread_mutex_lock(&lock);
	blocks = mock_prefix_table_use(&table, body, len, now_us);
	pthread_mutex_unlock(&lock);
	return blocks * MOCK_PREFIX_BLOCK_TOKENS;
}
