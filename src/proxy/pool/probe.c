/* SPDX-License-Identifier: Apache-2.0 */
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "tls.h"
#include "pool.h"
#include "url.h"

struct probe {
	struct probe *next, **prev;  /* every probe on its way */
	struct conf *conf;           /* its route's TLS context lives in it */
	struct replica *rep;
	struct bufferevent *bev;
	struct event *finish;        /* done is called from here, once */
	struct event *deadline;      /* health.timeout from the start, in all */
	int ok, concluded;
	char why[128];
	void (*done)(void *arg, struct replica *rep, int ok, const char *why);
	void *arg;
};

static struct probe *probes;

static void probe_free(struct probe *p)
{
	if (p->prev != NULL) {
		*p->prev = p->next;
		if (p->next != NULL)
			p->next->prev = p->prev;
	}
	if (p->bev != NULL)
		bufferevent_free(p->bev);
	if (p->finish != NULL)
		event_free(p->finish);
	if (p->deadline != NULL)
		event_free(p->deadline);
	pool_replica_unref(p->rep);
	conf_unref(p->conf);
	free(p);
}

static void finished(evutil_socket_t fd, short what, void *arg)
{
	struct probe *p = arg;
	(void)fd;
	(void)what;
	p->done(p->arg, p->rep, p->ok, p->why);
	probe_free(p);
}

/* The verdict, delivered after the callback that found it returns. */
static void conclude(struct probe *p, int ok, const char *why)
{
	if (p->concluded++)
		return;
	if (p->deadline != NULL)
		event_del(p->deadline);
	if (p->bev != NULL)
		bufferevent_disable(p->bev, EV_READ | EV_WRITE);
	p->ok = ok;
	snprintf(p->why, sizeof p->why, "%s", why);
	event_active(p->finish, EV_TIMEOUT, 1);
}

/* The status line is all a check reads: "HTTP/1.x 2xx ...". */
static void probe_read(struct bufferevent *bev, void *arg)
{
	struct probe *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);
	const char *line = (const char *)evbuffer_pullup(in, (ev_ssize_t)(n < 64 ? n : 64));
	char why[64];

	if (n < 12 && evbuffer_search(in, "\n", 1, NULL).pos < 0)
		return;
	if (line == NULL || n < 12 || strncmp(line, "HTTP/1.", 7) != 0) {
		conclude(p, 0, "not an HTTP response");
		return;
	}
	if (line[9] == '2') {
		conclude(p, 1, "");
		return;
	}
	snprintf(why, sizeof why, "status %.3s", line + 9);
	conclude(p, 0, why);
}

/* A replica that trickles its status line a byte at a time is as late
 * as one that says nothing. */
static void probe_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conclude(arg, 0, "timed out");
}

static void probe_event(struct bufferevent *bev, short what, void *arg)
{
	struct probe *p = arg;
	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	conclude(p, 0, what & BEV_EVENT_TIMEOUT ? "timed out" :
	    what & BEV_EVENT_EOF ? "closed before answering" : "cannot connect");
}

void probe_stop_all(void)
{
	while (probes != NULL) {
		probes->ok = -1;
		snprintf(probes->why, sizeof probes->why, "stopped");
		finished(-1, 0, probes);
	}
}

int probe_start(struct event_base *base, struct evdns_base *dns, struct conf *c,
    const struct conf_route *r, struct replica *rep,
    void (*done)(void *arg, struct replica *rep, int ok, const char *why), void *arg)
{
	struct probe *p = calloc(1, sizeof *p);
	struct timeval tv = { (time_t)(r->health.timeout_us / 1000000),
	    (suseconds_t)(r->health.timeout_us % 1000000) };
	char host[URL_HOST_LEN + 16];
	int hl;

	if (p == NULL)
		return -1;
	p->conf = conf_ref(c);
	p->rep = rep;
	pool_replica_ref(rep);
	p->done = done;
	p->arg = arg;
	p->next = probes;
	if (probes != NULL)
		probes->prev = &p->next;
	p->prev = &probes;
	probes = p;
	p->finish = event_new(base, -1, 0, finished, p);
	p->deadline = evtimer_new(base, probe_deadline, p);
	if (rep->target.tls && r->tls_ctx != NULL) {
		SSL *ssl = tls_client_ssl(r->tls_ctx, r->tls.sni ? r->tls.sni : rep->target.host);
		p->bev = ssl == NULL ? NULL : bufferevent_openssl_socket_new(base, -1, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (p->bev == NULL)
			SSL_free(ssl);
		else
			bufferevent_openssl_set_allow_dirty_shutdown(p->bev, 1);
	} else if (!rep->target.tls) {
		p->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (p->finish == NULL || p->deadline == NULL || p->bev == NULL) {
		probe_free(p);
		return -1;
	}
	hl = url_authority(host, sizeof host, rep->target.host, rep->target.port,
	    url_default_port(rep->target.tls));
	evbuffer_add_printf(bufferevent_get_output(p->bev),
	    "GET %s%s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: tokentap-health\r\n"
	    "Connection: close\r\n\r\n", rep->target.base, r->health.path,
	    hl > 0 ? hl : 0, host);
	bufferevent_setcb(p->bev, probe_read, NULL, probe_event, p);
	bufferevent_set_timeouts(p->bev, &tv, &tv);
	evtimer_add(p->deadline, &tv);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	if (pool_dial(p->bev, dns, rep) < 0)
		conclude(p, 0, "cannot connect");
	return 0;
}
