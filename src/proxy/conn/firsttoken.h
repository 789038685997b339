/* timeouts.first_token: the response held until its first token, while
 * another replica may still take the request (session.h's forwarded,
 * ft_armed, hold, ft_timer). */
#ifndef TOKENTAP_FIRSTTOKEN_H
#define TOKENTAP_FIRSTTOKEN_H

#include <event2/event.h>

#include "session.h"

/* The attempt that starts gets timeouts.first_token for a first token
 * (late runs when it passes); on a pool of one, or with nothing left to
 * try, nothing waits. */
void firsttoken_arm(struct session *s, event_callback_fn late);
/* A response byte reached the client: the request stays on its replica. */
void firsttoken_forwarded(struct session *s);
/* What was held goes to the client, and the deadline stops. */
void firsttoken_release(struct session *s);
/* A left attempt's held response never reached the client: it goes. */
void firsttoken_drop(struct session *s);
/* Where the response goes: held while the deadline runs, else the client. */
struct evbuffer *firsttoken_out(struct session *s);
/* The held response goes on at its first token, at its end, past 64 KiB,
 * or when it is no stream of a 2xx at all. */
void firsttoken_check(struct session *s);

#endif
