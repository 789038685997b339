/* timeouts.first_token: while another replica may still take the request,
 * the response head and the events before the first token are held back
 * (the client sees nothing of an attempt that is left), and go on at the
 * first token. */
#include "firsttoken.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "failover.h"
#include "loop.h"

/* The response head and the events before the first token are held back
 * at most this much, then they go on (and the request stays on its
 * replica). */
#define HOLD_MAX (64 * 1024)

void firsttoken_arm(struct session *s, event_callback_fn late)
{
	uint64_t us = s->x.route->timeouts.first_token_us;
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };

	s->ft_armed = 0;
	if (us == 0 || s->forwarded || !attempt_more(&s->att, &s->x, FAILOVER_FIRST_TOKEN))
		return;
	if (s->ft_timer == NULL &&
	    (s->ft_timer = evtimer_new(s->loop->base, late, s)) == NULL)
		return;
	evtimer_add(s->ft_timer, &tv);
	s->ft_armed = 1;
}

void firsttoken_forwarded(struct session *s)
{
	if (s->forwarded)
		return;
	s->forwarded = 1;
	exchange_forwarded(&s->x);
}

/* The deadline stops; nothing is held any more. */
static void disarm(struct session *s)
{
	if (s->ft_armed)
		event_del(s->ft_timer);
	s->ft_armed = 0;
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
	if (s->ft_armed && (s->hold != NULL || (s->hold = evbuffer_new()) != NULL)) {
		s->x.held = 1;
		return s->hold;
	}
	return bufferevent_get_output(s->bev);
}

void firsttoken_check(struct session *s)
{
	if (s->hold != NULL && (s->x.meter.t_first_token != 0 || s->x.res_done ||
	    !s->x.meter.stream || s->x.status < 200 || s->x.status >= 300 ||
	    evbuffer_get_length(s->hold) > HOLD_MAX)) {
		attempt_judge(&s->att, &s->x, !failover_unhealthy_status(s->x.status));
		firsttoken_release(s);
	}
}

