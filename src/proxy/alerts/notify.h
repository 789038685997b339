/* SPDX-License-Identifier: Apache-2.0 */
/* Where alert transitions go (docs/contract.md §6): a line in the error log, and for
 * each webhook or Alertmanager notifier a POST over libevent's HTTP client
 * on the main loop. Nothing here ever blocks: each notifier has a bounded
 * queue, one delivery in flight with a deadline (the notifier's timeout
 * from the attempt's start, whatever the receiver trickles meanwhile),
 * at most NOTIFY_HEAD_MAX of response head and NOTIFY_BODY_MAX of body
 * read, retries with exponential backoff, and drops (queue full, retries
 * exhausted) that are counted and logged (rate-limited). */
#ifndef TOKENTAP_NOTIFY_H
#define TOKENTAP_NOTIFY_H

#include <stddef.h>

#include "alert.h"
#include "config.h"

struct event_base;
struct evbuffer;

#define NOTIFY_QUEUE_MAX    1024
#define NOTIFY_ATTEMPTS_MAX 5
#define NOTIFY_BACKOFF_US   500000   /* then 1 s, 2 s, 4 s */
#define NOTIFY_HEAD_MAX     (64 * 1024)
#define NOTIFY_BODY_MAX     (64 * 1024)

struct notify_set;

struct notify_set *notify_new(struct event_base *base);
/* Notifiers from c. One whose type and URL stay keeps its queue and
 * counters; the others are stopped and their pending deliveries dropped.
 * Returns 0 or -1 (a notifier that could not be set up is left out). */
int notify_configure(struct notify_set *ns, const struct conf *c);
void notify_transition(struct notify_set *ns, const struct alert_transition *t);
/* tokentap_alert_instance_info{alert_instance}, tokentap_notify_sent_total,
 * tokentap_notify_dropped_total and tokentap_notify_failures_total. */
struct promout;
void notify_prometheus(const struct notify_set *ns, struct promout *out);
void notify_free(struct notify_set *ns);

#endif
