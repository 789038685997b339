/* SPDX-License-Identifier: Apache-2.0 */
/* The vitals of one exchange (a part of its stream health), beside its
 * meter: what the proxy itself costs it (the overhead of the request on
 * its way up and of each read forwarded down), and the stalls the sweep
 * reported while they lasted.
 * The proxy stamps, the exchange keeps; recording never allocates and
 * costs no clock read of its own. */
#ifndef TOKENTAP_VITALS_H
#define TOKENTAP_VITALS_H

#include <stdint.h>

#include "lhist.h"

/* The proxy's overhead per read, coarsely (lhist.h), up to 131 ms. */
#define VITALS_OVH_BUCKETS LHIST_LEN(17)

struct vitals {
	uint64_t ovh_from;            /* request head complete, not yet gone up */
	int64_t ovh_request_us;       /* -1: not measured */
	uint64_t ovh_reads;
	uint64_t ovh_read_sum_us;
	uint16_t ovh_read_hist[VITALS_OVH_BUCKETS];
	uint64_t stalls_live;         /* stalls reported to the statistics live */
};

void vitals_begin(struct vitals *h);

/* The request stage: from its head complete (from) to the request written
 * upstream, or queued for a connection being opened (to). Once. */
static inline void vitals_request(struct vitals *h, uint64_t from, uint64_t to)
{
	if (h->ovh_request_us < 0)
		h->ovh_request_us = to > from ? (int64_t)(to - from) : 0;
}

/* One upstream read forwarded: from recv(2) returning to the client's
 * send(2) returning, us µs. Kept as us - 1, so that a bucket [lo, hi)
 * holds the reads of (lo, hi] µs: its upper edge, a power of two and a
 * Prometheus bound, is inclusive as "le" is (stats_health_mid). */
static inline void vitals_read(struct vitals *h, uint64_t us)
{
	h->ovh_reads++;
	h->ovh_read_sum_us += us;
	lhist_add(h->ovh_read_hist, VITALS_OVH_BUCKETS, us > 0 ? us - 1 : 0);
}

/* What a read in bucket i is taken for, µs. */
static inline uint64_t vitals_read_mid(unsigned i)
{
	return (uint64_t)lhist_mid(i) + 1;
}

/* The request's own overhead in all (request stage plus every read), µs;
 * -1 when nothing was measured. */
int64_t vitals_overhead_us(const struct vitals *h);

#endif
