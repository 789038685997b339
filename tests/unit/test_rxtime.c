/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel receive times: a loopback read is stamped between the send and
 * the read; CLOCK_REALTIME stamps convert to the monotonic timeline with
 * the offset of their side of a clock step, and a stamp that cannot be
 * placed (in a step's window of doubt, or in the future) is refused. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rxtime.h"

#include "unit.h"

#define S 1000000000LL        /* one second in ns */
#define OFF (1700000000LL * S) /* a CLOCK_REALTIME - CLOCK_MONOTONIC */

static int64_t now_ns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * S + t.tv_nsec;
}

static void test_a_read_is_stamped_when_it_arrived(void **state)
{
	struct rxtime_clock c;
	int fds[2];
	char buf[16];
	int64_t real = 0, r0, r1, m0, m1;
	uint64_t t;
	ssize_t n;

	(void)state;
	rxtime_clock_init(&c);
	unit_tcp_pair(fds);
	/* the kernel turns its receive stamps on for everyone a moment after
	 * the first socket asks (a deferred static key): a segment before
	 * that has none */
	for (int i = 0; i < 100; i++) {
		assert_int_equal(send(fds[0], "w", 1, 0), 1);
		assert_int_equal(rxtime_recv(fds[1], buf, sizeof buf, 0, &real), 1);
		if (real != 0)
			break;
		usleep(10000);
	}
	assert_true(real != 0);
	/* loopback hands the segment over (and the kernel stamps it) inside
	 * the send: the stamp lies within the send's bracket */
	r0 = now_ns(CLOCK_REALTIME);
	m0 = now_ns(CLOCK_MONOTONIC);
	assert_int_equal(send(fds[0], "abc", 3, 0), 3);
	m1 = now_ns(CLOCK_MONOTONIC);
	r1 = now_ns(CLOCK_REALTIME);
	/* read 50 ms later: the stamp is the arrival's, not the read's */
	usleep(50000);
	n = rxtime_recv(fds[1], buf, sizeof buf, 0, &real);
	assert_int_equal(n, 3);
	assert_true(real >= r0 && real <= r1);
	t = rxtime_mono(&c, real, (uint64_t)now_ns(CLOCK_MONOTONIC) / 1000);
	assert_true(t != 0);
	/* the offset is sampled by a pair of reads at most 10 µs apart, and
	 * kept in µs: within that of the bracket */
	assert_true((int64_t)t * 1000 >= m0 - 12000 && (int64_t)t * 1000 <= m1 + 12000);
	/* without asking, no stamp and a plain recv */
	assert_int_equal(send(fds[0], "d", 1, 0), 1);
	n = rxtime_recv(fds[1], buf, sizeof buf, 0, NULL);
	assert_int_equal(n, 1);
	close(fds[0]);
	/* the end of the stream: 0 bytes and no stamp */
	n = rxtime_recv(fds[1], buf, sizeof buf, 0, &real);
	assert_int_equal(n, 0);
	assert_int_equal(real, 0);
	close(fds[1]);
	assert_int_equal(c.steps, 0);
}

static void test_a_steady_clock_converts_with_its_smallest_offset(void **state)
{
	struct rxtime_clock c;

	(void)state;
	rxtime_clock_init(&c);
	/* a stamp 5 ms before the read at 1 s */
	assert_int_equal(rxtime_mono_at(&c, OFF + 995000000LL, 1000000, OFF + S), 995000);
	/* a sample late by 30 µs (the thread ran between the clock reads) is
	 * no step, and the earlier, closer offset stays */
	assert_int_equal(rxtime_mono_at(&c, OFF + 1999000000LL, 2000000,
	    OFF + 2 * S + 30000), 1999000);
	assert_int_equal(c.steps, 0);
	/* no stamp: none converted */
	assert_int_equal(rxtime_mono_at(&c, 0, 3000000, OFF + 3 * S), 0);
	/* a stamp after the read (beyond the jitter) is a step not seen */
	assert_int_equal(rxtime_mono_at(&c, OFF + 3500000000LL, 3000000, OFF + 3 * S), 0);
	/* within the jitter: now */
	assert_int_equal(rxtime_mono_at(&c, OFF + 3 * S + 20000, 3000000, OFF + 3 * S),
	    3000000);
	assert_int_equal(c.unplaced, 1);
}

static void test_a_step_is_seen_and_each_stamp_takes_its_side(void **state)
{
	struct rxtime_clock c;

	(void)state;
	rxtime_clock_init(&c);
	assert_int_equal(rxtime_mono_at(&c, OFF + S - 1000, 1000000, OFF + S), 999999);
	/* the real-time clock jumps an hour ahead between the samples at
	 * 1 s and 2 s */
	assert_int_equal(rxtime_mono_at(&c, 0, 2000000, OFF + 3600 * S + 2 * S), 0);
	assert_int_equal(c.steps, 1);
	assert_int_equal(c.step_from_us, 1000000);
	assert_int_equal(c.step_to_us, 2000000);
	/* a stamp taken before the step (0.9 s under the old offset) */
	assert_int_equal(rxtime_mono_at(&c, OFF + 900000000LL, 2100000,
	    OFF + 3600 * S + 2100000000LL), 900000);
	/* one after it (2.05 s under the new one) */
	assert_int_equal(rxtime_mono_at(&c, OFF + 3600 * S + 2050000000LL, 2100000,
	    OFF + 3600 * S + 2100000000LL), 2050000);
	/* one inside the window of doubt: 1.5 s either way */
	assert_int_equal(rxtime_mono_at(&c, OFF + 1500000000LL, 2100000,
	    OFF + 3600 * S + 2100000000LL), 0);
	assert_int_equal(c.unplaced, 1);
}

static void test_a_step_back_places_what_it_can(void **state)
{
	struct rxtime_clock c;

	(void)state;
	rxtime_clock_init(&c);
	rxtime_mono_at(&c, 0, 1000000, OFF + S);
	/* back by 10 s between 1 s and 1.2 s */
	rxtime_mono_at(&c, 0, 1200000, OFF - 10 * S + 1200000000LL);
	assert_int_equal(c.steps, 1);
	/* real OFF + 0.5 s: before the step it is 0.5 s; after it, it would
	 * be 10.5 s, in the future: before */
	assert_int_equal(rxtime_mono_at(&c, OFF + 500000000LL, 1300000,
	    OFF - 10 * S + 1300000000LL), 500000);
	/* real OFF - 8.75 s: after the step 1.25 s; before it, before the
	 * clock began: after */
	assert_int_equal(rxtime_mono_at(&c, OFF - 8750000000LL, 1300000,
	    OFF - 10 * S + 1300000000LL), 1250000);
	assert_int_equal(c.unplaced, 0);
	/* back by 250 ms: a stamp that is 1.0 s before it or 1.25 s after it
	 * could be either */
	rxtime_clock_init(&c);
	rxtime_mono_at(&c, 0, 1000000, OFF + S);
	rxtime_mono_at(&c, 0, 1200000, OFF - 250000000LL + 1200000000LL);
	assert_int_equal(rxtime_mono_at(&c, OFF + S, 1300000,
	    OFF - 250000000LL + 1300000000LL), 0);
	assert_int_equal(c.unplaced, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_read_is_stamped_when_it_arrived),
		cmocka_unit_test(test_a_steady_clock_converts_with_its_smallest_offset),
		cmocka_unit_test(test_a_step_is_seen_and_each_stamp_takes_its_side),
		cmocka_unit_test(test_a_step_back_places_what_it_can),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
