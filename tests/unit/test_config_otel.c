/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of otel:'s keys and the OTel SDKs' environment variables:
 * the file wins over the environment, the environment over the
 * defaults; a bad variable is named, a header's value never echoed. */

#include "config.h"
#include <unistd.h>

#include "unit.h"

/* The config of yaml, loaded from a file (a file's config takes the
 * environment) with the variables env (NAME=value) set meanwhile; NULL
 * when it has errors, written to errs. */
static struct conf *load_with(const char *yaml, const char *const *env, char *errs,
    size_t cap)
{
	char path[] = "/tmp/tt-otel-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fmemopen(errs, cap, "w");
	struct conf *c;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	for (const char *const *v = env; *v != NULL; v++)
		putenv((char *)*v);
	c = conf_load(path, f);
	for (const char *const *v = env; *v != NULL; v++) {
		char name[64];
		snprintf(name, sizeof name, "%.*s", (int)(strchr(*v, '=') - *v), *v);
		unsetenv(name);
	}
	fclose(f);
	unlink(path);
	return c;
}

static void test_defaults(void **state)
{
	struct conf *c = unit_conf("otel: {endpoint: \"http://h:4318/\"}\n");

	(void)state;
	assert_string_equal(c->otel.traces_url, "http://h:4318/v1/traces");
	assert_string_equal(c->otel.metrics_url, "http://h:4318/v1/metrics");
	assert_int_equal(c->otel.protocol, OTEL_PROTOBUF);
	assert_int_equal(c->otel.traces, 1);
	assert_true(c->otel.sample == 0);
	assert_int_equal(c->otel.queue, 2048);
	assert_int_equal(c->otel.batch, 512);
	assert_int_equal(c->otel.interval_us, 60000000);
	assert_int_equal(c->otel.timeout_us, 10000000);
	assert_string_equal(c->otel.service_name, "tokentap");
	conf_unref(c);
	/* no endpoint: no signal */
	c = unit_conf("workers: 1\n");
	assert_null(c->otel.traces_url);
	assert_int_equal(c->otel.traces, 0);
	assert_int_equal(c->otel.metrics, 0);
	conf_unref(c);
}

static void test_environment(void **state)
{
	static const char *const env[] = {
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://env:4318",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/json",
		"OTEL_EXPORTER_OTLP_HEADERS=api-key=s%3Dcret, x-b = 2",
		"OTEL_SERVICE_NAME=from-env",
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=0.25",
		"OTEL_METRIC_EXPORT_INTERVAL=5000",
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta",
		NULL
	};
	char errs[512] = "";
	struct conf *c;

	(void)state;
	/* the file's service_name and protocol win; the rest is the environment's */
	c = load_with("otel: {service_name: file, protocol: protobuf}\n", env, errs,
	    sizeof errs);
	assert_non_null(c);
	assert_string_equal(errs, "");
	assert_string_equal(c->otel.traces_url, "http://env:4318/v1/traces");
	assert_int_equal(c->otel.protocol, OTEL_PROTOBUF);
	assert_string_equal(c->otel.service_name, "file");
	assert_int_equal(c->otel.n_headers, 2);
	assert_string_equal(c->otel.headers[0].name, "api-key");
	assert_string_equal(c->otel.headers[0].value, "s=cret");
	assert_string_equal(c->otel.headers[1].name, "x-b");
	assert_string_equal(c->otel.headers[1].value, "2");
	assert_true(c->otel.sample == 0.25);
	assert_int_equal(c->otel.interval_us, 5000000);
	assert_int_equal(c->otel.delta, 1);
	conf_unref(c);
}

static void test_bad_environment(void **state)
{
	static const char *const env[] = {
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://user:secret@h:4318",
		"OTEL_EXPORTER_OTLP_HEADERS=bad name=topsecret",
		NULL
	};
	char errs[1024] = "";
	struct conf *c;

	(void)state;
	c = load_with("workers: 1\n", env, errs, sizeof errs);
	assert_null(c);
	assert_non_null(strstr(errs, "environment: OTEL_EXPORTER_OTLP_PROTOCOL: expected "
	    "http/protobuf or http/json"));
	assert_non_null(strstr(errs, "got 'grpc'"));
	assert_non_null(strstr(errs, "environment: OTEL_EXPORTER_OTLP_ENDPOINT:"));
	assert_non_null(strstr(errs, "environment: OTEL_EXPORTER_OTLP_HEADERS:"));
	/* neither a URL's password nor a header's value is echoed */
	assert_null(strstr(errs, "secret"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_environment),
		cmocka_unit_test(test_bad_environment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
