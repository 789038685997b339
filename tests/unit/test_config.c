/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the config loader: good files give the values docs/contract.md
 * §2 says, and every kind of mistake is reported as "t.yaml:LINE:COL: message"
 * at the place it was made, all of them in one run, in file order. */
#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"

#include "unit.h"

#define MS 1000ull
#define S  1000000ull

/* Loads text as "t.yaml"; *errs gets what the loader printed. */
static struct conf *load(const char *text, char **errs)
{
	size_t len = 0;
	FILE *f;
	struct conf *c;

	*errs = NULL;
	f = open_memstream(errs, &len);
	assert_non_null(f);
	c = conf_load_string("t.yaml", text, strlen(text), f);
	assert_int_equal(fclose(f), 0);
	return c;
}

static int affinity_cpus(void)
{
	cpu_set_t set;
	assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
	return CPU_COUNT(&set) > 256 ? 256 : CPU_COUNT(&set);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The index (from 0) of the first line of errs starting with prefix. */
static size_t line_index(const char *errs, const char *prefix)
{
	size_t i = 0;
	for (const char *p = errs; *p; i++) {
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			return i;
		p = strchr(p, '\n');
		if (p == NULL)
			break;
		p++;
	}
	fail_msg("no line starts with \"%s\" in:\n%s", prefix, errs);
	return 0;
}

static struct conf *load_ok(const char *text)
{
	char *errs;
	struct conf *c = load(text, &errs);
	if (c == NULL)
		fail_msg("unexpected errors:\n%s", errs);
	assert_string_equal(errs, "");
	free(errs);
	return c;
}

/* The load fails with exactly one problem, whose line starts with prefix. */
static void expect_one(const char *text, const char *prefix)
{
	char *errs;
	struct conf *c = load(text, &errs);
	assert_null(c);
	line_index(errs, prefix);
	if (count_lines(errs) != 1)
		fail_msg("expected one line, got:\n%s", errs);
	free(errs);
}

/* The same for a route's upstream written on line 3, column 15. */
static void expect_upstream(const char *url, const char *msg)
{
	char text[512], want[512];
	snprintf(text, sizeof text, "routes:\n  - name: a\n    upstream: %s\n", url);
	snprintf(want, sizeof want, "t.yaml:3:15: routes[0].upstream: %s\n", msg);
	char *errs;
	struct conf *c = load(text, &errs);
	assert_null(c);
	assert_string_equal(errs, want);
	free(errs);
}

static void test_defaults(void **state)
{
	struct conf *c = conf_default();
	int cpus = affinity_cpus();

	(void)state;
	assert_non_null(c);
	assert_int_equal(atomic_load(&c->refs), 1);
	assert_int_equal(c->n_listen, 1);
	assert_string_equal(c->listen[0].address, "127.0.0.1:8080");
	assert_string_equal(c->listen[0].host, "127.0.0.1");
	assert_int_equal(c->listen[0].port, 8080);
	assert_null(c->listen[0].tls_cert);
	assert_string_equal(c->admin_address, "127.0.0.1:9464");
	assert_string_equal(c->admin_host, "127.0.0.1");
	assert_int_equal(c->admin_port, 9464);
	assert_null(c->admin_token);
	assert_int_equal(c->workers, cpus > 256 ? 256 : cpus);
	assert_int_equal(c->timeouts.client_header_us, 10 * S);
	assert_int_equal(c->timeouts.client_body_us, 60 * S);
	assert_int_equal(c->timeouts.connect_us, 5 * S);
	assert_int_equal(c->timeouts.first_byte_us, 120 * S);
	assert_int_equal(c->timeouts.idle_us, 60 * S);
	assert_int_equal(c->timeouts.shutdown_us, 30 * S);
	assert_int_equal(c->max_connections, 10000);
	assert_int_equal(c->max_header_bytes, 32 * 1024);
	assert_int_equal(c->max_body_bytes, 16 * 1024 * 1024);
	assert_int_equal(c->max_event_bytes, 1024 * 1024);
	assert_null(c->tenant_header);
	assert_int_equal(c->n_tenant_api_keys, 0);
	assert_int_equal(c->max_tenants, 1000);
	assert_int_equal(c->max_models, 100);
	assert_int_equal(c->n_routes, 0);
	assert_null(c->access_log);
	assert_int_equal(c->n_stats_windows, 3);
	assert_int_equal(c->stats_windows_us[0], 60 * S);
	assert_int_equal(c->stats_windows_us[1], 300 * S);
	assert_int_equal(c->stats_windows_us[2], 3600 * S);
	assert_null(c->stats_file);
	assert_int_equal(c->stats_interval_us, 10 * S);
	assert_int_equal(c->alerts_evaluate_every_us, 10 * S);
	assert_int_equal(c->alerts_window_us, 60 * S);
	assert_true(c->alerts_quantile == 0.95);
	assert_int_equal(c->alerts_min_samples, 10);
	assert_int_equal(c->alerts_for_us, 0);
	assert_true(c->alerts_hysteresis == 0.1);
	assert_int_equal(c->alerts_per_tenant, 0);
	assert_int_equal(c->thresholds.ttft_warning_us, 1000 * MS);
	assert_int_equal(c->thresholds.ttft_critical_us, 2000 * MS);
	assert_int_equal(c->thresholds.tpot_warning_us, 100 * MS);
	assert_int_equal(c->thresholds.tpot_critical_us, 200 * MS);
	assert_true(c->thresholds.error_rate_warning < 0);
	assert_true(c->thresholds.error_rate_critical < 0);
	assert_int_equal(c->thresholds.ttfo_warning_us, 0);
	assert_int_equal(c->thresholds.ttfo_critical_us, 0);
	assert_int_equal(c->thresholds.stall_us, 10 * S);
	assert_int_equal(c->thresholds.min_stalled, 1);
	assert_int_equal(c->timeouts.token_idle_us, 0);
	assert_int_equal(c->n_notify, 0);
	conf_unref(c);
}

static void test_empty_and_null_sections(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("");
	assert_string_equal(c->path, "t.yaml");
	assert_int_equal(c->n_listen, 1);
	conf_unref(c);
	c = load_ok("# nothing but a comment\n");
	conf_unref(c);
	/* sections whose keys are all commented out keep their defaults */
	c = load_ok("listen:\ntimeouts:\n  # idle: 5s\nroutes:\naccess_log:\nalerts:\n"
	    "  notify:\n");
	assert_int_equal(c->n_listen, 1);
	assert_int_equal(c->timeouts.idle_us, 60 * S);
	assert_int_equal(c->n_routes, 0);
	assert_null(c->access_log);
	conf_unref(c);
	/* an empty routes list is fine: every request gets a 404 */
	c = load_ok("routes: []\n");
	assert_int_equal(c->n_routes, 0);
	conf_unref(c);
}

static void test_minimal(void **state)
{
	struct conf *c;
	const struct conf_route *r;

	(void)state;
	c = load_ok("routes:\n  - name: local\n    upstream: http://127.0.0.1:8000\n");
	assert_int_equal(c->n_routes, 1);
	r = &c->routes[0];
	assert_string_equal(r->name, "local");
	assert_string_equal(r->upstream, "http://127.0.0.1:8000");
	assert_int_equal(r->upstream_tls, 0);
	assert_string_equal(r->upstream_host, "127.0.0.1");
	assert_int_equal(r->upstream_port, 8000);
	assert_string_equal(r->upstream_base, "");
	assert_int_equal(r->dialect, DIALECT_AUTO);
	assert_int_equal(r->strip_prefix, 0);
	assert_int_equal(r->preserve_host, 0);
	assert_null(r->match_path_prefix);
	assert_null(r->match_host);
	assert_int_equal(r->n_match_headers, 0);
	assert_int_equal(r->n_set_headers, 0);
	assert_int_equal(r->tls.verify, 1);
	assert_string_equal(r->tls.sni, "127.0.0.1");
	assert_memory_equal(&r->timeouts, &c->timeouts, sizeof r->timeouts);
	assert_memory_equal(&r->thresholds, &c->thresholds, sizeof r->thresholds);
	conf_unref(c);
}

/* docs/contract.md §2's example with the secrets from the environment. Two
 * changes: https upstream -> http until TLS upstreams land, and
 * ${ACME_KEY_SHA256} quoted, since a plain scalar in a flow mapping cannot
 * hold '{'. */
static const char full_example[] =
    "listen:                          # default: [{address: 127.0.0.1:8080}]\n"
    "  - address: 0.0.0.0:8080\n"
    "  - address: 0.0.0.0:8443\n"
    "    tls: {cert: /etc/tokentap/tls.crt, key: /etc/tokentap/tls.key}\n"
    "admin:\n"
    "  address: 127.0.0.1:9464\n"
    "  token: ${TOKENTAP_ADMIN_TOKEN}\n"
    "workers: auto\n"
    "timeouts:\n"
    "  client_header: 10s\n"
    "  connect: 5s\n"
    "  first_byte: 120s\n"
    "  idle: 60s\n"
    "  shutdown: 30s\n"
    "limits:\n"
    "  max_connections: 10000\n"
    "  max_header_bytes: 32k\n"
    "  max_body_bytes: 16m\n"
    "  max_event_bytes: 1m\n"
    "tenant:\n"
    "  header: X-Tenant-Id\n"
    "  api_keys: {acme: \"${ACME_KEY_SHA256}\"}\n"
    "  max_tenants: 1000\n"
    "models:\n"
    "  max_models: 100\n"
    "routes:\n"
    "  - name: openai\n"
    "    match: {path_prefix: /v1/, host: api.example.com, header: {X-Backend: openai}}\n"
    "    upstream: http://api.openai.com\n"
    "    dialect: auto\n"
    "    strip_prefix: false\n"
    "    preserve_host: false\n"
    "    set_headers: {Authorization: \"Bearer ${OPENAI_API_KEY}\"}\n"
    "    tls: {verify: true, ca_file: /etc/ssl/certs/ca-certificates.crt, sni: api.openai.com,"
    " client_cert: /etc/tokentap/c.crt, client_key: /etc/tokentap/c.key}\n"
    "    thresholds: {ttft_warning: 500ms}\n"
    "    timeouts: {first_byte: 600s, idle: 300s}\n"
    "access_log: /var/log/tokentap/access.jsonl\n"
    "stats:\n"
    "  windows: [1m, 5m, 1h]\n"
    "  file: /var/lib/tokentap/stats.jsonl\n"
    "  interval: 10s\n"
    "alerts:\n"
    "  evaluate_every: 10s\n"
    "  window: 1m\n"
    "  quantile: 0.95\n"
    "  min_samples: 10\n"
    "  for: 0s\n"
    "  hysteresis: 0.1\n"
    "  per_tenant: false\n"
    "  thresholds:\n"
    "    ttft_warning: 1000ms\n"
    "    ttft_critical: 2000ms\n"
    "    tpot_warning: 100ms\n"
    "    tpot_critical: 200ms\n"
    "    error_rate_warning: 0.05\n"
    "    error_rate_critical: 0.2\n"
    "  notify:\n"
    "    - {type: log}\n"
    "    - {type: webhook, url: http://127.0.0.1:5001/hooks/latency, headers: {X-Token: \"...\"}}\n"
    "    - {type: alertmanager, url: http://127.0.0.1:9093, repeat_interval: 1m}\n";

#define ACME_UPPER "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"

static void test_full_example(void **state)
{
	struct conf *c;
	const struct conf_route *r;

	(void)state;
	setenv("TOKENTAP_ADMIN_TOKEN", "s3cret", 1);
	setenv("ACME_KEY_SHA256", ACME_UPPER, 1);
	setenv("OPENAI_API_KEY", "sk-test", 1);
	c = load_ok(full_example);

	assert_int_equal(c->n_listen, 2);
	assert_string_equal(c->listen[0].address, "0.0.0.0:8080");
	assert_string_equal(c->listen[0].host, "0.0.0.0");
	assert_int_equal(c->listen[0].port, 8080);
	assert_null(c->listen[0].tls_cert);
	assert_int_equal(c->listen[1].port, 8443);
	assert_string_equal(c->listen[1].tls_cert, "/etc/tokentap/tls.crt");
	assert_string_equal(c->listen[1].tls_key, "/etc/tokentap/tls.key");
	assert_string_equal(c->admin_token, "s3cret");
	assert_int_equal(c->admin_port, 9464);
	assert_int_equal(c->max_body_bytes, 16 * 1024 * 1024);
	assert_string_equal(c->tenant_header, "X-Tenant-Id");
	assert_int_equal(c->n_tenant_api_keys, 1);
	assert_string_equal(c->tenant_api_keys[0].name, "acme");
	assert_string_equal(c->tenant_api_keys[0].value,
	    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");

	assert_int_equal(c->n_routes, 1);
	r = &c->routes[0];
	assert_string_equal(r->match_path_prefix, "/v1/");
	assert_string_equal(r->match_host, "api.example.com");
	assert_int_equal(r->n_match_headers, 1);
	assert_string_equal(r->match_headers[0].name, "X-Backend");
	assert_string_equal(r->match_headers[0].value, "openai");
	assert_string_equal(r->upstream_host, "api.openai.com");
	assert_int_equal(r->upstream_port, 80);
	assert_int_equal(r->n_set_headers, 1);
	assert_string_equal(r->set_headers[0].name, "Authorization");
	assert_string_equal(r->set_headers[0].value, "Bearer sk-test");
	assert_int_equal(r->tls.verify, 1);
	assert_string_equal(r->tls.ca_file, "/etc/ssl/certs/ca-certificates.crt");
	assert_string_equal(r->tls.sni, "api.openai.com");
	assert_string_equal(r->tls.client_key, "/etc/tokentap/c.key");
	assert_int_equal(r->thresholds.ttft_warning_us, 500 * MS);
	assert_int_equal(r->thresholds.ttft_critical_us, 2000 * MS);
	assert_true(r->thresholds.error_rate_critical == 0.2);
	assert_int_equal(r->timeouts.first_byte_us, 600 * S);
	assert_int_equal(r->timeouts.idle_us, 300 * S);
	assert_int_equal(r->timeouts.connect_us, 5 * S);

	assert_string_equal(c->access_log, "/var/log/tokentap/access.jsonl");
	assert_int_equal(c->n_stats_windows, 3);
	assert_int_equal(c->stats_windows_us[2], 3600 * S);
	assert_string_equal(c->stats_file, "/var/lib/tokentap/stats.jsonl");
	assert_true(c->thresholds.error_rate_warning == 0.05);
	assert_int_equal(c->n_notify, 3);
	assert_int_equal(c->notify[0].type, NOTIFY_LOG);
	assert_int_equal(c->notify[1].type, NOTIFY_WEBHOOK);
	assert_string_equal(c->notify[1].url, "http://127.0.0.1:5001/hooks/latency");
	assert_int_equal(c->notify[1].n_headers, 1);
	assert_string_equal(c->notify[1].headers[0].value, "...");
	assert_int_equal(c->notify[1].timeout_us, 5 * S);
	assert_int_equal(c->notify[2].type, NOTIFY_ALERTMANAGER);
	assert_int_equal(c->notify[2].repeat_interval_us, 60 * S);
	conf_unref(c);
}

static void test_units(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("timeouts: {client_header: 1500ms, connect: 2s, first_byte: 1m,"
	    " idle: 1h, shutdown: 3, client_body: 90s}\n"
	    "limits: {max_header_bytes: 16k, max_body_bytes: 1m, max_event_bytes: 4096}\n"
	    "workers: 3\n"
	    "alerts: {per_tenant: yes, quantile: 0.5, hysteresis: 0, for: 0}\n"
	    "stats: {windows: [30s, 2m]}\n");
	assert_int_equal(c->timeouts.client_header_us, 1500 * MS);
	assert_int_equal(c->timeouts.connect_us, 2 * S);
	assert_int_equal(c->timeouts.first_byte_us, 60 * S);
	assert_int_equal(c->timeouts.idle_us, 3600 * S);
	assert_int_equal(c->timeouts.shutdown_us, 3 * S);
	assert_int_equal(c->timeouts.client_body_us, 90 * S);
	assert_int_equal(c->max_header_bytes, 16384);
	assert_int_equal(c->max_body_bytes, 1048576);
	assert_int_equal(c->max_event_bytes, 4096);
	assert_int_equal(c->workers, 3);
	assert_int_equal(c->alerts_per_tenant, 1);
	assert_true(c->alerts_quantile == 0.5);
	assert_true(c->alerts_hysteresis == 0);
	assert_int_equal(c->n_stats_windows, 2);
	assert_int_equal(c->stats_windows_us[0], 30 * S);
	assert_int_equal(c->stats_windows_us[1], 120 * S);
	conf_unref(c);

	c = load_ok("workers: auto\n");
	assert_int_equal(c->workers, affinity_cpus());
	assert_int_equal(c->timestamps, TIMESTAMPS_KERNEL);     /* the default */
	conf_unref(c);
	c = load_ok("timestamps: loop\n");
	assert_int_equal(c->timestamps, TIMESTAMPS_LOOP);
	conf_unref(c);
	expect_one("timestamps: kernl\n", "t.yaml:1:13: timestamps: unknown timestamps 'kernl'");
}

/* auto follows the affinity mask (a cpuset), not the machine's CPU count. */
static void test_workers_auto_affinity(void **state)
{
	cpu_set_t saved, one;
	struct conf *c;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof saved, &saved), 0);
	CPU_ZERO(&one);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &saved)) {
			CPU_SET(i, &one);
			break;
		}
	assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
	c = load_ok("workers: auto\n");
	assert_int_equal(c->workers, 1);
	conf_unref(c);
	c = conf_default();
	assert_int_equal(c->workers, 1);
	conf_unref(c);
	assert_int_equal(sched_setaffinity(0, sizeof saved, &saved), 0);
	assert_int_equal(conf_auto_workers(), affinity_cpus());
}

static void test_upstream_forms(void **state)
{
	static const struct {
		const char *url, *host, *base;
		unsigned port;
	} cases[] = {
		{ "http://backend", "backend", "", 80 },
		{ "http://backend:81/", "backend", "", 81 },
		{ "HTTP://backend.example.com/v1/", "backend.example.com", "/v1", 80 },
		{ "http://[::1]:9000/base/path//", "::1", "/base/path", 9000 },
		/* RFC 6874's "%25" is the '%' getaddrinfo wants before a zone */
		{ "http://[fe80::1%25eth0]", "fe80::1%eth0", "", 80 },
		{ "http://[fe80::1%eth0]:81", "fe80::1%eth0", "", 81 },
		{ "http://10.0.0.7:65535/a", "10.0.0.7", "/a", 65535 },
		{ "https://api.openai.com", "api.openai.com", "", 443 },
		{ "https://api.example.com:8443/v1", "api.example.com", "/v1", 8443 },
	};
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct conf *c;
		snprintf(text, sizeof text, "routes:\n  - name: a\n    upstream: %s\n",
		    cases[i].url);
		c = load_ok(text);
		assert_string_equal(c->routes[0].upstream, cases[i].url);
		assert_string_equal(c->routes[0].upstream_host, cases[i].host);
		assert_int_equal(c->routes[0].upstream_port, cases[i].port);
		assert_string_equal(c->routes[0].upstream_base, cases[i].base);
		assert_int_equal(c->routes[0].upstream_tls,
		    strncasecmp(cases[i].url, "https", 5) == 0);
		/* the name verified and sent as SNI defaults to the host */
		assert_string_equal(c->routes[0].tls.sni, cases[i].host);
		conf_unref(c);
	}
}

static void test_upstream_errors(void **state)
{
	(void)state;
	expect_upstream("ftp://backend", "expected an http:// or https:// URL");
	expect_upstream("backend:80", "expected an http:// or https:// URL");
	expect_upstream("http://backend/v1?x=1", "must not contain a query or a fragment");
	expect_upstream("http://backend?x=1", "must not contain a query or a fragment");
	expect_upstream("http://backend/#top", "must not contain a fragment");
	expect_upstream("http://user:pw@backend",
	    "must not contain credentials (use set_headers)");
	expect_upstream("http://user@backend/v1",
	    "must not contain credentials (use set_headers)");
	expect_upstream("http://backend/v 1", "the path has a space or control character");
	expect_upstream("http://backend/v%1", "bad percent-encoding in the path");
	expect_upstream("http://[::g]", "bad IPv6 address");
	expect_upstream("''", "expected an http:// or https:// URL");
	expect_upstream("http://", "expected a host after the scheme");
	expect_upstream("http://:80/", "expected a host after the scheme");
	expect_upstream("http://backend:0", "bad port");
	expect_upstream("http://backend:65536", "bad port");
	expect_upstream("http://backend:8x", "bad port");
	expect_upstream("http://[::1", "unterminated IPv6 address (expected [addr])");
	expect_upstream("http://back_end!", "the host has an invalid character");
}

static void test_syntax_error(void **state)
{
	char *errs;
	struct conf *c;

	(void)state;
	expect_one("admin:\n  address: 127.0.0.1:1\n token: x\n",
	    "t.yaml:3:2: YAML syntax error: did not find expected key");
	expect_one("a: b\n c: d\n",
	    "t.yaml:2:3: YAML syntax error: mapping values are not allowed in this context");
	/* an encoding error has only a byte offset: it is turned into line:col */
	expect_one("workers: 1\nad\xc3(: x\n",
	    "t.yaml:2:4: YAML syntax error: invalid trailing UTF-8 octet");
	expect_one("workers: 1\n---\nworkers: 2\n",
	    "t.yaml:3:1: only one YAML document is allowed");
	c = load("- a\n- b\n", &errs);
	assert_null(c);
	assert_string_equal(errs,
	    "t.yaml:1:1: expected a mapping of settings at the top level, got a list\n");
	free(errs);
}

static void test_wrong_types(void **state)
{
	(void)state;
	expect_one("timeouts: 5s\n",
	    "t.yaml:1:11: timeouts: expected a mapping, got a single value");
	expect_one("timeouts:\n  idle: {a: 1}\n",
	    "t.yaml:2:9: timeouts.idle: expected a duration like 1500ms, 2s, 1m, got a mapping");
	expect_one("workers: [1, 2]\n",
	    "t.yaml:1:10: workers: expected auto or a number of threads, got a list");
	expect_one("listen: 0.0.0.0:80\n",
	    "t.yaml:1:9: listen: expected a list of addresses, got a single value");
	expect_one("routes:\n  - just-a-name\n",
	    "t.yaml:2:5: routes[0]: expected a mapping, got a single value");
	expect_one("access_log: [a]\n",
	    "t.yaml:1:13: access_log: expected a string, got a list");
	expect_one("tenant:\n  api_keys: [a]\n",
	    "t.yaml:2:13: tenant.api_keys: expected a mapping of names to strings, got a list");
	expect_one("alerts:\n  per_tenant: maybe\n",
	    "t.yaml:2:15: alerts.per_tenant: expected true or false, got 'maybe'");
	expect_one("{[a]: 1}\n", "t.yaml:1:2: expected a key name, got a list");
}

static void test_bad_duration_and_size(void **state)
{
	(void)state;
	expect_one("timeouts:\n  connect: 5x\n",
	    "t.yaml:2:12: timeouts.connect: expected a duration like 1500ms, 2s, 1m, got '5x'");
	expect_one("timeouts:\n  connect: -1s\n",
	    "t.yaml:2:12: timeouts.connect: expected a duration like 1500ms, 2s, 1m, got '-1s'");
	expect_one("timeouts:\n  connect: 0\n",
	    "t.yaml:2:12: timeouts.connect: must be greater than 0");
	expect_one("timeouts:\n  client_body: 0s\n",
	    "t.yaml:2:16: timeouts.client_body: must be greater than 0");
	expect_one("routes:\n  - {name: a, upstream: http://h, timeouts: {client_body: 2x}}\n",
	    "t.yaml:2:59: routes[0].timeouts.client_body: expected a duration like 1500ms, 2s, 1m, got '2x'");
	expect_one("timeouts:\n  idle:\n  connect: 1s\n",
	    "t.yaml:2:8: timeouts.idle: expected a duration like 1500ms, 2s, 1m, got an empty value");
	expect_one("limits:\n  max_body_bytes: 16q\n",
	    "t.yaml:2:19: limits.max_body_bytes: expected a size like 4096, 16k, 1m, got '16q'");
	expect_one("stats:\n  windows: [1m, 0s]\n",
	    "t.yaml:2:17: stats.windows[1]: must be greater than 0");
	expect_one("stats:\n  windows: []\n",
	    "t.yaml:2:12: stats.windows: at least one window is required");
}

static void test_ranges(void **state)
{
	(void)state;
	expect_one("workers: 300\n", "t.yaml:1:10: workers: 300 is out of range [1, 256]");
	expect_one("workers: 0\n", "t.yaml:1:10: workers: 0 is out of range [1, 256]");
	expect_one("workers: some\n",
	    "t.yaml:1:10: workers: expected auto or a number of threads, got 'some'");
	expect_one("limits:\n  max_header_bytes: 100\n",
	    "t.yaml:2:21: limits.max_header_bytes: 100 is out of range [1024, 1048576]");
	expect_one("limits:\n  max_connections: 1.5\n",
	    "t.yaml:2:20: limits.max_connections: expected a whole number, got '1.5'");
	expect_one("alerts:\n  quantile: 1\n",
	    "t.yaml:2:13: alerts.quantile: 1 is out of range (0, 1)");
	expect_one("alerts:\n  quantile: 0\n",
	    "t.yaml:2:13: alerts.quantile: 0 is out of range (0, 1)");
	expect_one("alerts:\n  quantile: 1e400\n",
	    "t.yaml:2:13: alerts.quantile: expected a number, got '1e400'");
	expect_one("alerts:\n  hysteresis: 1\n",
	    "t.yaml:2:15: alerts.hysteresis: 1 is out of range [0, 1)");
	expect_one("alerts:\n  hysteresis: -0.1\n",
	    "t.yaml:2:15: alerts.hysteresis: -0.1 is out of range [0, 1)");
	expect_one("alerts:\n  thresholds: {error_rate_warning: 1.5}\n",
	    "t.yaml:2:36: alerts.thresholds.error_rate_warning: 1.5 is out of range [0, 1]");
}

static void test_unknown_keys(void **state)
{
	char *errs;
	struct conf *c;

	(void)state;
	c = load("listne:\n  - address: :80\ncolour: red\nroutes:\n  - name: a\n"
	    "    upstrem: http://x\n    Dialect: raw\n", &errs);
	assert_null(c);
	assert_string_equal(errs,
	    "t.yaml:1:1: unknown key 'listne'; did you mean 'listen'?\n"
	    "t.yaml:3:1: unknown key 'colour'\n"
	    "t.yaml:5:5: missing required key 'upstream' in routes[0]\n"
	    "t.yaml:6:5: unknown key 'upstrem' in routes[0]; did you mean 'upstream'?\n"
	    "t.yaml:7:5: unknown key 'Dialect' in routes[0]; did you mean 'dialect'?\n");
	free(errs);
}

static void test_dialects(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("routes:\n"
	    "  - {name: a, upstream: http://x, dialect: openai-responses}\n"
	    "  - {name: b, upstream: http://x, dialect: ollama}\n");
	assert_int_equal(c->routes[0].dialect, DIALECT_OPENAI_RESPONSES);
	assert_int_equal(c->routes[1].dialect, DIALECT_OLLAMA);
	conf_unref(c);
	expect_one("routes:\n  - name: a\n    upstream: http://x\n    dialect: opnai\n",
	    "t.yaml:4:14: routes[0].dialect: unknown dialect 'opnai' (valid: auto, openai, "
	    "openai-responses, anthropic, dify, gemini, tgi, ollama, raw); did you mean 'openai'?");
	expect_one("routes:\n  - name: a\n    upstream: http://x\n    dialect: grpc-web\n",
	    "t.yaml:4:14: routes[0].dialect: unknown dialect 'grpc-web' (valid: auto, openai, "
	    "openai-responses, anthropic, dify, gemini, tgi, ollama, raw)\n");
}

static void test_route_required_and_duplicates(void **state)
{
	char *errs;
	struct conf *c;

	(void)state;
	c = load("routes:\n"
	    "  - upstream: http://a\n"
	    "  - name: b\n"
	    "  - name:\n"
	    "    upstream: http://c\n"
	    "  - name: b\n"
	    "    upstream: http://d\n", &errs);
	assert_null(c);
	assert_string_equal(errs,
	    "t.yaml:2:5: missing required key 'name' in routes[0]\n"
	    "t.yaml:3:5: missing required key 'upstream' in routes[1]\n"
	    "t.yaml:4:10: routes[2].name: must not be empty\n"
	    "t.yaml:6:11: routes[3].name: duplicate route name 'b' (first at line 3)\n");
	free(errs);
}

static void test_duplicate_keys(void **state)
{
	(void)state;
	expect_one("admin:\n  address: 127.0.0.1:1\n  address: 127.0.0.1:2\n",
	    "t.yaml:3:3: duplicate key 'address' in admin (first at line 2)");
	expect_one("workers: 1\nadmin: {}\nworkers: 2\n",
	    "t.yaml:3:1: duplicate key 'workers' (first at line 1)");
	/* header names compare without case */
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    set_headers: {X-A: 1, x-a: 2}\n",
	    "t.yaml:4:27: duplicate key 'x-a' in routes[0].set_headers (first at line 4)");
}

static void test_addresses(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("listen:\n  - address: :8080\n  - address: '[::1]:8081'\n"
	    "admin: {address: 0.0.0.0:9000}\n");
	assert_int_equal(c->n_listen, 2);
	assert_string_equal(c->listen[0].host, "");
	assert_int_equal(c->listen[0].port, 8080);
	assert_string_equal(c->listen[1].host, "::1");
	assert_int_equal(c->listen[1].port, 8081);
	assert_string_equal(c->admin_address, "0.0.0.0:9000");
	assert_int_equal(c->admin_port, 9000);
	conf_unref(c);

	expect_one("listen:\n  - address: localhost\n",
	    "t.yaml:2:14: listen[0].address: expected an address host:port, got 'localhost'");
	expect_one("admin:\n  address: 127.0.0.1:99999\n",
	    "t.yaml:2:12: admin.address: expected an address host:port, got '127.0.0.1:99999'");
	expect_one("listen:\n  - tls: {cert: a, key: b}\n",
	    "t.yaml:2:5: missing required key 'address' in listen[0]");
	expect_one("listen: []\n", "t.yaml:1:9: listen: at least one address is required");
}

static void test_env_expansion(void **state)
{
	struct conf *c;
	const struct conf_route *r;
	char *errs;

	(void)state;
	setenv("TT_W", "3", 1);
	setenv("TT_HOST", "backend.internal", 1);
	setenv("TT_PORT", "9000", 1);
	setenv("TT_EMPTY", "", 1);
	c = load_ok("workers: ${TT_W}\n"
	    "timeouts: {idle: \"${TT_W}s\"}\n"
	    "routes:\n"
	    "  - name: r${TT_W}${TT_EMPTY}\n"
	    "    upstream: http://${TT_HOST}:${TT_PORT}/v${TT_W}\n"
	    "    set_headers: {X-Cost: \"$5 ${TT_W}$\"}\n");
	assert_int_equal(c->workers, 3);
	assert_int_equal(c->timeouts.idle_us, 3 * S);
	r = &c->routes[0];
	assert_string_equal(r->name, "r3");
	assert_string_equal(r->upstream, "http://backend.internal:9000/v3");
	assert_string_equal(r->upstream_host, "backend.internal");
	assert_int_equal(r->upstream_port, 9000);
	assert_string_equal(r->upstream_base, "/v3");
	assert_string_equal(r->set_headers[0].value, "$5 3$");
	conf_unref(c);

	unsetenv("TT_NOPE");
	unsetenv("TT_NADA");
	c = load("admin:\n  token: ${TT_NOPE}-${TT_NADA}\n"
	    "routes:\n  - {name: a, upstream: 'http://${TT_HOST'}\n"
	    "access_log: /var/${1X}/a\n", &errs);
	assert_null(c);
	assert_string_equal(errs,
	    "t.yaml:2:10: admin.token: environment variable TT_NOPE is not set\n"
	    "t.yaml:2:10: admin.token: environment variable TT_NADA is not set\n"
	    "t.yaml:4:25: routes[0].upstream: unterminated '${' (expected ${NAME})\n"
	    "t.yaml:5:13: access_log: '${1X}' is not a valid environment variable name\n");
	free(errs);
}

static void test_notify(void **state)
{
	char *errs;
	struct conf *c;

	(void)state;
	c = load("alerts:\n"
	    "  notify:\n"
	    "    - type: slack\n"
	    "    - type: webhook\n"
	    "    - {type: alertmanager, url: ftp://am}\n"
	    "    - {url: http://x}\n"
	    "    - {type: log, headers: {\"X Y\": 1}}\n"
	    "    - {type: webhook, url: 'http://u:p w@h'}\n"
	    "    - {type: webhook, url: 'http://h/x#y'}\n"
	    "    - {type: webhook, url: }\n", &errs);
	assert_null(c);
	assert_string_equal(errs,
	    "t.yaml:3:13: alerts.notify[0].type: unknown notify type 'slack' "
	    "(valid: log, webhook, alertmanager)\n"
	    "t.yaml:4:7: missing required key 'url' in alerts.notify[1] (needed by type webhook)\n"
	    "t.yaml:5:33: alerts.notify[2].url: expected an http:// or https:// URL\n"
	    "t.yaml:6:7: missing required key 'type' in alerts.notify[3]\n"
	    "t.yaml:7:29: alerts.notify[4].headers: 'X Y' is not a valid header name\n"
	    "t.yaml:8:28: alerts.notify[5].url: the credentials have a character that "
	    "must be percent-encoded\n"
	    "t.yaml:9:28: alerts.notify[6].url: must not contain a fragment\n"
	    "t.yaml:10:28: alerts.notify[7].url: expected an http:// or https:// URL, "
	    "got an empty value\n");
	free(errs);
}

static void test_metrics_keys(void **state)
{
	struct conf *c;
	(void)state;
	c = load_ok("tenant:\n  header: X-Team\n  header_values: [a, b]\n"
	    "  header_pattern: 'team-[0-9]+'\n"
	    "metrics:\n  max_series: 5000\n  names: both\n  tenants: hashed\n");
	assert_int_equal(c->n_tenant_header_values, 2);
	assert_string_equal(c->tenant_header_values[1], "b");
	assert_true(c->tenant_header_re_ok);
	assert_true(ere_match(&c->tenant_header_re, "team-12", 7));
	/* the whole value must match */
	assert_false(ere_match(&c->tenant_header_re, "xteam-12", 8));
	assert_false(ere_match(&c->tenant_header_re, "team-12x", 8));
	assert_int_equal(c->metrics_max_series, 5000);
	assert_int_equal(c->metrics_expiration_us, 600000000);
	assert_int_equal(c->metrics_names, 2);
	assert_int_equal(c->metrics_hashed_tenants, 1);
	conf_unref(c);
	c = load_ok("routes: []\n");
	assert_int_equal(c->metrics_max_series, 20000);
	assert_int_equal(c->metrics_names, 0);
	assert_int_equal(c->metrics_hashed_tenants, 0);
	conf_unref(c);
	expect_one("tenant:\n  header_pattern: 'a(b'\n",
	    "t.yaml:2:19: tenant.header_pattern: not a POSIX extended regular expression "
	    "tokentap takes: unmatched ( (at offset 1)");
	/* what took glibc 11.7 s to match and 6.9 s and 1.7 GB to compile */
	expect_one("tenant:\n  header_pattern: '(.*)(.*)(.*)(.*)(.*)\\2\\3\\4\\5x'\n",
	    "t.yaml:2:19: tenant.header_pattern: not a POSIX extended regular expression "
	    "tokentap takes: back-reference \\2 refused");
	expect_one("models:\n  pattern: '((((a{30}){30}){30}){30}){10}'\n",
	    "t.yaml:2:12: models.pattern: not a POSIX extended regular expression "
	    "tokentap takes: counted out it takes more than 4096 positions");
	c = load_ok("models:\n  names: [llama-3, qwen]\n  pattern: 'gpt-[0-9a-z.-]+'\n"
	    "metrics:\n  expiration: 0s\n");
	assert_int_equal(c->n_model_names, 2);
	assert_true(c->model_re_ok);
	assert_true(ere_match(&c->model_re, "gpt-4o", 6));
	assert_int_equal(c->metrics_expiration_us, 0);
	conf_unref(c);
	expect_one("metrics:\n  names: opentelemetry\n",
	    "t.yaml:2:10: metrics.names: unknown metric names 'opentelemetry' "
	    "(valid: tokentap, otel, both)");
	expect_one("metrics:\n  max_series: 0\n",
	    "t.yaml:2:15: metrics.max_series: 0 is out of range [1, 100000000]");
}

static void test_thresholds_order(void **state)
{
	struct conf *c;
	char *errs;

	(void)state;
	/* the global critical default (2000ms) is below the new warning */
	expect_one("alerts:\n  thresholds:\n    ttft_warning: 3s\n",
	    "t.yaml:3:19: alerts.thresholds: ttft_critical (2000ms) is below ttft_warning (3000ms)");
	expect_one("alerts:\n  thresholds: {error_rate_warning: 0.5, error_rate_critical: 0.2}\n",
	    "t.yaml:2:62: alerts.thresholds: error_rate_critical (0.2) is below "
	    "error_rate_warning (0.5)");
	/* a route is checked with the global values it did not override */
	c = load("routes:\n  - name: a\n    upstream: http://x\n"
	    "    thresholds: {tpot_critical: 50ms}\n"
	    "alerts:\n  thresholds: {tpot_warning: 80ms}\n", &errs);
	assert_null(c);
	assert_string_equal(errs, "t.yaml:4:33: routes[0].thresholds: tpot_critical (50ms) is "
	    "below tpot_warning (80ms)\n");
	free(errs);
	/* equal is fine, and 0 turns a threshold off */
	c = load_ok("alerts:\n  thresholds: {ttft_warning: 2s, ttft_critical: 2s, tpot_warning: 0,"
	    " error_rate_critical: 0.1}\n");
	assert_int_equal(c->thresholds.ttft_warning_us, 2 * S);
	assert_int_equal(c->thresholds.tpot_warning_us, 0);
	assert_true(c->thresholds.error_rate_critical == 0.1);
	assert_true(c->thresholds.error_rate_warning < 0);
	conf_unref(c);
	/* TTFO like TTFT */
	expect_one("alerts:\n  thresholds: {ttfo_warning: 5s, ttfo_critical: 4s}\n",
	    "t.yaml:2:49: alerts.thresholds: ttfo_critical (4000ms) is below "
	    "ttfo_warning (5000ms)");
}

/* Stream health: the stall threshold and min_stalled per route, the
 * token_idle timeout per route, their bounds. */
static void test_stream_health_keys(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("routes:\n"
	    "  - name: a\n"
	    "    upstream: http://x\n"
	    "    thresholds: {stall: 30s, ttfo_warning: 8s}\n"
	    "    timeouts: {token_idle: 2m}\n"
	    "  - name: b\n"
	    "    upstream: http://y\n"
	    "timeouts: {token_idle: 45s}\n"
	    "alerts:\n  thresholds: {stall: 5s, min_stalled: 3, ttfo_critical: 9s}\n");
	assert_int_equal(c->routes[0].thresholds.stall_us, 30 * S);
	assert_int_equal(c->routes[0].thresholds.min_stalled, 3);
	assert_int_equal(c->routes[0].thresholds.ttfo_warning_us, 8 * S);
	assert_int_equal(c->routes[0].thresholds.ttfo_critical_us, 9 * S);
	assert_int_equal(c->routes[0].timeouts.token_idle_us, 120 * S);
	assert_int_equal(c->routes[1].thresholds.stall_us, 5 * S);
	assert_int_equal(c->routes[1].timeouts.token_idle_us, 45 * S);
	conf_unref(c);
	c = load_ok("alerts: {thresholds: {stall: 0}}\n");
	assert_int_equal(c->thresholds.stall_us, 0);
	conf_unref(c);
	expect_one("alerts: {thresholds: {min_stalled: 0}}\n",
	    "t.yaml:1:36: alerts.thresholds.min_stalled: 0 is out of range [1, 1000000]");
	expect_one("timeouts: {token_idle: soon}\n",
	    "t.yaml:1:24: timeouts.token_idle: expected a duration like 1500ms, 2s, 1m, "
	    "got 'soon'");
}

/* The routes are resolved after the whole file: globals written after them
 * still reach them, field by field under the route's own keys. */
static void test_overrides_after_routes(void **state)
{
	struct conf *c;
	const struct conf_route *a, *b;

	(void)state;
	c = load_ok("routes:\n"
	    "  - name: a\n"
	    "    upstream: http://x\n"
	    "    timeouts: {first_byte: 600s}\n"
	    "    thresholds: {ttft_warning: 500ms, error_rate_warning: 0.01}\n"
	    "  - name: b\n"
	    "    upstream: http://y\n"
	    "timeouts:\n  connect: 1s\n  first_byte: 30s\n"
	    "alerts:\n  thresholds:\n    ttft_warning: 700ms\n    ttft_critical: 900ms\n"
	    "    error_rate_critical: 0.3\n");
	a = &c->routes[0];
	b = &c->routes[1];
	assert_int_equal(a->timeouts.first_byte_us, 600 * S);
	assert_int_equal(a->timeouts.connect_us, 1 * S);
	assert_int_equal(a->timeouts.idle_us, 60 * S);
	assert_int_equal(a->thresholds.ttft_warning_us, 500 * MS);
	assert_int_equal(a->thresholds.ttft_critical_us, 900 * MS);
	assert_true(a->thresholds.error_rate_warning == 0.01);
	assert_true(a->thresholds.error_rate_critical == 0.3);
	assert_int_equal(b->timeouts.first_byte_us, 30 * S);
	assert_int_equal(b->timeouts.connect_us, 1 * S);
	assert_int_equal(b->thresholds.ttft_warning_us, 700 * MS);
	assert_true(b->thresholds.error_rate_warning < 0);
	assert_int_equal(c->timeouts.first_byte_us, 30 * S);
	conf_unref(c);
}

static void test_tenant_keys(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("tenant:\n  api_keys:\n    zeta: " ACME_UPPER "\n"
	    "    alpha: '0000000000000000000000000000000000000000000000000000000000000000'\n");
	assert_int_equal(c->n_tenant_api_keys, 2);
	assert_string_equal(c->tenant_api_keys[0].name, "zeta");
	assert_string_equal(c->tenant_api_keys[0].value,
	    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
	assert_string_equal(c->tenant_api_keys[1].name, "alpha");
	conf_unref(c);
	expect_one("tenant:\n  api_keys: {acme: sk-live-123}\n",
	    "t.yaml:2:20: tenant.api_keys.acme: expected the SHA-256 of the key as 64 hex characters");
	expect_one("tenant:\n  api_keys: {acme: " ACME_UPPER "0}\n",
	    "t.yaml:2:20: tenant.api_keys.acme: expected the SHA-256");
	expect_one("tenant:\n  header: X Tenant\n",
	    "t.yaml:2:11: tenant.header: 'X Tenant' is not a valid header name");
}

static void test_headers(void **state)
{
	struct conf *c;
	const struct conf_route *r;

	(void)state;
	c = load_ok("routes:\n  - name: a\n    upstream: http://x\n"
	    "    match: {header: {X-B: two, X-A: one}}\n"
	    "    set_headers:\n      X-Empty:\n      X-Z: 'z'\n      X-Y: y\n");
	r = &c->routes[0];
	assert_int_equal(r->n_match_headers, 2);
	assert_string_equal(r->match_headers[0].name, "X-B");
	assert_string_equal(r->match_headers[1].value, "one");
	assert_int_equal(r->n_set_headers, 3);
	assert_string_equal(r->set_headers[0].name, "X-Empty");
	assert_string_equal(r->set_headers[0].value, "");
	assert_string_equal(r->set_headers[1].name, "X-Z");
	assert_string_equal(r->set_headers[2].name, "X-Y");
	conf_unref(c);
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    set_headers: {\"Bad Header\": x}\n",
	    "t.yaml:4:19: routes[0].set_headers: 'Bad Header' is not a valid header name");
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    set_headers: {X-A: \"v\\r\\nInjected: 1\"}\n",
	    "t.yaml:4:24: routes[0].set_headers.X-A: must not contain CR or LF");
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    set_headers: {X-A: \"v\\x1b\"}\n",
	    "t.yaml:4:24: routes[0].set_headers.X-A: must not contain a control character "
	    "(byte 0x1B)");
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    match: {header: {X-A: \"a\\0b\"}}\n",
	    "t.yaml:4:27: routes[0].match.header.X-A: contains a NUL character");
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    match: {path_prefix: v1/}\n",
	    "t.yaml:4:26: routes[0].match.path_prefix: must start with '/'");
}

static void test_tls_pairs(void **state)
{
	(void)state;
	expect_one("listen:\n  - address: :443\n    tls: {cert: /c.pem}\n",
	    "t.yaml:3:10: listen[0].tls: 'cert' and 'key' go together: give both or neither");
	expect_one("routes:\n  - name: a\n    upstream: http://x\n"
	    "    tls:\n      client_key: /k.pem\n      verify: no\n",
	    "t.yaml:5:7: routes[0].tls: 'client_cert' and 'client_key' go together");
}

/* Errors from all over the file, each reported once, in file order, though
 * the routes are read after the global sections. */
static void test_many_errors(void **state)
{
	char *errs;
	struct conf *c;

	(void)state;
	unsetenv("TT_UNSET");
	c = load("routes:\n"
	    "  - name: a\n"
	    "    upstream: gopher://x\n"
	    "    timeouts: {idle: 5parsecs}\n"
	    "workers: many\n"
	    "timeouts:\n"
	    "  connect: 0\n"
	    "  idel: 5s\n"
	    "admin:\n"
	    "  token: ${TT_UNSET}\n"
	    "alerts:\n"
	    "  quantile: 95\n", &errs);
	assert_null(c);
	assert_string_equal(errs,
	    "t.yaml:3:15: routes[0].upstream: expected an http:// or https:// URL\n"
	    "t.yaml:4:22: routes[0].timeouts.idle: expected a duration like 1500ms, 2s, 1m, "
	    "got '5parsecs'\n"
	    "t.yaml:5:10: workers: expected auto or a number of threads, got 'many'\n"
	    "t.yaml:7:12: timeouts.connect: must be greater than 0\n"
	    "t.yaml:8:3: unknown key 'idel' in timeouts; did you mean 'idle'?\n"
	    "t.yaml:10:10: admin.token: environment variable TT_UNSET is not set\n"
	    "t.yaml:12:13: alerts.quantile: 95 is out of range (0, 1)\n");
	free(errs);
	/* with no stream for the messages the verdict is the same */
	assert_null(conf_load_string("t.yaml", "workers: many\n", 13, NULL));
}

/* slos: class fills the targets, a target beside it wins; defaults of
 * objective, period and the burn-rate pairs; mistakes at their place. */
static void test_slos(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("routes:\n  - {name: llm, upstream: http://x}\n"
	    "slo_state: /tmp/x.state\n"
	    "slos:\n"
	    "  - {name: chat, class: chat, ttft: 250ms, match: {route: llm, tenant: acme}}\n"
	    "  - {name: batch.v2, class: batch, objective: 0.999, period: 7d}\n"
	    "  - {name: pace, tpot: 30ms, ttfo: 4s}\n");
	assert_int_equal(c->n_slos, 3);
	assert_string_equal(c->slos[0].name, "chat");
	assert_string_equal(c->slos[0].match_route, "llm");
	assert_string_equal(c->slos[0].match_tenant, "acme");
	assert_null(c->slos[0].match_model);
	assert_int_equal(c->slos[0].targets.us[GOODPUT_TTFT], 250 * MS);
	assert_int_equal(c->slos[0].targets.us[GOODPUT_TPOT], 50 * MS);
	assert_true(c->slos[0].objective == 0.99);
	assert_int_equal(c->slos[0].period_us, 28 * 86400 * S);
	assert_int_equal(c->slos[1].targets.us[GOODPUT_TTFT], 2000 * MS);
	assert_int_equal(c->slos[1].targets.us[GOODPUT_TPOT], 150 * MS);
	assert_true(c->slos[1].objective == 0.999);
	assert_int_equal(c->slos[1].period_us, 7 * 86400 * S);
	assert_int_equal(c->slos[2].targets.us[GOODPUT_TTFT], 0);
	assert_int_equal(c->slos[2].targets.us[GOODPUT_TPOT], 30 * MS);
	assert_int_equal(c->slos[2].targets.us[GOODPUT_TTFO], 4000 * MS);
	assert_int_equal(c->slos[0].targets.us[GOODPUT_TTFO], 0);   /* a class has none */
	assert_string_equal(c->slo_state, "/tmp/x.state");
	assert_int_equal(c->n_burn_rates, 3);
	assert_int_equal(c->burn_rates[0].long_us, 3600 * S);
	assert_int_equal(c->burn_rates[0].short_us, 300 * S);
	assert_true(c->burn_rates[0].rate == 14.4 && c->burn_rates[0].critical);
	assert_true(c->burn_rates[1].rate == 6 && c->burn_rates[1].critical);
	assert_int_equal(c->burn_rates[2].long_us, 3 * 86400 * S);
	assert_true(c->burn_rates[2].rate == 1 && !c->burn_rates[2].critical);
	assert_int_equal(c->burn_min_requests, 10);
	conf_unref(c);

	c = load_ok("alerts:\n  burn_min_requests: 3\n  burn_rates:\n"
	    "    - {severity: warning, long: 20s, short: 2s, rate: 2.5}\n");
	assert_int_equal(c->n_burn_rates, 1);
	assert_int_equal(c->burn_rates[0].long_us, 20 * S);
	assert_true(c->burn_rates[0].rate == 2.5 && !c->burn_rates[0].critical);
	assert_int_equal(c->burn_min_requests, 3);
	conf_unref(c);

	expect_one("slos:\n  - {name: a}\n",
	    "t.yaml:2:5: slos[0]: give a class or at least one target (ttft, tpot, ttfo)");
	expect_one("slos:\n  - {name: a b, tpot: 1s}\n",
	    "t.yaml:2:12: slos[0].name: 'a b' must be 1 to 63 of A-Z a-z 0-9 _ - . :");
	expect_one("slos:\n  - {name: a, class: chatt, tpot: 1s}\n",
	    "t.yaml:2:22: slos[0].class: unknown class 'chatt' (valid: chat, content-creation, "
	    "code-assistant, translation, batch); did you mean 'chat'?");
	expect_one("slos:\n  - {name: a, tpot: 1s, match: {route: nope}}\n",
	    "t.yaml:2:40: slos[0].match.route: no route is called 'nope'");
	expect_one("slos:\n  - {name: a, tpot: 1s}\n  - {name: a, tpot: 2s}\n",
	    "t.yaml:3:12: slos[1].name: duplicate SLO name 'a'");
	expect_one("slos:\n  - {name: a, tpot: 1s, objective: 1}\n",
	    "t.yaml:2:36: slos[0].objective: 1 is out of range (0, 1)");
	expect_one("alerts:\n  burn_rates: [{severity: critical, long: 1m, short: 1m, rate: 2}]\n",
	    "t.yaml:2:54: alerts.burn_rates[0]: short must be shorter than long");
	expect_one("slo_state: '-'\n", "t.yaml:1:12: slo_state: a file, not '-'");
}

static void test_refcount(void **state)
{
	struct conf *c;

	(void)state;
	c = load_ok("routes:\n  - {name: a, upstream: http://x, set_headers: {A: b}}\n");
	assert_ptr_equal(conf_ref(c), c);
	assert_int_equal(atomic_load(&c->refs), 2);
	conf_unref(c);
	assert_int_equal(atomic_load(&c->refs), 1);
	/* the last reference frees everything: ASan and valgrind see no leak */
	conf_unref(c);
	assert_null(conf_ref(NULL));
	conf_unref(NULL);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/tokentap-test-config-XXXXXX";
	static const char good[] = "workers: 2\nroutes:\n  - {name: f, upstream: http://file:81}\n";
	static const char bad[] = "workers: 2\nlimits: {max_connections: 0}\n";
	char want[256], *errs;
	size_t len;
	FILE *f;
	struct conf *c;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, good, sizeof good - 1), (ssize_t)(sizeof good - 1));
	assert_int_equal(close(fd), 0);
	c = conf_load(path, stderr);
	assert_non_null(c);
	assert_string_equal(c->path, path);
	assert_int_equal(c->workers, 2);
	assert_int_equal(c->routes[0].upstream_port, 81);
	conf_unref(c);

	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(bad, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	f = open_memstream(&errs, &len);
	assert_null(conf_load(path, f));
	fclose(f);
	snprintf(want, sizeof want,
	    "%s:2:27: limits.max_connections: 0 is out of range [1, 10000000]\n", path);
	assert_string_equal(errs, want);
	free(errs);

	assert_int_equal(unlink(path), 0);
	f = open_memstream(&errs, &len);
	assert_null(conf_load(path, f));
	fclose(f);
	snprintf(want, sizeof want, "%s:1:1: cannot open: No such file or directory\n", path);
	assert_string_equal(errs, want);
	free(errs);
}

/* Replica pools: upstreams, balance, retries, retry_on, health,
 * timeouts.first_token; upstream: is a pool of one. */
static void test_pools(void **state)
{
	(void)state;
	struct conf *c = load_ok("timeouts: {first_token: 4s}\n"
	    "routes:\n"
	    "  - name: pool\n"
	    "    upstreams:\n"
	    "      - {url: http://10.0.0.1:8000/v1, weight: 3}\n"
	    "      - url: https://vllm.internal\n"
	    "    balance: hash\n"
	    "    hash_header: X-Session-Id\n"
	    "    retries: 2\n"
	    "    retry_on: [503, 500]\n"
	    "    min_healthy: 2\n"
	    "    dns_ttl: 5s\n"
	    "    health: {path: /health, interval: 2s, timeout: 500ms, failures: 3,\n"
	    "             backoff: 2s, backoff_max: 1m, ttft_factor: 2.5,\n"
	    "             throughput: {min_rate: 12.5, tokens: 8, window: 750ms}}\n"
	    "    timeouts: {first_token: 8s}\n"
	    "  - name: one\n"
	    "    upstream: http://127.0.0.1:9000\n");
	const struct conf_route *p = &c->routes[0], *o = &c->routes[1];

	assert_int_equal(p->n_upstreams, 2);
	assert_string_equal(p->upstreams[0].url, "http://10.0.0.1:8000/v1");
	assert_int_equal(p->upstreams[0].weight, 3);
	assert_string_equal(p->upstreams[0].base, "/v1");
	assert_int_equal(p->upstreams[1].weight, 1);
	assert_int_equal(p->upstreams[1].tls, 1);
	assert_int_equal(p->upstreams[1].port, 443);
	/* the first replica is the route's upstream; any https one needs TLS */
	assert_string_equal(p->upstream, "http://10.0.0.1:8000/v1");
	assert_int_equal(p->upstream_tls, 1);
	assert_null(p->tls.sni);          /* each replica's own host */
	assert_int_equal(p->balance, BALANCE_HASH);
	assert_string_equal(p->hash_header, "X-Session-Id");
	assert_int_equal(p->retries, 2);
	assert_int_equal(p->n_retry_on, 2);
	assert_int_equal(p->retry_on[1], 500);
	assert_int_equal(p->thresholds.min_healthy, 2);
	assert_int_equal(p->dns_ttl_us, 5000000);
	assert_string_equal(p->health.path, "/health");
	assert_int_equal(p->health.failures, 3);
	assert_int_equal(p->health.backoff_max_us, 60000000);
	assert_true(p->health.ttft_factor == 2.5);
	assert_true(p->health.throughput.min_rate == 12.5);
	assert_int_equal(p->health.throughput.tokens, 8);
	assert_int_equal(p->health.throughput.window_us, 750000);
	assert_int_equal(p->timeouts.first_token_us, 8000000);
	/* defaults */
	assert_int_equal(o->n_upstreams, 1);
	assert_string_equal(o->upstreams[0].url, "http://127.0.0.1:9000");
	assert_int_equal(o->balance, BALANCE_LEAST_STREAMS);
	assert_int_equal(o->retries, 1);
	assert_int_equal(o->n_retry_on, 3);
	assert_int_equal(o->retry_on[0], 502);
	assert_int_equal(o->retry_on[2], 429);
	assert_int_equal(o->thresholds.min_healthy, 0);
	assert_int_equal(o->dns_ttl_us, 30000000);
	assert_null(o->health.path);
	assert_int_equal(o->health.failures, 1);
	assert_int_equal(o->health.backoff_us, 1000000);
	assert_int_equal(o->health.backoff_max_us, 30000000);
	/* the throughput probe is off, its other keys at their defaults */
	assert_true(o->health.throughput.min_rate == 0);
	assert_int_equal(o->health.throughput.tokens, 16);
	assert_int_equal(o->health.throughput.window_us, 2000000);
	assert_int_equal(o->timeouts.first_token_us, 4000000);   /* the global one */
	conf_unref(c);

	expect_one("routes:\n  - name: a\n    upstream: http://a\n    upstreams: [{url: http://b}]\n",
	    "t.yaml:4:16: routes[0]: give 'upstream' or 'upstreams', not both");
	expect_one("routes:\n  - name: a\n    upstreams: []\n",
	    "t.yaml:3:16: routes[0].upstreams: between 1 and 64 replicas, got 0");
	expect_one("routes:\n  - name: a\n    upstreams: [{url: http://b}, {url: http://b, weight: 2}]\n",
	    "t.yaml:3:34: routes[0].upstreams[1]: http://b is listed twice (use weight)");
	expect_one("routes:\n  - name: a\n    upstreams: [{weight: 2}]\n",
	    "t.yaml:3:17: missing required key 'url' in routes[0].upstreams[0]");
	expect_one("routes:\n  - name: a\n    upstreams: [{url: ftp://b}]\n",
	    "t.yaml:3:23: routes[0].upstreams[0].url: expected an http:// or https:// URL");
	expect_one("routes:\n  - name: a\n    upstreams: [{url: http://b, weight: 0}]\n",
	    "t.yaml:3:41: routes[0].upstreams[0].weight: 0 is out of range");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    balance: random\n",
	    "t.yaml:4:14: routes[0].balance: unknown balance 'random'");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    hash_header: X-S\n",
	    "t.yaml:4:18: routes[0].hash_header: only with balance: hash");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    retry_on: [200]\n",
	    "t.yaml:4:16: routes[0].retry_on[0]:");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    retries: 9\n",
	    "t.yaml:4:14: routes[0].retries:");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    health: {path: health}\n",
	    "t.yaml:4:20: routes[0].health.path: must start with '/'");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n"
	    "    health: {backoff: 5s, backoff_max: 1s}\n",
	    "t.yaml:4:13: routes[0].health: backoff_max is below backoff");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n"
	    "    health: {throughput: {tokens: 0}}\n",
	    "t.yaml:4:35: routes[0].health.throughput.tokens: 0 is out of range");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n"
	    "    health: {throughput: {min_rate: fast}}\n",
	    "t.yaml:4:37: routes[0].health.throughput.min_rate:");
}

/* upgrades: protocol names, websocket by default, [] none */
static void test_upgrades(void **state)
{
	(void)state;
	struct conf *c = unit_conf("routes:\n"
	    "  - {name: a, upstream: http://b}\n"
	    "  - {name: b, upstream: http://b, upgrades: [h2c, WebSocket]}\n"
	    "  - {name: c, upstream: http://b, upgrades: []}\n");
	assert_int_equal(c->routes[0].n_upgrades, 1);
	assert_string_equal(c->routes[0].upgrades[0], "websocket");
	assert_int_equal(c->routes[1].n_upgrades, 2);
	assert_string_equal(c->routes[1].upgrades[1], "WebSocket");
	assert_int_equal(c->routes[2].n_upgrades, 0);
	conf_unref(c);
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    upgrades: [websocket/13]\n",
	    "t.yaml:4:16: routes[0].upgrades[0]: 'websocket/13' is not a protocol name");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    upgrades: [ok, 'a b']\n",
	    "t.yaml:4:20: routes[0].upgrades[1]: 'a b' is not a protocol name");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n    upgrades: websocket\n",
	    "t.yaml:4:15: routes[0].upgrades:");
	expect_one("routes:\n  - name: a\n    upstream: http://b\n"
	    "    upgrades: [a, b, c, d, e, f, g, h, i]\n",
	    "t.yaml:4:15: routes[0].upgrades: at most 8 protocols");
}

/* limits.request_buffers: 16m by default, 0 allowed (every body to a file) */
static void test_request_buffers(void **state)
{
	(void)state;
	struct conf *c = unit_conf("routes:\n  - {name: a, upstream: http://b}\n");
	assert_int_equal(c->request_buffers, 16 * 1024 * 1024);
	conf_unref(c);
	c = unit_conf("limits: {request_buffers: 0}\nroutes:\n  - {name: a, upstream: http://b}\n");
	assert_int_equal(c->request_buffers, 0);
	conf_unref(c);
	expect_one("limits: {request_buffers: lots}\nroutes:\n  - {name: a, upstream: http://b}\n",
	    "t.yaml:1:27: limits.request_buffers:");
}

/* limits.upstream_keepalive: 256 idle connections by default, 0 allowed
 * (none kept), a count */
static void test_upstream_keepalive_count(void **state)
{
	(void)state;
	struct conf *c = unit_conf("routes:\n  - {name: a, upstream: http://b}\n");
	assert_int_equal(c->upstream_keepalive, 256);
	conf_unref(c);
	c = unit_conf("limits: {upstream_keepalive: 0}\nroutes:\n  - {name: a, upstream: http://b}\n");
	assert_int_equal(c->upstream_keepalive, 0);
	conf_unref(c);
	expect_one("limits: {upstream_keepalive: 60s}\nroutes:\n  - {name: a, upstream: http://b}\n",
	    "t.yaml:1:30: limits.upstream_keepalive:");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_upgrades),
		cmocka_unit_test(test_request_buffers),
		cmocka_unit_test(test_upstream_keepalive_count),
		cmocka_unit_test(test_metrics_keys),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_empty_and_null_sections),
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_full_example),
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_workers_auto_affinity),
		cmocka_unit_test(test_upstream_forms),
		cmocka_unit_test(test_upstream_errors),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_bad_duration_and_size),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_dialects),
		cmocka_unit_test(test_route_required_and_duplicates),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_env_expansion),
		cmocka_unit_test(test_notify),
		cmocka_unit_test(test_thresholds_order),
		cmocka_unit_test(test_stream_health_keys),
		cmocka_unit_test(test_overrides_after_routes),
		cmocka_unit_test(test_tenant_keys),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_tls_pairs),
		cmocka_unit_test(test_many_errors),
		cmocka_unit_test(test_slos),
		cmocka_unit_test(test_refcount),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_pools),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
