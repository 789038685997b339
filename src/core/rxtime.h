/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel receive times: when the bytes a read returns reached this host,
 * not when a busy event loop got to them. A socket with SO_TIMESTAMPING's
 * software receive stamps (rxtime_enable) gets, with each recvmsg(2), the
 * time the kernel took in the newest segment that read consumed (TCP
 * merges segments queued together and keeps the newest's stamp, so a read
 * of several segments is stamped with its last: an upper bound for the
 * earlier bytes of it, exact for the last).
 *
 * The stamps are CLOCK_REALTIME; tokentap's timeline is CLOCK_MONOTONIC.
 * The two differ by an offset that changes only when the real-time clock
 * is stepped (settimeofday, an NTP step, a leap second; slewing moves both
 * alike), so rxtime_mono samples the offset at each conversion and keeps
 * the last step it saw: a stamp is converted with the offset of its side
 * of that step, and one that cannot be placed, or that lands in the
 * future, is not used (the caller falls back to the loop's clock). */
#ifndef TOKENTAP_RXTIME_H
#define TOKENTAP_RXTIME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The offset may jitter by the time between its two clock reads; a change
 * of more than this is a step. */
#define RXTIME_STEP_NS 100000

/* Asks the kernel for software receive stamps on fd (a listening socket's
 * accepted sockets inherit it). 0, or -1 where the kernel has none. */
int rxtime_enable(int fd);

/* recv(2) that also returns, in *real_ns, the kernel's receive time
 * (CLOCK_REALTIME ns) of the newest bytes read, 0 when it gave none.
 * real_ns NULL: a plain recv(2), no control data asked for. */
ssize_t rxtime_recv(int fd, void *buf, size_t len, int flags, int64_t *real_ns);

/* One worker's conversion state (no locks: one per thread). */
struct rxtime_clock {
	int64_t offset_ns;       /* CLOCK_REALTIME - CLOCK_MONOTONIC now */
	int64_t before_ns;       /* ... before the last step */
	uint64_t sampled_us;     /* when offset_ns was last sampled (monotonic) */
	uint64_t step_from_us;   /* the last step happened between these two */
	uint64_t step_to_us;     /* samples (monotonic µs); 0: none seen */
	uint64_t steps;          /* steps seen */
	uint64_t told;           /* ... of them the caller has said */
	uint64_t unplaced;       /* stamps not used (the caller fell back) */
};

void rxtime_clock_init(struct rxtime_clock *c);
/* The CLOCK_MONOTONIC µs of a kernel stamp, now_us being the monotonic
 * time the caller read for this read; 0 when real_ns is 0, or lies in a
 * step's window of doubt (either side could be its own), or converts to a
 * time after now_us (a step not seen): the caller uses its own clock. */
uint64_t rxtime_mono(struct rxtime_clock *c, int64_t real_ns, uint64_t now_us);
/* The offset sampled with a given CLOCK_REALTIME reading (tests). */
uint64_t rxtime_mono_at(struct rxtime_clock *c, int64_t real_ns, uint64_t now_us,
    int64_t real_now_ns);

#endif
