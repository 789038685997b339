/* The config's life cycle (defaults, reference counting, freeing) and the
 * entry points that run libyaml and the schema walk over a file. */
#include "config_load.h"

#include <openssl/ssl.h>

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
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
	free(r->upstream);
	free(r->upstream_base);
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
	for (size_t i = 0; i < c->n_routes; i++)
		route_free(&c->routes[i]);
	free(c->routes);
	free(c->access_log);
	free(c->stats_windows_us);
	free(c->stats_file);
	for (size_t i = 0; i < c->n_notify; i++) {
		free(c->notify[i].url);
		kv_free(c->notify[i].headers, c->notify[i].n_headers);
	}
	free(c->notify);
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
	}
	c->admin_address = strdup("127.0.0.1:9464");
	strcpy(c->admin_host, "127.0.0.1");
	c->admin_port = 9464;
	c->workers = conf_auto_workers();
	c->timeouts = (struct conf_timeouts){
		10000000, 5000000, 120000000, 60000000, 30000000
	};
	c->max_connections = 10000;
	c->max_header_bytes = 32 * 1024;
	c->max_body_bytes = 16 * 1024 * 1024;
	c->max_event_bytes = 1024 * 1024;
	c->max_tenants = 1000;
	c->max_models = 100;
	c->stats_windows_us = malloc(sizeof windows);
	if (c->stats_windows_us != NULL) {
		memcpy(c->stats_windows_us, windows, sizeof windows);
		c->n_stats_windows = UTIL_ARRAY_LEN(windows);
	}
	c->stats_interval_us = 10000000;
	c->alerts_evaluate_every_us = 10000000;
	c->alerts_window_us = 60000000;
	c->alerts_quantile = 0.95;
	c->alerts_min_samples = 10;
	c->alerts_hysteresis = 0.1;
	c->thresholds = (struct conf_thresholds){ 1000000, 2000000, 100000, 200000, -1, -1 };
	if (c->listen == NULL || c->listen[0].address == NULL || c->admin_address == NULL ||
	    c->stats_windows_us == NULL) {
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

static void load_documents(struct conf_loader *ld, yaml_parser_t *parser, size_t len)
{
	yaml_document_t doc;
	yaml_node_t *root;

	if (!yaml_parser_load(parser, &doc)) {
		conf_syntax_error(ld, parser, len);
		return;
	}
	ld->doc = &doc;
	root = yaml_document_get_root_node(&doc);
	if (root != NULL && root->type == YAML_MAPPING_NODE)
		conf_apply_mapping(ld, root, &conf_top_section, ld->c, "");
	else if (root != NULL && !conf_is_null(root))
		conf_err(ld, root, "expected a mapping of settings at the top level, got %s",
		    conf_kind(root));
	yaml_document_delete(&doc);
	if (root == NULL)
		return;
	if (!yaml_parser_load(parser, &doc)) {
		conf_syntax_error(ld, parser, len);
		return;
	}
	root = yaml_document_get_root_node(&doc);
	if (root != NULL)
		conf_err(ld, root, "only one YAML document is allowed");
	yaml_document_delete(&doc);
}

struct conf *conf_load_string(const char *name, const char *text, size_t len, FILE *errs)
{
	struct conf_loader ld = { .name = name, .text = text };
	yaml_parser_t parser;

	ld.c = conf_default();
	if (ld.c == NULL || (ld.c->path = strdup(name)) == NULL ||
	    !yaml_parser_initialize(&parser)) {
		conf_oom(&ld);
		goto out;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	load_documents(&ld, &parser, len);
	yaml_parser_delete(&parser);
out:
	conf_flush(&ld, errs);
	if (ld.n_problems > 0) {
		conf_unref(ld.c);
		return NULL;
	}
	return ld.c;
}

struct conf *conf_load(const char *path, FILE *errs)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL, buf[8192];
	size_t len = 0, n;
	FILE *mem;
	struct conf *c = NULL;
	int err;

	if (f == NULL) {
		if (errs != NULL)
			fprintf(errs, "%s:1:1: cannot open: %s\n", path, strerror(errno));
		return NULL;
	}
	mem = open_memstream(&text, &len);
	if (mem == NULL) {
		if (errs != NULL)
			fprintf(errs, "%s:1:1: out of memory\n", path);
		goto out;
	}
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, n, mem);
	err = ferror(f) ? errno : 0;
	if (fclose(mem) != 0 && err == 0)
		err = ENOMEM;
	if (err != 0) {
		if (errs != NULL)
			fprintf(errs, "%s:1:1: cannot read: %s\n", path, strerror(err));
		goto out;
	}
	c = conf_load_string(path, text, len, errs);
out:
	fclose(f);
	free(text);
	return c;
}
