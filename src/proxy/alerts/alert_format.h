/* How an alert transition reads: the error-log line, the webhook body of
 * SPEC §6 and an Alertmanager API v2 alert; and the JSON number /alerts
 * shares with them (strings and times: jsonw.h; numbers: alert_json_value). No I/O. */
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

#endif
