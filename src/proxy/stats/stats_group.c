/* SPDX-License-Identifier: Apache-2.0 */
/* The statistics groups: which group a record goes to (the names it may
 * have, the cardinality limits), the streams tied to a group while they
 * are open, and the groups, names and label sets that idle time gives
 * back. Main thread only. */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "stats_int.h"
#include "util.h"

/* ---- names ----------------------------------------------------------------- */

static uint64_t hash_text(const char *s)
{
	return util_fnv(UTIL_FNV_INIT, s, strlen(s));
}

static struct stats_name *name_alloc(const char *text, uint64_t h)
{
	size_t len = strlen(text);
	struct stats_name *n = malloc(sizeof *n + len + 1);

	if (n == NULL)
		return NULL;
	n->hnext = NULL;
	n->hash = h;
	n->refs = 0;
	memcpy(n->text, text, len + 1);
	return n;
}

static int names_grow(struct name_set *ns)
{
	size_t nb = ns->buckets ? ns->buckets * 2 : 64;
	struct stats_name **t = calloc(nb, sizeof *t);

	if (t == NULL)
		return -1;
	for (size_t i = 0; i < ns->buckets; i++)
		for (struct stats_name *n = ns->table[i], *next; n != NULL; n = next) {
			next = n->hnext;
			n->hnext = t[n->hash & (nb - 1)];
			t[n->hash & (nb - 1)] = n;
		}
	free(ns->table);
	ns->table = t;
	ns->buckets = nb;
	return 0;
}

/* The name of text: as it is when known; added when mint and there is
 * room under max; else "_other". NULL only when memory ran out. */
static struct stats_name *name_get(struct name_set *ns, const char *text, uint64_t max,
    int mint)
{
	uint64_t h = hash_text(text);
	struct stats_name *n;

	if (ns->other == NULL && (ns->other = name_alloc("_other", hash_text("_other"))) == NULL)
		return NULL;
	if (strcmp(text, "_other") == 0)
		return ns->other;
	for (n = ns->buckets ? ns->table[h & (ns->buckets - 1)] : NULL; n != NULL; n = n->hnext)
		if (n->hash == h && strcmp(n->text, text) == 0)
			return n;
	if (!mint || ns->n >= max)
		return ns->other;
	if ((ns->n >= ns->buckets && names_grow(ns) < 0) || (n = name_alloc(text, h)) == NULL)
		return ns->other;
	n->hnext = ns->table[h & (ns->buckets - 1)];
	ns->table[h & (ns->buckets - 1)] = n;
	ns->n++;
	return n;
}

/* A name no group has goes, and with it its place under the limit. */
static void name_unused(struct name_set *ns, struct stats_name *n)
{
	struct stats_name **p;

	if (n == ns->other || n->refs > 0)
		return;
	for (p = &ns->table[n->hash & (ns->buckets - 1)]; *p != NULL; p = &(*p)->hnext)
		if (*p == n) {
			*p = n->hnext;
			ns->n--;
			free(n);
			return;
		}
}

/* One group less has n. */
static void name_put(struct name_set *ns, const struct stats_name *cn)
{
	struct stats_name *n = (struct stats_name *)cn;

	if (n != ns->other && n->refs > 0)
		n->refs--;
	name_unused(ns, n);
}

static void names_free(struct name_set *ns)
{
	for (size_t i = 0; i < ns->buckets; i++)
		for (struct stats_name *n = ns->table[i], *next; n != NULL; n = next) {
			next = n->hnext;
			free(n);
		}
	free(ns->table);
	free(ns->other);
	memset(ns, 0, sizeof *ns);
}

/* ---- groups ---------------------------------------------------------------- */

static uint64_t hash_group(const struct stats_name *r, const struct stats_name *t,
    const struct stats_name *m, const struct stats_name *u, unsigned dialect, unsigned op)
{
	uint64_t h = ((r->hash * 31 + t->hash) * 31 + m->hash) * 31 + u->hash;
	return util_fnv_byte(util_fnv_byte(h, dialect), op);
}

static void lru_unlink(struct stats_state *st, struct group *g)
{
	if (g->newer != NULL)
		g->newer->older = g->older;
	else
		st->newest = g->older;
	if (g->older != NULL)
		g->older->newer = g->newer;
	else
		st->oldest = g->newer;
	g->newer = g->older = NULL;
}

static void lru_push(struct stats_state *st, struct group *g)
{
	g->older = st->newest;
	g->newer = NULL;
	if (st->newest != NULL)
		st->newest->newer = g;
	else
		st->oldest = g;
	st->newest = g;
}

static int groups_grow(struct stats_state *st)
{
	size_t nb = st->buckets ? st->buckets * 2 : 1024;
	struct group **t = calloc(nb, sizeof *t);

	if (t == NULL)
		return -1;
	for (size_t i = 0; i < st->buckets; i++)
		for (struct group *g = st->table[i], *next; g != NULL; g = next) {
			next = g->hnext;
			g->hnext = t[g->hash & (nb - 1)];
			t[g->hash & (nb - 1)] = g;
		}
	free(st->table);
	st->table = t;
	st->buckets = nb;
	return 0;
}

/* Its label set: resolved anew when it gave its own back, or when it was
 * folded and label sets have gone since (there may be room now). The
 * gauges it put in the old one move with it. */
static void relabel(struct stats_state *st, struct group *g)
{
	struct mset *old = g->ms;
	int folded;

	g->ms = metrics_resolve(g->route->text, g->tenant->text, g->model->text,
	    g->upstream->text, g->dialect, g->op, &folded);
	g->ms_folded = (uint8_t)folded;
	g->ms_epoch = metrics_epoch();
	if (old != g->ms)
		metrics_move(old, g->ms, g->active, g->stalled);
	metrics_release(old, st->now_us);
}

void stats_group_windows_free(struct stats_state *st, struct group *g)
{
	if (g->slot == NULL)
		return;
	for (size_t i = 0; i < st->n_windows * 2 * SLICES; i++) {
		struct slice *s = g->slot[i];
		if (s == NULL)
			continue;
		hist_sparse_free(&s->ttft);
		hist_sparse_free(&s->tpot);
		hist_sparse_free(&s->itl);
		hist_sparse_free(&s->ttfo);
		hist_sparse_free(&s->ovh_request);
		hist_sparse_free(&s->ovh_read);
		hist_sparse_free(&s->ttft_server);
		hist_sparse_free(&s->ttfo_server);
		free(s);
	}
	free(g->slot);
	g->slot = NULL;
}

static struct group *group_new(struct stats_state *st, struct stats_name *names[4],
    unsigned dialect, unsigned op, uint64_t h)
{
	struct group *g;

	if (st->n_groups >= st->buckets && groups_grow(st) < 0)
		return NULL;
	if ((g = calloc(1, sizeof *g)) == NULL)
		return NULL;
	g->route = names[0];
	g->tenant = names[1];
	g->model = names[2];
	g->upstream = names[3];
	for (int i = 0; i < 4; i++)
		names[i]->refs++;
	g->dialect = (uint8_t)dialect;
	g->op = (uint8_t)op;
	g->hash = h;
	g->last_us = st->now_us;
	relabel(st, g);
	g->hnext = st->table[h & (st->buckets - 1)];
	st->table[h & (st->buckets - 1)] = g;
	lru_push(st, g);
	st->n_groups++;
	return g;
}

/* ---- which group ----------------------------------------------------------- */

/* The group the last key went to: records come in runs of one stream's.
 * Where a key goes changes when a name is added (that call takes this
 * one's place) and when a group or a name goes (forgotten then). */
static struct {
	struct sample_key in;
	struct group *g;
} last_group;

#define KEY_CMP offsetof(struct sample_key, stream)   /* the stream's id aside */

struct group *stats_group_get(struct stats_state *st, const struct sample_key *in)
{
	struct stats_name *names[4];
	struct group *g;
	uint64_t h;

	if (last_group.g != NULL && memcmp(&last_group.in, in, KEY_CMP) == 0)
		return last_group.g;
	/* cardinality: a tenant or model not seen yet is added only by a
	 * request that earned it (stats.h, SAMPLE_MINT_*) and within the
	 * limits; else it is "_other". Replicas come from the config, but a
	 * DNS name's addresses change. */
	names[0] = name_get(&st->routes, in->route, UINT64_MAX, 1);
	names[1] = name_get(&st->tenants, in->tenant, st->max_tenants,
	    in->mint & SAMPLE_MINT_TENANT);
	names[2] = name_get(&st->models, in->model, st->max_models, in->mint & SAMPLE_MINT_MODEL);
	names[3] = name_get(&st->upstreams, in->upstream, STATS_UPSTREAMS_MAX, 1);
	for (int i = 0; i < 4; i++)
		if (names[i] == NULL)
			return NULL;
	h = hash_group(names[0], names[1], names[2], names[3], in->dialect, in->op);
	for (g = st->buckets ? st->table[h & (st->buckets - 1)] : NULL; g != NULL; g = g->hnext)
		if (g->hash == h && g->route == names[0] && g->tenant == names[1] &&
		    g->model == names[2] && g->upstream == names[3] &&
		    g->dialect == in->dialect && g->op == in->op)
			break;
	if (g == NULL && (g = group_new(st, names, in->dialect, in->op, h)) == NULL) {
		/* a name added for it goes again */
		name_unused(&st->routes, names[0]);
		name_unused(&st->tenants, names[1]);
		name_unused(&st->models, names[2]);
		name_unused(&st->upstreams, names[3]);
		return NULL;
	}
	last_group.in = *in;
	last_group.g = g;
	return g;
}

/* ---- open streams ------------------------------------------------------------ */

/* A stream's gauges (active, stalled) go where its +1 went, whatever its
 * later records would resolve to: between a stream's start and its end a
 * name may be added, a group may go, a label set be given back. An open
 * table of stream id -> group, for the streams open now. */
struct stream_entry {
	uint64_t id;               /* 0: free */
	struct group *g;
};

static struct {
	struct stream_entry *e;
	size_t n, cap;             /* cap: a power of two, or 0 */
} streams;

static size_t stream_home(uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (streams.cap - 1);
}

static void stream_put(uint64_t id, struct group *g)
{
	size_t k = stream_home(id);

	while (streams.e[k].id != 0)
		k = (k + 1) & (streams.cap - 1);
	streams.e[k].id = id;
	streams.e[k].g = g;
	streams.n++;
}

static int streams_grow(void)
{
	struct stream_entry *old = streams.e;
	size_t n = streams.cap;

	if ((streams.e = calloc(n ? 2 * n : 256, sizeof *streams.e)) == NULL) {
		streams.e = old;
		return -1;
	}
	streams.cap = n ? 2 * n : 256;
	streams.n = 0;
	for (size_t i = 0; i < n; i++)
		if (old[i].id != 0)
			stream_put(old[i].id, old[i].g);
	free(old);
	return 0;
}

static size_t stream_find(uint64_t id)
{
	if (streams.cap == 0)
		return SIZE_MAX;
	for (size_t k = stream_home(id); streams.e[k].id != 0; k = (k + 1) & (streams.cap - 1))
		if (streams.e[k].id == id)
			return k;
	return SIZE_MAX;
}

/* Linear probing's delete: an entry after the hole whose probe from its
 * home passed the hole moves into it. */
static void stream_remove(size_t hole)
{
	size_t j = hole;

	streams.e[hole].id = 0;
	streams.n--;
	for (;;) {
		size_t home;
		int passed;

		j = (j + 1) & (streams.cap - 1);
		if (streams.e[j].id == 0)
			return;
		home = stream_home(streams.e[j].id);
		passed = home <= j ? home <= hole && hole < j : home <= hole || hole < j;
		if (passed) {
			streams.e[hole] = streams.e[j];
			streams.e[j].id = 0;
			hole = j;
		}
	}
}

struct group *stats_group_of_stream(struct stats_state *st, const struct sample_key *k,
    int active_delta)
{
	size_t at = k->stream ? stream_find(k->stream) : SIZE_MAX;
	struct group *g;

	if (at != SIZE_MAX) {
		g = streams.e[at].g;
		if (active_delta < 0) {
			stream_remove(at);
			g->streams--;
		}
		return g;
	}
	g = stats_group_get(st, k);
	if (g != NULL && active_delta > 0 && k->stream != 0 &&
	    (2 * (streams.n + 1) <= streams.cap || streams_grow() == 0)) {
		stream_put(k->stream, g);
		g->streams++;
	}
	return g;
}

/* ---- use and idle time --------------------------------------------------------- */

int stats_group_stale(const struct group *g)
{
	return g->ms == NULL || (g->ms_folded && g->ms_epoch != metrics_epoch());
}

void stats_group_use(struct stats_state *st, struct group *g)
{
	if (stats_group_stale(g))
		relabel(st, g);
	g->last_us = st->now_us;
	if (st->newest != g) {
		lru_unlink(st, g);
		lru_push(st, g);
	}
}

static void group_free(struct stats_state *st, struct group *g)
{
	struct group **p;

	for (p = &st->table[g->hash & (st->buckets - 1)]; *p != NULL; p = &(*p)->hnext)
		if (*p == g) {
			*p = g->hnext;
			break;
		}
	lru_unlink(st, g);
	st->n_groups--;
	if (last_group.g == g)
		last_group.g = NULL;
	metrics_release(g->ms, g->last_us);
	name_put(&st->routes, g->route);
	name_put(&st->tenants, g->tenant);
	name_put(&st->models, g->model);
	name_put(&st->upstreams, g->upstream);
	stats_group_windows_free(st, g);
	free(g);
}

void stats_groups_sweep(struct stats_state *st)
{
	uint64_t first = st->release_us && st->release_us < st->idle_us ? st->release_us :
	    st->idle_us;
	uint64_t every = first / 10;
	struct group *g, *newer;

	if (st->idle_us == 0)
		return;
	if (every < 100000)
		every = 100000;
	if (every > 10000000)
		every = 10000000;
	if (st->now_us - st->swept_us < every)
		return;
	st->swept_us = st->now_us;
	for (g = st->oldest; g != NULL; g = newer) {
		uint64_t idle = st->now_us - g->last_us;
		newer = g->newer;
		if (idle < first)
			break;
		if (g->active != 0 || g->stalled != 0 || g->streams != 0) {
			stats_group_use(st, g);      /* open: in use */
			continue;
		}
		if (idle >= st->idle_us) {
			group_free(st, g);
		} else if (g->ms != NULL) {
			metrics_release(g->ms, g->last_us);
			g->ms = NULL;
		}
	}
	metrics_sweep(st->now_us, st->release_us);
}

void stats_groups_forget(void)
{
	last_group.g = NULL;
}

void stats_groups_free(struct stats_state *st)
{
	struct group *g, *older;

	for (g = st->newest; g != NULL; g = older) {
		older = g->older;
		stats_group_windows_free(st, g);
		free(g);
	}
	free(st->table);
	st->table = NULL;
	st->buckets = 0;
	st->newest = st->oldest = NULL;
	st->n_groups = 0;
	names_free(&st->routes);
	names_free(&st->tenants);
	names_free(&st->models);
	names_free(&st->upstreams);
	free(streams.e);
	memset(&streams, 0, sizeof streams);
	last_group.g = NULL;
}
