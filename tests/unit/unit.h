/* SPDX-License-Identifier: Apache-2.0 */
/* The prelude of every cmocka unit test (the headers cmocka wants before
 * it, in its order) and the helpers several tests share. */
#ifndef TOKENTAP_UNIT_H
#define TOKENTAP_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef TOKENTAP_CONFIG_H
/* A configuration from YAML text; the test fails when it does not load
 * (the loader's messages go to stderr). */
static inline struct conf *unit_conf(const char *yaml)
{
	struct conf *c = conf_load_string("t.yaml", yaml, strlen(yaml), stderr);
	assert_non_null(c);
	return c;
}
#endif

#ifdef EVENT2_BUFFER_H_INCLUDED_
/* What b holds as a string, b drained; the caller frees it. */
static inline char *unit_take(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	assert_non_null(s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}
#endif

#ifdef TOKENTAP_HTTPHEAD_H
/* A header field from two string literals, as a parsed head holds it. */
#define UNIT_FIELD(n, v) { n, sizeof(n) - 1, v, sizeof(v) - 1 }
#endif

#ifdef TOKENTAP_RXTIME_H
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* A connected loopback TCP pair: fds[0] sends, fds[1] receives, with the
 * kernel's receive stamps on (set on the listener, inherited). */
static inline void unit_tcp_pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(rxtime_enable(l), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fds[0], (struct sockaddr *)&a, sizeof a), 0);
	fds[1] = accept(l, NULL, NULL);
	assert_true(fds[1] >= 0);
	close(l);
}
#endif

#endif
