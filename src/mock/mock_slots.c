/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_slots.h"

#include <pthread.h>
#include <stddef.h>

#include <event2/event.h>

#include "mock_conn.h"
#include "util.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned slots;
static long held;
static struct mock_conn *head, *tail;       /* waiting, oldest first */

void mock_slots_configure(unsigned n)
{
	slots = n;
}

int mock_slots_enabled(void)
{
	return slots > 0;
}

long mock_slots_held(void)
{
	long n;

	pthread_mutex_lock(&lock);
	n = held;
	pthread_mutex_unlock(&lock);
	return n;
}

int mock_slots_acquire(struct mock_conn *c)
{
	int now;

	pthread_mutex_lock(&lock);
	now = head == NULL && held < (long)slots;
	if (now) {
		held++;
		c->slot = MOCK_SLOT_HELD;
		c->slot_at = util_now_us();
	} else {
		c->slot = MOCK_SLOT_WAITING;
		c->slot_next = NULL;
		if (tail != NULL)
			tail->slot_next = c;
		else
			head = c;
		tail = c;
	}
	pthread_mutex_unlock(&lock);
	return now;
}

/* Under the lock: the freed slot goes to the oldest waiter, woken on its
 * own loop (libevent's thread support carries the activation there). */
static void grant_next(void)
{
	struct mock_conn *c = head;

	if (c == NULL || held >= (long)slots)
		return;
	head = c->slot_next;
	if (head == NULL)
		tail = NULL;
	c->slot_next = NULL;
	c->slot = MOCK_SLOT_HELD;
	c->slot_at = util_now_us();
	held++;
	event_active(c->timer, EV_TIMEOUT, 1);
}

void mock_slots_release(struct mock_conn *c)
{
	pthread_mutex_lock(&lock);
	if (c->slot == MOCK_SLOT_HELD) {
		held--;
		grant_next();
	} else if (c->slot == MOCK_SLOT_WAITING) {
		struct mock_conn **p = &head, *prev = NULL;
		while (*p != NULL && *p != c) {
			prev = *p;
			p = &(*p)->slot_next;
		}
		if (*p == c) {
			*p = c->slot_next;
			if (tail == c)
				tail = prev;
		}
		c->slot_next = NULL;
	}
	c->slot = MOCK_SLOT_NONE;
	pthread_mutex_unlock(&lock);
}
