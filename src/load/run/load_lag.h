/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-load --lag: each event's trip from the server's send to the
 * client's read. tokentap-mock --stamp opens every token event with the
 * comment line ": ts=<CLOCK_MONOTONIC µs>"; this scanner finds those stamps
 * in the decoded body, split across reads anywhere, and when the event's
 * blank line arrives reports (read time - stamp). Sender and reader must
 * share the clock, i.e. the host. Pure: no I/O, no clock, no allocation. */
#ifndef TOKENTAP_LOAD_LAG_H
#define TOKENTAP_LOAD_LAG_H

#include <stddef.h>
#include <stdint.h>

/* Called once per stamped event with its lag in µs (0 if the stamp lies
 * ahead of the read time). */
typedef void (*load_lag_fn)(void *arg, uint64_t lag_us);

struct load_lag {
	load_lag_fn fn;
	void *arg;

	/* private */
	int state;           /* where in a line the scan is */
	int cr;              /* the last byte was a CR: a LF next is its pair */
	size_t matched;      /* bytes of ": ts=" matched */
	uint64_t value;      /* digits read so far */
	uint64_t stamp;
	int has_stamp;       /* the event being read carries a stamp */
};

/* Starts a fresh body (a new response). */
void load_lag_init(struct load_lag *l, load_lag_fn fn, void *arg);
/* Scans len body bytes read at time now (µs, the stamps' clock). */
void load_lag_feed(struct load_lag *l, const char *p, size_t len, uint64_t now);

#endif
