/* SPDX-License-Identifier: Apache-2.0 */
#include "pool.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>

#include "balance.h"

struct pool {
	struct pool *next;
	char *route;
	pthread_mutex_t lock;          /* set and gen, as a pair */
	struct pool_set *set;
	atomic_uint gen;
	atomic_size_t n;               /* the set's size, for pool_size */
	atomic_ulong ticket;           /* round_robin */
};

/* A worker's copy of a pool's current set. */
struct pool_view {
	struct pool_view *next;
	struct pool *pool;
	unsigned gen;
	struct pool_set *set;          /* a reference */
};

/* Made and read by the main thread; freed at exit. */
static struct pool *pools, **pools_tail = &pools;

/* ---- replicas and sets ----------------------------------------------- */

void pool_replica_ref(struct replica *rep)
{
	atomic_fetch_add_explicit(&rep->refs, 1, memory_order_relaxed);
}

void pool_replica_unref(struct replica *rep)
{
	if (rep == NULL ||
	    atomic_fetch_sub_explicit(&rep->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(rep->target.url);
	free(rep->target.base);
	free(rep);
}

static struct pool_set *set_ref(struct pool_set *s)
{
	if (s != NULL)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void pool_set_unref(struct pool_set *s)
{
	if (s == NULL || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < s->n; i++)
		pool_replica_unref(s->m[i].r);
	free(s);
}

/* ---- health ------------------------------------------------------------- */

uint64_t pool_backoff_us(const struct conf_health *h, unsigned n)
{
	uint64_t us = h->backoff_us;
	for (unsigned i = 1; i < n && us < h->backoff_max_us; i++)
		us *= 2;
	return us < h->backoff_max_us ? us : h->backoff_max_us;
}

int pool_healthy(const struct replica *rep, uint64_t now)
{
	(void)now;
	return atomic_load_explicit(&rep->ejected_until, memory_order_relaxed) == 0;
}

/* Out for the next backoff; *for_us says how long. */
static enum pool_health eject(struct replica *rep, const struct conf_health *h,
    uint64_t now, uint64_t *for_us)
{
	unsigned n = atomic_fetch_add(&rep->ejections, 1) + 1;
	uint64_t us = pool_backoff_us(h, n);

	atomic_store(&rep->fails, 0);
	atomic_store(&rep->ejected_until, now + us);
	atomic_fetch_add(&rep->ejected_total, 1);
	if (for_us != NULL)
		*for_us = us;
	return POOL_EJECTED;
}

static enum pool_health back(struct replica *rep)
{
	atomic_store(&rep->fails, 0);
	atomic_store(&rep->ejections, 0);
	atomic_store(&rep->ejected_until, 0);
	atomic_store(&rep->trial, 0);
	return POOL_BACK;
}

/* A failure outside a trial: ejects at the failures'th in a row, once
 * (another worker may have ejected it meanwhile). */
static enum pool_health failure(struct replica *rep, const struct conf_health *h,
    uint64_t now, uint64_t *for_us)
{
	uint64_t zero = 0;
	unsigned n;

	if (atomic_load(&rep->ejected_until) != 0)
		return POOL_SAME;
	n = atomic_fetch_add(&rep->fails, 1) + 1;
	if (n < h->failures)
		return POOL_SAME;
	if (!atomic_compare_exchange_strong(&rep->ejected_until, &zero, now + 1))
		return POOL_SAME;
	return eject(rep, h, now, for_us);
}

enum pool_health pool_report(struct replica *rep, const struct conf_health *h,
    int ok, int trial, uint64_t now, uint64_t *for_us)
{
	if (ok) {
		if (trial)
			return back(rep);
		atomic_store_explicit(&rep->fails, 0, memory_order_relaxed);
		return POOL_SAME;
	}
	if (trial) {
		atomic_store(&rep->trial, 0);
		return eject(rep, h, now, for_us);
	}
	return failure(rep, h, now, for_us);
}

enum pool_health pool_probe_result(struct replica *rep, const struct conf_health *h,
    int ok, uint64_t now, uint64_t *for_us)
{
	if (ok)
		return atomic_load(&rep->ejected_until) != 0 ? back(rep) : POOL_SAME;
	return failure(rep, h, now, for_us);
}

void pool_leave(struct replica *rep, int trial)
{
	if (rep == NULL)
		return;
	atomic_fetch_sub_explicit(&rep->open, 1, memory_order_relaxed);
	if (trial)
		atomic_store(&rep->trial, 0);
}

/* ---- picking ---------------------------------------------------------- */

static struct pool_view *view_of(struct pool_view **views, struct pool *p)
{
	struct pool_view *v;

	for (v = *views; v != NULL; v = v->next)
		if (v->pool == p)
			break;
	if (v == NULL) {
		if ((v = calloc(1, sizeof *v)) == NULL)
			return NULL;
		v->pool = p;
		v->gen = atomic_load(&p->gen) - 1;
		v->next = *views;
		*views = v;
	}
	/* one load per pick; the lock only when poold published a new set */
	if (atomic_load_explicit(&p->gen, memory_order_acquire) != v->gen) {
		pthread_mutex_lock(&p->lock);
		pool_set_unref(v->set);
		v->set = set_ref(p->set);
		v->gen = atomic_load_explicit(&p->gen, memory_order_relaxed);
		pthread_mutex_unlock(&p->lock);
	}
	return v;
}

void pool_views_free(struct pool_view **views)
{
	struct pool_view *v, *next;
	for (v = *views; v != NULL; v = next) {
		next = v->next;
		pool_set_unref(v->set);
		free(v);
	}
	*views = NULL;
}

size_t pool_size(const struct conf_route *r)
{
	return r->pool != NULL ? atomic_load_explicit(&r->pool->n, memory_order_relaxed) : 0;
}

static int was_tried(const struct replica *rep, struct replica *const *tried, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (tried[i] == rep)
			return 1;
	return 0;
}

/* The candidates of one round: the replicas not tried that serve, or
 * return and have no trial out. */
static size_t candidates(const struct pool_set *s, const struct conf_route *r,
    struct replica *const *tried, size_t n_tried, uint64_t now,
    struct balance_cand *c, size_t *idx)
{
	unsigned char slow[POOL_SET_MAX];
	size_t n = 0, n_slow = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct replica *rep = s->m[i].r;
		uint64_t until = atomic_load_explicit(&rep->ejected_until, memory_order_relaxed);
		if (was_tried(rep, tried, n_tried))
			continue;
		if (until != 0 && (now < until || atomic_load(&rep->trial)))
			continue;
		c[n].weight = s->m[i].weight;
		c[n].load = (uint64_t)atomic_load_explicit(&rep->open, memory_order_relaxed);
		c[n].id = rep->id;
		/* never with hash: affinity must not move with a passing slowness */
		slow[n] = r->balance != BALANCE_HASH && atomic_load(&rep->slow);
		n_slow += slow[n];
		idx[n++] = i;
	}
	/* a slow replica keeps a quarter of its share; without one the
	 * weights stay as written (round_robin goes in turn) */
	for (size_t k = 0; n_slow > 0 && k < n; k++)
		c[k].weight *= slow[k] ? 1 : 4;
	return n;
}

/* Nothing serves: the replica not tried whose ejection ends first. */
static struct replica *least_ejected(const struct pool_set *s,
    struct replica *const *tried, size_t n_tried)
{
	struct replica *best = NULL;
	uint64_t best_until = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct replica *rep = s->m[i].r;
		uint64_t until = atomic_load(&rep->ejected_until);
		if (was_tried(rep, tried, n_tried))
			continue;
		if (best == NULL || until < best_until) {
			best = rep;
			best_until = until;
		}
	}
	return best;
}

static long choose(const struct conf_route *r, struct pool *p,
    const struct balance_cand *c, size_t n, uint64_t affinity, uint64_t *rng)
{
	switch (r->balance) {
	case BALANCE_ROUND_ROBIN:
		return balance_round_robin(c, n, atomic_fetch_add_explicit(&p->ticket, 1,
		    memory_order_relaxed));
	case BALANCE_HASH:
		return balance_hash(c, n, affinity);
	default:
		return balance_least(c, n, rng);
	}
}

struct replica *pool_pick(struct pool_view **views, const struct conf_route *r,
    uint64_t affinity, struct replica *const *tried, size_t n_tried,
    uint64_t *rng, uint64_t now, int *trial)
{
	struct balance_cand c[POOL_SET_MAX];
	size_t idx[POOL_SET_MAX];
	struct pool_view *v;
	struct replica *rep = NULL;

	*trial = 0;
	if (r->pool == NULL || (v = view_of(views, r->pool)) == NULL || v->set == NULL)
		return NULL;
	/* a returning replica's trial may be taken by another worker between
	 * the look and the claim: then the next round goes without it */
	for (int round = 0; round < 4 && rep == NULL; round++) {
		size_t n = candidates(v->set, r, tried, n_tried, now, c, idx);
		long k;
		int free_trial = 0;
		if (n == 0)
			break;
		k = n == 1 ? 0 : choose(r, r->pool, c, n, affinity, rng);
		rep = v->set->m[idx[k]].r;
		if (atomic_load(&rep->ejected_until) == 0)
			break;
		if (atomic_compare_exchange_strong(&rep->trial, &free_trial, 1))
			*trial = 1;
		else
			rep = NULL;
	}
	if (rep == NULL && (rep = least_ejected(v->set, tried, n_tried)) == NULL)
		return NULL;
	pool_replica_ref(rep);
	atomic_fetch_add_explicit(&rep->open, 1, memory_order_relaxed);
	return rep;
}

/* ---- the main thread: pools and their sets -------------------------------- */

struct pool *pool_get(const char *route)
{
	struct pool *p;

	for (p = pools; p != NULL; p = p->next)
		if (strcmp(p->route, route) == 0)
			return p;
	if ((p = calloc(1, sizeof *p)) == NULL || (p->route = strdup(route)) == NULL) {
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	*pools_tail = p;
	pools_tail = &p->next;
	return p;
}

void pool_publish(struct pool *p, struct pool_set *s)
{
	struct pool_set *old;

	pthread_mutex_lock(&p->lock);
	old = p->set;
	p->set = s;
	atomic_store(&p->n, s != NULL ? s->n : 0);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_mutex_unlock(&p->lock);
	/* the workers' views hold their own references */
	pool_set_unref(old);
}

struct pool_set *pool_current(struct pool *p)
{
	struct pool_set *s;
	pthread_mutex_lock(&p->lock);
	s = set_ref(p->set);
	pthread_mutex_unlock(&p->lock);
	return s;
}

void pool_free_all(void)
{
	struct pool *p, *next;
	for (p = pools; p != NULL; p = next) {
		next = p->next;
		pool_set_unref(p->set);
		pthread_mutex_destroy(&p->lock);
		free(p->route);
		free(p);
	}
	pools = NULL;
	pools_tail = &pools;
}

/* An IP literal's address (no DNS), or 0. */
static socklen_t literal_addr(const char *host, unsigned port,
    struct sockaddr_storage *ss)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof *ss);
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return sizeof *a4;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		return sizeof *a6;
	}
	return 0;
}

int pool_is_literal(const char *host)
{
	struct sockaddr_storage ss;
	return literal_addr(host, 1, &ss) > 0;
}

/* "10.0.0.1:8000", "[::1]:8000" */
static void addr_text(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
		snprintf(out, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
		snprintf(out, len, "%s:%u", ip, ntohs(a->sin_port));
	}
}

static struct replica *reuse(const struct pool_set *old, const char *name,
    const char *url, const char *addr)
{
	for (size_t i = 0; old != NULL && i < old->n; i++) {
		struct replica *rep = old->m[i].r;
		if (strcmp(rep->name, name) == 0 && strcmp(rep->target.url, url) == 0 &&
		    strcmp(rep->addr, addr) == 0)
			return rep;
	}
	return NULL;
}

static struct replica *replica_new(const struct conf_upstream *u, const char *name,
    const struct sockaddr_storage *ss, socklen_t len)
{
	struct replica *rep = calloc(1, sizeof *rep);

	if (rep == NULL)
		return NULL;
	rep->target = *u;
	rep->target.url = strdup(u->url);
	rep->target.base = strdup(u->base ? u->base : "");
	if (rep->target.url == NULL || rep->target.base == NULL) {
		free(rep->target.url);
		free(rep->target.base);
		free(rep);
		return NULL;
	}
	snprintf(rep->name, sizeof rep->name, "%s", name);
	if (len > 0) {
		rep->sa = *ss;
		rep->salen = len;
		addr_text(ss, rep->addr, sizeof rep->addr);
	}
	rep->id = balance_key(rep->name, strlen(rep->name));
	rep->ttft_p95_ms = -1;
	atomic_init(&rep->refs, 1);
	return rep;
}

/* Appends the replica of u at address ss (len 0: by name) to s. */
static int add_member(struct pool_set *s, const struct pool_set *old,
    const struct conf_upstream *u, const struct sockaddr_storage *ss, socklen_t len,
    int several)
{
	char name[POOL_NAME_MAX], addr[64] = "";
	struct replica *rep;

	if (s->n == POOL_SET_MAX)
		return 0;
	if (len > 0)
		addr_text(ss, addr, sizeof addr);
	/* the URL as written; a name's address too when it has several */
	if (several)
		snprintf(name, sizeof name, "%s (%s)", u->url, addr);
	else
		snprintf(name, sizeof name, "%s", u->url);
	if ((rep = reuse(old, name, u->url, addr)) != NULL) {
		pool_replica_ref(rep);
		/* host, base and scheme follow the URL, which is the same */
	} else if ((rep = replica_new(u, name, ss, len)) == NULL) {
		return -1;
	}
	s->m[s->n].r = rep;
	s->m[s->n++].weight = u->weight;
	return 0;
}

struct pool_set *pool_build(const struct conf_route *r, const struct pool_set *old,
    pool_addrs_fn addrs, void *arg)
{
	struct pool_set *s = calloc(1, sizeof *s + POOL_SET_MAX * sizeof s->m[0]);
	struct sockaddr_storage ss[POOL_SET_MAX];
	socklen_t lens[POOL_SET_MAX];

	if (s == NULL)
		return NULL;
	atomic_init(&s->refs, 1);
	for (size_t i = 0; i < r->n_upstreams; i++) {
		const struct conf_upstream *u = &r->upstreams[i];
		size_t n;
		int rc = 0;

		if ((lens[0] = literal_addr(u->host, u->port, &ss[0])) > 0)
			n = 1;
		else
			n = addrs != NULL ? addrs(arg, u->host, u->port, ss, lens, POOL_SET_MAX) : 0;
		if (n == 0)
			rc = add_member(s, old, u, NULL, 0, 0);
		for (size_t k = 0; k < n && rc == 0; k++)
			rc = add_member(s, old, u, &ss[k], lens[k], n > 1);
		if (rc < 0) {
			pool_set_unref(s);
			return NULL;
		}
	}
	return s;
}

int pool_dial(struct bufferevent *bev, struct evdns_base *dns,
    const struct replica *rep)
{
	/* an address poold resolved, or the name (evdns, before its first
	 * answer) */
	if (rep->salen > 0)
		return bufferevent_socket_connect(bev, (const struct sockaddr *)&rep->sa,
		    (int)rep->salen) < 0 ? -1 : 0;
	return bufferevent_socket_connect_hostname(bev, dns, AF_UNSPEC,
	    rep->target.host, (int)rep->target.port) < 0 ? -1 : 0;
}
