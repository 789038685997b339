/* SPDX-License-Identifier: Apache-2.0 */
/* The config's life cycle (defaults, reference counting, freeing) and the
 * entry points that read a file along the schema (config_schema.c) with
 * the core's YAML reader. */
#include "config_schema.h"

#include <openssl/ssl.h>

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* ---- life cycle -------------------------------------------------------- */

static void kv_free(struct conf_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

void conf_listen_free(struct conf *c)
{
	for (size_t i = 0; i < c->n_listen; i++) {
		free(c->listen[i].address);
		free(c->listen[i].tls_cert);
		free(c->listen[i].tls_key);
		SSL_CTX_free(c->listen[i].tls_ctx);
	}
	free(c->listen);
	c->listen = NULL;
	c->n_listen = 0;
}

static void route_free(struct conf_route *r)
{
	free(r->name);
	free(r->match_path_prefix);
	free(r->match_host);
	kv_free(r->match_headers, r->n_match_headers);
	for (size_t i = 0; i < r->n_upstreams; i++) {
		free(r->upstreams[i].url);
		free(r->upstreams[i].base);
	}
	free(r->upstreams);
	free(r->upstream);
	free(r->upstream_base);
	free(r->hash_header);
	free(r->health.path);
	kv_free(r->set_headers, r->n_set_headers);
	free(r->tls.ca_file);
	free(r->tls.sni);
	free(r->tls.client_cert);
	free(r->tls.client_key);
	SSL_CTX_free(r->tls_ctx);
}

static void conf_free(struct conf *c)
{
	conf_listen_free(c);
	free(c->admin_address);
	free(c->admin_token);
	free(c->tenant_header);
	kv_free(c->tenant_api_keys, c->n_tenant_api_keys);
	for (size_t i = 0; i < c->n_tenant_header_values; i++)
		free(c->tenant_header_values[i]);
	free(c->tenant_header_values);
	free(c->tenant_header_pattern);
	ere_free(&c->tenant_header_re);
	for (size_t i = 0; i < c->n_model_names; i++)
		free(c->model_names[i]);
	free(c->model_names);
	free(c->model_pattern);
	ere_free(&c->model_re);
	for (size_t i = 0; i < c->n_routes; i++)
		route_free(&c->routes[i]);
	free(c->routes);
	free(c->access_log);
	for (size_t i = 0; i < c->n_access_log_mask; i++)
		free(c->access_log_mask[i]);
	free(c->access_log_mask);
	free(c->stats_windows_us);
	free(c->stats_file);
	free(c->stats_history);
	free(c->stats_history_file);
	for (size_t i = 0; i < c->n_notify; i++) {
		free(c->notify[i].url);
		kv_free(c->notify[i].headers, c->notify[i].n_headers);
	}
	free(c->notify);
	for (size_t i = 0; i < c->n_slos; i++) {
		free(c->slos[i].name);
		free(c->slos[i].match_route);
		free(c->slos[i].match_tenant);
		free(c->slos[i].match_model);
	}
	free(c->slos);
	free(c->slo_state);
	free(c->burn_rates);
	conf_otel_free(&c->otel);
	SSL_CTX_free(c->otel.tls_ctx);
	free(c->path);
	free(c);
}

/* One worker per CPU this process may run on: its affinity mask, which a
 * cpuset (taskset, systemd CPUAffinity=, a container's --cpuset-cpus)
 * narrows, else every online CPU. More threads than CPUs only take turns. */
int conf_auto_workers(void)
{
	cpu_set_t set;
	long cpus = -1;

	if (sched_getaffinity(0, sizeof set, &set) == 0)
		cpus = CPU_COUNT(&set);
	if (cpus < 1)
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus < 1 ? 1 : cpus > 256 ? 256 : (int)cpus;
}

struct conf *conf_default(void)
{
	static const uint64_t windows[] = { 60000000, 300000000, 3600000000 };
	/* 10 s: the alerts' evaluate_every, a Prometheus scrape's order; an
	 * hour of them (360) is a chart's width. 1 min: alerts.window; a day
	 * of them is 1,440 points. */
	static const struct conf_history_step history[] = {
		{ 10000000, 3600000000ull }, { 60000000, 86400000000ull },
	};
	/* the SRE Workbook's multi-window, multi-burn-rate pairs (ch. 5) */
	static const struct conf_burn burns[] = {
		{ 1, 3600000000ull, 300000000ull, 14.4 },
		{ 1, 21600000000ull, 1800000000ull, 6 },
		{ 0, 259200000000ull, 21600000000ull, 1 },
	};
	struct conf *c = calloc(1, sizeof *c);

	if (c == NULL)
		return NULL;
	atomic_init(&c->refs, 1);
	c->listen = calloc(1, sizeof *c->listen);
	if (c->listen != NULL) {
		c->n_listen = 1;
		c->listen[0].address = strdup("127.0.0.1:8080");
		strcpy(c->listen[0].host, "127.0.0.1");
		c->listen[0].port = 8080;
		c->listen[0].backlog = CONF_BACKLOG;
	}
	c->admin_address = strdup("127.0.0.1:9464");
	strcpy(c->admin_host, "127.0.0.1");
	c->admin_port = 9464;
	c->workers = conf_auto_workers();
	c->timeouts = (struct conf_timeouts){
		.client_header_us = 10000000, .client_body_us = 60000000,
		.connect_us = 5000000,
		.first_byte_us = 120000000, .idle_us = 60000000,
		.shutdown_us = 30000000, .send_us = 60000000,
		/* below uvicorn's 5 s (vLLM's server): ours close first */
		.upstream_keepalive_us = 4000000,
	};
	c->max_connections = 10000;
	c->max_header_bytes = 32 * 1024;
	c->max_body_bytes = 16 * 1024 * 1024;
	c->max_event_bytes = 1024 * 1024;
	c->client_backlog = 32 * 1024 * 1024;
	c->request_buffers = 16 * 1024 * 1024;
	c->upstream_keepalive = 256;
	c->max_tenants = 1000;
	c->max_models = 100;
	c->metrics_max_series = 20000;
	c->metrics_expiration_us = 600000000;
	c->stats_windows_us = malloc(sizeof windows);
	if (c->stats_windows_us != NULL) {
		memcpy(c->stats_windows_us, windows, sizeof windows);
		c->n_stats_windows = UTIL_ARRAY_LEN(windows);
	}
	c->stats_interval_us = 10000000;
	c->stats_history_save_every_us = 60000000;
	c->stats_history = malloc(sizeof history);
	if (c->stats_history != NULL) {
		memcpy(c->stats_history, history, sizeof history);
		c->n_stats_history = UTIL_ARRAY_LEN(history);
	}
	c->alerts_evaluate_every_us = 10000000;
	c->alerts_window_us = 60000000;
	c->alerts_quantile = 0.95;
	c->alerts_min_samples = 10;
	c->alerts_hysteresis = 0.1;
	c->thresholds = (struct conf_thresholds){
		.ttft_warning_us = 1000000, .ttft_critical_us = 2000000,
		.tpot_warning_us = 100000, .tpot_critical_us = 200000,
		.error_rate_warning = -1, .error_rate_critical = -1,
		.stall_us = 10000000, .min_stalled = 1,
	};
	c->burn_rates = malloc(sizeof burns);
	if (c->burn_rates != NULL) {
		memcpy(c->burn_rates, burns, sizeof burns);
		c->n_burn_rates = UTIL_ARRAY_LEN(burns);
	}
	c->burn_min_requests = 10;
	conf_otel_init(&c->otel);
	if (c->listen == NULL || c->listen[0].address == NULL || c->admin_address == NULL ||
	    c->stats_windows_us == NULL || c->burn_rates == NULL || c->stats_history == NULL) {
		conf_free(c);
		return NULL;
	}
	return c;
}

struct conf *conf_ref(struct conf *c)
{
	if (c != NULL)
		atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	return c;
}

void conf_unref(struct conf *c)
{
	if (c != NULL && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		conf_free(c);
}

/* ---- loading ----------------------------------------------------------- */

/* getenv, typed for conf_otel_finish: a file's config takes the OTel
 * SDKs' variables; one from a string (tests) does not. */
static const char *getenv_const(const char *name)
{
	return getenv(name);
}

/* text NULL: read the file called name. */
static struct conf *load(const char *name, const char *text, size_t len, FILE *errs)
{
	struct yconf ld = { .name = name, .flags = YCONF_EXPAND_ENV };
	struct conf *c = conf_default();

	if (c == NULL || (c->path = strdup(name)) == NULL) {
		yconf_oom(&ld);
	} else {
		ld.user = c;
		if (text != NULL)
			yconf_parse(&ld, text, len, &conf_schema, c);
		else
			yconf_parse_file(&ld, &conf_schema, c);
	}
	if (yconf_finish(&ld, errs) > 0 ||
	    conf_otel_finish(c, text == NULL ? getenv_const : NULL, errs) < 0) {
		conf_unref(c);
		return NULL;
	}
	return c;
}

struct conf *conf_load_string(const char *name, const char *text, size_t len, FILE *errs)
{
	return load(name, text, len, errs);
}

struct conf *conf_load(const char *path, FILE *errs)
{
	return load(path, NULL, 0, errs);
}

/* What a path names, in a few words. */
static const char *kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ?
	    "a socket" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" :
	    S_ISLNK(m) ? "a symlink" : "not a regular file";
}

/* Why the directory dir cannot take a new file, or NULL. A component that
 * is a file ("/etc/passwd/x") is named: access(2) alone let an executable
 * one pass for root, and said "not writable" of the others. */
static const char *bad_dir(const char *dir, char *why, size_t len)
{
	struct stat st;
	int err = stat(dir, &st) == 0 ? 0 : errno;

	if (err == 0 && S_ISDIR(st.st_mode)) {
		if (access(dir, W_OK | X_OK) == 0)
			return NULL;
		snprintf(why, len, "the directory %s is not writable", dir);
		return why;
	}
	if (err == ENOENT) {
		snprintf(why, len, "the directory %s does not exist", dir);
		return why;
	}
	/* the first component that is there and is not a directory */
	for (size_t i = 1, n = strlen(dir); i <= n; i++) {
		char part[4096];
		if (i < n && dir[i] != '/')
			continue;
		snprintf(part, sizeof part, "%.*s", (int)i, dir);
		if (stat(part, &st) == 0 && !S_ISDIR(st.st_mode)) {
			snprintf(why, len, "%s is %s, not a directory", part,
			    S_ISREG(st.st_mode) ? "a file" : kind_of(st.st_mode));
			return why;
		}
	}
	snprintf(why, len, "the directory %s: %s", dir, strerror(err ? err : ENOTDIR));
	return why;
}

/* Why path cannot be written, or NULL. regular: the file is replaced by a
 * rename (slo_state), so it must be a regular file, not a symlink (the
 * rename would replace the link: refused, as logrotate refuses to rotate
 * one), and its directory writable even when the file is there. The logs
 * are appended to through whatever the path names, as nginx does: a
 * symlink, /dev/stdout, a FIFO (opened non-blocking at start: one that no
 * process reads fails it, said, instead of holding it). */
static const char *unwritable(const char *path, int regular, char *why, size_t len)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	if (regular && lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (!S_ISLNK(st.st_mode))
			snprintf(why, len, "%s, not a regular file", kind_of(st.st_mode));
		else
			snprintf(why, len, "a symlink: tokentap replaces the file by rename, "
			    "which would replace the link; name the file itself");
		return why;
	}
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return "a directory, not a file";
		if (access(path, W_OK) != 0)
			return "the file is not writable";
		return regular ? bad_dir(dir, why, len) : NULL;
	}
	if (errno != ENOENT && errno != ENOTDIR) {
		snprintf(why, len, "%s", strerror(errno));
		return why;
	}
	return bad_dir(dir, why, len);
}

int conf_check_paths(const struct conf *c, FILE *errs)
{
	const struct {
		const char *key, *path;
		struct conf_pos at;
		int regular;
	} files[] = {
		{ "access_log", c->access_log, c->access_log_at, 0 },
		{ "stats.file", c->stats_file, c->stats_file_at, 0 },
		{ "slo_state", c->slo_state, c->slo_state_at, 1 },
		{ "stats.history_file", c->stats_history_file, c->stats_history_file_at, 1 },
	};
	char why[4200];
	int bad = 0;

	for (size_t i = 0; i < UTIL_ARRAY_LEN(files); i++) {
		const char *w;
		if (files[i].path == NULL || strcmp(files[i].path, "-") == 0)
			continue;
		if ((w = unwritable(files[i].path, files[i].regular, why, sizeof why)) == NULL)
			continue;
		if (errs != NULL)
			fprintf(errs, "%s:%zu:%zu: %s %s: %s\n", c->path ? c->path : "config",
			    files[i].at.line, files[i].at.col, files[i].key, files[i].path, w);
		bad = 1;
	}
	return bad ? -1 : 0;
}

const char *conf_history_check(const struct conf_history_step *t, size_t n)
{
	if (n > CONF_HISTORY_STEPS_MAX)
		return "at most 4 steps";
	for (size_t i = 0; i < n; i++) {
		if (t[i].step_us < 1000000 || t[i].step_us % 1000000 != 0)
			return "a step is whole seconds, at least 1s";
		if (t[i].keep_us < t[i].step_us || t[i].keep_us % t[i].step_us != 0)
			return "keep is a whole number of its step";
		if (t[i].keep_us / t[i].step_us > CONF_HISTORY_KEEP_STEPS_MAX)
			return "keep holds at most 100000 of its steps";
		if (i == 0)
			continue;
		if (t[i].step_us <= t[i - 1].step_us || t[i].step_us % t[i - 1].step_us != 0)
			return "each step is a multiple of the one before it";
		if (t[i].step_us > t[i - 1].keep_us)
			return "a step is no longer than the one before keeps";
		if (t[i].keep_us <= t[i - 1].keep_us)
			return "each keep is longer than the one before it";
	}
	return NULL;
}
