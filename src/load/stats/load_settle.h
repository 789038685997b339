/* SPDX-License-Identifier: Apache-2.0 */
/* Whether an open loop's level can show its rate's steady state. A level
 * starts with an empty queue; near the target's service rate mu the queue
 * takes long to fill to its steady state, and a short level's percentile
 * reads low: a 3 s level at 32 slots put the capacity 5 % past its true
 * value, and past the 320/s the slots serve at all.
 *
 * Near saturation the queue of a G/G/c behaves as a reflected Brownian
 * motion (the heavy-traffic limit: Iglehart and Whitt) with drift
 * -(mu - r) and variance r (ca2 + cs2) a second; started empty it nears
 * its steady state on the time scale (ca2 + cs2) r / (mu - r)^2 (Abate
 * and Whitt's), and LOAD_SETTLE_SCALES of them is the warm-up a level at
 * r needs. The client knows its own arrivals' ca2 (Poisson 1, constant 0,
 * gamma 1 / shape), not the target's cs2 (0 for tokentap-mock, whose
 * requests hold a slot a fixed time): the time is a lower bound. A rate
 * at or over mu is never sustained. Pure. */
#ifndef TOKENTAP_LOAD_SETTLE_H
#define TOKENTAP_LOAD_SETTLE_H

#include "load_conf.h"

#define LOAD_SETTLE_SCALES 2.0

/* The squared coefficient of variation of the arrivals' gaps. */
double load_settle_ca2(const struct load_conf *c);
/* The warm-up (s) a level at rate r needs against a target that serves
 * mu a second: 0 with no variance, INFINITY at or over mu, NaN for an
 * unknown mu (NaN: no level fell behind yet). */
double load_settle_s(double r, double mu, double ca2);

#endif
