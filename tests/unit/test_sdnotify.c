/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of sdnotify.c: each test plays systemd, binding a datagram
 * socket (a path in a temp directory, or an abstract name bound with its
 * exact length, as systemd does) and reading what tokentap sent. */
#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sdnotify.h"
#include "util.h"

#include "unit.h"

struct listener {
	int fd;
	char dir[32];
	char path[96];
};

static int bind_path(struct listener *l)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	strcpy(l->dir, "/tmp/tt-sdnotify-XXXXXX");
	if (mkdtemp(l->dir) == NULL)
		return -1;
	snprintf(l->path, sizeof l->path, "%s/notify", l->dir);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", l->path);
	l->fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return -1;
	return setenv("NOTIFY_SOCKET", l->path, 1);
}

/* systemd binds "@name" as exactly the bytes "\0name": a sender that adds a
 * trailing NUL reaches another address and fails. */
static int bind_abstract(struct listener *l)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(l->path, sizeof l->path, "@tt-sdnotify-test-%d", (int)getpid());

	memcpy(sa.sun_path, l->path, (size_t)n);
	sa.sun_path[0] = '\0';
	l->dir[0] = '\0';
	l->fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa,
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n)) < 0)
		return -1;
	return setenv("NOTIFY_SOCKET", l->path, 1);
}

static void listener_close(struct listener *l)
{
	close(l->fd);
	if (l->dir[0] != '\0') {
		unlink(l->path);
		rmdir(l->dir);
	}
	unsetenv("NOTIFY_SOCKET");
}

/* The next datagram as a string, or "" when none is waiting. */
static const char *next_message(struct listener *l, char *buf, size_t size)
{
	ssize_t n = recv(l->fd, buf, size - 1, MSG_DONTWAIT);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static void test_unset_is_a_noop(void **state)
{
	struct listener l;
	char buf[256];

	(void)state;
	assert_int_equal(bind_path(&l), 0);
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sdnotify_send("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	assert_int_equal(sdnotify_send("READY=1"), 0);
	assert_string_equal(next_message(&l, buf, sizeof buf), "");
	listener_close(&l);
}

static void test_path_socket(void **state)
{
	struct listener l;
	char buf[256];

	(void)state;
	assert_int_equal(bind_path(&l), 0);
	assert_int_equal(sdnotify_send("READY=1"), 0);
	assert_int_equal(sdnotify_send("STOPPING=1"), 0);
	assert_string_equal(next_message(&l, buf, sizeof buf), "READY=1");
	assert_string_equal(next_message(&l, buf, sizeof buf), "STOPPING=1");
	assert_string_equal(next_message(&l, buf, sizeof buf), "");
	listener_close(&l);
}

static void test_abstract_socket(void **state)
{
	struct listener l;
	char buf[256];

	(void)state;
	assert_int_equal(bind_abstract(&l), 0);
	assert_int_equal(sdnotify_send("READY=1\nSTATUS=serving"), 0);
	assert_string_equal(next_message(&l, buf, sizeof buf), "READY=1\nSTATUS=serving");
	listener_close(&l);
}

static void test_reloading_carries_monotonic_time(void **state)
{
	struct listener l;
	char buf[256];
	unsigned long long usec = 0;
	uint64_t before, after;
	int used = 0;

	(void)state;
	assert_int_equal(bind_path(&l), 0);
	before = util_now_us();
	assert_int_equal(sdnotify_reloading(), 0);
	after = util_now_us();
	next_message(&l, buf, sizeof buf);
	assert_int_equal(sscanf(buf, "RELOADING=1\nMONOTONIC_USEC=%llu%n", &usec, &used), 1);
	assert_int_equal((size_t)used, strlen(buf));
	assert_true(usec >= before && usec <= after);
	listener_close(&l);
}

static void test_sendf_formats(void **state)
{
	struct listener l;
	char buf[256], big[2048];

	(void)state;
	assert_int_equal(bind_path(&l), 0);
	assert_int_equal(sdnotify_sendf("STATUS=%d listener(s), %s", 2, "admin on :9464"), 0);
	assert_string_equal(next_message(&l, buf, sizeof buf),
	    "STATUS=2 listener(s), admin on :9464");
	/* longer than the format buffer: refused, never sent cut short */
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(sdnotify_sendf("STATUS=%s", big), -1);
	assert_string_equal(next_message(&l, buf, sizeof buf), "");
	listener_close(&l);
}

static void test_bad_sockets_fail(void **state)
{
	char longname[200];

	(void)state;
	setenv("NOTIFY_SOCKET", "relative/notify", 1);
	assert_int_equal(sdnotify_send("READY=1"), -1);
	setenv("NOTIFY_SOCKET", "/nonexistent/tt-sdnotify/notify", 1);
	assert_int_equal(sdnotify_send("READY=1"), -1);
	memset(longname, 'a', sizeof longname - 1);
	longname[0] = '/';
	longname[sizeof longname - 1] = '\0';
	setenv("NOTIFY_SOCKET", longname, 1);
	assert_int_equal(sdnotify_send("READY=1"), -1);
	unsetenv("NOTIFY_SOCKET");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unset_is_a_noop),
		cmocka_unit_test(test_path_socket),
		cmocka_unit_test(test_abstract_socket),
		cmocka_unit_test(test_reloading_carries_monotonic_time),
		cmocka_unit_test(test_sendf_formats),
		cmocka_unit_test(test_bad_sockets_fail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
