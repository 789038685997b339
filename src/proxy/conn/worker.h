/* SPDX-License-Identifier: Apache-2.0 */
/* Worker threads: one event_base each, SO_REUSEPORT listeners of their own,
 * their own upstream pools and statistics. The main thread talks to them
 * only through worker_command(), which wakes the worker's loop. */
#ifndef TOKENTAP_WORKER_H
#define TOKENTAP_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

#include "config.h"
#include "loop.h"

struct evconnlistener;
struct event;
struct listen_ref;

struct worker {
	int id;
	pthread_t thread;
	struct loop loop;             /* what the worker runs: proxy.c's world */
	struct evconnlistener **listeners;
	struct listen_ref *lrefs;
	size_t n_listeners;
	struct event *listen_retry;   /* re-enables accepting after EMFILE */
	struct event *sweep;          /* looks at the open streams: stalls */

	/* commands from the main thread */
	struct event *cmd_ev;
	int cmd_fd;                   /* eventfd the main thread writes */
	pthread_mutex_t cmd_lock;
	struct conf *cmd_conf;        /* a new config to switch to */
	int cmd_drain;
	int cmd_stop;
	atomic_int done;              /* the loop has ended */
};

/* Creates the workers of conf and binds their listeners. Returns 0 or -1
 * (a listener could not be bound: the message was logged). */
int workers_start(struct conf *conf);
/* Hands a new config to every worker (each takes its own reference). */
void workers_reload(struct conf *conf);
/* Closes the listeners and lets streams finish; workers exit when idle. */
void workers_drain(void);
/* Number of workers whose loop is still running. */
int workers_running(void);
/* Ends every worker at once (after the shutdown timeout) and joins them. */
void workers_stop(void);

#endif
