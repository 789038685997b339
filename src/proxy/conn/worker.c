/* SPDX-License-Identifier: Apache-2.0 */
#include "worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "log.h"
#include "net.h"
#include "pool.h"
#include "proxy.h"
#include "rng.h"
#include "gauge.h"
#include "ring.h"
#include "upstream.h"
#include "util.h"


static struct worker **workers;
static int n_workers;

/* ---- listeners ---------------------------------------------------------- */

/* A listener's callback argument: its worker and its place in listen[],
 * so a reload's new certificate is used for the next handshake. */
struct listen_ref {
	struct worker *w;
	size_t idx;
};

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct listen_ref *lr = arg;
	const struct conf *c = lr->w->loop.conf;
	(void)l;
	proxy_accept(&lr->w->loop, fd, sa, socklen,
	    lr->idx < c->n_listen ? c->listen[lr->idx].tls_ctx : NULL);
}

static void listen_retry(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	(void)fd;
	(void)what;
	for (size_t i = 0; i < w->n_listeners; i++)
		if (w->listeners[i] != NULL)
			evconnlistener_enable(w->listeners[i]);
}

/* Out of descriptors or memory: this listener stops for a moment
 * (listen_retry enables them all again) rather than spin on a socket that
 * stays readable. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
	struct worker *w = ((struct listen_ref *)arg)->w;
	int err = EVUTIL_SOCKET_ERROR();

	if (net_accept_pause(w->listen_retry, err)) {
		evconnlistener_disable(l);
		return;
	}
	log_limited(&net_accept_log, LOG_LVL_WARN, "accept: %s", strerror(err));
}

static int listen_all(struct worker *w, const struct conf *c)
{
	w->listeners = calloc(c->n_listen, sizeof *w->listeners);
	w->lrefs = calloc(c->n_listen, sizeof *w->lrefs);
	if (w->listeners == NULL || w->lrefs == NULL)
		return -1;
	w->n_listeners = c->n_listen;
	for (size_t i = 0; i < c->n_listen; i++) {
		char what[300];
		evutil_socket_t fd;
		/* every worker its own socket on each address (SO_REUSEPORT) */
		snprintf(what, sizeof what, "listen %s", c->listen[i].address);
		fd = net_listen(c->listen[i].host, c->listen[i].port, 1,
		    (int)c->listen[i].backlog, what);
		if (fd < 0)
			return -1;
		/* accepted sockets inherit it, and a request's first segment,
		 * queued before accept(2), is stamped too */
		if (c->timestamps == TIMESTAMPS_KERNEL)
			rxtime_enable(fd);
		w->lrefs[i].w = w;
		w->lrefs[i].idx = i;
		/* backlog 0: the socket listens already (-1 would listen(2)
		 * again, at libevent's 128) */
		w->listeners[i] = evconnlistener_new(w->loop.base, on_accept, &w->lrefs[i],
		    LEV_OPT_CLOSE_ON_FREE, 0, fd);
		if (w->listeners[i] == NULL) {
			close(fd);
			return -1;
		}
		evconnlistener_set_error_cb(w->listeners[i], on_accept_error);
	}
	return 0;
}

static void close_listeners(struct worker *w)
{
	for (size_t i = 0; i < w->n_listeners; i++)
		if (w->listeners[i] != NULL)
			evconnlistener_free(w->listeners[i]);
	free(w->listeners);
	free(w->lrefs);
	w->listeners = NULL;
	w->lrefs = NULL;
	w->n_listeners = 0;
}

/* ---- the sweep ---------------------------------------------------------- */

/* How often the open streams are looked at for stalls and token_idle:
 * coarse, so that detection costs the per-event path nothing. */
#define SWEEP_US 250000

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	(void)fd;
	(void)what;
	proxy_sweep(&w->loop, util_now_us());
}

/* ---- commands from the main thread ------------------------------------ */

static void on_command(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct conf *c;
	int drain, stop;
	uint64_t n;
	(void)what;

	if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
		log_warn("worker %d: command channel: %s", w->id, strerror(errno));
	pthread_mutex_lock(&w->cmd_lock);
	c = w->cmd_conf;
	w->cmd_conf = NULL;
	drain = w->cmd_drain;
	stop = w->cmd_stop;
	pthread_mutex_unlock(&w->cmd_lock);

	if (c != NULL) {
		/* exchanges in flight keep their own reference to the old one */
		conf_unref(w->loop.conf);
		w->loop.conf = c;
	}
	if (stop) {
		proxy_close_all(&w->loop);
		event_base_loopexit(w->loop.base, NULL);
		return;
	}
	if (drain && !w->loop.draining) {
		w->loop.draining = 1;
		close_listeners(w);
		proxy_drain(&w->loop);
		loop_idle_check(&w->loop);
	}
}

static void send_command(struct worker *w, struct conf *c, int drain, int stop)
{
	pthread_mutex_lock(&w->cmd_lock);
	if (c != NULL) {
		if (w->cmd_conf != NULL)
			conf_unref(w->cmd_conf);
		w->cmd_conf = conf_ref(c);
	}
	w->cmd_drain |= drain;
	w->cmd_stop |= stop;
	pthread_mutex_unlock(&w->cmd_lock);
	/* an eventfd wakes the worker: its event_base has no lock to take */
	if (write(w->cmd_fd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0)
		log_warn("worker %d: command channel: %s", w->id, strerror(errno));
}

/* ---- life cycle --------------------------------------------------------- */

static void worker_free(struct worker *w)
{
	proxy_close_all(&w->loop);
	upstream_free_all(&w->loop);
	pool_views_free(&w->loop.pool_views);
	close_listeners(w);
	if (w->listen_retry != NULL)
		event_free(w->listen_retry);
	if (w->sweep != NULL)
		event_free(w->sweep);
	if (w->cmd_ev != NULL)
		event_free(w->cmd_ev);
	if (w->cmd_fd >= 0)
		close(w->cmd_fd);
	if (w->loop.dns != NULL)
		evdns_base_free(w->loop.dns, 0);
	if (w->cmd_conf != NULL)
		conf_unref(w->cmd_conf);
	if (w->loop.conf != NULL)
		conf_unref(w->loop.conf);
	if (w->loop.base != NULL)
		event_base_free(w->loop.base);
	pthread_mutex_destroy(&w->cmd_lock);
	if (w->loop.urg_ep >= 0)
		close(w->loop.urg_ep);
	free(w->loop.rbuf);
	free(w);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	event_base_loop(w->loop.base, EVLOOP_NO_EXIT_ON_EMPTY);
	proxy_close_all(&w->loop);
	atomic_store(&w->done, 1);
	return NULL;
}

/* Only its own thread touches a worker's event_base (commands come
 * through an eventfd), so it needs no lock: libevent would otherwise take
 * a mutex around every event operation. The changelist folds one loop
 * turn's epoll changes per socket into one epoll_ctl (an upstream handed
 * back to the pool swaps one read event for another); it misbehaves only
 * with dup()ed sockets, which tokentap never makes. The time cache stays:
 * with it a turn reads the clock once; without it (NO_CACHE_TIME) twice,
 * for the next timeout and for the expiry, as the timer heap always holds
 * some session's timer (docs/benchmarks.md, "libevent's share").
 *
 * Priorities (loop.h): a turn runs the most urgent events ready; and every
 * LOOP_NORMAL_BURST normal reads the loop's urgent set is asked (urg_ep),
 * so that a first token that came meanwhile is read before the rest of a
 * long turn (a worker behind has hundreds of streams ready at once). */
static struct event_base *base_new(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (cfg == NULL)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK |
	    EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base != NULL && event_base_priority_init(base, LOOP_PRIORITIES) != 0) {
		event_base_free(base);
		return NULL;
	}
	return base;
}

static struct worker *worker_new(int id, struct conf *c)
{
	struct worker *w = calloc(1, sizeof *w);

	if (w == NULL)
		return NULL;
	w->id = id;
	w->cmd_fd = -1;
	pthread_mutex_init(&w->cmd_lock, NULL);
	TAILQ_INIT(&w->loop.sessions);
	TAILQ_INIT(&w->loop.urgent);
	w->loop.conf = conf_ref(c);
	w->loop.rng = rng_seed();
	w->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	/* read_order: even puts no socket in it (its reads stay LOOP_NORMAL) */
	w->loop.urg_ep = epoll_create1(EPOLL_CLOEXEC);
	w->loop.base = base_new();
	w->loop.stats = ring_new();
	w->loop.rbuf = malloc(LOOP_READ_MAX);
	if (w->loop.base == NULL || w->loop.stats == NULL || w->loop.rbuf == NULL)
		goto fail;
	w->loop.dns = evdns_base_new(w->loop.base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (w->loop.dns == NULL) {
		/* no resolv.conf: names from /etc/hosts and IP literals still work */
		w->loop.dns = evdns_base_new(w->loop.base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
		if (w->loop.dns != NULL)
			evdns_base_load_hosts(w->loop.dns, NULL);
	}
	w->cmd_ev = w->cmd_fd < 0 ? NULL :
	    event_new(w->loop.base, w->cmd_fd, EV_READ | EV_PERSIST, on_command, w);
	if (w->cmd_ev != NULL)
		event_add(w->cmd_ev, NULL);
	w->listen_retry = evtimer_new(w->loop.base, listen_retry, w);
	w->sweep = event_new(w->loop.base, -1, EV_PERSIST, on_sweep, w);
	if (w->sweep != NULL)
		event_add(w->sweep, &(struct timeval){ 0, SWEEP_US });
	if (w->loop.dns == NULL || w->cmd_ev == NULL || w->listen_retry == NULL ||
	    w->sweep == NULL || listen_all(w, c) < 0)
		goto fail;
	return w;
fail:
	worker_free(w);
	return NULL;
}

/* One instance per address: the workers share theirs by SO_REUSEPORT, so
 * a second tokentap (or any program with it) would otherwise bind beside
 * them and take half the connections. */
static int addresses_free(const struct conf *c)
{
	for (size_t i = 0; i < c->n_listen; i++) {
		char what[300];
		snprintf(what, sizeof what, "listen %s", c->listen[i].address);
		if (net_address_free(c->listen[i].host, c->listen[i].port, what) < 0)
			return -1;
	}
	return 0;
}

int workers_start(struct conf *conf)
{
	if (addresses_free(conf) < 0)
		return -1;
	workers = calloc((size_t)conf->workers, sizeof *workers);
	if (workers == NULL)
		return -1;
	for (int i = 0; i < conf->workers; i++) {
		workers[i] = worker_new(i, conf);
		if (workers[i] == NULL) {
			while (i-- > 0)
				worker_free(workers[i]);
			free(workers);
			workers = NULL;
			return -1;
		}
	}
	for (int i = 0; i < conf->workers; i++) {
		if (pthread_create(&workers[i]->thread, NULL, worker_main,
		    workers[i]) != 0) {
			log_error("cannot start worker thread %d: %s", i, strerror(errno));
			exit(1);
		}
		n_workers++;
	}
	return 0;
}

void workers_reload(struct conf *conf)
{
	for (int i = 0; i < n_workers; i++)
		send_command(workers[i], conf, 0, 0);
}

void workers_drain(void)
{
	for (int i = 0; i < n_workers; i++)
		send_command(workers[i], NULL, 1, 0);
}

int workers_running(void)
{
	int n = 0;
	for (int i = 0; i < n_workers; i++)
		n += !atomic_load(&workers[i]->done);
	return n;
}

void workers_stop(void)
{
	for (int i = 0; i < n_workers; i++)
		send_command(workers[i], NULL, 0, 1);
	for (int i = 0; i < n_workers; i++) {
		pthread_join(workers[i]->thread, NULL);
		worker_free(workers[i]);
	}
	free(workers);
	workers = NULL;
	n_workers = 0;
}
