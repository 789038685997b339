/* SPDX-License-Identifier: Apache-2.0 */
#include "gauge.h"

#include "net.h"

atomic_long gauge_connections;
atomic_long gauge_streams;
atomic_long gauge_max_streams;
atomic_long gauge_peak_streams;
atomic_long gauge_client_backlog;
atomic_ullong gauge_body_bytes;
atomic_ullong gauge_body_spills;
atomic_ulong gauge_unmeasured[METER_UNMEASURED_COUNT];
atomic_ullong gauge_read_times[2];
atomic_ullong gauge_clock_steps;
atomic_ullong gauge_probes[GAUGE_PROBE_COUNT];

/* 10 lines every 10 s a kind: the first lines of a new trouble, with the
 * client or the request they name, then one line an interval with the
 * count; 8 kinds and the accept errors write at most 99 lines in 10 s
 * (journald's default allows a service 10,000 in 30 s). */
#define KIND(name) LOG_LIMIT_INIT(name, 10, 10000)

struct log_limit gauge_log[GAUGE_LOG_COUNT] = {
	[GAUGE_LOG_MALFORMED_REQUEST] = KIND("malformed_request"),
	[GAUGE_LOG_CLIENT_TIMEOUT] = KIND("client_timeout"),
	[GAUGE_LOG_CLIENT_TLS] = KIND("client_tls"),
	[GAUGE_LOG_REQUEST_BODY_FILE] = KIND("request_body_file"),
	[GAUGE_LOG_UPSTREAM_RETRY] = KIND("upstream_retry"),
	[GAUGE_LOG_UPSTREAM_ERROR] = KIND("upstream_error"),
	[GAUGE_LOG_UPSTREAM_TIMEOUT] = KIND("upstream_timeout"),
	[GAUGE_LOG_UPSTREAM_EJECTION] = KIND("upstream_ejection"),
};

void gauge_log_register(void)
{
	log_limit_register(&net_accept_log);
	for (int i = 0; i < GAUGE_LOG_COUNT; i++)
		log_limit_register(&gauge_log[i]);
}
