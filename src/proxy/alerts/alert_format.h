/* SPDX-License-Identifier: Apache-2.0 */
/* How an alert transition reads: the error-log line, the webhook body of
 * docs/contract.md §6 and an Alertmanager API v2 alert; and the JSON number
 * /alerts shares with them (strings and times: jsonw.h; numbers:
 * alert_json_value). No I/O. */
#ifndef TOKENTAP_ALERT_FORMAT_H
#define TOKENTAP_ALERT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"

struct evbuffer;

/* "alert firing: TTFTHigh severity=critical route=openai p95=2310ms > 2000ms
 * (n=57, window 1m)" */
void alert_format_log(const struct alert_transition *t, char *buf, size_t len);
/* instance names this tokentap: "host name/first listen address". */
void alert_format_webhook(struct evbuffer *out, const struct alert_transition *t,
    const char *instance);
/* One Alertmanager alert object; it ends at ends_at_ms. */
void alert_format_alertmanager(struct evbuffer *out,
    const struct alert_transition *t, const char *instance,
    const char *generator_url, uint64_t ends_at_ms);

/* A value or threshold of metric m as people read it: "2310ms", "45.3ms"
 * (m a time, v in ms), "0.31", "3"; "none" when v < 0. */
void alert_format_value(enum alert_metric m, double v, char *buf, size_t len);
/* The Alertmanager summary of t ("TTFT p95 of route openai over 1000ms"):
 * it names the rule and its threshold, not the value, so the Prometheus
 * rules (alert_rules.c) carry the same, with templates for the names. */
void alert_format_summary(const struct alert_transition *t, char *buf, size_t len);

#endif
