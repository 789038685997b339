/* One load run: closed loop (N virtual users, each sending its next request
 * when the previous one ends, on its own kept-alive connection) or open
 * loop (arrivals at a fixed rate, Poisson or uniform, each on a free or new
 * connection and timed from its scheduled start, so that waiting for a
 * connection counts as latency). Stops issuing at the duration or count,
 * lets requests in flight end (each is bounded by the timeout), and stops
 * early on SIGINT / SIGTERM (a second one drops what is in flight). */
#ifndef TOKENTAP_LOAD_RUN_H
#define TOKENTAP_LOAD_RUN_H

#include <stdint.h>

#include "load_conf.h"
#include "loadstats.h"

struct event_base;
struct evdns_base;

struct load_run_info {
	uint64_t elapsed_us;        /* start to the end of the last request */
	uint64_t max_in_flight;
	uint64_t connections;       /* connections opened */
	int interrupted;
};

/* Resolves c's host (evdns for names) and runs the load on base, recording
 * into st, which the caller has initialised. progress: a line on stderr
 * once a second. Returns 0, or -1 when the run could not start. */
int load_run(struct event_base *base, struct evdns_base *dns,
    const struct load_conf *c, struct loadstats *st, int progress,
    struct load_run_info *info);

#endif
