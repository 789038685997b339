/* SPDX-License-Identifier: Apache-2.0 */
#include "admin.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "alertd.h"
#include "historyd.h"
#include "jsonw.h"
#include "log.h"
#include "net.h"
#include "otel.h"
#include "procmetrics.h"
#include "promout.h"
#include "slod.h"
#include "poold.h"
#include "stats.h"
#include "ui.h"
#include "util.h"
#include "yconf.h"

/* An admin request's head (a scraper's is a few hundred bytes) and body. */
#define ADMIN_HEAD_MAX (16 * 1024)
#define ADMIN_BODY_MAX 1024

static struct event_base *admin_base;
static struct evhttp *http;
static struct conf *admin_conf;
static char bound_address[300];
static int draining;

static void reply(struct evhttp_request *req, int code, const char *type,
    const char *body)
{
	struct evbuffer *b = evbuffer_new();
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evbuffer_add(b, body, strlen(body));
	evhttp_send_reply(req, code, net_reason((unsigned)code), b);
	evbuffer_free(b);
}

static void send_buffer(struct evhttp_request *req, const char *type,
    struct evbuffer *b)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evhttp_send_reply(req, 200, net_reason(200), b);
	evbuffer_free(b);
}

/* *b gzipped in its place when the client takes gzip (a large document
 * is mostly repeated names); -1: no memory, answered 500 and freed. */
static int send_gzipped(struct evhttp_request *req, struct evbuffer **b)
{
	const struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	struct evbuffer *z;

	if (!promout_accepts_gzip(evhttp_find_header(h, "Accept-Encoding")) ||
	    (z = evbuffer_new()) == NULL)
		return 0;
	if (promout_gzip(*b, z) < 0) {
		evbuffer_free(z);
		evbuffer_free(*b);
		evhttp_send_error(req, 500, NULL);
		return -1;
	}
	evbuffer_free(*b);
	*b = z;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Encoding", "gzip");
	return 0;
}

static void bad_query(struct evhttp_request *req, const char *what)
{
	char body[1024], valid[512];
	size_t n = 0;
	valid[0] = '\0';
	if (strcmp(what, "window") == 0) {
		for (size_t i = 0; i < admin_conf->n_stats_windows; i++) {
			char w[32];
			util_duration_text(admin_conf->stats_windows_us[i], w, sizeof w);
			n += (size_t)snprintf(valid + n, sizeof valid - n, "%s%s",
			    i ? ", " : "", w);
			if (n >= sizeof valid)
				break;
		}
	} else if (strcmp(what, "limit") == 0) {
		snprintf(valid, sizeof valid, "1 to %d", STATS_ROWS_MAX);
	} else if (strcmp(what, "offset") == 0) {
		snprintf(valid, sizeof valid, "0 or more");
	} else {
		snprintf(valid, sizeof valid, "route, tenant, model, upstream");
	}
	snprintf(body, sizeof body, "{\"error\":{\"type\":\"bad_request\","
	    "\"message\":\"unknown %s; valid: %s\"}}\n", what, valid);
	reply(req, 400, "application/json", body);
}

/* by=route,tenant,model: the groups are keyed by exactly the fields asked
 * (docs/contract.md §5: by=tenant sums a tenant over its routes); route when
 * absent. */
static int parse_by(const char *v, unsigned *by)
{
	char buf[128], *save = NULL;
	*by = BY_ROUTE;
	if (v == NULL)
		return 0;
	*by = 0;
	snprintf(buf, sizeof buf, "%s", v);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "route") == 0)
			*by |= BY_ROUTE;
		else if (strcmp(t, "tenant") == 0)
			*by |= BY_TENANT;
		else if (strcmp(t, "model") == 0)
			*by |= BY_MODEL;
		else if (strcmp(t, "upstream") == 0)
			*by |= BY_UPSTREAM;
		else
			return -1;
	}
	return *by != 0 ? 0 : -1;
}

/* A count of the query: absent, the default; digits only, within [lo, hi]. */
static int parse_count(const char *v, size_t lo, size_t hi, size_t *out)
{
	uint64_t n;

	if (v == NULL)
		return 0;
	if (yconf_parse_uint(v, &n) < 0 || n < lo || n > hi)
		return -1;
	*out = (size_t)n;
	return 0;
}

static void serve_stats(struct evhttp_request *req, const struct evhttp_uri *uri)
{
	struct evkeyvalq q;
	const char *query = evhttp_uri_get_query(uri);
	const char *wv, *bv;
	int wi = 0;
	unsigned by;
	size_t offset = 0, limit = STATS_ROWS_DEFAULT;
	struct evbuffer *b;

	TAILQ_INIT(&q);
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
		bad_query(req, "window");
		return;
	}
	wv = evhttp_find_header(&q, "window");
	bv = evhttp_find_header(&q, "by");
	if (wv != NULL && (wi = stats_window_index(wv)) < 0) {
		evhttp_clear_headers(&q);
		bad_query(req, "window");
		return;
	}
	if (parse_by(bv, &by) < 0) {
		evhttp_clear_headers(&q);
		bad_query(req, "by");
		return;
	}
	/* the rows are paged: the answer, and the main thread's work for it,
	 * are bounded by limit whatever the groups (100,000 took 7.6 s and
	 * 85 MB in one answer) */
	if (parse_count(evhttp_find_header(&q, "limit"), 1, STATS_ROWS_MAX, &limit) < 0) {
		evhttp_clear_headers(&q);
		bad_query(req, "limit");
		return;
	}
	if (parse_count(evhttp_find_header(&q, "offset"), 0, SIZE_MAX, &offset) < 0) {
		evhttp_clear_headers(&q);
		bad_query(req, "offset");
		return;
	}
	evhttp_clear_headers(&q);
	stats_drain();
	b = evbuffer_new();
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	stats_json(b, wi, by, offset, limit);
	send_buffer(req, "application/json", b);
}

/* GET /stats/history: answered a slice at a time (historyd.h), gzipped
 * when the client takes it (a browser does); a wrong parameter is a 400. */
static void serve_history(struct evhttp_request *req, const struct evhttp_uri *uri)
{
	const struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	char why[256], body[512];

	if (historyd_serve(req, evhttp_uri_get_query(uri),
	    promout_accepts_gzip(evhttp_find_header(h, "Accept-Encoding")), why,
	    sizeof why) < 0) {
		jsonw_sanitize(why, '?');
		snprintf(body, sizeof body, "{\"error\":{\"type\":\"bad_request\","
		    "\"message\":\"%s\"}}\n", why);
		reply(req, 400, "application/json", body);
	}
}

void admin_series(struct promout *o)
{
	stats_drain();
	stats_prometheus(o);
	poold_prometheus(o);
	slod_prometheus(o);
	alertd_prometheus(o);
	otel_prometheus(o);
	procmetrics_logs(o);
	procmetrics_write(o);
}

/* The format the scraper asked for (protobuf brings native histograms),
 * gzipped when it takes gzip (a scrape of many series is mostly labels). */
static void serve_metrics(struct evhttp_request *req)
{
	const struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	int proto = promout_wants_protobuf(evhttp_find_header(h, "Accept"));
	struct evbuffer *b = evbuffer_new();
	struct promout *o = b ? promout_new(b, proto) : NULL;

	if (o == NULL) {
		if (b != NULL)
			evbuffer_free(b);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	admin_series(o);
	if (promout_finish(o) < 0) {
		evbuffer_free(b);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	if (send_gzipped(req, &b) < 0)
		return;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Vary",
	    "Accept, Accept-Encoding");
	send_buffer(req, proto ? PROMOUT_PROTO_TYPE : PROMOUT_TEXT_TYPE, b);
}

/* A JSON document of what the statistics hold now. */
static void serve_json(struct evhttp_request *req, void (*write)(struct evbuffer *out))
{
	struct evbuffer *b = evbuffer_new();
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	stats_drain();
	write(b);
	send_buffer(req, "application/json", b);
}

/* Every path but /healthz needs "Authorization: Bearer <token>" when a
 * token is configured; compared in constant time. */
static int authorized(struct evhttp_request *req)
{
	const char *h;
	const char *tok = admin_conf->admin_token;

	if (tok == NULL)
		return 1;
	h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
		return 0;
	return util_ct_equal(h + 7, strlen(h + 7), tok, strlen(tok));
}

static void on_request(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	(void)arg;

	if (path == NULL)
		path = "/";
	if (strcmp(path, "/healthz") == 0) {
		if (draining)
			reply(req, 503, "text/plain", "draining\n");
		else
			reply(req, 200, "text/plain", "ok\n");
		return;
	}
	/* The page holds no data; what it reads needs the token (ui.h). */
	if (strcmp(path, "/ui") == 0 || strcmp(path, "/ui/") == 0) {
		ui_serve_page(req);
		return;
	}
	if (!authorized(req)) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "WWW-Authenticate", "Bearer");
		reply(req, 401, "application/json",
		    "{\"error\":{\"type\":\"unauthorized\",\"message\":\"admin token required\"}}\n");
		return;
	}
	if (strcmp(path, "/stats") == 0) {
		serve_stats(req, uri);
		return;
	}
	if (strcmp(path, "/stats/history") == 0) {
		serve_history(req, uri);
		return;
	}
	if (strcmp(path, "/alerts") == 0) {
		serve_json(req, alertd_json);
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		serve_metrics(req);
		return;
	}
	if (strcmp(path, "/slo") == 0) {
		serve_json(req, slod_json);
		return;
	}
	if (strcmp(path, "/ui/config.json") == 0) {
		ui_serve_config(req, admin_conf);
		return;
	}
	reply(req, 404, "application/json",
	    "{\"error\":{\"type\":\"not_found\",\"message\":\"unknown admin path\"}}\n");
}

static int bind_admin(struct conf *c)
{
	struct evhttp *h = evhttp_new(admin_base);
	if (h == NULL)
		return -1;
	evhttp_set_gencb(h, on_request, NULL);
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	/* bounds an admin client cannot push past, token or not (it is checked
	 * once the head is in, so the head is kept small): the head, a body
	 * no GET needs, and a connection that sends nothing or too slowly */
	evhttp_set_max_headers_size(h, ADMIN_HEAD_MAX);
	evhttp_set_max_body_size(h, ADMIN_BODY_MAX);
	evhttp_set_timeout(h, (int)((c->timeouts.client_header_us + 999999) / 1000000));
	if (evhttp_bind_socket(h, c->admin_host[0] ? c->admin_host : "0.0.0.0",
	    (ev_uint16_t)c->admin_port) != 0) {
		log_error("admin: cannot listen on %s", c->admin_address);
		evhttp_free(h);
		return -1;
	}
	if (http != NULL) {
		historyd_cancel();      /* their requests go with the server */
		evhttp_free(http);
	}
	http = h;
	snprintf(bound_address, sizeof bound_address, "%s", c->admin_address);
	return 0;
}

int admin_start(struct event_base *base, struct conf *c)
{
	admin_base = base;
	admin_conf = conf_ref(c);
	return bind_admin(c);
}

int admin_reload(struct conf *c)
{
	if (strcmp(bound_address, c->admin_address) != 0 && bind_admin(c) < 0)
		return -1;
	conf_unref(admin_conf);
	admin_conf = conf_ref(c);
	return 0;
}

void admin_set_draining(void)
{
	draining = 1;
}

void admin_stop(void)
{
	historyd_cancel();
	if (http != NULL)
		evhttp_free(http);
	http = NULL;
	if (admin_conf != NULL)
		conf_unref(admin_conf);
	admin_conf = NULL;
}
