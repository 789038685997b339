/* SPDX-License-Identifier: Apache-2.0 */
/* timeouts.first_token and health.throughput: the response held until
 * its first token, and with the throughput probe until its first tokens
 * showed the replica's pace, while another replica may still take the
 * request (session.h's forwarded, ft_armed, probing, hold, ft_timer). */
#ifndef TOKENTAP_FIRSTTOKEN_H
#define TOKENTAP_FIRSTTOKEN_H

#include <event2/event.h>

#include "session.h"

/* The attempt that starts gets timeouts.first_token for a first token,
 * and health.throughput's probe after it; late runs when the deadline
 * passes, the probe's window ends, or its tokens are in (a verdict is
 * due: probe_state 2). On a pool of one, or with nothing left to try,
 * nothing waits. */
void firsttoken_arm(struct session *s, event_callback_fn late);
/* A response byte reached the client: the request stays on its replica. */
void firsttoken_forwarded(struct session *s);
/* What was held goes to the client, and the deadline stops. */
void firsttoken_release(struct session *s);
/* A left attempt's held response never reached the client: it goes. */
void firsttoken_drop(struct session *s);
/* Where the response goes: held while the deadline runs, else the client. */
struct evbuffer *firsttoken_out(struct session *s);
/* The held response goes on at its first token (with a probe running,
 * once its verdict is in), at its end, past 64 KiB, or when it is no
 * stream of a 2xx at all. */
void firsttoken_check(struct session *s);
/* The window's timer went off before the window ran (the loop's clock is
 * coarse): 1, re-armed for the rest; 0, the verdict is due. */
int firsttoken_early(struct session *s);
/* The probe's verdict, when its window ended or its tokens are in: the
 * rate of the tokens after the first (to the last of those it waits for,
 * or to now when they are not all in) against min_rate. 0: fast enough
 * (counted, the replica judged well; release it); 1: too slow (counted,
 * logged): the caller sends the request elsewhere, or keeps it with
 * firsttoken_keep. */
int firsttoken_slow(struct session *s);
/* What was held goes on: a slow stream that nothing else could take is
 * counted kept and its replica judged. */
void firsttoken_keep(struct session *s);

#endif
