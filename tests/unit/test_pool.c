/* SPDX-License-Identifier: Apache-2.0 */
/* Replica pools: sets built from a route (one replica per address of a
 * name), live state kept across rebuilds, picks, ejection with backoff,
 * the one trial of a returning replica. */

#include <arpa/inet.h>
#include <netinet/in.h>

#include "config.h"
#include "pool.h"

#include "unit.h"

#define S 1000000ull

/* A fake resolver: "pool.test" has three addresses, others none yet. */
static size_t fake_addrs(void *arg, const char *host, unsigned port,
    struct sockaddr_storage *out, socklen_t *lens, size_t max)
{
	size_t n = *(size_t *)arg;
	if (strcmp(host, "pool.test") != 0)
		return 0;
	for (size_t i = 0; i < n && i < max; i++) {
		struct sockaddr_in *a = (struct sockaddr_in *)&out[i];
		memset(&out[i], 0, sizeof out[i]);
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(0x0a000001u + (uint32_t)i);
		lens[i] = sizeof *a;
	}
	return n;
}

static struct conf *route_conf(const char *route_yaml)
{
	char text[2048];
	snprintf(text, sizeof text, "routes:\n  - name: r\n%s", route_yaml);
	return unit_conf(text);
}

/* Attaches r to its pool with a set built from it. */
static struct pool_set *attach(struct conf_route *r, size_t n_addrs)
{
	struct pool *p = pool_get(r->name);
	struct pool_set *old = pool_current(p), *s;
	assert_non_null(p);
	s = pool_build(r, old, fake_addrs, &n_addrs);
	assert_non_null(s);
	pool_set_unref(old);
	pool_publish(p, s);
	r->pool = p;
	return s;
}

/* The end of a test: the worker's views, the config, every pool. */
static void finish(struct pool_view **views, struct conf *c)
{
	if (views != NULL)
		pool_views_free(views);
	conf_unref(c);
	pool_free_all();
}

/* One request's pick, done with at once: which replica it was (the
 * pointer stays valid, the set holds it) and whether it was a trial. */
static struct replica *pick_done(struct pool_view **views, const struct conf_route *r,
    struct replica *const *tried, size_t n_tried, uint64_t *rng, uint64_t now, int *trial)
{
	struct replica *x = pool_pick(views, r, 0, tried, n_tried, rng, now, trial);
	assert_non_null(x);
	pool_leave(x, *trial);
	pool_replica_unref(x);
	return x;
}

static void test_build_names(void **state)
{
	(void)state;
	struct conf *c = route_conf("    upstreams:\n"
	    "      - {url: http://127.0.0.1:8001, weight: 2}\n"
	    "      - {url: http://pool.test:8000/v1}\n"
	    "      - {url: http://later.test:9000}\n");
	struct pool_set *s = attach(&c->routes[0], 3);

	assert_int_equal(s->n, 5);
	assert_string_equal(s->m[0].r->name, "http://127.0.0.1:8001");
	assert_string_equal(s->m[0].r->addr, "127.0.0.1:8001");
	assert_int_equal(s->m[0].weight, 2);
	/* a name with several addresses: a replica per address */
	assert_string_equal(s->m[1].r->name, "http://pool.test:8000/v1 (10.0.0.1:8000)");
	assert_string_equal(s->m[3].r->addr, "10.0.0.3:8000");
	assert_string_equal(s->m[3].r->target.base, "/v1");
	assert_string_equal(s->m[3].r->target.host, "pool.test");
	/* not resolved yet: connected by name */
	assert_string_equal(s->m[4].r->name, "http://later.test:9000");
	assert_int_equal(s->m[4].r->salen, 0);
	assert_int_equal(pool_size(&c->routes[0]), 5);
	finish(NULL, c);
}

/* A reload (or a DNS answer) keeps what stays, with its live state. */
static void test_rebuild_keeps_state(void **state)
{
	(void)state;
	struct conf *c1 = route_conf("    upstreams: [{url: http://127.0.0.1:1}, {url: http://127.0.0.1:2}]\n");
	struct conf *c2 = route_conf("    upstreams: [{url: http://127.0.0.1:2, weight: 5}, {url: http://127.0.0.1:3}]\n");
	struct pool_set *s1 = attach(&c1->routes[0], 0), *s2;
	struct replica *kept = s1->m[1].r, *gone = s1->m[0].r;
	struct pool_view *views = NULL;
	uint64_t rng = 1;
	int trial;
	struct replica *held;

	/* a stream in flight on the replica that leaves */
	held = pool_pick(&views, &c1->routes[0], 0, &kept, 1, &rng, S, &trial);
	assert_ptr_equal(held, gone);
	atomic_store(&kept->open, 7);
	s2 = attach(&c2->routes[0], 0);
	assert_ptr_equal(s2->m[0].r, kept);
	assert_int_equal(s2->m[0].weight, 5);
	assert_int_equal(atomic_load(&kept->open), 7);
	assert_string_equal(s2->m[1].r->name, "http://127.0.0.1:3");
	/* the old config's route is the same pool: its next pick sees the new set */
	assert_ptr_equal(c1->routes[0].pool, c2->routes[0].pool);
	/* the request that started on the gone replica ends there */
	assert_int_equal(atomic_load(&gone->open), 1);
	pool_leave(held, trial);
	assert_int_equal(atomic_load(&gone->open), 0);
	pool_replica_unref(held);
	conf_unref(c2);
	finish(&views, c1);
}

static void test_pick_excludes_tried_and_counts(void **state)
{
	(void)state;
	struct conf *c = route_conf("    upstreams: [{url: http://127.0.0.1:1}, {url: http://127.0.0.1:2}, {url: http://127.0.0.1:3}]\n");
	struct conf_route *r = &c->routes[0];
	struct pool_set *s = attach(r, 0);
	struct pool_view *views = NULL;
	struct replica *tried[3];
	uint64_t rng = 5;
	int trial, counts[3] = { 0 };

	for (int i = 0; i < 3; i++) {
		tried[i] = pool_pick(&views, r, 0, tried, (size_t)i, &rng, S, &trial);
		assert_non_null(tried[i]);
		for (int k = 0; k < i; k++)
			assert_ptr_not_equal(tried[i], tried[k]);
	}
	assert_null(pool_pick(&views, r, 0, tried, 3, &rng, S, &trial));
	for (int i = 0; i < 3; i++) {
		pool_leave(tried[i], 0);
		pool_replica_unref(tried[i]);
	}
	/* 300 streams left open spread within a few of even */
	for (int i = 0; i < 300; i++) {
		struct replica *x = pool_pick(&views, r, 0, NULL, 0, &rng, S, &trial);
		for (int k = 0; k < 3; k++)
			counts[k] += x == s->m[k].r;
		pool_replica_unref(x);
	}
	for (int k = 0; k < 3; k++)
		assert_in_range(counts[k], 95, 105);
	finish(&views, c);
}

static void test_eject_backoff_and_trial(void **state)
{
	(void)state;
	struct conf *c = route_conf("    upstreams: [{url: http://127.0.0.1:1}, {url: http://127.0.0.1:2}]\n"
	    "    health: {failures: 2, backoff: 1s, backoff_max: 3s}\n");
	struct conf_route *r = &c->routes[0];
	struct pool_set *s = attach(r, 0);
	struct replica *bad = s->m[0].r, *x;
	struct pool_view *views = NULL;
	uint64_t rng = 9, now = 10 * S, us = 0;
	int trial;

	assert_int_equal(pool_backoff_us(&r->health, 1), 1 * S);
	assert_int_equal(pool_backoff_us(&r->health, 2), 2 * S);
	assert_int_equal(pool_backoff_us(&r->health, 3), 3 * S);
	assert_int_equal(pool_backoff_us(&r->health, 30), 3 * S);
	/* one failure is not enough; a success in between resets the count */
	assert_int_equal(pool_report(bad, &r->health, 0, 0, now, &us), POOL_SAME);
	assert_int_equal(pool_report(bad, &r->health, 1, 0, now, &us), POOL_SAME);
	assert_int_equal(pool_report(bad, &r->health, 0, 0, now, &us), POOL_SAME);
	assert_int_equal(pool_report(bad, &r->health, 0, 0, now, &us), POOL_EJECTED);
	assert_int_equal(us, 1 * S);
	assert_false(pool_healthy(bad, now));
	/* ejected: every pick goes to the other one */
	for (int i = 0; i < 50; i++) {
		assert_ptr_equal(pick_done(&views, r, NULL, 0, &rng, now, &trial), s->m[1].r);
		assert_false(trial);
	}
	/* both out (the other one tried): the ejected one still serves */
	assert_ptr_equal(pick_done(&views, r, &s->m[1].r, 1, &rng, now, &trial), bad);
	assert_false(trial);
	/* its time is up: one trial request, then it waits for the verdict */
	now += 1 * S;
	x = pool_pick(&views, r, 0, &s->m[1].r, 1, &rng, now, &trial);
	assert_ptr_equal(x, bad);
	assert_true(trial);
	for (int i = 0; i < 20; i++) {
		int t2;
		assert_ptr_equal(pick_done(&views, r, NULL, 0, &rng, now, &t2), s->m[1].r);
	}
	/* the trial fails: out again, for twice as long */
	assert_int_equal(pool_report(x, &r->health, 0, 1, now, &us), POOL_EJECTED);
	assert_int_equal(us, 2 * S);
	pool_leave(x, 1);
	pool_replica_unref(x);
	now += 2 * S;
	x = pool_pick(&views, r, 0, &s->m[1].r, 1, &rng, now, &trial);
	assert_true(trial);
	/* the next trial succeeds: back, the backoff starts over */
	assert_int_equal(pool_report(x, &r->health, 1, 1, now, &us), POOL_BACK);
	assert_true(pool_healthy(bad, now));
	assert_int_equal(atomic_load(&bad->ejections), 0);
	pool_leave(x, 1);
	pool_replica_unref(x);
	/* an active check's success brings one back at once */
	pool_report(bad, &r->health, 0, 0, now, &us);
	assert_int_equal(pool_probe_result(bad, &r->health, 0, now, &us), POOL_EJECTED);
	assert_int_equal(pool_probe_result(bad, &r->health, 1, now, &us), POOL_BACK);
	finish(&views, c);
}

/* A trial that ends without a verdict (the client left) is given back. */
static void test_trial_given_back(void **state)
{
	(void)state;
	struct conf *c = route_conf("    upstreams: [{url: http://127.0.0.1:1}]\n");
	struct conf_route *r = &c->routes[0];
	struct pool_set *s = attach(r, 0);
	struct pool_view *views = NULL;
	uint64_t rng = 1, us;
	int trial;
	struct replica *x;

	pool_report(s->m[0].r, &r->health, 0, 0, S, &us);
	x = pool_pick(&views, r, 0, NULL, 0, &rng, S + us, &trial);
	assert_true(trial);
	pool_leave(x, trial);
	pool_replica_unref(x);
	x = pool_pick(&views, r, 0, NULL, 0, &rng, S + us, &trial);
	assert_true(trial);
	pool_leave(x, trial);
	pool_replica_unref(x);
	finish(&views, c);
}

static void test_hash_keeps_a_key(void **state)
{
	(void)state;
	struct conf *c = route_conf("    upstreams: [{url: http://127.0.0.1:1}, {url: http://127.0.0.1:2}, {url: http://127.0.0.1:3}]\n"
	    "    balance: hash\n");
	struct conf_route *r = &c->routes[0];
	struct pool_view *views = NULL;
	uint64_t rng = 1;
	int trial;

	attach(r, 0);
	for (uint64_t key = 1; key < 50; key++) {
		struct replica *a = pool_pick(&views, r, key * 7919, NULL, 0, &rng, S, &trial);
		struct replica *b = pool_pick(&views, r, key * 7919, NULL, 0, &rng, S, &trial);
		assert_ptr_equal(a, b);
		/* tried: the next one for that key, never the same */
		struct replica *n = pool_pick(&views, r, key * 7919, &a, 1, &rng, S, &trial);
		assert_ptr_not_equal(n, a);
		pool_replica_unref(a);
		pool_replica_unref(b);
		pool_replica_unref(n);
	}
	finish(&views, c);
}

/* round_robin goes in turn; a slow replica keeps a quarter of its share. */
static void test_round_robin_and_slow_share(void **state)
{
	(void)state;
	struct conf *c = route_conf("    upstreams: [{url: http://127.0.0.1:1}, {url: http://127.0.0.1:2}, {url: http://127.0.0.1:3}]\n"
	    "    balance: round_robin\n");
	struct conf_route *r = &c->routes[0];
	struct pool_set *s = attach(r, 0);
	struct pool_view *views = NULL;
	uint64_t rng = 3;
	int trial, n_slow = 0;

	for (int i = 0; i < 9; i++)
		assert_ptr_equal(pick_done(&views, r, NULL, 0, &rng, S, &trial), s->m[i % 3].r);
	/* weights 1 : 4 : 4 */
	atomic_store(&s->m[0].r->slow, 1);
	for (int i = 0; i < 900; i++)
		n_slow += pick_done(&views, r, NULL, 0, &rng, S, &trial) == s->m[0].r;
	assert_int_equal(n_slow, 100);
	finish(&views, c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_names),
		cmocka_unit_test(test_rebuild_keeps_state),
		cmocka_unit_test(test_pick_excludes_tried_and_counts),
		cmocka_unit_test(test_eject_backoff_and_trial),
		cmocka_unit_test(test_trial_given_back),
		cmocka_unit_test(test_hash_keeps_a_key),
		cmocka_unit_test(test_round_robin_and_slow_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
