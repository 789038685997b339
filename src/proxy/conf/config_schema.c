/* SPDX-License-Identifier: Apache-2.0 */
/* The schema of docs/contract.md §2: one table per mapping (the core's walker,
 * yconf.c, does the typing), plus the keys and cross-key rules that need code
 * of their own: addresses, URLs, enums, lists of sections, "both or neither",
 * warning <= critical. */
#include "config_schema.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "url.h"
#include "util.h"

/* ---- keys with their own rules ------------------------------------------ */

static void parse_address(struct yconf *ld, yaml_node_t *v, const char *path,
    char **addr, char host[256], unsigned *port)
{
	char *s = yconf_is_null(v) ? NULL :
	    yconf_scalar(ld, v, path, "an address host:port");
	char h[256];
	unsigned p;

	if (yconf_is_null(v))
		yconf_err(ld, v, "%s: expected an address host:port, got an empty value", path);
	if (s == NULL)
		return;
	if (util_split_hostport(s, h, sizeof h, &p) != 0) {
		yconf_err(ld, v, "%s: expected an address host:port, got '%.64s'", path, s);
		free(s);
		return;
	}
	free(*addr);
	*addr = s;
	memcpy(host, h, sizeof h);
	*port = p;
}

static void listen_address_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	struct conf_listen *l = base;
	parse_address(ld, v, path, &l->address, l->host, &l->port);
}

static void admin_address_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	struct conf *c = base;
	parse_address(ld, v, path, &c->admin_address, c->admin_host, &c->admin_port);
}

static void workers_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const struct yconf_key k = { .type = YCONF_UINT, .lo = 1, .hi = 256 };
	static const char want[] = "auto or a number of threads";
	struct conf *c = base;
	uint64_t n = 0;
	char *s = yconf_is_null(v) ? NULL : yconf_scalar(ld, v, path, want);

	if (yconf_is_null(v))
		yconf_err(ld, v, "%s: expected %s, got an empty value", path, want);
	if (s == NULL)
		return;
	if (strcmp(s, "auto") == 0)
		c->workers = conf_auto_workers();
	else if (yconf_parse_uint(s, &n) != 0) {
		yconf_err(ld, v, "%s: expected %s, got '%.64s'", path, want, s);
	} else {
		n = 0;
		yconf_convert(ld, &k, v, s, &n, path);
		if (n != 0)
			c->workers = (int)n;
	}
	free(s);
}

static void timestamps_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "kernel", "loop" };
	struct conf *c = base;
	int t = yconf_enum(ld, v, path, "timestamps", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		c->timestamps = (enum conf_timestamps)t;
}

static void read_order_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "first_token", "even" };
	struct conf *c = base;
	int t = yconf_enum(ld, v, path, "read_order", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		c->read_order = (enum conf_read_order)t;
}

static void dialect_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_route *r = base;
	int d = yconf_enum(ld, v, path, "dialect", dialect_names, DIALECT_COUNT);
	if (d >= 0)
		r->dialect = (enum dialect_id)d;
}

static void notify_type_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "log", "webhook", "alertmanager" };
	static const enum conf_notify_type types[] = {
		NOTIFY_LOG, NOTIFY_WEBHOOK, NOTIFY_ALERTMANAGER
	};
	struct conf_notify *nt = base;
	int t = yconf_enum(ld, v, path, "notify type", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		nt->type = types[t];
}

/* The rule for a replica's URL (url.h): credentials are refused, as
 * nginx refuses them in proxy_pass: the client's own Authorization goes to
 * the upstream and set_headers replaces it, and the URL is written in the
 * access log and the error log. A query has no place in a base path.
 * Returns NULL or the problem. */
static const char *parse_upstream(const char *s, void *field)
{
	struct conf_upstream *up = field;
	struct url u;
	const char *problem = url_parse(s, &u);
	size_t pl;

	if (problem != NULL)
		return problem;
	if (u.user != NULL) {
		problem = "must not contain credentials (use set_headers)";
	} else if (u.query != NULL) {
		problem = "must not contain a query or a fragment";
	} else {
		up->tls = u.tls;
		memcpy(up->host, u.host, sizeof up->host);
		up->port = u.port;
		pl = strlen(u.path);
		while (pl > 0 && u.path[pl - 1] == '/')
			pl--;
		free(up->base);
		up->base = strndup(u.path, pl);
		if (up->base == NULL)
			problem = "out of memory";
	}
	url_free(&u);
	return problem;
}

/* Webhooks and Alertmanager: user:password@ is sent as Basic auth. */
static const char *parse_notify_url(const char *s, void *field)
{
	struct url u;
	const char *problem = url_parse(s, &u);

	(void)field;
	url_free(&u);
	return problem;
}

/* A URL key: *url gets the text as written once parse accepts it. */
static void url_key(struct yconf *ld, yaml_node_t *v, const char *path, char **url,
    const char *(*parse)(const char *s, void *field), void *field)
{
	char *s = yconf_is_null(v) ? NULL : yconf_scalar(ld, v, path, "a URL");
	const char *problem;

	if (yconf_is_null(v))
		yconf_err(ld, v, "%s: expected an http:// or https:// URL, got an empty value",
		    path);
	if (s == NULL)
		return;
	problem = parse(s, field);
	if (problem != NULL) {
		/* not echoed: it may carry credentials */
		yconf_err(ld, v, "%s: %s", path, problem);
		free(s);
		return;
	}
	free(*url);
	*url = s;
}

/* `upstream: URL`: a pool of one. */
static void upstream_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_route *r = base;
	struct conf_upstream *up;

	if (r->n_upstreams == 0) {
		if ((up = yconf_grow(ld, r->upstreams, 0, sizeof *up)) == NULL)
			return;
		memset(up, 0, sizeof *up);
		up->weight = 1;
		r->upstreams = up;
	}
	url_key(ld, v, path, &r->upstreams[0].url, parse_upstream, &r->upstreams[0]);
	if (r->upstreams[0].url != NULL)
		r->n_upstreams = 1;
}

static void upstream_item_url_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	struct conf_upstream *up = base;
	url_key(ld, v, path, &up->url, parse_upstream, up);
}

static void upstream_item_init(struct yconf *ld, void *item)
{
	(void)ld;
	((struct conf_upstream *)item)->weight = 1;
}

static const struct yconf_section upstream_item_section;

/* `upstreams: [{url, weight}, ...]`: the replicas of a pool. */
static void upstreams_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_route *r = base;
	void *arr = NULL;
	size_t n = 0, items;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "replicas"))
		return;
	items = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (items == 0 || items > CONF_UPSTREAMS_MAX) {
		yconf_err(ld, v, "%s: between 1 and %d replicas, got %zu", path,
		    CONF_UPSTREAMS_MAX, items);
		return;
	}
	yconf_apply_list(ld, v, path, &arr, &n, sizeof *r->upstreams,
	    &upstream_item_section, upstream_item_init);
	/* `upstream` given too (an error route_check reports): it goes */
	for (size_t i = 0; i < r->n_upstreams; i++) {
		free(r->upstreams[i].url);
		free(r->upstreams[i].base);
	}
	free(r->upstreams);
	r->upstreams = arr;
	r->n_upstreams = n;
}

static void balance_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const char *const names[] = { "least_streams", "round_robin", "hash" };
	struct conf_route *r = base;
	int b = yconf_enum(ld, v, path, "balance", names, UTIL_ARRAY_LEN(names));
	if (b >= 0)
		r->balance = (enum conf_balance)b;
}

/* retry_on: response statuses that send the request to another replica. */
static void retry_on_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const struct yconf_key k = { .type = YCONF_UINT, .lo = 400, .hi = 599 };
	struct conf_route *r = base;
	yaml_node_item_t *it;
	size_t n;
	char sub[YCONF_PATH_LEN];

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "statuses"))
		return;
	it = v->data.sequence.items.start;
	n = (size_t)(v->data.sequence.items.top - it);
	if (n > CONF_RETRY_ON_MAX) {
		yconf_err(ld, v, "%s: at most %d statuses", path, CONF_RETRY_ON_MAX);
		return;
	}
	r->n_retry_on = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t st = 0;
		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		if (yconf_apply_value(ld, &k, yconf_node(ld, it[i]), &st, sub) == 0 && st != 0)
			r->retry_on[r->n_retry_on++] = (unsigned)st;
	}
}

/* upgrades: protocol names (RFC 9110 §7.8: a token, without the version);
 * [] allows none. */
static void upgrades_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_route *r = base;
	yaml_node_item_t *it;
	size_t n;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "protocol names"))
		return;
	it = v->data.sequence.items.start;
	n = (size_t)(v->data.sequence.items.top - it);
	if (n > CONF_UPGRADES_MAX) {
		yconf_err(ld, v, "%s: at most %d protocols", path, CONF_UPGRADES_MAX);
		return;
	}
	r->n_upgrades = 0;
	for (size_t i = 0; i < n; i++) {
		static const struct yconf_key k = { .type = YCONF_STRING };
		yaml_node_t *e = yconf_node(ld, it[i]);
		char *name = NULL, sub[YCONF_PATH_LEN];
		size_t len;
		int ok;

		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		if (yconf_apply_value(ld, &k, e, &name, sub) < 0 || name == NULL)
			continue;
		len = strlen(name);
		ok = len > 0 && len < CONF_UPGRADE_LEN;
		for (size_t j = 0; ok && j < len; j++)
			ok = util_is_tchar((unsigned char)name[j]);
		if (ok)
			memcpy(r->upgrades[r->n_upgrades++], name, len + 1);
		else
			yconf_err(ld, e, "%s: '%.64s' is not a protocol name (a token of at "
			    "most %d characters, without a version: websocket)", sub, name,
			    CONF_UPGRADE_LEN - 1);
		free(name);
	}
}

static void notify_url_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_notify *nt = base;
	url_key(ld, v, path, &nt->url, parse_notify_url, nt);
}

/* A list of strings into *out (what was there freed). */
static void string_list(struct yconf *ld, yaml_node_t *v, const char *path,
    const char *what, char ***out, size_t *n_out)
{
	static const struct yconf_key k = { .type = YCONF_STRING };
	yaml_node_item_t *it;
	size_t n;
	char **names, sub[YCONF_PATH_LEN];

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, what))
		return;
	it = v->data.sequence.items.start;
	n = (size_t)(v->data.sequence.items.top - it);
	names = calloc(n ? n : 1, sizeof *names);
	if (names == NULL) {
		yconf_oom(ld);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		yconf_apply_value(ld, &k, yconf_node(ld, it[i]), &names[i], sub);
	}
	for (size_t i = 0; i < *n_out; i++)
		free((*out)[i]);
	free(*out);
	*out = names;
	*n_out = n;
}

/* More query parameter names whose values the access log masks. */
static void mask_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	string_list(ld, v, path, "parameter names", &c->access_log_mask,
	    &c->n_access_log_mask);
}

/* tenant.header_values: header values that name a tenant for /metrics. */
static void header_values_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	struct conf *c = base;
	string_list(ld, v, path, "tenant names", &c->tenant_header_values,
	    &c->n_tenant_header_values);
}

/* models.names: the models the operator names (models.pattern too). */
static void model_names_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	string_list(ld, v, path, "model names", &c->model_names, &c->n_model_names);
}

static void metrics_names_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "tokentap", "otel", "both" };
	struct conf *c = base;
	int t = yconf_enum(ld, v, path, "metric names", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		c->metrics_names = t;
}

static void metrics_tenants_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "named", "hashed" };
	struct conf *c = base;
	int t = yconf_enum(ld, v, path, "tenant labels", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		c->metrics_hashed_tenants = t;
}

static void windows_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const struct yconf_key k = { .type = YCONF_DURATION, .lo = 1 };
	struct conf *c = base;
	yaml_node_item_t *it;
	size_t n;
	uint64_t *w;
	char sub[YCONF_PATH_LEN];

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "durations"))
		return;
	it = v->data.sequence.items.start;
	n = (size_t)(v->data.sequence.items.top - it);
	if (n == 0) {
		yconf_err(ld, v, "%s: at least one window is required", path);
		return;
	}
	w = calloc(n, sizeof *w);
	if (w == NULL) {
		yconf_oom(ld);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		yconf_apply_value(ld, &k, yconf_node(ld, it[i]), &w[i], sub);
	}
	free(c->stats_windows_us);
	c->stats_windows_us = w;
	c->n_stats_windows = n;
}

static const struct yconf_section listen_section, route_section, notify_section;

static void listen_init(struct yconf *ld, void *item)
{
	struct conf_listen *l = item;
	(void)ld;
	l->backlog = CONF_BACKLOG;
}

static void listen_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	void *arr = NULL;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "addresses"))
		return;
	if (v->data.sequence.items.top == v->data.sequence.items.start) {
		yconf_err(ld, v, "%s: at least one address is required", path);
		return;
	}
	conf_listen_free(c);
	yconf_apply_list(ld, v, path, &arr, &c->n_listen, sizeof *c->listen, &listen_section,
	    listen_init);
	c->listen = arr;
}

static void route_init(struct yconf *ld, void *item)
{
	struct conf_route *r = item;
	const struct conf *c = ld->user;
	r->dialect = DIALECT_AUTO;
	r->request_buffering = 1;
	r->tls.verify = 1;
	r->timeouts = c->timeouts;
	r->thresholds = c->thresholds;
	r->balance = BALANCE_LEAST_STREAMS;
	r->retries = 1;
	r->retry_on[0] = 502;
	r->retry_on[1] = 503;
	r->retry_on[2] = 429;
	r->n_retry_on = 3;
	snprintf(r->upgrades[0], sizeof r->upgrades[0], "websocket");
	r->n_upgrades = 1;
	r->dns_ttl_us = 30000000;
	r->health = (struct conf_health){
		.interval_us = 10000000, .timeout_us = 2000000, .failures = 1,
		.backoff_us = 1000000, .backoff_max_us = 30000000, .ttft_factor = 3,
		.throughput = { .tokens = 16, .window_us = 2000000 },
	};
}

static void routes_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	yaml_node_item_t *items;
	void *arr = c->routes;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "routes"))
		return;
	items = v->data.sequence.items.start;
	yconf_apply_list(ld, v, path, &arr, &c->n_routes, sizeof *c->routes, &route_section,
	    route_init);
	c->routes = arr;
	for (size_t i = 0; i < c->n_routes; i++) {
		struct conf_route *r = &c->routes[i];
		/* a pool of one names its peer; in a longer one each replica
		 * is named by its own host */
		if (r->tls.sni == NULL && r->n_upstreams == 1 && r->upstream_host[0] != '\0')
			r->tls.sni = yconf_strdup(ld, r->upstream_host);
		for (size_t j = 0; j < i && r->name != NULL; j++) {
			yaml_node_t *first;
			const char *other = c->routes[j].name;
			if (other == NULL || strcmp(other, r->name) != 0)
				continue;
			first = yconf_map_find(ld, yconf_node(ld, items[j]), "name");
			yconf_err(ld, yconf_map_find(ld, yconf_node(ld, items[i]), "name"),
			    "%s[%zu].name: duplicate route name '%.64s' (first at line %zu)",
			    path, i, r->name, first->start_mark.line + 1);
			break;
		}
	}
}

static void notify_init(struct yconf *ld, void *item)
{
	struct conf_notify *nt = item;
	(void)ld;
	nt->type = NOTIFY_LOG;
	nt->timeout_us = 5000000;
	nt->repeat_interval_us = 60000000;
}

static void notify_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	void *arr = c->notify;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "notifiers"))
		return;
	yconf_apply_list(ld, v, path, &arr, &c->n_notify, sizeof *c->notify, &notify_section,
	    notify_init);
	c->notify = arr;
}

/* ---- SLOs ------------------------------------------------------------- */

static const struct yconf_section slo_section, burn_section;

/* The product brief's application kinds: class fills ttft and tpot (a
 * target given beside it wins). */
static const struct {
	const char *name;
	uint64_t ttft_us, tpot_us;
} slo_classes[] = {
	{ "chat", 300000, 50000 },
	{ "content-creation", 800000, 100000 },
	{ "code-assistant", 500000, 40000 },
	{ "translation", 200000, 30000 },
	{ "batch", 2000000, 150000 },
};

static void slo_class_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	const char *names[UTIL_ARRAY_LEN(slo_classes)];
	struct conf_slo *o = base;
	int k;

	for (size_t i = 0; i < UTIL_ARRAY_LEN(slo_classes); i++)
		names[i] = slo_classes[i].name;
	k = yconf_enum(ld, v, path, "class", names, UTIL_ARRAY_LEN(names));
	if (k < 0)
		return;
	o->targets.us[GOODPUT_TTFT] = slo_classes[k].ttft_us;
	o->targets.us[GOODPUT_TPOT] = slo_classes[k].tpot_us;
}

/* A name is a label value, a word in the state file and the UI's text. */
static int slo_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.' ||
		    *s == ':'))
			return 0;
	return 1;
}

static void slo_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	const struct conf_slo *o = base;
	yaml_node_t *n = yconf_map_find(ld, m, "name");

	if (o->name != NULL && !slo_name_ok(o->name))
		yconf_err(ld, n, "%s.name: '%.64s' must be 1 to 63 of A-Z a-z 0-9 _ - . :",
		    path, o->name);
	if (!goodput_any(&o->targets))
		yconf_err(ld, m, "%s: give a class or at least one target (ttft, tpot, ttfo)", path);
}

static void slo_init(struct yconf *ld, void *item)
{
	struct conf_slo *o = item;
	(void)ld;
	o->objective = 0.99;
	o->period_us = 28 * 86400000000ull;
}

static void slos_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	yaml_node_item_t *items;
	void *arr = c->slos;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "SLOs"))
		return;
	items = v->data.sequence.items.start;
	yconf_apply_list(ld, v, path, &arr, &c->n_slos, sizeof *c->slos, &slo_section,
	    slo_init);
	c->slos = arr;
	for (size_t i = 0; i < c->n_slos; i++)
		for (size_t j = 0; j < i && c->slos[i].name != NULL; j++) {
			if (c->slos[j].name == NULL || strcmp(c->slos[j].name, c->slos[i].name) != 0)
				continue;
			yconf_err(ld, yconf_map_find(ld, yconf_node(ld, items[i]), "name"),
			    "%s[%zu].name: duplicate SLO name '%.64s'", path, i, c->slos[i].name);
			break;
		}
}

/* A route an SLO matches must be one of the routes. */
static void slo_routes_check(struct yconf *ld, yaml_node_t *top, const struct conf *c)
{
	yaml_node_t *list = yconf_map_find(ld, top, "slos");

	for (size_t i = 0; i < c->n_slos; i++) {
		const char *want = c->slos[i].match_route;
		int found = 0;
		yaml_node_t *n;
		if (want == NULL || list == NULL || list->type != YAML_SEQUENCE_NODE)
			continue;
		for (size_t k = 0; k < c->n_routes && !found; k++)
			found = c->routes[k].name != NULL && strcmp(c->routes[k].name, want) == 0;
		if (found)
			continue;
		n = yconf_node(ld, list->data.sequence.items.start[i]);
		n = yconf_map_find(ld, n, "match");
		n = n != NULL ? yconf_map_find(ld, n, "route") : NULL;
		if (n != NULL)
			yconf_err(ld, n, "slos[%zu].match.route: no route is called '%.64s'", i, want);
	}
}

static void burn_severity_fn(struct yconf *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "warning", "critical" };
	struct conf_burn *b = base;
	int k = yconf_enum(ld, v, path, "severity", names, UTIL_ARRAY_LEN(names));
	if (k >= 0)
		b->critical = k;
}

static void burn_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	const struct conf_burn *b = base;
	yaml_node_t *at = yconf_map_find(ld, m, "short");

	if (b->short_us >= b->long_us && b->long_us != 0)
		yconf_err(ld, at ? at : m, "%s: short must be shorter than long", path);
}

static void burn_rates_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	void *arr = NULL;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "burn-rate pairs"))
		return;
	free(c->burn_rates);
	c->burn_rates = NULL;
	c->n_burn_rates = 0;
	yconf_apply_list(ld, v, path, &arr, &c->n_burn_rates, sizeof *c->burn_rates,
	    &burn_section, NULL);
	c->burn_rates = arr;
}

/* ---- mappings of names to strings ------------------------------------- */

/* Appends an entry to the struct conf_kv array at k->off, its count at
 * k->n_off. */
static void kv_put(struct yconf *ld, const struct yconf_key *k, void *base,
    struct yconf_entry *e)
{
	struct conf_kv **arr = (struct conf_kv **)((char *)base + k->off);
	size_t *n = (size_t *)((char *)base + k->n_off);
	struct conf_kv *kv = yconf_grow(ld, *arr, *n, sizeof *kv);

	if (kv == NULL || (kv[*n].name = yconf_strdup(ld, e->name)) == NULL) {
		if (kv != NULL)
			*arr = kv;
		free(e->text);
		return;
	}
	*arr = kv;
	kv[(*n)++].value = e->text;
}

/* Lowercases s; 1 when it is 64 hex digits. */
static int sha256_hex_ok(char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		if (s[n] >= 'A' && s[n] <= 'F')
			s[n] = (char)(s[n] - 'A' + 'a');
		else if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	}
	return n == 64;
}

/* tenant.api_keys: name -> the SHA-256 of the key, never the key. */
static void sha256_put(struct yconf *ld, const struct yconf_key *k, void *base,
    struct yconf_entry *e)
{
	if (!sha256_hex_ok(e->text)) {
		yconf_err(ld, e->value, "%s: expected the SHA-256 of the key as 64 hex "
		    "characters", e->path);
		free(e->text);
		return;
	}
	kv_put(ld, k, base, e);
}

/* ---- cross-key rules ------------------------------------------------- */

/* Both keys or neither. */
static void pair_check(struct yconf *ld, yaml_node_t *m, const char *path,
    const char *a, const char *b)
{
	if ((yconf_map_find(ld, m, a) == NULL) != (yconf_map_find(ld, m, b) == NULL))
		yconf_err(ld, m, "%s: '%s' and '%s' go together: give both or neither", path,
		    a, b);
}

/* The position of node n (or of m, where n is absent) in the file. */
static struct conf_pos pos_of(yaml_node_t *n, yaml_node_t *m)
{
	yaml_node_t *at = n != NULL ? n : m;
	struct conf_pos p = { at->start_mark.line + 1, at->start_mark.column + 1 };
	return p;
}

/* Certificates load after the file (tls_prepare): their errors then name
 * the key's place, as every other configuration error does. */
static void listen_tls_check(struct yconf *ld, yaml_node_t *m, void *base,
    const char *path)
{
	struct conf_listen *l = base;
	pair_check(ld, m, path, "cert", "key");
	l->tls_cert_at = pos_of(yconf_map_find(ld, m, "cert"), m);
	l->tls_key_at = pos_of(yconf_map_find(ld, m, "key"), m);
}

static void route_tls_check(struct yconf *ld, yaml_node_t *m, void *base,
    const char *path)
{
	struct conf_tls *t = base;
	pair_check(ld, m, path, "client_cert", "client_key");
	t->at = pos_of(NULL, m);
	t->ca_file_at = pos_of(yconf_map_find(ld, m, "ca_file"), m);
	t->client_cert_at = pos_of(yconf_map_find(ld, m, "client_cert"), m);
}

static void match_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf_route *r = base;
	if (r->match_path_prefix != NULL && r->match_path_prefix[0] != '/')
		yconf_err(ld, yconf_map_find(ld, m, "path_prefix"),
		    "%s.path_prefix: must start with '/'", path);
}

/* Checks the values in force: a route's include the global ones it did not
 * override. */
static void thresholds_check(struct yconf *ld, yaml_node_t *m, void *base,
    const char *path)
{
	static const char *const metric[4] = { "ttft", "tpot", "error_rate", "ttfo" };
	const struct conf_thresholds *t = base;
	double w[4] = { t->ttft_warning_us / 1e3, t->tpot_warning_us / 1e3,
		t->error_rate_warning, t->ttfo_warning_us / 1e3 };
	double c[4] = { t->ttft_critical_us / 1e3, t->tpot_critical_us / 1e3,
		t->error_rate_critical, t->ttfo_critical_us / 1e3 };
	int set[4] = { t->ttft_warning_us && t->ttft_critical_us,
		t->tpot_warning_us && t->tpot_critical_us,
		t->error_rate_warning >= 0 && t->error_rate_critical >= 0,
		t->ttfo_warning_us && t->ttfo_critical_us };
	char wk[32], ck[32];

	for (int i = 0; i < 4; i++) {
		yaml_node_t *at;
		if (!set[i] || c[i] >= w[i])
			continue;
		snprintf(wk, sizeof wk, "%s_warning", metric[i]);
		snprintf(ck, sizeof ck, "%s_critical", metric[i]);
		/* point at the key this mapping set, the one to fix */
		if ((at = yconf_map_find(ld, m, ck)) == NULL &&
		    (at = yconf_map_find(ld, m, wk)) == NULL)
			at = m;
		yconf_err(ld, at, "%s: %s (%g%s) is below %s (%g%s)", path, ck, c[i],
		    i != 2 ? "ms" : "", wk, w[i], i != 2 ? "ms" : "");
	}
}

/* A pattern of the config (tenant.header_pattern, models.pattern) into
 * re, matched whole. ere.h, not regcomp: glibc backtracks on
 * back-references and expands counted repetitions at compile time
 * without a bound (seconds of the main thread and gigabytes, at -t too);
 * ere refuses both and matches in linear time. */
static void pattern_check(struct yconf *ld, yaml_node_t *m, const char *path,
    const char *key, const char *pattern, struct ere *re, int *ok)
{
	char why[256];

	if (pattern == NULL || *ok)
		return;
	if (ere_compile(re, pattern, why, sizeof why) != 0) {
		yconf_err(ld, yconf_map_find(ld, m, key),
		    "%s.%s: not a POSIX extended regular expression tokentap takes: %s",
		    path, key, why);
		return;
	}
	*ok = 1;
}

/* a header value names a tenant when the whole value matches */
static void tenant_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf *c = base;
	pattern_check(ld, m, path, "header_pattern", c->tenant_header_pattern,
	    &c->tenant_header_re, &c->tenant_header_re_ok);
}

static void models_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf *c = base;
	pattern_check(ld, m, path, "pattern", c->model_pattern, &c->model_re,
	    &c->model_re_ok);
}

static void notify_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	const struct conf_notify *nt = base;
	yaml_node_t *url = yconf_map_find(ld, m, "url");

	if (nt->type != NOTIFY_LOG && url == NULL)
		yconf_err(ld, m, "missing required key 'url' in %s (needed by type %s)", path,
		    nt->type == NOTIFY_WEBHOOK ? "webhook" : "alertmanager");
}

/* `upstream` or `upstreams`, one of them; the first replica's fields are
 * the route's upstream* (messages, and a pool of one as before). */
static void route_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf_route *r = base;
	yaml_node_t *one = yconf_map_find(ld, m, "upstream");
	yaml_node_t *many = yconf_map_find(ld, m, "upstreams");
	const struct conf_upstream *u0;

	if (one == NULL && many == NULL)
		yconf_err(ld, m, "missing required key 'upstream' in %s", path);
	if (one != NULL && many != NULL)
		yconf_err(ld, many, "%s: give 'upstream' or 'upstreams', not both", path);
	if (r->n_upstreams == 0 || r->upstreams[0].url == NULL)
		return;     /* a problem was reported */
	u0 = &r->upstreams[0];
	free(r->upstream);
	free(r->upstream_base);
	r->upstream = yconf_strdup(ld, u0->url);
	r->upstream_base = yconf_strdup(ld, u0->base ? u0->base : "");
	memcpy(r->upstream_host, u0->host, sizeof r->upstream_host);
	r->upstream_port = u0->port;
	for (size_t i = 0; i < r->n_upstreams; i++) {
		r->upstream_tls |= r->upstreams[i].tls;
		for (size_t j = 0; j < i && many != NULL &&
		    many->type == YAML_SEQUENCE_NODE; j++) {
			if (r->upstreams[i].url == NULL || r->upstreams[j].url == NULL ||
			    strcmp(r->upstreams[i].url, r->upstreams[j].url) != 0)
				continue;
			/* one replica, one name: weight says "twice as much" */
			yconf_err(ld, yconf_node(ld, many->data.sequence.items.start[i]),
			    "%s.upstreams[%zu]: %s is listed twice (use weight)", path, i,
			    r->upstreams[i].url);
			break;
		}
	}
	if (r->balance != BALANCE_HASH && r->hash_header != NULL)
		yconf_err(ld, yconf_map_find(ld, m, "hash_header"),
		    "%s.hash_header: only with balance: hash", path);
}

static void health_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf_health *h = base;
	if (h->path != NULL && h->path[0] != '/')
		yconf_err(ld, yconf_map_find(ld, m, "path"), "%s.path: must start with '/'",
		    path);
	if (h->backoff_max_us < h->backoff_us)
		yconf_err(ld, m, "%s: backoff_max is below backoff", path);
}

/* ---- the schema ---------------------------------------------------------- */

#define DUR(n, st, f, min) \
	{ .name = n, .type = YCONF_DURATION, .off = offsetof(st, f), .lo = min }
#define SIZE(n, st, f, min, max) \
	{ .name = n, .type = YCONF_SIZE, .off = offsetof(st, f), .lo = min, .hi = max }
#define UINT(n, st, f, min, max) \
	{ .name = n, .type = YCONF_UINT, .off = offsetof(st, f), .lo = min, .hi = max }
#define FLOAT(n, st, f, min, max, fl) { .name = n, .type = YCONF_FLOAT, .flags = fl, \
	.off = offsetof(st, f), .flo = min, .fhi = max }
#define BOOL(n, st, f) { .name = n, .type = YCONF_BOOL, .off = offsetof(st, f) }
#define STR(n, st, f, fl) \
	{ .name = n, .type = YCONF_STRING, .flags = fl, .off = offsetof(st, f) }
#define MAP(n, st, f, cnt, fl, p) { .name = n, .type = YCONF_MAP, .flags = fl, \
	.off = offsetof(st, f), .n_off = offsetof(st, cnt), .put = p }
#define SECTION(n, off_, s) { .name = n, .type = YCONF_SECTION, .off = off_, .sub = &s }
#define FUNC(n, f, fl) { .name = n, .type = YCONF_FUNC, .flags = fl, .fn = f }
#define TABLE(keys, chk) { keys, UTIL_ARRAY_LEN(keys), chk }

static const struct yconf_key timeouts_keys[] = {
	DUR("client_header", struct conf_timeouts, client_header_us, 1),
	DUR("client_body", struct conf_timeouts, client_body_us, 1),
	DUR("connect", struct conf_timeouts, connect_us, 1),
	DUR("first_byte", struct conf_timeouts, first_byte_us, 1),
	DUR("idle", struct conf_timeouts, idle_us, 1),
	DUR("shutdown", struct conf_timeouts, shutdown_us, 0),
	DUR("send", struct conf_timeouts, send_us, 1),
	DUR("upstream_keepalive", struct conf_timeouts, upstream_keepalive_us, 1),
	DUR("token_idle", struct conf_timeouts, token_idle_us, 0),
	DUR("first_token", struct conf_timeouts, first_token_us, 0),
};
static const struct yconf_section timeouts_section = TABLE(timeouts_keys, NULL);

/* 0 (durations) turns a threshold off, e.g. a global one for one route. */
static const struct yconf_key thresholds_keys[] = {
	DUR("ttft_warning", struct conf_thresholds, ttft_warning_us, 0),
	DUR("ttft_critical", struct conf_thresholds, ttft_critical_us, 0),
	DUR("tpot_warning", struct conf_thresholds, tpot_warning_us, 0),
	DUR("tpot_critical", struct conf_thresholds, tpot_critical_us, 0),
	FLOAT("error_rate_warning", struct conf_thresholds, error_rate_warning, 0, 1, 0),
	FLOAT("error_rate_critical", struct conf_thresholds, error_rate_critical, 0, 1, 0),
	DUR("ttfo_warning", struct conf_thresholds, ttfo_warning_us, 0),
	DUR("ttfo_critical", struct conf_thresholds, ttfo_critical_us, 0),
	DUR("stall", struct conf_thresholds, stall_us, 0),
	UINT("min_stalled", struct conf_thresholds, min_stalled, 1, 1000000),
	FLOAT("ttft_uncertain_warning", struct conf_thresholds, ttft_uncertain_warning,
	    0, 1, 0),
};
static const struct yconf_section thresholds_section = TABLE(thresholds_keys, thresholds_check);

static const struct yconf_key listen_tls_keys[] = {
	STR("cert", struct conf_listen, tls_cert, 0),
	STR("key", struct conf_listen, tls_key, 0),
};
static const struct yconf_section listen_tls_section = TABLE(listen_tls_keys, listen_tls_check);

static const struct yconf_key listen_keys[] = {
	FUNC("address", listen_address_fn, YCONF_REQUIRED),
	UINT("backlog", struct conf_listen, backlog, 1, 1 << 20),
	SECTION("tls", 0, listen_tls_section),
};
static const struct yconf_section listen_section = TABLE(listen_keys, NULL);

static const struct yconf_key admin_keys[] = {
	FUNC("address", admin_address_fn, 0),
	STR("token", struct conf, admin_token, 0),
};
static const struct yconf_section admin_section = TABLE(admin_keys, NULL);

static const struct yconf_key limits_keys[] = {
	UINT("max_connections", struct conf, max_connections, 1, 10000000),
	SIZE("max_header_bytes", struct conf, max_header_bytes, 1024, 1 << 20),
	SIZE("max_body_bytes", struct conf, max_body_bytes, 1, 0),
	SIZE("max_event_bytes", struct conf, max_event_bytes, 1024, 1 << 30),
	SIZE("client_backlog", struct conf, client_backlog, 1 << 20, 0),
	SIZE("request_buffers", struct conf, request_buffers, 0, 0),
	UINT("upstream_keepalive", struct conf, upstream_keepalive, 0, 1000000),
};
static const struct yconf_section limits_section = TABLE(limits_keys, NULL);

static const struct yconf_key tenant_keys[] = {
	STR("header", struct conf, tenant_header, YCONF_HEADER),
	MAP("api_keys", struct conf, tenant_api_keys, n_tenant_api_keys, 0, sha256_put),
	UINT("max_tenants", struct conf, max_tenants, 1, 1000000),
	FUNC("header_values", header_values_fn, 0),
	STR("header_pattern", struct conf, tenant_header_pattern, 0),
};
static const struct yconf_section tenant_section = TABLE(tenant_keys, tenant_check);

static const struct yconf_key metrics_keys[] = {
	UINT("max_series", struct conf, metrics_max_series, 1, 100000000),
	FUNC("names", metrics_names_fn, 0),
	FUNC("tenants", metrics_tenants_fn, 0),
	DUR("expiration", struct conf, metrics_expiration_us, 0),
};
static const struct yconf_section metrics_section = TABLE(metrics_keys, NULL);

static const struct yconf_key models_keys[] = {
	UINT("max_models", struct conf, max_models, 1, 1000000),
	FUNC("names", model_names_fn, 0),
	STR("pattern", struct conf, model_pattern, 0),
};
static const struct yconf_section models_section = TABLE(models_keys, models_check);

static const struct yconf_key history_step_keys[] = {
	{ .name = "step", .type = YCONF_DURATION, .flags = YCONF_REQUIRED,
	  .off = offsetof(struct conf_history_step, step_us), .lo = 1 },
	{ .name = "keep", .type = YCONF_DURATION, .flags = YCONF_REQUIRED,
	  .off = offsetof(struct conf_history_step, keep_us), .lo = 1 },
};
static const struct yconf_section history_step_section = TABLE(history_step_keys, NULL);

/* stats.history: [{step, keep}, ...], finest first (conf_history_check
 * says what fits); [] keeps none. */
static void history_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	struct conf_history_step t[CONF_HISTORY_STEPS_MAX];
	const char *wrong = NULL;
	void *arr = NULL;

	if (yconf_is_null(v) || !yconf_is_list(ld, v, path, "steps"))
		return;
	free(c->stats_history);
	c->stats_history = NULL;
	c->n_stats_history = 0;
	yconf_apply_list(ld, v, path, &arr, &c->n_stats_history, sizeof *c->stats_history,
	    &history_step_section, NULL);
	c->stats_history = arr;
	if (c->n_stats_history > CONF_HISTORY_STEPS_MAX) {
		wrong = "at most 4 steps";
	} else {
		for (size_t i = 0; i < c->n_stats_history; i++) {
			if (c->stats_history[i].step_us == 0 || c->stats_history[i].keep_us == 0)
				return;           /* a missing key, said */
			t[i].step_us = c->stats_history[i].step_us;
			t[i].keep_us = c->stats_history[i].keep_us;
		}
		wrong = conf_history_check(t, c->n_stats_history);
	}
	if (wrong != NULL)
		yconf_err(ld, v, "%s: %s", path, wrong);
}

static const struct yconf_key stats_keys[] = {
	FUNC("windows", windows_fn, 0),
	STR("file", struct conf, stats_file, 0),
	DUR("interval", struct conf, stats_interval_us, 1),
	FUNC("history", history_fn, 0),
	STR("history_file", struct conf, stats_history_file, 0),
	DUR("history_save_every", struct conf, stats_history_save_every_us, 1),
};
static const struct yconf_section stats_section = TABLE(stats_keys, NULL);

static const struct yconf_key notify_keys[] = {
	FUNC("type", notify_type_fn, YCONF_REQUIRED),
	FUNC("url", notify_url_fn, 0),
	MAP("headers", struct conf_notify, headers, n_headers, YCONF_HEADER, kv_put),
	DUR("timeout", struct conf_notify, timeout_us, 1),
	DUR("repeat_interval", struct conf_notify, repeat_interval_us, 1),
};
static const struct yconf_section notify_section = TABLE(notify_keys, notify_check);

static const struct yconf_key burn_keys[] = {
	FUNC("severity", burn_severity_fn, YCONF_REQUIRED),
	DUR("long", struct conf_burn, long_us, 1),
	DUR("short", struct conf_burn, short_us, 1),
	FLOAT("rate", struct conf_burn, rate, 0, 1e6, YCONF_OPEN_LO),
};
static const struct yconf_section burn_section = TABLE(burn_keys, burn_check);

static const struct yconf_key alerts_keys[] = {
	DUR("evaluate_every", struct conf, alerts_evaluate_every_us, 1),
	DUR("window", struct conf, alerts_window_us, 1),
	FLOAT("quantile", struct conf, alerts_quantile, 0, 1,
	    YCONF_OPEN_LO | YCONF_OPEN_HI),
	UINT("min_samples", struct conf, alerts_min_samples, 1, 1000000000),
	DUR("for", struct conf, alerts_for_us, 0),
	FLOAT("hysteresis", struct conf, alerts_hysteresis, 0, 1, YCONF_OPEN_HI),
	BOOL("per_tenant", struct conf, alerts_per_tenant),
	SECTION("thresholds", offsetof(struct conf, thresholds), thresholds_section),
	FUNC("notify", notify_fn, 0),
	FUNC("burn_rates", burn_rates_fn, 0),
	UINT("burn_min_requests", struct conf, burn_min_requests, 1, 1000000000),
};
static const struct yconf_section alerts_section = TABLE(alerts_keys, NULL);

static const struct yconf_key slo_match_keys[] = {
	STR("route", struct conf_slo, match_route, 0),
	STR("tenant", struct conf_slo, match_tenant, 0),
	STR("model", struct conf_slo, match_model, 0),
};
static const struct yconf_section slo_match_section = TABLE(slo_match_keys, NULL);

/* ttft, tpot and ttfo are applied after class, which they override (a
 * class sets no ttfo: the brief's application kinds name TTFT and TPOT) */
static const struct yconf_key slo_keys[] = {
	STR("name", struct conf_slo, name, YCONF_REQUIRED),
	SECTION("match", 0, slo_match_section),
	FUNC("class", slo_class_fn, 0),
	{ .name = "ttft", .type = YCONF_DURATION, .flags = YCONF_LATE,
	  .off = offsetof(struct conf_slo, targets.us[GOODPUT_TTFT]), .lo = 1 },
	{ .name = "tpot", .type = YCONF_DURATION, .flags = YCONF_LATE,
	  .off = offsetof(struct conf_slo, targets.us[GOODPUT_TPOT]), .lo = 1 },
	{ .name = "ttfo", .type = YCONF_DURATION, .flags = YCONF_LATE,
	  .off = offsetof(struct conf_slo, targets.us[GOODPUT_TTFO]), .lo = 1 },
	FLOAT("objective", struct conf_slo, objective, 0, 1, YCONF_OPEN_LO | YCONF_OPEN_HI),
	DUR("period", struct conf_slo, period_us, 60000000),
};
static const struct yconf_section slo_section = TABLE(slo_keys, slo_check);

static const struct yconf_key match_keys[] = {
	STR("path_prefix", struct conf_route, match_path_prefix, 0),
	STR("host", struct conf_route, match_host, 0),
	MAP("header", struct conf_route, match_headers, n_match_headers, YCONF_HEADER, kv_put),
};
static const struct yconf_section match_section = TABLE(match_keys, match_check);

static const struct yconf_key route_tls_keys[] = {
	BOOL("verify", struct conf_tls, verify),
	STR("ca_file", struct conf_tls, ca_file, 0),
	STR("sni", struct conf_tls, sni, 0),
	STR("client_cert", struct conf_tls, client_cert, 0),
	STR("client_key", struct conf_tls, client_key, 0),
};
static const struct yconf_section route_tls_section = TABLE(route_tls_keys, route_tls_check);
/* the same rules for otel.tls (config_otel.c) */
const struct yconf_section conf_tls_section = TABLE(route_tls_keys, route_tls_check);

void conf_kv_put(struct yconf *ld, const struct yconf_key *k, void *base,
    struct yconf_entry *e)
{
	kv_put(ld, k, base, e);
}

static const struct yconf_key upstream_item_keys[] = {
	FUNC("url", upstream_item_url_fn, YCONF_REQUIRED),
	UINT("weight", struct conf_upstream, weight, 1, 1000),
};
static const struct yconf_section upstream_item_section = TABLE(upstream_item_keys, NULL);

static const struct yconf_key throughput_keys[] = {
	FLOAT("min_rate", struct conf_throughput, min_rate, 0, 1e6, 0),
	UINT("tokens", struct conf_throughput, tokens, 1, 100000),
	DUR("window", struct conf_throughput, window_us, 1000),
};
static const struct yconf_section throughput_section = TABLE(throughput_keys, NULL);

static const struct yconf_key health_keys[] = {
	STR("path", struct conf_health, path, 0),
	DUR("interval", struct conf_health, interval_us, 100000),
	DUR("timeout", struct conf_health, timeout_us, 1000),
	UINT("failures", struct conf_health, failures, 1, 1000),
	DUR("backoff", struct conf_health, backoff_us, 1000),
	DUR("backoff_max", struct conf_health, backoff_max_us, 1000),
	FLOAT("ttft_factor", struct conf_health, ttft_factor, 0, 1000, 0),
	SECTION("throughput", offsetof(struct conf_health, throughput), throughput_section),
};
static const struct yconf_section health_section = TABLE(health_keys, health_check);

static const struct yconf_key route_keys[] = {
	STR("name", struct conf_route, name, YCONF_REQUIRED),
	SECTION("match", 0, match_section),
	FUNC("upstream", upstream_fn, 0),
	FUNC("upstreams", upstreams_fn, 0),
	FUNC("balance", balance_fn, 0),
	STR("hash_header", struct conf_route, hash_header, YCONF_HEADER),
	UINT("retries", struct conf_route, retries, 0, CONF_RETRIES_MAX),
	FUNC("retry_on", retry_on_fn, 0),
	UINT("min_healthy", struct conf_route, thresholds.min_healthy, 0, CONF_UPSTREAMS_MAX),
	DUR("dns_ttl", struct conf_route, dns_ttl_us, 1000000),
	SECTION("health", offsetof(struct conf_route, health), health_section),
	FUNC("dialect", dialect_fn, 0),
	BOOL("strip_prefix", struct conf_route, strip_prefix),
	BOOL("preserve_host", struct conf_route, preserve_host),
	BOOL("request_buffering", struct conf_route, request_buffering),
	FUNC("upgrades", upgrades_fn, 0),
	MAP("set_headers", struct conf_route, set_headers, n_set_headers, YCONF_HEADER,
	    kv_put),
	SECTION("tls", offsetof(struct conf_route, tls), route_tls_section),
	SECTION("thresholds", offsetof(struct conf_route, thresholds), thresholds_section),
	SECTION("timeouts", offsetof(struct conf_route, timeouts), timeouts_section),
};
static const struct yconf_section route_section = TABLE(route_keys, route_check);

static const struct yconf_key top_keys[] = {
	FUNC("listen", listen_fn, 0),
	SECTION("admin", 0, admin_section),
	FUNC("workers", workers_fn, 0),
	FUNC("timestamps", timestamps_fn, 0),
	FUNC("read_order", read_order_fn, 0),
	SECTION("timeouts", offsetof(struct conf, timeouts), timeouts_section),
	SECTION("limits", 0, limits_section),
	SECTION("tenant", 0, tenant_section),
	SECTION("models", 0, models_section),
	FUNC("routes", routes_fn, YCONF_LATE),
	STR("access_log", struct conf, access_log, 0),
	FUNC("access_log_mask", mask_fn, 0),
	SECTION("stats", 0, stats_section),
	SECTION("metrics", 0, metrics_section),
	SECTION("alerts", 0, alerts_section),
	FUNC("slos", slos_fn, 0),
	STR("slo_state", struct conf, slo_state, 0),
	SECTION("otel", offsetof(struct conf, otel), conf_otel_section),
};
/* Where the history is kept: stats.history_file, else beside slo_state,
 * else beside stats.file (a file, not stdout); none when the history is. */
static void history_file(struct yconf *ld, yaml_node_t *m, struct conf *c)
{
	yaml_node_t *stats = yconf_map_find(ld, m, "stats");
	yaml_node_t *at = stats ? yconf_map_find(ld, stats, "history_file") : NULL;
	const char *beside = NULL;

	if (c->stats_history_file != NULL && strcmp(c->stats_history_file, "-") == 0) {
		yconf_err(ld, at, "stats.history_file: a file, not '-'");
		return;
	}
	if (c->n_stats_history == 0) {        /* no history: no file to keep */
		free(c->stats_history_file);
		c->stats_history_file = NULL;
		return;
	}
	if (c->stats_history_file != NULL) {
		c->stats_history_file_at = pos_of(at, m);
	} else if (c->slo_state != NULL) {
		beside = c->slo_state;
		c->stats_history_file_at = c->slo_state_at;
	} else if (c->stats_file != NULL && strcmp(c->stats_file, "-") != 0) {
		beside = c->stats_file;
		c->stats_history_file_at = c->stats_file_at;
	}
	if (beside != NULL && asprintf(&c->stats_history_file, "%s.history", beside) < 0) {
		c->stats_history_file = NULL;
		yconf_oom(ld);
	}
}

/* Two of the same host:port (a wildcard host meets every host). */
static int same_address(const char *h1, unsigned p1, const char *h2, unsigned p2)
{
	return p1 == p2 && (h1[0] == '\0' || h2[0] == '\0' || strcmp(h1, h2) == 0 ||
	    strcmp(h1, "0.0.0.0") == 0 || strcmp(h2, "0.0.0.0") == 0 ||
	    strcmp(h1, "::") == 0 || strcmp(h2, "::") == 0);
}

/* What start would trip over, found by -t: an address given twice, the
 * admin listener on a proxy address. The paths' turn is conf_check_paths. */
static void top_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf *c = base;
	yaml_node_t *listen = yconf_map_find(ld, m, "listen"), *admin, *n;

	(void)path;
	for (size_t i = 0; i < c->n_listen; i++)
		for (size_t k = 0; k < i; k++) {
			if (!same_address(c->listen[i].host, c->listen[i].port,
			    c->listen[k].host, c->listen[k].port))
				continue;
			n = listen != NULL && listen->type == YAML_SEQUENCE_NODE ?
			    yconf_node(ld, listen->data.sequence.items.start[i]) : m;
			yconf_err(ld, n, "listen: %s is given twice", c->listen[i].address);
			break;
		}
	admin = yconf_map_find(ld, m, "admin");
	n = admin != NULL ? yconf_map_find(ld, admin, "address") : NULL;
	for (size_t i = 0; i < c->n_listen; i++)
		if (same_address(c->admin_host, c->admin_port, c->listen[i].host,
		    c->listen[i].port)) {
			yconf_err(ld, n ? n : m, "admin.address %s is also a listen address",
			    c->admin_address);
			break;
		}
	c->access_log_at = pos_of(yconf_map_find(ld, m, "access_log"), m);
	n = yconf_map_find(ld, m, "stats");
	c->stats_file_at = pos_of(n ? yconf_map_find(ld, n, "file") : NULL, n ? n : m);
	c->slo_state_at = pos_of(yconf_map_find(ld, m, "slo_state"), m);
	if (c->slo_state != NULL && strcmp(c->slo_state, "-") == 0)
		yconf_err(ld, yconf_map_find(ld, m, "slo_state"), "slo_state: a file, not '-'");
	history_file(ld, m, c);
	slo_routes_check(ld, m, c);
}

const struct yconf_section conf_schema = TABLE(top_keys, top_check);
