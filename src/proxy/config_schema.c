/* The schema of SPEC §2: one table per mapping (the generic walker in
 * config_load.c does the typing), plus the keys and cross-key rules that
 * need code of their own: addresses, upstream URLs, enums, lists of
 * sections, "both or neither", warning <= critical. */
#include "config_load.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"

/* ---- keys with their own rules ------------------------------------------ */

static void parse_address(struct conf_loader *ld, yaml_node_t *v, const char *path,
    char **addr, char host[256], unsigned *port)
{
	char *s = conf_is_null(v) ? NULL :
	    conf_scalar(ld, v, path, "an address host:port");
	char h[256];
	unsigned p;

	if (conf_is_null(v))
		conf_err(ld, v, "%s: expected an address host:port, got an empty value", path);
	if (s == NULL)
		return;
	if (util_split_hostport(s, h, sizeof h, &p) != 0) {
		conf_err(ld, v, "%s: expected an address host:port, got '%.64s'", path, s);
		free(s);
		return;
	}
	free(*addr);
	*addr = s;
	memcpy(host, h, sizeof h);
	*port = p;
}

static void listen_address_fn(struct conf_loader *ld, yaml_node_t *v, void *base,
    const char *path)
{
	struct conf_listen *l = base;
	parse_address(ld, v, path, &l->address, l->host, &l->port);
}

static void admin_address_fn(struct conf_loader *ld, yaml_node_t *v, void *base,
    const char *path)
{
	struct conf *c = base;
	parse_address(ld, v, path, &c->admin_address, c->admin_host, &c->admin_port);
}

static void workers_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	static const struct conf_key k = { .type = CONF_KT_UINT, .lo = 1, .hi = 256 };
	static const char want[] = "auto or a number of threads";
	struct conf *c = base;
	uint64_t n = 0;
	char *s = conf_is_null(v) ? NULL : conf_scalar(ld, v, path, want);

	if (conf_is_null(v))
		conf_err(ld, v, "%s: expected %s, got an empty value", path, want);
	if (s == NULL)
		return;
	if (strcmp(s, "auto") == 0)
		c->workers = conf_auto_workers();
	else if (conf_parse_uint(s, &n) != 0) {
		conf_err(ld, v, "%s: expected %s, got '%.64s'", path, want, s);
	} else {
		n = 0;
		conf_convert(ld, &k, v, s, &n, path);
		if (n != 0)
			c->workers = (int)n;
	}
	free(s);
}

/* Looks s up in names; reports it with the valid names and the closest one. */
static int enum_fn(struct conf_loader *ld, yaml_node_t *v, const char *path,
    const char *what, const char *const *names, size_t n)
{
	char *s = conf_is_null(v) ? NULL : conf_scalar(ld, v, path, "a name");
	char list[256] = "";
	const char *best = NULL;
	size_t best_d = 3, used = 0;
	int found = -1;

	if (conf_is_null(v))
		conf_err(ld, v, "%s: expected a %s, got an empty value", path, what);
	if (s == NULL)
		return -1;
	for (size_t i = 0; i < n && found < 0; i++) {
		size_t d = util_edit_distance(s, names[i]);
		if (strcmp(s, names[i]) == 0)
			found = (int)i;
		if (d < best_d) {
			best_d = d;
			best = names[i];
		}
		if (used < sizeof list)
			used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
			    i ? ", " : "", names[i]);
	}
	if (found < 0 && best != NULL)
		conf_err(ld, v, "%s: unknown %s '%.64s' (valid: %s); did you mean '%s'?", path,
		    what, s, list, best);
	else if (found < 0)
		conf_err(ld, v, "%s: unknown %s '%.64s' (valid: %s)", path, what, s, list);
	free(s);
	return found;
}

static void dialect_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_route *r = base;
	int d = enum_fn(ld, v, path, "dialect", dialect_names, DIALECT_COUNT);
	if (d >= 0)
		r->dialect = (enum dialect_id)d;
}

static void notify_type_fn(struct conf_loader *ld, yaml_node_t *v, void *base,
    const char *path)
{
	static const char *const names[] = { "log", "webhook", "alertmanager" };
	static const enum conf_notify_type types[] = {
		NOTIFY_LOG, NOTIFY_WEBHOOK, NOTIFY_ALERTMANAGER
	};
	struct conf_notify *nt = base;
	int t = enum_fn(ld, v, path, "notify type", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		nt->type = types[t];
}

static int host_char_ok(char ch, int v6)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
		return 1;
	return v6 ? ch == ':' || ch == '.' || ch == '%' : ch == '.' || ch == '-' || ch == '_';
}

/* Splits scheme://host[:port][/base-path] into r; returns NULL or the
 * problem. The URL is not echoed: it may carry credentials. */
static const char *parse_upstream(const char *s, struct conf_route *r)
{
	const char *host, *after, *path, *end;
	size_t hl, pl;
	int v6;

	if (strncasecmp(s, "http://", 7) == 0) {
		host = s + 7;
		r->upstream_tls = 0;
		r->upstream_port = 80;
	} else if (strncasecmp(s, "https://", 8) == 0) {
		host = s + 8;
		r->upstream_tls = 1;
		r->upstream_port = 443;
	} else {
		return "expected an http:// or https:// URL";
	}
	if (strpbrk(host, "?#") != NULL)
		return "must not contain a query or a fragment";
	path = host + strcspn(host, "/");
	if (memchr(host, '@', (size_t)(path - host)) != NULL)
		return "must not contain credentials (use set_headers)";
	v6 = *host == '[';
	if (v6) {
		end = memchr(host, ']', (size_t)(path - host));
		if (end == NULL)
			return "unterminated IPv6 address (expected [addr])";
		host++;
		hl = (size_t)(end - host);
		after = end + 1;
	} else {
		after = host + strcspn(host, ":/");
		hl = (size_t)(after - host);
	}
	if (hl == 0 || hl >= sizeof r->upstream_host)
		return "expected a host after the scheme";
	for (size_t i = 0; i < hl; i++)
		if (!host_char_ok(host[i], v6))
			return "the host has an invalid character";
	if (*after == ':') {
		uint64_t port;
		char digits[8];
		size_t dl = (size_t)(path - after - 1);
		if (dl == 0 || dl >= sizeof digits)
			return "bad port";
		memcpy(digits, after + 1, dl);
		digits[dl] = '\0';
		if (conf_parse_uint(digits, &port) != 0 || port == 0 || port > 65535)
			return "bad port";
		r->upstream_port = (unsigned)port;
	} else if (after != path) {
		return "unexpected character after the host";
	}
	memcpy(r->upstream_host, host, hl);
	r->upstream_host[hl] = '\0';
	for (const char *q = path; *q; q++)
		if ((unsigned char)*q <= ' ' || *q == 0x7f)
			return "the base path has a space or control character";
	pl = strlen(path);
	while (pl > 0 && path[pl - 1] == '/')
		pl--;
	free(r->upstream_base);
	r->upstream_base = strndup(path, pl);
	return r->upstream_base == NULL ? "out of memory" : NULL;
}

static void upstream_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf_route *r = base;
	char *s = conf_is_null(v) ? NULL : conf_scalar(ld, v, path, "a URL");
	const char *problem;

	if (conf_is_null(v))
		conf_err(ld, v, "%s: expected an http:// or https:// URL, got an empty value",
		    path);
	if (s == NULL)
		return;
	problem = parse_upstream(s, r);
	if (problem != NULL) {
		conf_err(ld, v, "%s: %s", path, problem);
		free(s);
		return;
	}
	free(r->upstream);
	r->upstream = s;
	/* No TLS upstreams yet: delete this one line when they land. */
}

static void windows_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	static const struct conf_key k = { .type = CONF_KT_DURATION, .lo = 1 };
	struct conf *c = base;
	yaml_node_item_t *it;
	size_t n;
	uint64_t *w;
	char sub[CONF_PATH_LEN];

	if (conf_is_null(v) || !conf_is_list(ld, v, path, "durations"))
		return;
	it = v->data.sequence.items.start;
	n = (size_t)(v->data.sequence.items.top - it);
	if (n == 0) {
		conf_err(ld, v, "%s: at least one window is required", path);
		return;
	}
	w = calloc(n, sizeof *w);
	if (w == NULL) {
		conf_oom(ld);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		conf_apply_value(ld, &k, conf_node(ld, it[i]), &w[i], sub);
	}
	free(c->stats_windows_us);
	c->stats_windows_us = w;
	c->n_stats_windows = n;
}

static const struct conf_section listen_section, route_section, notify_section;

static void listen_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	void *arr = NULL;

	if (conf_is_null(v) || !conf_is_list(ld, v, path, "addresses"))
		return;
	if (v->data.sequence.items.top == v->data.sequence.items.start) {
		conf_err(ld, v, "%s: at least one address is required", path);
		return;
	}
	conf_listen_free(c);
	conf_apply_list(ld, v, path, &arr, &c->n_listen, sizeof *c->listen, &listen_section,
	    NULL);
	c->listen = arr;
}

static void route_init(struct conf_loader *ld, void *item)
{
	struct conf_route *r = item;
	r->dialect = DIALECT_AUTO;
	r->request_buffering = 1;
	r->tls.verify = 1;
	r->timeouts = ld->c->timeouts;
	r->thresholds = ld->c->thresholds;
}

static void routes_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	yaml_node_item_t *items;
	void *arr = c->routes;

	if (conf_is_null(v) || !conf_is_list(ld, v, path, "routes"))
		return;
	items = v->data.sequence.items.start;
	conf_apply_list(ld, v, path, &arr, &c->n_routes, sizeof *c->routes, &route_section,
	    route_init);
	c->routes = arr;
	for (size_t i = 0; i < c->n_routes; i++) {
		struct conf_route *r = &c->routes[i];
		if (r->tls.sni == NULL && r->upstream_host[0] != '\0')
			r->tls.sni = conf_strdup(ld, r->upstream_host);
		for (size_t j = 0; j < i && r->name != NULL; j++) {
			yaml_node_t *first;
			const char *other = c->routes[j].name;
			if (other == NULL || strcmp(other, r->name) != 0)
				continue;
			first = conf_map_find(ld, conf_node(ld, items[j]), "name");
			conf_err(ld, conf_map_find(ld, conf_node(ld, items[i]), "name"),
			    "%s[%zu].name: duplicate route name '%.64s' (first at line %zu)",
			    path, i, r->name, first->start_mark.line + 1);
			break;
		}
	}
}

static void notify_init(struct conf_loader *ld, void *item)
{
	struct conf_notify *nt = item;
	(void)ld;
	nt->type = NOTIFY_LOG;
	nt->timeout_us = 5000000;
	nt->repeat_interval_us = 60000000;
}

static void notify_fn(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path)
{
	struct conf *c = base;
	void *arr = c->notify;

	if (conf_is_null(v) || !conf_is_list(ld, v, path, "notifiers"))
		return;
	conf_apply_list(ld, v, path, &arr, &c->n_notify, sizeof *c->notify, &notify_section,
	    notify_init);
	c->notify = arr;
}

/* ---- cross-key rules ------------------------------------------------- */

/* Both keys or neither. */
static void pair_check(struct conf_loader *ld, yaml_node_t *m, const char *path,
    const char *a, const char *b)
{
	if ((conf_map_find(ld, m, a) == NULL) != (conf_map_find(ld, m, b) == NULL))
		conf_err(ld, m, "%s: '%s' and '%s' go together: give both or neither", path,
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
static void listen_tls_check(struct conf_loader *ld, yaml_node_t *m, void *base,
    const char *path)
{
	struct conf_listen *l = base;
	pair_check(ld, m, path, "cert", "key");
	l->tls_cert_at = pos_of(conf_map_find(ld, m, "cert"), m);
	l->tls_key_at = pos_of(conf_map_find(ld, m, "key"), m);
}

static void route_tls_check(struct conf_loader *ld, yaml_node_t *m, void *base,
    const char *path)
{
	struct conf_tls *t = base;
	pair_check(ld, m, path, "client_cert", "client_key");
	t->at = pos_of(NULL, m);
	t->ca_file_at = pos_of(conf_map_find(ld, m, "ca_file"), m);
	t->client_cert_at = pos_of(conf_map_find(ld, m, "client_cert"), m);
}

static void match_check(struct conf_loader *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf_route *r = base;
	if (r->match_path_prefix != NULL && r->match_path_prefix[0] != '/')
		conf_err(ld, conf_map_find(ld, m, "path_prefix"),
		    "%s.path_prefix: must start with '/'", path);
}

/* Checks the values in force: a route's include the global ones it did not
 * override. */
static void thresholds_check(struct conf_loader *ld, yaml_node_t *m, void *base,
    const char *path)
{
	static const char *const metric[3] = { "ttft", "tpot", "error_rate" };
	const struct conf_thresholds *t = base;
	double w[3] = { t->ttft_warning_us / 1e3, t->tpot_warning_us / 1e3,
		t->error_rate_warning };
	double c[3] = { t->ttft_critical_us / 1e3, t->tpot_critical_us / 1e3,
		t->error_rate_critical };
	int set[3] = { t->ttft_warning_us && t->ttft_critical_us,
		t->tpot_warning_us && t->tpot_critical_us,
		t->error_rate_warning >= 0 && t->error_rate_critical >= 0 };
	char wk[32], ck[32];

	for (int i = 0; i < 3; i++) {
		yaml_node_t *at;
		if (!set[i] || c[i] >= w[i])
			continue;
		snprintf(wk, sizeof wk, "%s_warning", metric[i]);
		snprintf(ck, sizeof ck, "%s_critical", metric[i]);
		/* point at the key this mapping set, the one to fix */
		if ((at = conf_map_find(ld, m, ck)) == NULL &&
		    (at = conf_map_find(ld, m, wk)) == NULL)
			at = m;
		conf_err(ld, at, "%s: %s (%g%s) is below %s (%g%s)", path, ck, c[i],
		    i < 2 ? "ms" : "", wk, w[i], i < 2 ? "ms" : "");
	}
}

static void notify_check(struct conf_loader *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf_notify *nt = base;
	yaml_node_t *url = conf_map_find(ld, m, "url");

	if (nt->type != NOTIFY_LOG && url == NULL)
		conf_err(ld, m, "missing required key 'url' in %s (needed by type %s)", path,
		    nt->type == NOTIFY_WEBHOOK ? "webhook" : "alertmanager");
	if (nt->url != NULL && strncasecmp(nt->url, "http://", 7) != 0 &&
	    strncasecmp(nt->url, "https://", 8) != 0)
		conf_err(ld, url, "%s.url: expected an http:// or https:// URL", path);
}

/* ---- the schema ---------------------------------------------------------- */

#define DUR(n, st, f, min) \
	{ .name = n, .type = CONF_KT_DURATION, .off = offsetof(st, f), .lo = min }
#define SIZE(n, st, f, min, max) \
	{ .name = n, .type = CONF_KT_SIZE, .off = offsetof(st, f), .lo = min, .hi = max }
#define UINT(n, st, f, min, max) \
	{ .name = n, .type = CONF_KT_UINT, .off = offsetof(st, f), .lo = min, .hi = max }
#define FLOAT(n, st, f, min, max, fl) { .name = n, .type = CONF_KT_FLOAT, .flags = fl, \
	.off = offsetof(st, f), .flo = min, .fhi = max }
#define BOOL(n, st, f) { .name = n, .type = CONF_KT_BOOL, .off = offsetof(st, f) }
#define STR(n, st, f, fl) \
	{ .name = n, .type = CONF_KT_STRING, .flags = fl, .off = offsetof(st, f) }
#define MAP(n, st, f, cnt, fl) { .name = n, .type = CONF_KT_MAP, .flags = fl, \
	.off = offsetof(st, f), .n_off = offsetof(st, cnt) }
#define SECTION(n, off_, s) { .name = n, .type = CONF_KT_SECTION, .off = off_, .sub = &s }
#define FUNC(n, f, fl) { .name = n, .type = CONF_KT_FUNC, .flags = fl, .fn = f }
#define TABLE(keys, chk) { keys, UTIL_ARRAY_LEN(keys), chk }

static const struct conf_key timeouts_keys[] = {
	DUR("client_header", struct conf_timeouts, client_header_us, 1),
	DUR("connect", struct conf_timeouts, connect_us, 1),
	DUR("first_byte", struct conf_timeouts, first_byte_us, 1),
	DUR("idle", struct conf_timeouts, idle_us, 1),
	DUR("shutdown", struct conf_timeouts, shutdown_us, 0),
};
static const struct conf_section timeouts_section = TABLE(timeouts_keys, NULL);

/* 0 (durations) turns a threshold off, e.g. a global one for one route. */
static const struct conf_key thresholds_keys[] = {
	DUR("ttft_warning", struct conf_thresholds, ttft_warning_us, 0),
	DUR("ttft_critical", struct conf_thresholds, ttft_critical_us, 0),
	DUR("tpot_warning", struct conf_thresholds, tpot_warning_us, 0),
	DUR("tpot_critical", struct conf_thresholds, tpot_critical_us, 0),
	FLOAT("error_rate_warning", struct conf_thresholds, error_rate_warning, 0, 1, 0),
	FLOAT("error_rate_critical", struct conf_thresholds, error_rate_critical, 0, 1, 0),
};
static const struct conf_section thresholds_section = TABLE(thresholds_keys, thresholds_check);

static const struct conf_key listen_tls_keys[] = {
	STR("cert", struct conf_listen, tls_cert, 0),
	STR("key", struct conf_listen, tls_key, 0),
};
static const struct conf_section listen_tls_section = TABLE(listen_tls_keys, listen_tls_check);

static const struct conf_key listen_keys[] = {
	FUNC("address", listen_address_fn, CONF_KF_REQUIRED),
	SECTION("tls", 0, listen_tls_section),
};
static const struct conf_section listen_section = TABLE(listen_keys, NULL);

static const struct conf_key admin_keys[] = {
	FUNC("address", admin_address_fn, 0),
	STR("token", struct conf, admin_token, 0),
};
static const struct conf_section admin_section = TABLE(admin_keys, NULL);

static const struct conf_key limits_keys[] = {
	UINT("max_connections", struct conf, max_connections, 1, 10000000),
	SIZE("max_header_bytes", struct conf, max_header_bytes, 1024, 1 << 20),
	SIZE("max_body_bytes", struct conf, max_body_bytes, 1, 0),
	SIZE("max_event_bytes", struct conf, max_event_bytes, 1024, 1 << 30),
};
static const struct conf_section limits_section = TABLE(limits_keys, NULL);

static const struct conf_key tenant_keys[] = {
	STR("header", struct conf, tenant_header, CONF_KF_HEADER),
	MAP("api_keys", struct conf, tenant_api_keys, n_tenant_api_keys, CONF_KF_SHA256),
	UINT("max_tenants", struct conf, max_tenants, 1, 1000000),
};
static const struct conf_section tenant_section = TABLE(tenant_keys, NULL);

static const struct conf_key models_keys[] = {
	UINT("max_models", struct conf, max_models, 1, 1000000),
};
static const struct conf_section models_section = TABLE(models_keys, NULL);

static const struct conf_key stats_keys[] = {
	FUNC("windows", windows_fn, 0),
	STR("file", struct conf, stats_file, 0),
	DUR("interval", struct conf, stats_interval_us, 1),
};
static const struct conf_section stats_section = TABLE(stats_keys, NULL);

static const struct conf_key notify_keys[] = {
	FUNC("type", notify_type_fn, CONF_KF_REQUIRED),
	STR("url", struct conf_notify, url, 0),
	MAP("headers", struct conf_notify, headers, n_headers, CONF_KF_HEADER),
	DUR("timeout", struct conf_notify, timeout_us, 1),
	DUR("repeat_interval", struct conf_notify, repeat_interval_us, 1),
};
static const struct conf_section notify_section = TABLE(notify_keys, notify_check);

static const struct conf_key alerts_keys[] = {
	DUR("evaluate_every", struct conf, alerts_evaluate_every_us, 1),
	DUR("window", struct conf, alerts_window_us, 1),
	FLOAT("quantile", struct conf, alerts_quantile, 0, 1,
	    CONF_KF_OPEN_LO | CONF_KF_OPEN_HI),
	UINT("min_samples", struct conf, alerts_min_samples, 1, 1000000000),
	DUR("for", struct conf, alerts_for_us, 0),
	FLOAT("hysteresis", struct conf, alerts_hysteresis, 0, 1, CONF_KF_OPEN_HI),
	BOOL("per_tenant", struct conf, alerts_per_tenant),
	SECTION("thresholds", offsetof(struct conf, thresholds), thresholds_section),
	FUNC("notify", notify_fn, 0),
};
static const struct conf_section alerts_section = TABLE(alerts_keys, NULL);

static const struct conf_key match_keys[] = {
	STR("path_prefix", struct conf_route, match_path_prefix, 0),
	STR("host", struct conf_route, match_host, 0),
	MAP("header", struct conf_route, match_headers, n_match_headers, CONF_KF_HEADER),
};
static const struct conf_section match_section = TABLE(match_keys, match_check);

static const struct conf_key route_tls_keys[] = {
	BOOL("verify", struct conf_tls, verify),
	STR("ca_file", struct conf_tls, ca_file, 0),
	STR("sni", struct conf_tls, sni, 0),
	STR("client_cert", struct conf_tls, client_cert, 0),
	STR("client_key", struct conf_tls, client_key, 0),
};
static const struct conf_section route_tls_section = TABLE(route_tls_keys, route_tls_check);

static const struct conf_key route_keys[] = {
	STR("name", struct conf_route, name, CONF_KF_REQUIRED),
	SECTION("match", 0, match_section),
	FUNC("upstream", upstream_fn, CONF_KF_REQUIRED),
	FUNC("dialect", dialect_fn, 0),
	BOOL("strip_prefix", struct conf_route, strip_prefix),
	BOOL("preserve_host", struct conf_route, preserve_host),
	BOOL("request_buffering", struct conf_route, request_buffering),
	MAP("set_headers", struct conf_route, set_headers, n_set_headers, CONF_KF_HEADER),
	SECTION("tls", offsetof(struct conf_route, tls), route_tls_section),
	SECTION("thresholds", offsetof(struct conf_route, thresholds), thresholds_section),
	SECTION("timeouts", offsetof(struct conf_route, timeouts), timeouts_section),
};
static const struct conf_section route_section = TABLE(route_keys, NULL);

static const struct conf_key top_keys[] = {
	FUNC("listen", listen_fn, 0),
	SECTION("admin", 0, admin_section),
	FUNC("workers", workers_fn, 0),
	SECTION("timeouts", offsetof(struct conf, timeouts), timeouts_section),
	SECTION("limits", 0, limits_section),
	SECTION("tenant", 0, tenant_section),
	SECTION("models", 0, models_section),
	FUNC("routes", routes_fn, CONF_KF_LATE),
	STR("access_log", struct conf, access_log, 0),
	SECTION("stats", 0, stats_section),
	SECTION("alerts", 0, alerts_section),
};
const struct conf_section conf_top_section = TABLE(top_keys, NULL);
