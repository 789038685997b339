/* SPDX-License-Identifier: Apache-2.0 */
/* net.c: the descriptor table reserved before threads start, the reason
 * phrases, the listening socket, the accept pause and the write-now. */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "net.h"
#include "util.h"

#include "unit.h"

/* The size of this process's descriptor table, as the kernel reports it. */
static long fd_table_size(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "FDSize:", 7) == 0)
			n = strtol(line + 7, NULL, 10);
	fclose(f);
	return n;
}

static void test_reserve_grows_the_table(void **state)
{
	struct rlimit rl;
	long before = fd_table_size(), after;
	int fd;
	long want;

	(void)state;
	assert_true(before > 0);
	/* a fresh process starts small, but one started by a parent that had
	 * high descriptors open inherits a table that holds them: ask for
	 * more than there is, whatever there is */
	want = before < 2048 ? 2048 : before * 2;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < (rlim_t)want * 2) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)want * 2 ? rl.rlim_max : (rlim_t)want * 2;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	if ((long)rl.rlim_cur <= want)
		skip();
	net_reserve_fds((unsigned long)want);
	after = fd_table_size();
	assert_true(after >= want);
	/* nothing stays open: the next descriptor is a low one */
	fd = dup(0);
	assert_true(fd >= 0 && fd < 64);
	close(fd);
}

static void test_reserve_stops_at_the_limit(void **state)
{
	struct rlimit rl, low;
	long before = fd_table_size(), after;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	/* a limit past the table as it is (grown by the test before, or
	 * inherited from a parent that had high descriptors open), so that
	 * growing to it shows */
	low = rl;
	low.rlim_cur = (rlim_t)before * 2 + 1000;
	if (low.rlim_cur > rl.rlim_max)
		skip();
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	net_reserve_fds(1000000);      /* capped, not refused */
	after = fd_table_size();
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_true(after >= (long)low.rlim_cur);
	/* the kernel rounds a table up to a power of two: under twice it */
	assert_true(after < 2 * (long)low.rlim_cur);
}

/* Every status tokentap, the mock and the admin endpoint send, with the
 * text of RFC 9110 §15 (and RFC 6585, RFC 8297). */
static void test_reasons_are_rfc9110(void **state)
{
	static const struct { unsigned status; const char *text; } want[] = {
		{100, "Continue"}, {101, "Switching Protocols"}, {103, "Early Hints"},
		{200, "OK"}, {201, "Created"}, {204, "No Content"},
		{304, "Not Modified"}, {400, "Bad Request"}, {401, "Unauthorized"},
		{403, "Forbidden"}, {404, "Not Found"}, {405, "Method Not Allowed"},
		{408, "Request Timeout"}, {413, "Content Too Large"},
		{414, "URI Too Long"}, {422, "Unprocessable Content"},
		{429, "Too Many Requests"}, {431, "Request Header Fields Too Large"},
		{500, "Internal Server Error"}, {501, "Not Implemented"},
		{502, "Bad Gateway"}, {503, "Service Unavailable"},
		{504, "Gateway Timeout"}, {505, "HTTP Version Not Supported"},
		{529, "Overloaded"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		assert_string_equal(net_reason(want[i].status), want[i].text);
	/* a code it does not know says only whether it failed */
	assert_string_equal(net_reason(299), "OK");
	assert_string_equal(net_reason(418), "Error");
	assert_string_equal(net_reason(599), "Error");
}

static void test_listen_on_loopback(void **state)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	int fd, again, one = 0;

	(void)state;
	fd = net_listen("127.0.0.1", 0, 1, 4096, "listen test");
	assert_true(fd >= 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	assert_int_equal(sin.sin_family, AF_INET);
	assert_int_equal(ntohl(sin.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_true(ntohs(sin.sin_port) != 0);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	len = sizeof one;
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, &len), 0);
	assert_true(one);
	/* SO_REUSEPORT on both: a second socket shares the port */
	again = net_listen("127.0.0.1", ntohs(sin.sin_port), 1, 4096, "listen test");
	assert_true(again >= 0);
	close(again);
	close(fd);
}

static void test_listen_without_reuseport(void **state)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	int fd, one = 1;

	(void)state;
	fd = net_listen("127.0.0.1", 0, 0, 4096, "listen test");
	assert_true(fd >= 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	len = sizeof one;
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, &len), 0);
	assert_false(one);
	/* the port is taken: a second socket is refused, not shared */
	assert_int_equal(net_listen("127.0.0.1", ntohs(sin.sin_port), 0, 4096,
	    "listen test"), -1);
	/* TEST-NET-1 (RFC 5737) is no address of this machine */
	assert_int_equal(net_listen("192.0.2.1", 0, 0, 4096, "listen test"), -1);
	close(fd);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(int *)arg = 1;
}

static void test_accept_pause(void **state)
{
	struct event_base *base = net_base_new(EVENT_BASE_FLAG_PRECISE_TIMER);
	struct event *resume;
	uint64_t t0;
	int fired = 0;

	(void)state;
	assert_non_null(base);
	resume = evtimer_new(base, on_timer, &fired);
	assert_non_null(resume);
	/* a connection the peer reset before accept(2) is no reason to stop */
	assert_int_equal(net_accept_pause(resume, ECONNABORTED), 0);
	assert_false(evtimer_pending(resume, NULL));
	assert_int_equal(net_accept_pause(resume, EMFILE), 1);
	assert_true(evtimer_pending(resume, NULL));
	event_del(resume);
	t0 = util_now_us();
	assert_int_equal(net_accept_pause(resume, ENFILE), 1);
	assert_true(evtimer_pending(resume, NULL));
	/* the listeners come back by the timer, after the pause */
	event_base_loop(base, EVLOOP_ONCE);
	assert_true(fired);
	assert_true(util_now_us() - t0 >= NET_ACCEPT_PAUSE_US - 1000);
	event_free(resume);
	event_base_free(base);
}

static void test_write_now(void **state)
{
	struct event_base *base = net_base_new(0);
	struct bufferevent *bev;
	char got[16];
	int sv[2];

	(void)state;
	assert_non_null(base);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(bev);
	evbuffer_add(bufferevent_get_output(bev), "hello", 5);
	/* written before any loop turn: the peer has it at once */
	assert_int_equal(net_write_now(bev), 0);
	assert_int_equal(read(sv[1], got, sizeof got), 5);
	assert_memory_equal(got, "hello", 5);
	bufferevent_free(bev);
	close(sv[1]);
	event_base_free(base);
}

/* net_peer_ip writes what inet_ntop(3) writes, for every IPv4 address
 * of a few octet shapes (1, 2 and 3 digits, zero), plain and v4-mapped. */
static void test_peer_ip_as_inet_ntop(void **state)
{
	static const unsigned char octets[] = { 0, 1, 9, 10, 99, 100, 127, 200, 255 };
	const size_t n = sizeof octets;
	(void)state;

	for (size_t i = 0; i < n * n * n * n; i++) {
		unsigned char a[4] = { octets[i % n], octets[i / n % n],
		    octets[i / n / n % n], octets[i / n / n / n] };
		struct sockaddr_in v4 = { .sin_family = AF_INET };
		struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
		char want[INET_ADDRSTRLEN], got[64], mapped[64];

		memcpy(&v4.sin_addr, a, 4);
		v6.sin6_addr.s6_addr[10] = v6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&v6.sin6_addr.s6_addr[12], a, 4);
		assert_non_null(inet_ntop(AF_INET, a, want, sizeof want));
		memset(got, 'x', sizeof got);
		net_peer_ip((struct sockaddr *)&v4, got, sizeof got);
		assert_string_equal(got, want);
		net_peer_ip((struct sockaddr *)&v6, mapped, sizeof mapped);
		assert_string_equal(mapped, want);
	}
}

/* IPv6 as inet_ntop writes it; a family that is neither: "-". */
static void test_peer_ip_v6_and_other(void **state)
{
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
	struct sockaddr other = { .sa_family = AF_UNIX };
	char got[64];
	(void)state;

	v6.sin6_addr.s6_addr[15] = 1;
	net_peer_ip((struct sockaddr *)&v6, got, sizeof got);
	assert_string_equal(got, "::1");
	net_peer_ip(&other, got, sizeof got);
	assert_string_equal(got, "-");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_grows_the_table),
		cmocka_unit_test(test_reserve_stops_at_the_limit),
		cmocka_unit_test(test_reasons_are_rfc9110),
		cmocka_unit_test(test_listen_on_loopback),
		cmocka_unit_test(test_listen_without_reuseport),
		cmocka_unit_test(test_accept_pause),
		cmocka_unit_test(test_write_now),
		cmocka_unit_test(test_peer_ip_as_inet_ntop),
		cmocka_unit_test(test_peer_ip_v6_and_other),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
