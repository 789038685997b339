/* SPDX-License-Identifier: Apache-2.0 */
/* The process's gauges and counters that worker threads move and the main
 * thread reads (/metrics, /stats, /healthz): atomics, one update per
 * connection, request or held body, never per event. */
#ifndef TOKENTAP_GAUGE_H
#define TOKENTAP_GAUGE_H

#include <stdatomic.h>

#include "log.h"
#include "meter.h"

extern atomic_long gauge_connections;      /* client connections open */
extern atomic_long gauge_streams;          /* requests in flight */
extern atomic_long gauge_max_streams;      /* the most at once */
/* The most streams active at once since the history last took it (and
 * set it to 0): the instance's peak concurrency of each step. */
extern atomic_long gauge_peak_streams;
/* Bytes waiting in client output buffers, all connections together (only
 * clients that lag have any), against limits.client_backlog. */
extern atomic_long gauge_client_backlog;
/* Request bodies held in memory (bodybuf.h), bytes, and those moved to a
 * temporary file so far. */
extern atomic_ullong gauge_body_bytes;
extern atomic_ullong gauge_body_spills;
/* Responses whose body was not measured, by cause (meter_unmeasured). */
extern atomic_ulong gauge_unmeasured[METER_UNMEASURED_COUNT];
/* Requests' first bytes and response reads timed by the kernel's receive
 * stamps [0] or by the event loop's clock [1] (added at each request's
 * end), and steps of the real-time clock the workers saw (rxtime.h). */
extern atomic_ullong gauge_read_times[2];
extern atomic_ullong gauge_clock_steps;
/* Throughput probes' verdicts (health.throughput): fast enough, too slow
 * and sent elsewhere, too slow with nowhere else to go (kept). */
enum { GAUGE_PROBE_PASS, GAUGE_PROBE_SLOW, GAUGE_PROBE_KEPT, GAUGE_PROBE_COUNT };
extern atomic_ullong gauge_probes[GAUGE_PROBE_COUNT];

/* The kinds of error-log lines that a client or a peer (a backend) can
 * cause, one per request or connection: each at most a burst per interval
 * (log.h), the others counted (tokentap_log_lines_suppressed_total{kind})
 * and said by the kind's next line. A flood of one kind does not silence
 * another: a client's malformed requests leave the backends' failures
 * said. */
enum gauge_log {
	GAUGE_LOG_MALFORMED_REQUEST,    /* a request llhttp cannot parse */
	GAUGE_LOG_CLIENT_TIMEOUT,       /* timeouts.send, timeouts.client_body */
	GAUGE_LOG_CLIENT_TLS,           /* a client's failed TLS handshake */
	GAUGE_LOG_REQUEST_BODY_FILE,    /* a held body's temporary file */
	GAUGE_LOG_UPSTREAM_RETRY,       /* "trying another replica", retries */
	GAUGE_LOG_UPSTREAM_ERROR,       /* connect, TLS, closed before answering */
	GAUGE_LOG_UPSTREAM_TIMEOUT,     /* first_token, token_idle, idle, too slow */
	GAUGE_LOG_UPSTREAM_EJECTION,    /* a replica ejected or back */
	GAUGE_LOG_COUNT
};
extern struct log_limit gauge_log[GAUGE_LOG_COUNT];

/* Every kind of the process listed (gauge_log, and the accept errors'
 * net_accept_log) before the first line, so /metrics shows each from 0. */
void gauge_log_register(void);

#endif
