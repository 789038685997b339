/* SPDX-License-Identifier: Apache-2.0 */
/* The process's gauges and counters that worker threads move and the main
 * thread reads (/metrics, /stats, /healthz): atomics, one update per
 * connection, request or held body, never per event. */
#ifndef TOKENTAP_GAUGE_H
#define TOKENTAP_GAUGE_H

#include <stdatomic.h>

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

#endif
