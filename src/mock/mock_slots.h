/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-mock --slots N: a backend that decodes at most N sequences at
 * once, the rest waiting their turn first come, first served (vLLM's
 * max_num_seqs with its waiting queue), so that its saturation is known in
 * closed form (docs/load-testing.md, "tokentap-mock"). One set of slots for
 * the whole process: a slot freed on one worker thread goes to the request
 * that waited longest, whichever worker holds it, woken on its own loop. */
#ifndef TOKENTAP_MOCK_SLOTS_H
#define TOKENTAP_MOCK_SLOTS_H

#include <stdint.h>

struct mock_conn;

enum mock_slot { MOCK_SLOT_NONE, MOCK_SLOT_WAITING, MOCK_SLOT_HELD };

/* n slots (0: no limit, every request decodes at once). Before the
 * workers start. */
void mock_slots_configure(unsigned n);
int mock_slots_enabled(void);
/* c's request wants a slot: 1 when it holds one now, 0 when it waits
 * (c->slot, c->slot_at set): its timer fires once it holds one. */
int mock_slots_acquire(struct mock_conn *c);
/* c's sequence is over, or c goes away: its slot goes to the longest
 * waiter, or it leaves the queue. Safe to call when c holds nothing. */
void mock_slots_release(struct mock_conn *c);
/* Sequences holding a slot now. */
long mock_slots_held(void);

#endif
