/* SPDX-License-Identifier: Apache-2.0 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "log.h"
#include "util.h"

void net_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The limit is not the table: Linux doubles a process's descriptor table
 * as descriptors fill it, and when threads share the table each doubling
 * waits for an RCU grace period (expand_files -> synchronize_rcu): 10-20 ms
 * on these machines, inside the accept(2) or socket(2) that crossed the
 * line, while every stream of that worker waits. Growing it once, before
 * the threads exist, costs nothing: one F_DUPFD at the top of the wanted
 * range. */
void net_reserve_fds(unsigned long want)
{
	struct rlimit rl;
	int fd, hi;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    want > rl.rlim_cur)
		want = (unsigned long)rl.rlim_cur;
	if (want < 2 || want > (unsigned long)INT32_MAX)
		return;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(want - 1));
	if (hi >= 0)
		close(hi);
	close(fd);
}

struct event_base *net_base_new(int flags)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (cfg == NULL)
		return NULL;
	event_config_set_flag(cfg, flags);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

/* The first address of host:port for a passive socket; NULL is logged. */
static struct addrinfo *passive(const char *host, unsigned port, const char *what)
{
	struct addrinfo hints, *ai = NULL;
	char portstr[8];
	int rc;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(portstr, sizeof portstr, "%u", port);
	rc = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &ai);
	if (rc != 0) {
		log_error("%s: %s", what, gai_strerror(rc));
		return NULL;
	}
	return ai;
}

int net_address_free(const char *host, unsigned port, const char *what)
{
	struct addrinfo *ai = passive(host, port, what);
	int fd, one = 1, r = -1;

	if (ai == NULL)
		return -1;
	/* bound without SO_REUSEPORT, a socket clashes with every socket
	 * there, ours or another program's (SO_REUSEADDR: not with TIME_WAIT) */
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
	    bind(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		r = 0;
	else
		log_error("%s: %s", what, strerror(errno));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return r;
}

int net_listen(const char *host, unsigned port, int reuseport, int backlog,
    const char *what)
{
	struct addrinfo *ai = passive(host, port, what);
	int fd = -1, one = 1;

	if (ai == NULL)
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    (reuseport &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(fd, backlog) < 0) {
		log_error("%s: %s", what, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

struct log_limit net_accept_log = LOG_LIMIT_INIT("accept", 10, 10000);

int net_accept_pause(struct event *resume, int err)
{
	struct timeval tv = { 0, NET_ACCEPT_PAUSE_US };

	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return 0;
	log_limited(&net_accept_log, LOG_LVL_WARN, "accept: %s; pausing accepts for %d ms",
	    strerror(err), NET_ACCEPT_PAUSE_US / 1000);
	evtimer_add(resume, &tv);
	return 1;
}

/* RFC 9110 §15, and the few codes other RFCs add (103: RFC 8297; 428,
 * 429, 431, 511: RFC 6585), by code. */
static const struct {
	unsigned short status;
	const char *text;
} reasons[] = {
	{100, "Continue"}, {101, "Switching Protocols"}, {103, "Early Hints"},
	{200, "OK"}, {201, "Created"}, {202, "Accepted"},
	{203, "Non-Authoritative Information"}, {204, "No Content"},
	{205, "Reset Content"}, {206, "Partial Content"},
	{300, "Multiple Choices"}, {301, "Moved Permanently"}, {302, "Found"},
	{303, "See Other"}, {304, "Not Modified"}, {305, "Use Proxy"},
	{307, "Temporary Redirect"}, {308, "Permanent Redirect"},
	{400, "Bad Request"}, {401, "Unauthorized"}, {402, "Payment Required"},
	{403, "Forbidden"}, {404, "Not Found"}, {405, "Method Not Allowed"},
	{406, "Not Acceptable"}, {407, "Proxy Authentication Required"},
	{408, "Request Timeout"}, {409, "Conflict"}, {410, "Gone"},
	{411, "Length Required"}, {412, "Precondition Failed"},
	{413, "Content Too Large"}, {414, "URI Too Long"},
	{415, "Unsupported Media Type"}, {416, "Range Not Satisfiable"},
	{417, "Expectation Failed"}, {421, "Misdirected Request"},
	{422, "Unprocessable Content"}, {426, "Upgrade Required"},
	{428, "Precondition Required"}, {429, "Too Many Requests"},
	{431, "Request Header Fields Too Large"},
	{500, "Internal Server Error"}, {501, "Not Implemented"},
	{502, "Bad Gateway"}, {503, "Service Unavailable"},
	{504, "Gateway Timeout"}, {505, "HTTP Version Not Supported"},
	{511, "Network Authentication Required"},
	/* not registered: Anthropic's "overloaded_error", which the mock sends */
	{529, "Overloaded"},
};

/* An IPv4 address as inet_ntop(3) writes it (dotted decimal, no leading
 * zeros), without the sprintf it costs in glibc: some 1,700 instructions
 * an accepted connection, against ~100. */
static void ipv4_text(const unsigned char *a, char *buf, size_t len)
{
	char *p = buf;

	if (len < INET_ADDRSTRLEN) {
		inet_ntop(AF_INET, a, buf, (socklen_t)len);
		return;
	}
	for (int i = 0; i < 4; i++) {
		unsigned v = a[i];
		if (v >= 100)
			*p++ = (char)('0' + v / 100);
		if (v >= 10)
			*p++ = (char)('0' + v / 10 % 10);
		*p++ = (char)('0' + v % 10);
		*p++ = i < 3 ? '.' : '\0';
	}
}

void net_peer_ip(const struct sockaddr *sa, char *buf, size_t len)
{
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			ipv4_text(&a->sin6_addr.s6_addr[12], buf, len);
			return;
		}
		inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)len);
	} else if (sa->sa_family == AF_INET) {
		ipv4_text((const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr,
		    buf, len);
	} else {
		snprintf(buf, len, "-");
	}
}

const char *net_reason(unsigned status)
{
	for (size_t i = 0; i < UTIL_ARRAY_LEN(reasons); i++)
		if (reasons[i].status == status)
			return reasons[i].text;
	return status < 400 ? "OK" : "Error";
}

size_t net_write_now(struct bufferevent *bev)
{
	struct evbuffer *out = bufferevent_get_output(bev);

	/* a socket bufferevent freezes its output's start so that only it
	 * drains it; we are that writer here, for this call. An error stays
	 * in the output for the bufferevent to meet and report. */
	evbuffer_unfreeze(out, 1);
	evbuffer_write(out, bufferevent_getfd(bev));
	evbuffer_freeze(out, 1);
	return evbuffer_get_length(out);
}
