/* SPDX-License-Identifier: Apache-2.0 */
#include "poold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "jsonw.h"
#include "log.h"
#include "pool.h"
#include "probe.h"
#include "promout.h"
#include "stats.h"
#include "util.h"

#define TICK_US       250000    /* names due, checks due */
#define SLOW_EVERY_US 5000000   /* slow replicas from the statistics */
#define SLOW_WINDOW_US 60000000 /* "TTFT p95 over the last minute" */
#define SLOW_MIN_SAMPLES 10
#define NAME_ADDRS    64        /* addresses kept per name */

/* A DNS name replicas are written with, and what it resolved to. */
struct dns_name {
	struct dns_name *next;
	char host[256];
	unsigned port;
	uint64_t ttl_us;            /* the shortest dns_ttl of its routes */
	uint64_t next_at;           /* when to ask again */
	int asking;                 /* a lookup is on its way */
	int used;                   /* by the config in force */
	int failing;                /* the last lookup failed (said once) */
	size_t n;
	struct sockaddr_storage sa[NAME_ADDRS];
	socklen_t len[NAME_ADDRS];
};

/* An active check on its way, so a replica has one at a time. */
struct check {
	struct check *next;
	struct replica *rep;        /* identity only: the probe holds it */
	const char *route;          /* for the log: the config in force's */
};

static struct event_base *base;
static struct evdns_base *dns;
static struct event *tick;
static struct conf *cur;        /* the config in force, a reference */
static struct dns_name *names;
static struct check *checks;
static uint64_t next_slow, *next_check;   /* next_check: per route of cur */
static size_t n_next_check;

/* ---- names ----------------------------------------------------------- */

static struct dns_name *name_find(const char *host, unsigned port)
{
	for (struct dns_name *n = names; n != NULL; n = n->next)
		if (n->port == port && strcmp(n->host, host) == 0)
			return n;
	return NULL;
}

/* pool_build's view of the names: the addresses known, 0 before the first
 * answer (the replica is then connected by name). */
static size_t addrs_of(void *arg, const char *host, unsigned port,
    struct sockaddr_storage *out, socklen_t *lens, size_t max)
{
	struct dns_name *n = name_find(host, port);
	size_t k;
	(void)arg;
	if (n == NULL)
		return 0;
	for (k = 0; k < n->n && k < max; k++) {
		out[k] = n->sa[k];
		lens[k] = n->len[k];
	}
	return k;
}

/* Rebuilds and publishes route r's set from what the names say now. */
static void publish(struct conf_route *r)
{
	struct pool_set *old = pool_current(r->pool), *s;

	s = pool_build(r, old, addrs_of, NULL);
	pool_set_unref(old);
	if (s == NULL) {
		log_warn("route %s: out of memory building its replicas; they stay", r->name);
		return;
	}
	pool_publish(r->pool, s);
}

static int uses_name(const struct conf_route *r, const struct dns_name *n)
{
	for (size_t i = 0; i < r->n_upstreams; i++)
		if (r->upstreams[i].port == n->port && strcmp(r->upstreams[i].host, n->host) == 0)
			return 1;
	return 0;
}

static int cmp_addr(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct sockaddr_storage));
}

/* The answer's addresses, without repeats, in a stable order (a set
 * built twice from the same answer is the same set). */
static size_t collect(struct evutil_addrinfo *res, struct sockaddr_storage *sa)
{
	size_t n = 0;
	for (struct evutil_addrinfo *ai = res; ai != NULL && n < NAME_ADDRS; ai = ai->ai_next) {
		int seen = 0;
		if (ai->ai_addrlen > sizeof sa[0] ||
		    (ai->ai_family != AF_INET && ai->ai_family != AF_INET6))
			continue;
		memset(&sa[n], 0, sizeof sa[n]);
		memcpy(&sa[n], ai->ai_addr, ai->ai_addrlen);
		for (size_t k = 0; k < n && !seen; k++)
			seen = cmp_addr(&sa[k], &sa[n]) == 0;
		n += !seen;
	}
	qsort(sa, n, sizeof sa[0], cmp_addr);
	return n;
}

static void answered(int err, struct evutil_addrinfo *res, void *arg)
{
	struct dns_name *n = arg;
	struct sockaddr_storage sa[NAME_ADDRS];
	size_t k;

	n->asking = 0;
	n->next_at = util_now_us() + n->ttl_us;
	if (err != 0 || res == NULL) {
		if (err != EVUTIL_EAI_CANCEL && !n->failing)
			log_warn("upstream %s: cannot resolve: %s; %zu address(es) kept",
			    n->host, evutil_gai_strerror(err), n->n);
		n->failing = 1;
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	n->failing = 0;
	k = collect(res, sa);
	evutil_freeaddrinfo(res);
	if (k == 0 || (k == n->n && memcmp(sa, n->sa, k * sizeof sa[0]) == 0))
		return;
	if (n->n > 0)
		log_info("upstream %s: now %zu address(es)", n->host, k);
	memcpy(n->sa, sa, k * sizeof sa[0]);
	for (size_t i = 0; i < k; i++)
		n->len[i] = sa[i].ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
		    sizeof(struct sockaddr_in);
	n->n = k;
	for (size_t i = 0; cur != NULL && i < cur->n_routes; i++)
		if (cur->routes[i].pool != NULL && uses_name(&cur->routes[i], n))
			publish(&cur->routes[i]);
}

static void ask(struct dns_name *n)
{
	struct evutil_addrinfo hints;
	char port[16];

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* no IPv6 address where the host has no IPv6 to reach it with */
	hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
	snprintf(port, sizeof port, "%u", n->port);
	n->asking = 1;
	/* the callback may run before this returns (the hosts file) */
	evdns_getaddrinfo(dns, n->host, port, &hints, answered, n);
}

/* The names of c's replicas: new ones asked at once, each with the
 * shortest dns_ttl of the routes naming it. */
static int names_of(const struct conf *c)
{
	for (struct dns_name *n = names; n != NULL; n = n->next)
		n->used = 0;
	for (size_t i = 0; i < c->n_routes; i++) {
		const struct conf_route *r = &c->routes[i];
		for (size_t k = 0; k < r->n_upstreams; k++) {
			const struct conf_upstream *u = &r->upstreams[k];
			struct dns_name *n;
			if (pool_is_literal(u->host))
				continue;
			if ((n = name_find(u->host, u->port)) == NULL) {
				if ((n = calloc(1, sizeof *n)) == NULL)
					return -1;
				snprintf(n->host, sizeof n->host, "%s", u->host);
				n->port = u->port;
				n->ttl_us = r->dns_ttl_us;
				n->next = names;
				names = n;
			}
			if (!n->used || r->dns_ttl_us < n->ttl_us)
				n->ttl_us = r->dns_ttl_us;
			n->used = 1;
		}
	}
	return 0;
}

/* ---- active checks ---------------------------------------------------- */

static void check_done(void *arg, struct replica *rep, int ok, const char *why)
{
	struct check **pc, *c = arg;
	uint64_t us = 0;
	const struct conf_route *r = NULL;

	for (size_t i = 0; cur != NULL && i < cur->n_routes && r == NULL; i++)
		if (strcmp(cur->routes[i].name, c->route) == 0)
			r = &cur->routes[i];
	if (r != NULL && ok >= 0) {
		switch (pool_probe_result(rep, &r->health, ok, util_now_us(), &us)) {
		case POOL_EJECTED:
			log_warn("route %s: upstream %s ejected for %llu ms (health check: %s)",
			    r->name, rep->name, (unsigned long long)(us / 1000), why);
			break;
		case POOL_BACK:
			log_info("route %s: upstream %s is back (health check)", r->name,
			    rep->name);
			break;
		case POOL_SAME:
			break;
		}
	}
	for (pc = &checks; *pc != NULL; pc = &(*pc)->next)
		if (*pc == c) {
			*pc = c->next;
			break;
		}
	free((char *)c->route);
	free(c);
}

static int checking(const struct replica *rep)
{
	for (struct check *c = checks; c != NULL; c = c->next)
		if (c->rep == rep)
			return 1;
	return 0;
}

static void check_route(const struct conf_route *r)
{
	struct pool_set *s = pool_current(r->pool);

	for (size_t i = 0; s != NULL && i < s->n; i++) {
		struct check *c;
		if (checking(s->m[i].r) || (c = calloc(1, sizeof *c)) == NULL)
			continue;
		c->rep = s->m[i].r;
		c->route = strdup(r->name);
		if (c->route == NULL ||
		    probe_start(base, dns, cur, r, s->m[i].r, check_done, c) < 0) {
			free((char *)c->route);
			free(c);
			continue;
		}
		c->next = checks;
		checks = c;
	}
	pool_set_unref(s);
}

/* ---- slow replicas ------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* A replica whose TTFT p95 (the server side's, from the request's last
 * byte: a slow client is no slow replica) over the last minute is over ttft_factor times
 * the median of its pool's gets a quarter of its share (pool.c): slower,
 * not sick. With fewer than two replicas measured there is no median. */
static void slow_route(const struct conf_route *r)
{
	struct pool_set *s = pool_current(r->pool);
	double p95[POOL_SET_MAX], sorted[POOL_SET_MAX], median = -1;
	size_t n = 0;

	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++) {
		uint64_t count = 0;
		double q = -1;
		stats_upstream_ttft(r->name, s->m[i].r->name, SLOW_WINDOW_US, 0.95, &count, &q);
		p95[i] = count >= SLOW_MIN_SAMPLES ? q : -1;
		s->m[i].r->ttft_p95_ms = count > 0 ? q / 1000.0 : -1;
		if (p95[i] >= 0)
			sorted[n++] = p95[i];
	}
	if (n >= 2) {
		qsort(sorted, n, sizeof sorted[0], cmp_double);
		median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct replica *rep = s->m[i].r;
		int slow = r->health.ttft_factor > 0 && median > 0 && p95[i] >= 0 &&
		    p95[i] > r->health.ttft_factor * median;
		if (slow != atomic_load(&rep->slow))
			log_info("route %s: upstream %s %s (TTFT p95 %.1f ms, the pool's median "
			    "%.1f ms)", r->name, rep->name, slow ? "is slow: a quarter of its "
			    "share" : "is no longer slow", p95[i] / 1000.0, median / 1000.0);
		atomic_store(&rep->slow, slow);
	}
	pool_set_unref(s);
}

/* ---- the loop ----------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_now_us();
	(void)fd;
	(void)what;
	(void)arg;

	for (struct dns_name *n = names; n != NULL; n = n->next)
		if (n->used && !n->asking && now >= n->next_at)
			ask(n);
	for (size_t i = 0; cur != NULL && i < cur->n_routes && i < n_next_check; i++) {
		const struct conf_route *r = &cur->routes[i];
		if (r->health.path == NULL || r->pool == NULL || now < next_check[i])
			continue;
		next_check[i] = now + r->health.interval_us;
		check_route(r);
	}
	if (cur != NULL && now >= next_slow) {
		next_slow = now + SLOW_EVERY_US;
		stats_drain();
		for (size_t i = 0; i < cur->n_routes; i++)
			if (cur->routes[i].pool != NULL && pool_size(&cur->routes[i]) > 1)
				slow_route(&cur->routes[i]);
	}
}

int poold_start(struct event_base *b)
{
	struct timeval tv = { 0, TICK_US };

	base = b;
	dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if (dns == NULL) {
		/* no resolv.conf: names from /etc/hosts and IP literals still work */
		dns = evdns_base_new(base, 0);
		if (dns != NULL)
			evdns_base_load_hosts(dns, NULL);
	}
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	if (dns == NULL || tick == NULL) {
		log_error("pools: cannot start (out of memory)");
		return -1;
	}
	event_add(tick, &tv);
	return 0;
}

int poold_attach(struct conf *c)
{
	uint64_t *nc = calloc(c->n_routes ? c->n_routes : 1, sizeof *nc);

	if (nc == NULL || names_of(c) < 0) {
		free(nc);
		return -1;
	}
	for (size_t i = 0; i < c->n_routes; i++) {
		struct conf_route *r = &c->routes[i];
		if ((r->pool = pool_get(r->name)) == NULL) {
			free(nc);
			return -1;
		}
		publish(r);
	}
	free(next_check);
	next_check = nc;
	n_next_check = c->n_routes;
	conf_unref(cur);
	cur = conf_ref(c);
	/* new names now, not at the next tick */
	if (dns != NULL)
		for (struct dns_name *n = names; n != NULL; n = n->next)
			if (n->used && !n->asking && n->next_at == 0)
				ask(n);
	return 0;
}

void poold_stop(void)
{
	if (tick != NULL)
		event_free(tick);
	tick = NULL;
	probe_stop_all();         /* their done frees the checks */
	/* pending lookups are answered (cancelled) here, the names still there */
	if (dns != NULL)
		evdns_base_free(dns, 1);
	dns = NULL;
	while (names != NULL) {
		struct dns_name *n = names;
		names = n->next;
		free(n);
	}
	free(next_check);
	next_check = NULL;
	n_next_check = 0;
	conf_unref(cur);
	cur = NULL;
}

/* ---- outputs ---------------------------------------------------------- */

static const char *state_of(const struct replica *rep, uint64_t now, uint64_t *left_us)
{
	uint64_t until = atomic_load(&rep->ejected_until);
	*left_us = 0;
	if (until != 0 && now < until) {
		*left_us = until - now;
		return "ejected";
	}
	if (until != 0)
		return "returning";
	return atomic_load(&rep->slow) ? "slow" : "healthy";
}

static void json_replica(struct evbuffer *out, const struct pool_member *m, uint64_t now)
{
	const struct replica *rep = m->r;
	uint64_t left;
	const char *state = state_of(rep, now, &left);

	evbuffer_add_printf(out, "{\"upstream\":");
	jsonw_str(out, rep->name);
	evbuffer_add_printf(out, ",\"address\":");
	jsonw_str(out, rep->addr[0] ? rep->addr : NULL);
	evbuffer_add_printf(out, ",\"weight\":%llu,\"open_streams\":%ld,\"state\":\"%s\","
	    "\"ejected_for_ms\":", (unsigned long long)m->weight, atomic_load(&rep->open),
	    state);
	if (left > 0)
		evbuffer_add_printf(out, "%llu", (unsigned long long)(left / 1000));
	else
		evbuffer_add(out, "null", 4);
	evbuffer_add_printf(out, ",\"ejected_until\":");
	jsonw_time(out, left > 0 ? util_wall_ms() + left / 1000 : 0);
	evbuffer_add_printf(out, ",\"ejections\":%u,\"ttft_p95_ms\":", atomic_load(&rep->ejections));
	jsonw_fixed(out, rep->ttft_p95_ms, 3);
	evbuffer_add(out, "}", 1);
}

void poold_json(struct evbuffer *out)
{
	uint64_t now = util_now_us();

	evbuffer_add_printf(out, ",\"pools\":[");
	for (size_t i = 0; cur != NULL && i < cur->n_routes; i++) {
		const struct conf_route *r = &cur->routes[i];
		struct pool_set *s = r->pool ? pool_current(r->pool) : NULL;
		size_t healthy = 0;
		for (size_t k = 0; s != NULL && k < s->n; k++)
			healthy += pool_healthy(s->m[k].r, now);
		evbuffer_add_printf(out, "%s{\"route\":", i ? "," : "");
		jsonw_str(out, r->name);
		evbuffer_add_printf(out, ",\"balance\":\"%s\",\"replicas\":%zu,\"healthy\":%zu,"
		    "\"min_healthy\":%llu,\"upstreams\":[",
		    r->balance == BALANCE_HASH ? "hash" : r->balance == BALANCE_ROUND_ROBIN ?
		    "round_robin" : "least_streams", s ? s->n : 0, healthy,
		    (unsigned long long)r->thresholds.min_healthy);
		for (size_t k = 0; s != NULL && k < s->n; k++) {
			if (k > 0)
				evbuffer_add(out, ",", 1);
			json_replica(out, &s->m[k], now);
		}
		evbuffer_add(out, "]}", 2);
		pool_set_unref(s);
	}
	evbuffer_add(out, "]", 1);
}

/* One family: for every replica of the config in force, fn's value. */
static void prom_family(struct promout *o, const char *name, enum promproto_type type,
    const char *help, double (*fn)(const struct replica *, uint64_t))
{
	uint64_t now = util_now_us();
	struct promout_labels l;

	promout_family(o, name, help, type);
	for (size_t i = 0; cur != NULL && i < cur->n_routes; i++) {
		const struct conf_route *r = &cur->routes[i];
		struct pool_set *s = r->pool ? pool_current(r->pool) : NULL;
		for (size_t k = 0; s != NULL && k < s->n; k++) {
			l.n = 0;
			promout_label(&l, "route", r->name);
			promout_label(&l, "upstream", s->m[k].r->name);
			promout_sample(o, &l, fn(s->m[k].r, now));
		}
		pool_set_unref(s);
	}
}

static double up_value(const struct replica *rep, uint64_t now)
{
	return pool_healthy(rep, now);
}

static double open_value(const struct replica *rep, uint64_t now)
{
	(void)now;
	return (double)atomic_load(&rep->open);
}

static double ejections_value(const struct replica *rep, uint64_t now)
{
	(void)now;
	return (double)atomic_load(&rep->ejected_total);
}

void poold_prometheus(struct promout *o)
{
	prom_family(o, "tokentap_upstream_up", PROMPROTO_GAUGE,
	    "1 while the replica serves, 0 while it is ejected or waits for its trial.",
	    up_value);
	prom_family(o, "tokentap_upstream_open_streams", PROMPROTO_GAUGE,
	    "Requests in flight on the replica, all workers together.", open_value);
	prom_family(o, "tokentap_upstream_ejections_total", PROMPROTO_COUNTER,
	    "Times the replica was ejected (passive health or active checks).",
	    ejections_value);
}

int poold_healthy(const char *route, size_t *healthy, size_t *total)
{
	uint64_t now = util_now_us();

	*healthy = *total = 0;
	for (size_t i = 0; cur != NULL && i < cur->n_routes; i++) {
		const struct conf_route *r = &cur->routes[i];
		struct pool_set *s;
		if (strcmp(r->name, route) != 0 || r->pool == NULL)
			continue;
		s = pool_current(r->pool);
		for (size_t k = 0; s != NULL && k < s->n; k++)
			*healthy += pool_healthy(s->m[k].r, now);
		*total = s ? s->n : 0;
		pool_set_unref(s);
		return 0;
	}
	return -1;
}
