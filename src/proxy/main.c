/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap: a transparent SSE measuring reverse proxy.
 *
 * The main thread loads the config, starts the workers, serves the admin
 * endpoints and handles signals; the workers carry the traffic. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "accesslog.h"
#include "admin.h"
#include "alertd.h"
#include "bodybuf.h"
#include "config.h"
#include "gauge.h"
#include "historyd.h"
#include "log.h"
#include "procmetrics.h"
#include "net.h"
#include "otel.h"
#include "pool.h"
#include "poold.h"
#include "sdnotify.h"
#include "alert_rules.h"
#include "slod.h"
#include "stats.h"
#include "tls.h"
#include "statsfile.h"
#include "util.h"
#include "worker.h"

#define DEFAULT_CONFIG "/etc/tokentap/tokentap.yaml"

static struct event_base *main_base;
static struct conf *current;
static const char *config_path = DEFAULT_CONFIG;
static struct event *drain_poll;
static struct event *stats_tick;
static struct event *log_tick;
static uint64_t drain_deadline;

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: tokentap [-t | --prometheus-rules] [-c FILE]\n"
	    "  -c, --config FILE  configuration file (default " DEFAULT_CONFIG ")\n"
	    "  -t, --test         check the configuration and exit\n"
	    "  --prometheus-rules print Prometheus rules for every built-in alert of the\n"
	    "                     configuration and exit\n"
	    "  -V, --version      print the version and exit\n"
	    "  -h, --help         print this help and exit\n");
}

static void on_reload(void)
{
	struct conf *c;

	sdnotify_reloading();
	c = conf_load(config_path, stderr);
	if (c != NULL && (tls_prepare(c, stderr) < 0 || conf_check_paths(c, stderr) < 0)) {
		conf_unref(c);
		c = NULL;
	}
	if (c == NULL) {
		log_error("reload: %s has errors, keeping the running configuration",
		    config_path);
		sdnotify_send("READY=1\nSTATUS=reload failed: configuration has errors, "
		    "the previous one stays in force");
		return;
	}
	if (c->n_listen != current->n_listen || c->workers != current->workers)
		log_warn("reload: listen addresses and workers change only on restart");
	if (admin_reload(c) < 0)
		log_warn("reload: admin address unchanged");
	if ((c->access_log == NULL) != (current->access_log == NULL) ||
	    (c->access_log && strcmp(c->access_log, current->access_log) != 0))
		accesslog_open(c->access_log);
	if (c->max_connections > current->max_connections)
		net_reserve_fds(2 * c->max_connections + 1024);
	/* the replicas first: a worker's first request on c picks from them */
	if (poold_attach(c) < 0) {
		log_error("reload: out of memory attaching the replica pools; "
		    "keeping the running configuration");
		poold_attach(current);
		conf_unref(c);
		return;
	}
	workers_reload(c);
	stats_configure(c);
	slod_reload(c);
	historyd_reload(c);
	alertd_reload(c);
	otel_reload(c);
	statsfile_configure(c);
	conf_unref(current);
	current = c;
	log_info("reload: configuration %s loaded", config_path);
	sdnotify_send("READY=1\nSTATUS=serving (configuration reloaded)");
}

static void on_drain_poll(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, 20000 };
	(void)fd;
	(void)what;
	(void)arg;
	if (workers_running() == 0) {
		event_base_loopexit(main_base, NULL);
		return;
	}
	if (util_now_us() >= drain_deadline) {
		log_warn("shutdown: timeouts.shutdown reached, closing the remaining streams");
		event_base_loopexit(main_base, NULL);
		return;
	}
	evtimer_add(drain_poll, &tv);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	switch (sig) {
	case SIGHUP:
		on_reload();
		break;
	case SIGUSR1:
		accesslog_reopen();
		statsfile_reopen();
		log_info("logs reopened");
		break;
	case SIGTERM:
	case SIGINT:
		if (drain_poll != NULL)
			return;
		log_info("shutdown: draining (up to %llu ms)",
		    (unsigned long long)(current->timeouts.shutdown_us / 1000));
		sdnotify_send("STOPPING=1\nSTATUS=draining the streams in flight");
		admin_set_draining();
		workers_drain();
		drain_deadline = util_now_us() + current->timeouts.shutdown_us;
		drain_poll = evtimer_new(main_base, on_drain_poll, NULL);
		on_drain_poll(-1, 0, NULL);
		break;
	}
}

/* Workers' statistics records are pulled often, so their rings stay short
 * and the windows current. */
static void on_stats_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	stats_drain();
	statsfile_tick(util_now_us());
	bodybuf_trim(util_now_us());
}

/* A kind of error-log line that fell silent says what it suppressed. */
static void on_log_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	log_limits_flush();
}

/* This thread's work (statistics, admin, alerts) can wait; the workers'
 * forwarding cannot. A lower priority for this thread alone (on Linux a
 * thread's nice value is its own; the workers, started before, keep
 * theirs) makes a worker keep its CPU when this thread's timer fires, and
 * this thread run in the workers' idle time, which at 100 % busy is still
 * its weight's share. */
static void yield_to_workers(void)
{
	int nice;

	errno = 0;
	nice = getpriority(PRIO_PROCESS, 0);
	if (errno == 0 && nice < 19)
		setpriority(PRIO_PROCESS, 0, nice + 10 > 19 ? 19 : nice + 10);
}

/* What /stats (and the stats file) adds after its groups. */
static void stats_more(struct evbuffer *out)
{
	poold_json(out);
	procmetrics_logs_json(out);
	otel_json(out);
}

static int run(void)
{
	static const int sigs[] = { SIGHUP, SIGUSR1, SIGTERM, SIGINT };
	struct event *sev[4];
	sigset_t all, old;
	int rc = 0;

	main_base = net_base_new(0);
	if (main_base == NULL)
		return 1;
	stats_configure(current);
	stats_json_more = stats_more;
	gauge_log_register();
	if (accesslog_open(current->access_log) < 0 ||
	    statsfile_configure(current) < 0 ||
	    admin_start(main_base, current) < 0 ||
	    slod_start(main_base, current) < 0 ||
	    historyd_start(main_base, current) < 0 ||
	    alertd_start(main_base, current) < 0 ||
	    poold_start(main_base) < 0 || poold_attach(current) < 0 ||
	    otel_start(main_base, current, admin_series) < 0)
		return 1;
	/* handlers first: once a listener is bound, a signal may come */
	for (size_t i = 0; i < UTIL_ARRAY_LEN(sigs); i++) {
		sev[i] = evsignal_new(main_base, sigs[i], on_signal, NULL);
		evsignal_add(sev[i], NULL);
	}
	/* workers inherit a mask that leaves every signal to this thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	/* two descriptors per connection (client, upstream), idle pooled
	 * upstream connections and the fixed few */
	net_reserve_fds(2 * current->max_connections + 1024);
	rc = workers_start(current) < 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return 1;
	yield_to_workers();
	{
		struct timeval tv = { 0, 50000 };
		stats_tick = event_new(main_base, -1, EV_PERSIST, on_stats_tick, NULL);
		event_add(stats_tick, &tv);
		tv.tv_sec = 1;
		tv.tv_usec = 0;
		log_tick = event_new(main_base, -1, EV_PERSIST, on_log_tick, NULL);
		event_add(log_tick, &tv);
	}
	sdnotify_send("READY=1\nSTATUS=serving");
	log_info("tokentap %s: %zu listener(s), %d worker(s), admin on %s",
	    TOKENTAP_VERSION, current->n_listen, current->workers,
	    current->admin_address);
	event_base_dispatch(main_base);
	workers_stop();
	poold_stop();
	pool_free_all();
	otel_stop();
	alertd_stop();
	historyd_stop();
	slod_stop();
	admin_stop();
	event_free(stats_tick);
	event_free(log_tick);
	statsfile_close();
	stats_free();
	for (size_t i = 0; i < UTIL_ARRAY_LEN(sigs); i++)
		event_free(sev[i]);
	if (drain_poll != NULL)
		event_free(drain_poll);
	accesslog_close();
	event_base_free(main_base);
	log_limits_flush_all();
	log_info("tokentap stopped");
	return rc;
}

int main(int argc, char **argv)
{
	/* the long forms the two helper programs take too */
	static const struct option longs[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ "prometheus-rules", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, test = 0, rules = 0, rc;

	while ((opt = getopt_long(argc, argv, "c:tVh", longs, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			break;
		case 't':
			test = 1;
			break;
		case 'P':
			rules = 1;
			break;
		case 'V':
			printf("tokentap %s\n", TOKENTAP_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	current = conf_load(config_path, stderr);
	if (current == NULL)
		return 1;
	if (rules) {
		rc = alert_rules_write(stdout, current) < 0 || fflush(stdout) != 0;
		conf_unref(current);
		return rc;
	}
	if (tls_prepare(current, stderr) < 0 || conf_check_paths(current, stderr) < 0) {
		conf_unref(current);
		return 1;
	}
	if (test) {
		printf("configuration OK\n");
		conf_unref(current);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	/* a log past a file-size limit (ulimit -f, LimitFSIZE=) loses lines,
	 * counted (logfile.h), as on a full disk: it does not end the proxy */
	signal(SIGXFSZ, SIG_IGN);
	/* two descriptors per stream: the hard limit, as nginx's
	 * worker_rlimit_nofile would take */
	net_raise_nofile();
	evthread_use_pthreads();
	rc = run();
	conf_unref(current);
	libevent_global_shutdown();
	return rc;
}
