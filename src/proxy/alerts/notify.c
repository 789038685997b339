/* SPDX-License-Identifier: Apache-2.0 */
#include "notify.h"

#include "promout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "alert_format.h"
#include "log.h"
#include "tls.h"
#include "url.h"
#include "util.h"

/* Re-sending to Alertmanager more often than this would only load it. */
#define MIN_REPEAT_US 1000000

/* Lines a receiver causes (a failure, a drop): a few a minute, then the
 * count of those left out (log.h). */
static struct log_limit delivery_lines = LOG_LIMIT_INIT("notify_delivery", 10, 60000);

/* Why an attempt failed (tokentap_notify_failures_total{reason}). */
enum reason { R_DEADLINE, R_TOO_LARGE, R_INVALID, R_CONNECTION, R_STATUS, R_N };
static const char *const reason_names[R_N] = {
	"deadline", "too_large", "invalid", "connection", "status"
};

struct delivery {
	struct delivery *next;
	char *body;
	size_t len;
	int attempts;
	char what[160];            /* names it in log lines */
};

struct notifier {
	struct notify_set *set;
	enum conf_notify_type type;
	char *url;                 /* as configured: the identity */
	char *label;               /* without credentials or query, for metrics */
	int https;
	char host[256];
	unsigned port;
	char *path;                /* request target */
	char *host_header;
	char *basic_auth;          /* "Basic ..." from user:pass@ in the URL */
	struct conf_kv *headers;
	size_t n_headers;
	uint64_t timeout_us;
	uint64_t repeat_us;

	struct delivery *head, *tail;
	size_t queued;
	int busy;
	struct evhttp_connection *conn;   /* the attempt in flight */
	struct evhttp_connection *spent;  /* a finished one, freed from the timer */
	int error;                 /* libevent's reason for the last failure, or -1 */
	struct event *timer;       /* the next attempt: now or after a backoff */
	struct event *deadline;    /* the attempt in flight ends here */
	struct event *repeat;      /* alertmanager: re-send the firing alerts */
	int keep;

	uint64_t sent;
	uint64_t dropped;
	uint64_t failures[R_N];    /* attempts, by reason */
};

/* A firing alert, kept to re-send to Alertmanager. */
struct firing {
	struct firing *next;
	struct alert_transition t;
	char route[128];
	char tenant[128];
	char slo[64];
};

struct notify_set {
	struct event_base *base;
	struct evdns_base *dns;
	SSL_CTX *ssl;
	struct notifier **v;
	size_t n;
	char instance[600];
	char generator_url[600];
	struct firing *firing;
};

static const char *const type_names[] = { "log", "webhook", "alertmanager" };

/* "firing TTFTHigh warning route=a tenant=t", for log lines about deliveries */
static void describe(const struct alert_transition *t, char *buf, size_t len)
{
	if (t->slo != NULL) {
		snprintf(buf, len, "%s SLOBurnRate %s slo=%s", t->firing ? "firing" : "resolved",
		    alert_severity_name(t->severity), t->slo);
		return;
	}
	snprintf(buf, len, "%s %s %s route=%s%s%s", t->firing ? "firing" : "resolved",
	    alert_name(t->metric), alert_severity_name(t->severity), t->route,
	    t->tenant ? " tenant=" : "", t->tenant ? t->tenant : "");
}

/* ---- delivery ----------------------------------------------------------- */

static void delivery_free(struct delivery *d)
{
	if (d == NULL)
		return;
	free(d->body);
	free(d);
}

static struct delivery *pop(struct notifier *n)
{
	struct delivery *d = n->head;
	if (d == NULL)
		return NULL;
	n->head = d->next;
	if (n->head == NULL)
		n->tail = NULL;
	n->queued--;
	return d;
}

/* Runs the timer at once unless a backoff is already waiting on it. */
static void kick(struct notifier *n)
{
	struct timeval now = { 0, 0 };
	if (!evtimer_pending(n->timer, NULL))
		evtimer_add(n->timer, &now);
}

static void drop_head(struct notifier *n, const char *why)
{
	struct delivery *d = pop(n);
	n->dropped++;
	log_limited(&delivery_lines, LOG_LVL_WARN, "notify: %s %s: dropped %s after %d "
	    "attempt(s): %s", type_names[n->type], n->label, d->what, d->attempts, why);
	delivery_free(d);
}

/* What libevent says went wrong, before it calls on_response without a
 * request. */
static void on_error(enum evhttp_request_error error, void *arg)
{
	((struct notifier *)arg)->error = (int)error;
}

/* The failure of an attempt that got no answer: its reason and words. */
static enum reason no_answer(const struct notifier *n, const char **why)
{
	switch (n->error) {
	case EVREQ_HTTP_TIMEOUT:
		*why = "no complete answer within the timeout";
		return R_DEADLINE;
	case EVREQ_HTTP_DATA_TOO_LONG:
		*why = "answer too large (a body over 64 KiB)";
		return R_TOO_LARGE;
	case EVREQ_HTTP_INVALID_HEADER:
		*why = "not an HTTP answer, a malformed one, or a head over 64 KiB";
		return R_INVALID;
	case EVREQ_HTTP_EOF:
		*why = "no response: closed before a complete answer, or TLS failed";
		return R_CONNECTION;
	default:
		*why = "no response: refused, reset or TLS failed";
		return R_CONNECTION;
	}
}

static void failed(struct notifier *n, struct delivery *d, const char *why);

static void on_response(struct evhttp_request *req, void *arg)
{
	struct notifier *n = arg;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	struct delivery *d = n->head;
	const char *what;
	char why[96];

	/* libevent still runs this connection's code after we return: it is
	 * freed later, from the timer. One spent before it that the timer has
	 * not freed yet (a new attempt began and ended first, on a busy host:
	 * seen leaked under ASan) is done with now. */
	if (n->conn != NULL) {
		if (n->spent != NULL)
			evhttp_connection_free(n->spent);
		n->spent = n->conn;
		n->conn = NULL;
	}
	n->busy = 0;
	evtimer_del(n->deadline);
	if (d == NULL)
		return;
	if (code >= 200 && code < 300) {
		n->sent++;
		delivery_free(pop(n));
		kick(n);
		return;
	}
	if (code == 0) {
		n->failures[no_answer(n, &what)]++;
		snprintf(why, sizeof why, "%s", what);
	} else {
		n->failures[R_STATUS]++;
		snprintf(why, sizeof why, "HTTP %d", code);
	}
	/* a 4xx other than 408 / 429 will not change on a retry */
	if (code >= 400 && code < 500 && code != 408 && code != 429) {
		drop_head(n, why);
		kick(n);
		return;
	}
	failed(n, d, why);
}

/* An attempt failed: tried again after a backoff, or dropped after the
 * last. */
static void failed(struct notifier *n, struct delivery *d, const char *why)
{
	uint64_t us = (uint64_t)NOTIFY_BACKOFF_US << (d->attempts - 1);
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };

	if (d->attempts >= NOTIFY_ATTEMPTS_MAX) {
		drop_head(n, why);
		kick(n);
		return;
	}
	/* the first failure says why; the drop will say it again */
	if (d->attempts == 1)
		log_limited(&delivery_lines, LOG_LVL_WARN, "notify: %s %s: %s; retrying",
		    type_names[n->type], n->label, why);
	evtimer_add(n->timer, &tv);
}

/* The attempt in flight took the notifier's timeout: it ends now,
 * whatever the receiver is still sending. Freeing the connection frees
 * the request without calling on_response. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct notifier *n = arg;
	char why[96];
	(void)fd;
	(void)what;
	if (!n->busy || n->conn == NULL || n->head == NULL)
		return;
	evhttp_connection_free(n->conn);
	n->conn = NULL;
	n->busy = 0;
	n->failures[R_DEADLINE]++;
	snprintf(why, sizeof why, "no complete answer within the timeout (%.3g s)",
	    (double)n->timeout_us / 1e6);
	failed(n, n->head, why);
}

static struct bufferevent *tls_bufferevent(struct notifier *n)
{
	struct bufferevent *bev;
	SSL *ssl = tls_client_ssl(n->set->ssl, n->host);

	if (ssl == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(n->set->base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

/* Starts the head delivery on a fresh connection: alerts are rare, and a
 * new connection never inherits a broken one's state. */
static void attempt(struct notifier *n)
{
	struct delivery *d = n->head;
	struct bufferevent *bev = NULL;
	struct evhttp_request *req;
	struct evkeyvalq *h;
	struct timeval tv = { (time_t)(n->timeout_us / 1000000),
		(suseconds_t)(n->timeout_us % 1000000) };

	d->attempts++;
	if (n->https && (n->set->ssl == NULL || (bev = tls_bufferevent(n)) == NULL))
		goto fail;
	n->conn = evhttp_connection_base_bufferevent_new(n->set->base, n->set->dns,
	    bev, n->host, (ev_uint16_t)n->port);
	if (n->conn == NULL) {
		if (bev != NULL)
			bufferevent_free(bev);
		goto fail;
	}
	evhttp_connection_set_timeout_tv(n->conn, &tv);
	/* what a receiver may send is bounded: the head and the body by
	 * libevent, and what waits unparsed (a line that never ends, a chunk
	 * size without its CRLF) by the buffer's high-water mark, past which
	 * nothing more is read until the deadline */
	evhttp_connection_set_max_headers_size(n->conn, NOTIFY_HEAD_MAX);
	evhttp_connection_set_max_body_size(n->conn, NOTIFY_BODY_MAX);
	bufferevent_setwatermark(evhttp_connection_get_bufferevent(n->conn), EV_READ, 0,
	    NOTIFY_HEAD_MAX + NOTIFY_BODY_MAX);
	req = evhttp_request_new(on_response, n);
	if (req == NULL)
		goto fail;
	evhttp_request_set_error_cb(req, on_error);
	n->error = -1;
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", n->host_header);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "User-Agent", "tokentap/" TOKENTAP_VERSION);
	evhttp_add_header(h, "Connection", "close");
	if (n->basic_auth != NULL)
		evhttp_add_header(h, "Authorization", n->basic_auth);
	for (size_t i = 0; i < n->n_headers; i++) {
		evhttp_remove_header(h, n->headers[i].name);
		evhttp_add_header(h, n->headers[i].name, n->headers[i].value);
	}
	evbuffer_add(evhttp_request_get_output_buffer(req), d->body, d->len);
	n->busy = 1;
	evtimer_add(n->deadline, &tv);
	/* on a failure libevent may already have called on_response */
	if (evhttp_make_request(n->conn, req, EVHTTP_REQ_POST, n->path) < 0 && n->busy)
		goto fail;
	return;
fail:
	n->busy = 0;
	evtimer_del(n->deadline);
	if (n->conn != NULL) {
		evhttp_connection_free(n->conn);
		n->conn = NULL;
	}
	if (d->attempts >= NOTIFY_ATTEMPTS_MAX) {
		drop_head(n, "cannot start a request");
		kick(n);
	} else {
		struct timeval back = { 0, NOTIFY_BACKOFF_US };
		evtimer_add(n->timer, &back);
	}
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct notifier *n = arg;
	(void)fd;
	(void)what;
	if (n->spent != NULL) {
		evhttp_connection_free(n->spent);
		n->spent = NULL;
	}
	if (!n->busy && n->head != NULL)
		attempt(n);
}

/* Queues body (taking it) for n, or drops it when the queue is full. */
static void enqueue(struct notifier *n, char *body, size_t len, const char *what)
{
	struct delivery *d;

	if (n->queued >= NOTIFY_QUEUE_MAX || (d = calloc(1, sizeof *d)) == NULL) {
		n->dropped++;
		log_limited(&delivery_lines, LOG_LVL_WARN, "notify: %s %s: queue full (%d), "
		    "dropped %s", type_names[n->type], n->label, NOTIFY_QUEUE_MAX, what);
		free(body);
		return;
	}
	d->body = body;
	d->len = len;
	snprintf(d->what, sizeof d->what, "%s", what);
	if (n->tail != NULL)
		n->tail->next = d;
	else
		n->head = d;
	n->tail = d;
	n->queued++;
	if (!n->busy)
		kick(n);
}

static char *take_string(struct evbuffer *b, size_t *len)
{
	char *s;
	*len = evbuffer_get_length(b);
	s = malloc(*len + 1);
	if (s != NULL) {
		evbuffer_remove(b, s, *len);
		s[*len] = '\0';
	}
	evbuffer_free(b);
	return s;
}

/* ---- Alertmanager's firing alerts --------------------------------------- */

static int same_alert(const struct alert_transition *a, const struct alert_transition *b)
{
	if (a->metric != b->metric || a->severity != b->severity)
		return 0;
	if (a->metric == ALERT_BURN_RATE)     /* one rule per SLO and pair */
		return strcmp(a->slo, b->slo) == 0 && a->window_us == b->window_us &&
		    a->short_window_us == b->short_window_us;
	if (strcmp(a->route, b->route) != 0)
		return 0;
	if (a->tenant == NULL || b->tenant == NULL)
		return a->tenant == b->tenant;
	return strcmp(a->tenant, b->tenant) == 0;
}

static void track_firing(struct notify_set *ns, const struct alert_transition *t)
{
	struct firing **pp = &ns->firing, *f;

	for (; *pp != NULL; pp = &(*pp)->next)
		if (same_alert(&(*pp)->t, t))
			break;
	if (*pp != NULL) {
		f = *pp;
		*pp = f->next;
		free(f);
	}
	if (!t->firing || (f = calloc(1, sizeof *f)) == NULL)
		return;
	f->t = *t;
	if (t->route != NULL) {
		snprintf(f->route, sizeof f->route, "%s", t->route);
		f->t.route = f->route;
	}
	if (t->slo != NULL) {
		snprintf(f->slo, sizeof f->slo, "%s", t->slo);
		f->t.slo = f->slo;
	}
	if (t->tenant != NULL) {
		snprintf(f->tenant, sizeof f->tenant, "%s", t->tenant);
		f->t.tenant = f->tenant;
	}
	f->next = ns->firing;
	ns->firing = f;
}

/* Alertmanager forgets an alert at endsAt: a firing one is given three
 * repeat intervals, and re-sent every one. */
static void send_alertmanager(struct notifier *n, const struct alert_transition *only)
{
	struct notify_set *ns = n->set;
	struct evbuffer *b = evbuffer_new();
	uint64_t now = util_wall_ms();
	uint64_t ends = now + 3 * (n->repeat_us / 1000);
	char what[160];
	size_t len, k = 0;
	char *body;

	if (b == NULL)
		return;
	evbuffer_add(b, "[", 1);
	for (const struct firing *f = ns->firing; only == NULL && f != NULL; f = f->next, k++) {
		if (k > 0)
			evbuffer_add(b, ",", 1);
		alert_format_alertmanager(b, &f->t, ns->instance, ns->generator_url, ends);
	}
	if (only != NULL)
		alert_format_alertmanager(b, only, ns->instance, ns->generator_url,
		    only->firing ? ends : only->ends_at_ms);
	evbuffer_add(b, "]", 1);
	if (only != NULL)
		describe(only, what, sizeof what);
	else
		snprintf(what, sizeof what, "re-send of %zu firing alert(s)", k);
	body = take_string(b, &len);
	if (body != NULL)
		enqueue(n, body, len, what);
}

static void on_repeat(evutil_socket_t fd, short what, void *arg)
{
	struct notifier *n = arg;
	(void)fd;
	(void)what;
	if (n->set->firing != NULL)
		send_alertmanager(n, NULL);
}

/* ---- notifiers ---------------------------------------------------------- */

static void notifier_free(struct notifier *n)
{
	struct delivery *d;
	if (n == NULL)
		return;
	/* frees the request in flight without calling on_response */
	if (n->conn != NULL)
		evhttp_connection_free(n->conn);
	if (n->spent != NULL)
		evhttp_connection_free(n->spent);
	if (n->timer != NULL)
		event_free(n->timer);
	if (n->deadline != NULL)
		event_free(n->deadline);
	if (n->repeat != NULL)
		event_free(n->repeat);
	if (n->queued > 0)
		log_warn("notify: %s %s stopped with %zu notification(s) undelivered",
		    type_names[n->type], n->label, n->queued);
	while ((d = pop(n)) != NULL)
		delivery_free(d);
	for (size_t i = 0; i < n->n_headers; i++) {
		free(n->headers[i].name);
		free(n->headers[i].value);
	}
	free(n->headers);
	free(n->url);
	free(n->label);
	free(n->path);
	free(n->host_header);
	free(n->basic_auth);
	free(n);
}

/* "Basic " and the base64 of user:password (RFC 7617). */
static char *basic_auth(const char *user, const char *password)
{
	char *pair, *out;
	int len = asprintf(&pair, "%s:%s", user, password != NULL ? password : "");

	if (len < 0)
		return NULL;
	out = malloc(6 + 4 * (((size_t)len + 2) / 3) + 1);
	if (out != NULL) {
		memcpy(out, "Basic ", 6);
		EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)pair, len);
	}
	free(pair);
	return out;
}

/* The request target: a webhook's path and query; Alertmanager's API
 * under the URL's path. */
static char *request_target(const struct notifier *n, const struct url *u)
{
	const char *q = u->query != NULL ? "?" : "", *query = u->query != NULL ? u->query : "";
	size_t pl = strlen(u->path);
	char *t;

	if (n->type != NOTIFY_ALERTMANAGER)
		return asprintf(&t, "%s%s%s", *u->path ? u->path : "/", q, query) < 0 ? NULL : t;
	while (pl > 0 && u->path[pl - 1] == '/')
		pl--;
	return asprintf(&t, "%.*s/api/v2/alerts%s%s", (int)pl, u->path, q, query) < 0 ? NULL : t;
}

/* Splits the URL (url.h; the config checked it) into what a request
 * needs. Returns 0 or -1. */
static int parse_url(struct notifier *n)
{
	struct url u;
	char auth[URL_HOST_LEN + 8];
	int ok;

	if (url_parse(n->url, &u) != NULL)
		return -1;
	n->https = u.tls;
	snprintf(n->host, sizeof n->host, "%s", u.host);
	n->port = u.port;
	url_authority(auth, sizeof auth, u.host, u.port, url_default_port(u.tls));
	n->host_header = strdup(auth);
	/* the label is the URL as written, its port too, without credentials
	 * or query */
	url_authority(auth, sizeof auth, u.host, u.port, u.port_given ? 0 : u.port);
	if (asprintf(&n->label, "%s://%s%s", u.tls ? "https" : "http", auth, u.path) < 0)
		n->label = NULL;
	n->path = request_target(n, &u);
	if (u.user != NULL)
		n->basic_auth = basic_auth(u.user, u.password);
	ok = n->host_header && n->label && n->path && (n->basic_auth || u.user == NULL);
	url_free(&u);
	return ok ? 0 : -1;
}

static int copy_headers(struct notifier *n, const struct conf_notify *cn)
{
	struct conf_kv *h = cn->n_headers ? calloc(cn->n_headers, sizeof *h) : NULL;
	if (cn->n_headers && h == NULL)
		return -1;
	for (size_t i = 0; i < cn->n_headers; i++) {
		h[i].name = strdup(cn->headers[i].name);
		h[i].value = strdup(cn->headers[i].value);
		if (h[i].name == NULL || h[i].value == NULL) {
			for (size_t j = 0; j <= i; j++) {
				free(h[j].name);
				free(h[j].value);
			}
			free(h);
			return -1;
		}
	}
	for (size_t i = 0; i < n->n_headers; i++) {
		free(n->headers[i].name);
		free(n->headers[i].value);
	}
	free(n->headers);
	n->headers = h;
	n->n_headers = cn->n_headers;
	return 0;
}

static void arm_repeat(struct notifier *n)
{
	struct timeval tv = { (time_t)(n->repeat_us / 1000000),
		(suseconds_t)(n->repeat_us % 1000000) };
	if (n->type == NOTIFY_ALERTMANAGER && n->repeat_us > 0)
		event_add(n->repeat, &tv);
}

/* Headers, timeout and repeat interval of a new or kept notifier. */
static int notifier_update(struct notifier *n, const struct conf_notify *cn)
{
	uint64_t repeat = n->repeat_us;
	if (copy_headers(n, cn) < 0)
		return -1;
	n->timeout_us = cn->timeout_us ? cn->timeout_us : 5000000;
	n->repeat_us = cn->repeat_interval_us < MIN_REPEAT_US ? MIN_REPEAT_US :
	    cn->repeat_interval_us;
	if (repeat != n->repeat_us)
		arm_repeat(n);
	return 0;
}

static struct notifier *notifier_new(struct notify_set *ns, const struct conf_notify *cn)
{
	struct notifier *n = calloc(1, sizeof *n);
	if (n == NULL)
		return NULL;
	n->set = ns;
	n->type = cn->type;
	n->url = strdup(cn->url);
	n->error = -1;
	n->timer = evtimer_new(ns->base, on_timer, n);
	n->deadline = evtimer_new(ns->base, on_deadline, n);
	n->repeat = event_new(ns->base, -1, EV_PERSIST, on_repeat, n);
	if (n->url == NULL || n->timer == NULL || n->deadline == NULL || n->repeat == NULL ||
	    parse_url(n) < 0 || (n->https && ns->ssl == NULL) ||
	    notifier_update(n, cn) < 0) {
		log_error("notify: %s %s: cannot set up this notifier", type_names[cn->type],
		    cn->url);
		notifier_free(n);
		return NULL;
	}
	return n;
}

static struct notifier *take_kept(struct notify_set *ns, const struct conf_notify *cn)
{
	for (size_t i = 0; i < ns->n; i++) {
		struct notifier *n = ns->v[i];
		if (!n->keep && n->type == cn->type && strcmp(n->url, cn->url) == 0) {
			n->keep = 1;
			return n;
		}
	}
	return NULL;
}

/* What notifiers need once, made on first use: DNS that does not block
 * the loop, and TLS verified against the system store. */
static int shared_setup(struct notify_set *ns, const struct conf *c)
{
	int tls = 0;
	for (size_t i = 0; i < c->n_notify; i++)
		tls |= c->notify[i].url != NULL && strncasecmp(c->notify[i].url, "https:", 6) == 0;
	if (ns->dns == NULL && c->n_notify > 0) {
		ns->dns = evdns_base_new(ns->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
		if (ns->dns == NULL)
			log_warn("notify: no DNS resolver; use IP addresses in notifier URLs");
	}
	if (tls && ns->ssl == NULL) {
		ns->ssl = tls_client_ctx_new();
		if (ns->ssl == NULL) {
			log_error("notify: cannot set up TLS");
			return -1;
		}
	}
	return 0;
}

static void describe_instance(struct notify_set *ns, const struct conf *c)
{
	char host[256];
	const char *ah = c->admin_host;

	if (gethostname(host, sizeof host) != 0)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = '\0';
	snprintf(ns->instance, sizeof ns->instance, "%s/%s", host,
	    c->n_listen ? c->listen[0].address : "-");
	if (ah[0] == '\0' || strcmp(ah, "0.0.0.0") == 0 || strcmp(ah, "::") == 0)
		snprintf(ns->generator_url, sizeof ns->generator_url,
		    "http://%s:%u/alerts", host, c->admin_port);
	else
		snprintf(ns->generator_url, sizeof ns->generator_url, "http://%s/alerts",
		    c->admin_address);
}

struct notify_set *notify_new(struct event_base *base)
{
	struct notify_set *ns = calloc(1, sizeof *ns);
	if (ns == NULL)
		return NULL;
	ns->base = base;
	snprintf(ns->instance, sizeof ns->instance, "-");
	return ns;
}

int notify_configure(struct notify_set *ns, const struct conf *c)
{
	struct notifier **v = calloc(c->n_notify + 1, sizeof *v);
	size_t nv = 0;
	int rc = 0;

	if (v == NULL)
		return -1;
	describe_instance(ns, c);
	if (shared_setup(ns, c) < 0)
		rc = -1;
	for (size_t i = 0; i < ns->n; i++)
		ns->v[i]->keep = 0;
	for (size_t i = 0; i < c->n_notify; i++) {
		const struct conf_notify *cn = &c->notify[i];
		struct notifier *n;
		if (cn->type == NOTIFY_LOG)
			continue;
		if ((n = take_kept(ns, cn)) != NULL) {
			if (notifier_update(n, cn) < 0)
				rc = -1;
		} else if ((n = notifier_new(ns, cn)) == NULL) {
			rc = -1;
			continue;
		}
		n->keep = 1;
		v[nv++] = n;
	}
	for (size_t i = 0; i < ns->n; i++)
		if (!ns->v[i]->keep)
			notifier_free(ns->v[i]);
	free(ns->v);
	ns->v = v;
	ns->n = nv;
	return rc;
}

void notify_transition(struct notify_set *ns, const struct alert_transition *t)
{
	char line[1024], what[160];

	alert_format_log(t, line, sizeof line);
	if (t->severity == ALERT_CRITICAL)
		log_error("%s", line);
	else
		log_warn("%s", line);
	track_firing(ns, t);
	describe(t, what, sizeof what);
	for (size_t i = 0; i < ns->n; i++) {
		struct notifier *n = ns->v[i];
		if (n->type == NOTIFY_ALERTMANAGER) {
			send_alertmanager(n, t);
		} else {
			struct evbuffer *b = evbuffer_new();
			size_t len;
			char *body;
			if (b == NULL)
				continue;
			alert_format_webhook(b, t, ns->instance);
			body = take_string(b, &len);
			if (body != NULL)
				enqueue(n, body, len, what);
		}
	}
}

static void prom_counter(const struct notify_set *ns, struct promout *out,
    const char *name, const char *help, int dropped)
{
	promout_family(out, name, help, PROMPROTO_COUNTER);
	for (size_t i = 0; i < ns->n; i++) {
		const struct notifier *n = ns->v[i];
		struct promout_labels l = { .n = 0 };
		promout_label(&l, "notifier", type_names[n->type]);
		promout_label(&l, "url", n->label);
		promout_sample(out, &l, (double)(dropped ? n->dropped : n->sent));
	}
}

void notify_prometheus(const struct notify_set *ns, struct promout *out)
{
	struct promout_labels l = { .n = 0 };

	/* the rules of --prometheus-rules name each scraped target by it, so
	 * that Alertmanager sees one alert from either path (alert_rules.h) */
	promout_family(out, "tokentap_alert_instance_info", "The instance label of the "
	    "alerts this tokentap sends (host name/first listen address).", PROMPROTO_GAUGE);
	promout_label(&l, "alert_instance", ns->instance);
	promout_sample(out, &l, 1);
	if (ns->n == 0)
		return;
	prom_counter(ns, out, "tokentap_notify_sent_total",
	    "Alert notifications delivered, per notifier.", 0);
	prom_counter(ns, out, "tokentap_notify_dropped_total",
	    "Alert notifications given up: queue full or retries exhausted.", 1);
	promout_family(out, "tokentap_notify_failures_total", "Alert notification "
	    "attempts that failed, per notifier and reason: deadline (no complete answer "
	    "within the timeout), too_large (a body over 64 KiB), invalid (not "
	    "HTTP, malformed, or a head over 64 KiB), connection (refused, reset, "
	    "closed early, TLS), status (not 2xx).",
	    PROMPROTO_COUNTER);
	for (size_t i = 0; i < ns->n; i++) {
		const struct notifier *n = ns->v[i];
		for (int r = 0; r < R_N; r++) {
			l.n = 0;
			promout_label(&l, "notifier", type_names[n->type]);
			promout_label(&l, "url", n->label);
			promout_label(&l, "reason", reason_names[r]);
			promout_sample(out, &l, (double)n->failures[r]);
		}
	}
}

void notify_free(struct notify_set *ns)
{
	struct firing *f;
	if (ns == NULL)
		return;
	for (size_t i = 0; i < ns->n; i++)
		notifier_free(ns->v[i]);
	free(ns->v);
	while ((f = ns->firing) != NULL) {
		ns->firing = f->next;
		free(f);
	}
	if (ns->dns != NULL)
		evdns_base_free(ns->dns, 0);
	if (ns->ssl != NULL)
		SSL_CTX_free(ns->ssl);
	free(ns);
}
