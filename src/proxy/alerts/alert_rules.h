/* SPDX-License-Identifier: Apache-2.0 */
/* `tokentap --prometheus-rules -c FILE`: every built-in alert
 * (docs/contract.md §6: alert.c's threshold rules, slo.c's SLOBurnRate) as
 * Prometheus recording and alerting rules over the /metrics of each instance,
 * with the config's thresholds per route (and per tenant), quantile, window,
 * for, min_samples and hysteresis. Pure: writes YAML to f.
 *
 * One page for one condition: an alert carries the alertname, severity and
 * labels tokentap's notifiers send (alert_format.c), instance included.
 * A notifier's instance is tokentap's own name ("host name/first listen
 * address", notify.c); a scraped series has the target's instance and a
 * job instead. So every recording rule sums by instance and job, then
 * takes tokentap's name from tokentap_alert_instance_info (the scrape of
 * the same target) and keeps no job: the records, and the alerts over
 * them, are labelled as tokentap labels its own, and Alertmanager merges
 * the two paths' alerts into one. */
#ifndef TOKENTAP_ALERT_RULES_H
#define TOKENTAP_ALERT_RULES_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* Returns 0, or -1 when f could not be written. */
int alert_rules_write(FILE *f, const struct conf *c);

/* A range as PromQL reads it: "1m", "1500ms" (whole ms, rounded up). */
void alert_rules_range(uint64_t us, char *buf, size_t len);

#endif
