/* SPDX-License-Identifier: Apache-2.0 */
/* timeouts.first_token and health.throughput: while another replica may
 * still take the request, the response head and its events are held back
 * (the client sees nothing of an attempt that is left): until the first
 * token, and with the throughput probe until the first tokens after it
 * have shown the replica's pace. */
#include "firsttoken.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "failover.h"
#include "gauge.h"
#include "log.h"
#include "loop.h"
#include "util.h"

/* The response head and the events before the first token are held back
 * at most this much, then they go on (and the request stays on its
 * replica). */
#define HOLD_MAX (64 * 1024)

/* A deadline from now: libevent counts a timer from the time it cached at
 * the loop turn's start, which a busy turn leaves milliseconds behind the
 * attempt's own start (its t0, read since): refreshed, the deadline is
 * never early by the attempt's clock (one clock read an attempt). */
static void timer_in(struct session *s, uint64_t us)
{
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
	event_base_update_cache_time(s->loop->base);
	evtimer_add(s->ft_timer, &tv);
	s->ft_armed = 1;
}

void firsttoken_arm(struct session *s, event_callback_fn late)
{
	uint64_t us = s->x.route->timeouts.first_token_us;
	int deadline;

	s->ft_armed = 0;
	s->probe_state = 0;
	s->probing = !s->forwarded && s->x.route->health.throughput.min_rate > 0 &&
	    attempt_more(&s->att, &s->x, FAILOVER_THROUGHPUT);
	deadline = us != 0 && !s->forwarded &&
	    attempt_more(&s->att, &s->x, FAILOVER_FIRST_TOKEN);
	if (!deadline && !s->probing)
		return;
	if (s->ft_timer == NULL &&
	    (s->ft_timer = evtimer_new(s->loop->base, late, s)) == NULL) {
		s->probing = 0;
		return;
	}
	if (deadline)
		timer_in(s, us);
}

void firsttoken_forwarded(struct session *s)
{
	if (s->forwarded)
		return;
	s->forwarded = 1;
	exchange_forwarded(&s->x);
}

/* The deadline and the probe stop; nothing is held any more. */
static void disarm(struct session *s)
{
	if (s->ft_timer != NULL)
		event_del(s->ft_timer);   /* pending, or made active by verdict_due */
	s->ft_armed = 0;
	s->probing = 0;
	s->x.held = 0;
}

void firsttoken_release(struct session *s)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);

	disarm(s);
	if (s->hold == NULL)
		return;
	evbuffer_add_buffer(out, s->hold);
	evbuffer_free(s->hold);
	s->hold = NULL;
	if (s->x.client_out != NULL)
		s->x.client_out = out;      /* a decoded body goes there now */
	firsttoken_forwarded(s);
}

void firsttoken_drop(struct session *s)
{
	disarm(s);
	if (s->hold == NULL)
		return;
	s->x.bytes_out -= evbuffer_get_length(s->hold);
	evbuffer_free(s->hold);
	s->hold = NULL;
}

struct evbuffer *firsttoken_out(struct session *s)
{
	if ((s->ft_armed || s->probing) &&
	    (s->hold != NULL || (s->hold = evbuffer_new()) != NULL)) {
		s->x.held = 1;
		return s->hold;
	}
	return bufferevent_get_output(s->bev);
}

/* The tokens after the first event's: from the stream's own count where
 * it comes with every token event (continuous usage), else one an event. */
static uint64_t tokens_after_first(const struct meter *m)
{
	if (m->reported_out >= 0 && m->first_event_tokens >= 0 &&
	    m->usage_token_events == m->token_events)
		return m->reported_out > m->first_event_tokens ?
		    (uint64_t)(m->reported_out - m->first_event_tokens) : 0;
	return m->token_events > 0 ? m->token_events - 1 : 0;
}

/* Tokens per second after the first token: to the last of those the
 * probe waits for, or to now when they are not all in; -1: no time. */
static double rate_at(const struct session *s, uint64_t now)
{
	const struct meter *m = &s->x.meter;
	uint64_t n = tokens_after_first(m);
	uint64_t end = n >= s->x.route->health.throughput.tokens ? m->t_last_token : now;

	if (m->t_first_token == 0 || end <= m->t_first_token)
		return -1;
	return (double)n * 1e6 / (double)(end - m->t_first_token);
}

/* The worker's loop keeps libevent's coarse clock (a tick of up to 4 ms,
 * no timerfd call per loop turn), so the window's timer may go off a
 * little before the window has run on the precise clock the tokens are
 * stamped with: it then waits out the rest. 1: re-armed. */
int firsttoken_early(struct session *s)
{
	uint64_t end = s->x.meter.t_first_token + s->x.route->health.throughput.window_us;
	uint64_t now = util_now_us();

	if (s->probe_state != 1 || now >= end)
		return 0;       /* (2: its tokens are all in, the verdict is due) */
	timer_in(s, end - now);
	return 1;
}

int firsttoken_slow(struct session *s)
{
	double rate = rate_at(s, util_now_us());

	s->probe_state = 3;
	if (rate >= s->x.route->health.throughput.min_rate) {
		atomic_fetch_add_explicit(&gauge_probes[GAUGE_PROBE_PASS], 1,
		    memory_order_relaxed);
		attempt_judge(&s->att, &s->x, 1);
		return 0;
	}
	log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_TIMEOUT], LOG_LVL_INFO,
	    "request %s: upstream %s made %.1f tokens/s, below "
	    "health.throughput.min_rate", s->x.request_id, s->att.rep->name,
	    rate < 0 ? 0 : rate);
	atomic_fetch_add_explicit(&gauge_probes[GAUGE_PROBE_SLOW], 1, memory_order_relaxed);
	return 1;
}

void firsttoken_keep(struct session *s)
{
	/* slow, and no other replica took it */
	if (s->probe_state == 3 && !s->att.judged) {
		atomic_fetch_add_explicit(&gauge_probes[GAUGE_PROBE_KEPT], 1,
		    memory_order_relaxed);
		attempt_judge(&s->att, &s->x, 0);
	}
	firsttoken_release(s);
}

/* A verdict is due now: in the timer's callback, out of the read that
 * brought it (failing over there would pull the exchange from under it). */
static void verdict_due(struct session *s)
{
	if (s->ft_armed)
		event_del(s->ft_timer);
	s->ft_armed = 0;
	s->probe_state = 2;
	event_active(s->ft_timer, EV_TIMEOUT, 1);
}

void firsttoken_check(struct session *s)
{
	const struct conf_throughput *tp = &s->x.route->health.throughput;
	const struct meter *m = &s->x.meter;
	uint64_t since, now;
	int over;

	if (s->hold == NULL)
		return;
	/* no stream of a 2xx to wait for, or too much held, or the end */
	over = !m->stream || s->x.status < 200 || s->x.status >= 300 || s->x.res_done ||
	    evbuffer_get_length(s->hold) > HOLD_MAX;
	if (m->t_first_token == 0 && !over)
		return;
	if (!s->probing || over || m->t_first_token == 0) {
		attempt_judge(&s->att, &s->x, !failover_unhealthy_status(s->x.status));
		firsttoken_release(s);
		return;
	}
	if (s->probe_state >= 2)
		return;
	if (s->probe_state == 0) {
		/* the first token: the probe's window runs from it (its time
		 * may be the kernel's, before now) */
		s->probe_state = 1;
		if (s->ft_armed)
			event_del(s->ft_timer);
		now = util_now_us();
		since = now > m->t_first_token ? now - m->t_first_token : 0;
		timer_in(s, since < tp->window_us ? tp->window_us - since : 0);
	}
	if (tokens_after_first(m) >= tp->tokens)
		verdict_due(s);
}
