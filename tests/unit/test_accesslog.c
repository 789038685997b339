/* SPDX-License-Identifier: Apache-2.0 */
/* The access log's request target: the value of every credential
 * parameter masked wherever a server would read one (docs/contract.md §5): in
 * the query whatever separates the parameters (& or ;) and however the name is
 * spelled (case, percent-escapes), and in the path as a matrix parameter or a
 * segment of its own. Nothing else changes, and a cut never leaves half a
 * value. */
#include "accesslog.h"

#include "unit.h"

static char *const more[] = { "Session_ID" };

static void expect(const char *target, const char *want)
{
	char out[2048];
	size_t n = accesslog_mask_target(target, strlen(target), more, 1, out, sizeof out);
	out[n] = '\0';
	assert_string_equal(out, want);
}

static void test_query(void **state)
{
	(void)state;
	expect("/v1/x?key=S1&x=1&API_KEY=S2", "/v1/x?key=***&x=1&API_KEY=***");
	expect("/v1/x?keys=kept&monkey=kept&x=key=kept", "/v1/x?keys=kept&monkey=kept&x=key=kept");
	expect("/v1/x?key=a=b&x=1", "/v1/x?key=***&x=1");
	expect("/v1/x?session_id=S", "/v1/x?session_id=***");
	expect("/v1/x?key", "/v1/x?key");
	expect("/v1/x?key=", "/v1/x?key=***");
	expect("/v1/x", "/v1/x");
	expect("", "");
}

/* the three the issue found: an escaped name, ';' as a separator, a
 * parameter in the path */
static void test_what_leaked(void **state)
{
	(void)state;
	expect("/v1/x?k%65y=S", "/v1/x?k%65y=***");
	expect("/v1/x?%6B%45%59=S&%61pi_key=S", "/v1/x?%6B%45%59=***&%61pi_key=***");
	expect("/v1/x?session%5Fid=S", "/v1/x?session%5Fid=***");
	expect("/v1/x?x=1;key=S;y=2", "/v1/x?x=1;key=***;y=2");
	expect("/v1beta/models/key=S:streamGenerateContent",
	    "/v1beta/models/key=***");
	expect("/v1/models/key=S/x?alt=sse", "/v1/models/key=***/x?alt=sse");
	expect("/v1/models;api_key=S;v=2/x?token=S", "/v1/models;api_key=***;v=2/x?token=***");
	/* a stray '%' is no escape, and a name that decodes to no credential
	 * stays */
	expect("/v1/x?k%zzey=kept&%=kept&k%6=kept", "/v1/x?k%zzey=kept&%=kept&k%6=kept");
	expect("/v1/a=b/c", "/v1/a=b/c");
}

static void test_cut_never_halves_a_value(void **state)
{
	char target[4096], out[64];
	size_t n;
	(void)state;

	/* a long name is no credential's, whatever it decodes to */
	memset(target, 'a', 200);
	memcpy(target + 200, "=kept", 6);
	n = accesslog_mask_target(target, strlen(target), more, 1, out, sizeof out);
	assert_int_equal(n, sizeof out - 1);
	/* the value that would not fit whole is not there at all */
	snprintf(target, sizeof target, "/v1/x?a=%s&token=SECRETSECRET", "0123456789012345678901234567890123456789");
	n = accesslog_mask_target(target, strlen(target), NULL, 0, out, sizeof out);
	out[n] = '\0';
	assert_null(strstr(out, "SECRET"));
	assert_int_equal(strncmp(out, "/v1/x?a=0123", 12), 0);
	for (size_t cap = 8; cap < 40; cap++) {
		n = accesslog_mask_target("/x?key=SECRET&y", 15, NULL, 0, out, cap);
		out[n] = '\0';
		assert_true(n < cap);
		assert_null(strstr(out, "S"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_what_leaked),
		cmocka_unit_test(test_cut_never_halves_a_value),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
