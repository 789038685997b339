/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the one URL parser: every form a route's upstream, a
 * notifier or tokentap-load's target may take, and every way to get one
 * wrong, with the problem named. */

#include "url.h"

#include "unit.h"

struct good {
	const char *s;
	int tls;
	const char *host;
	unsigned port;
	int port_given;
	const char *user, *password, *path, *query;
};

/* got is want, or both are NULL */
static void expect_text(const char *got, const char *want)
{
	if (want == NULL)
		assert_null(got);
	else
		assert_string_equal(got, want);
}

static void expect_good(const struct good *g)
{
	struct url u;
	const char *problem = url_parse(g->s, &u);

	if (problem != NULL)
		fail_msg("%s: %s", g->s, problem);
	assert_int_equal(u.tls, g->tls);
	assert_string_equal(u.host, g->host);
	assert_int_equal(u.port, g->port);
	assert_int_equal(u.port_given, g->port_given);
	expect_text(u.user, g->user);
	expect_text(u.password, g->password);
	assert_string_equal(u.path, g->path);
	expect_text(u.query, g->query);
	url_free(&u);
	assert_null(u.path);
}

static void test_forms(void **state)
{
	static const struct good cases[] = {
		/* default ports, a missing path, a trailing slash */
		{ "http://backend", 0, "backend", 80, 0, NULL, NULL, "", NULL },
		{ "https://api.openai.com", 1, "api.openai.com", 443, 0, NULL, NULL, "", NULL },
		{ "http://backend/", 0, "backend", 80, 0, NULL, NULL, "/", NULL },
		{ "http://backend:80/v1/", 0, "backend", 80, 1, NULL, NULL, "/v1/", NULL },
		{ "https://h:8443/a/b", 1, "h", 8443, 1, NULL, NULL, "/a/b", NULL },
		{ "http://10.0.0.7:65535/a", 0, "10.0.0.7", 65535, 1, NULL, NULL, "/a", NULL },
		/* the scheme in any case; the host as written */
		{ "HTTP://Backend.Example.com/v1", 0, "Backend.Example.com", 80, 0, NULL, NULL,
		    "/v1", NULL },
		{ "HttpS://x", 1, "x", 443, 0, NULL, NULL, "", NULL },
		{ "http://back_end-1.local", 0, "back_end-1.local", 80, 0, NULL, NULL, "", NULL },
		/* IPv6 literals, with a zone as RFC 6874 writes it or as getaddrinfo does */
		{ "http://[::1]:8080", 0, "::1", 8080, 1, NULL, NULL, "", NULL },
		{ "http://[::1]", 0, "::1", 80, 0, NULL, NULL, "", NULL },
		{ "https://[2001:db8::7]/v1", 1, "2001:db8::7", 443, 0, NULL, NULL, "/v1", NULL },
		{ "http://[::ffff:10.0.0.1]:81/", 0, "::ffff:10.0.0.1", 81, 1, NULL, NULL, "/",
		    NULL },
		{ "http://[fe80::1%25eth0]", 0, "fe80::1%eth0", 80, 0, NULL, NULL, "", NULL },
		{ "http://[fe80::1%eth0]:9", 0, "fe80::1%eth0", 9, 1, NULL, NULL, "", NULL },
		/* a query, empty or not; a path without one */
		{ "http://h/v1/chat?x=1&y=%20", 0, "h", 80, 0, NULL, NULL, "/v1/chat", "x=1&y=%20" },
		{ "http://h?x=1", 0, "h", 80, 0, NULL, NULL, "", "x=1" },
		{ "http://h/a?", 0, "h", 80, 0, NULL, NULL, "/a", "" },
		/* percent-encoding: kept in the path, decoded in the credentials */
		{ "http://h/a%2Fb%7e", 0, "h", 80, 0, NULL, NULL, "/a%2Fb%7e", NULL },
		{ "http://bob:pw@h:81/x", 0, "h", 81, 1, "bob", "pw", "/x", NULL },
		{ "https://bob@h", 1, "h", 443, 0, "bob", NULL, "", NULL },
		{ "http://b%40b:p%3Aw:d@h", 0, "h", 80, 0, "b@b", "p:w:d", "", NULL },
		{ "http://:secret@h", 0, "h", 80, 0, "", "secret", "", NULL },
		{ "http://u:@[::1]:82", 0, "::1", 82, 1, "u", "", "", NULL },
		{ "http://u:p@h/a@b", 0, "h", 80, 0, "u", "p", "/a@b", NULL },
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_good(&cases[i]);
}

static void expect_bad(const char *s, const char *want)
{
	struct url u;
	const char *problem = url_parse(s, &u);

	if (problem == NULL)
		fail_msg("%s: accepted", s);
	if (strcmp(problem, want) != 0)
		fail_msg("%s: \"%s\", expected \"%s\"", s, problem, want);
	/* nothing is left to free */
	assert_null(u.user);
	assert_null(u.password);
	assert_null(u.path);
	assert_null(u.query);
}

static void test_errors(void **state)
{
	(void)state;
	expect_bad("ftp://backend", "expected an http:// or https:// URL");
	expect_bad("backend:80", "expected an http:// or https:// URL");
	expect_bad("http:/backend", "expected an http:// or https:// URL");
	expect_bad("", "expected an http:// or https:// URL");
	expect_bad("http://backend/#top", "must not contain a fragment");
	expect_bad("http://backend/v1?x=1#y", "must not contain a fragment");
	expect_bad("http://", "expected a host after the scheme");
	expect_bad("http://:80/", "expected a host after the scheme");
	expect_bad("http:///v1", "expected a host after the scheme");
	expect_bad("http://u:p@/x", "expected a host after the scheme");
	expect_bad("http://backend:0", "bad port");
	expect_bad("http://backend:65536", "bad port");
	expect_bad("http://backend:8x", "bad port");
	expect_bad("http://backend:", "bad port");
	expect_bad("http://backend:1234567", "bad port");
	expect_bad("http://back:80:81", "bad port");
	expect_bad("http://[::1", "unterminated IPv6 address (expected [addr])");
	expect_bad("http://[::1]x", "unexpected character after the host");
	expect_bad("http://[]", "bad IPv6 address");
	expect_bad("http://[::g]", "bad IPv6 address");
	expect_bad("http://[10.0.0.1]", "bad IPv6 address");
	expect_bad("http://[fe80::1%]", "bad IPv6 zone");
	expect_bad("http://[fe80::1%25]", "bad IPv6 zone");
	expect_bad("http://[fe80::1%e/th0]", "unterminated IPv6 address (expected [addr])");
	expect_bad("http://[fe80::1%e:0]", "bad IPv6 zone");
	expect_bad("http://::1:80", "expected a host after the scheme");
	expect_bad("http://back_end!", "the host has an invalid character");
	expect_bad("http://b%61ck", "the host has an invalid character");
	expect_bad("http://a b", "the host has an invalid character");
	expect_bad("http://a@b@h", "the credentials have a character that must be "
	    "percent-encoded");
	expect_bad("http://u:p w@h", "the credentials have a character that must be "
	    "percent-encoded");
	expect_bad("http://u:p%4@h", "bad percent-encoding in the credentials");
	expect_bad("http://u:p%00@h", "bad percent-encoding in the credentials");
	expect_bad("http://%zz@h", "bad percent-encoding in the credentials");
	expect_bad("http://@h", "empty credentials before '@'");
	expect_bad("http://h/a b", "the path has a space or control character");
	expect_bad("http://h/a\x7f", "the path has a space or control character");
	expect_bad("http://h/a\tb", "the path has a space or control character");
	expect_bad("http://h/a%2", "bad percent-encoding in the path");
	expect_bad("http://h/a%g0", "bad percent-encoding in the path");
	expect_bad("http://h/a?x y", "the query has a space or control character");
	expect_bad("http://h/a?x=%", "bad percent-encoding in the query");
}

static void test_long_host(void **state)
{
	char s[600], host[URL_HOST_LEN + 1];
	struct url u;

	(void)state;
	memset(host, 'a', URL_HOST_LEN - 1);
	host[URL_HOST_LEN - 1] = '\0';
	snprintf(s, sizeof s, "http://%s:81/", host);
	assert_null(url_parse(s, &u));
	assert_string_equal(u.host, host);
	url_free(&u);
	host[URL_HOST_LEN - 1] = 'a';
	host[URL_HOST_LEN] = '\0';
	snprintf(s, sizeof s, "http://%s/", host);
	assert_string_equal(url_parse(s, &u), "the host name is too long");
}

static void test_authority(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(url_default_port(0), 80);
	assert_int_equal(url_default_port(1), 443);
	assert_int_equal(url_authority(buf, sizeof buf, "h", 80, url_default_port(0)), 1);
	assert_string_equal(buf, "h");
	url_authority(buf, sizeof buf, "h", 443, url_default_port(0));
	assert_string_equal(buf, "h:443");
	url_authority(buf, sizeof buf, "h", 443, url_default_port(1));
	assert_string_equal(buf, "h");
	url_authority(buf, sizeof buf, "::1", 8080, url_default_port(0));
	assert_string_equal(buf, "[::1]:8080");
	url_authority(buf, sizeof buf, "::1", 80, url_default_port(0));
	assert_string_equal(buf, "[::1]");
	/* 0 keeps every port */
	url_authority(buf, sizeof buf, "h", 80, 0);
	assert_string_equal(buf, "h:80");
	assert_int_equal(url_authority(buf, 4, "abcdef", 80, 80), 6);
	assert_string_equal(buf, "abc");
	/* as snprintf writes it, cut at every length */
	{
		static const char *const hosts[] = { "h", "example.com", "::1",
			"fe80::1%eth0", "" };
		static const unsigned ports[] = { 0, 1, 80, 443, 8080, 65535, 4294967295u };
		char want[64];

		for (size_t h = 0; h < sizeof hosts / sizeof *hosts; h++)
			for (size_t p = 0; p < sizeof ports / sizeof *ports; p++)
				for (unsigned omit = 0; omit < 2; omit++)
					for (size_t len = 0; len <= sizeof buf; len++) {
						int v6 = strchr(hosts[h], ':') != NULL, w;
						unsigned o = omit ? ports[p] : 80;
						memset(buf, 'x', sizeof buf);
						memset(want, 'x', sizeof want);
						w = o == ports[p] ?
						    snprintf(want, len, v6 ? "[%s]" : "%s", hosts[h]) :
						    snprintf(want, len, v6 ? "[%s]:%u" : "%s:%u",
						    hosts[h], ports[p]);
						assert_int_equal(url_authority(buf, len, hosts[h],
						    ports[p], o), w);
						assert_memory_equal(buf, want, sizeof buf);
					}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_long_host),
		cmocka_unit_test(test_authority),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
