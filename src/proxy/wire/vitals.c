/* SPDX-License-Identifier: Apache-2.0 */
#include "vitals.h"

#include <string.h>

void vitals_begin(struct vitals *h)
{
	memset(h, 0, sizeof *h);
	h->ovh_request_us = -1;
}

int64_t vitals_overhead_us(const struct vitals *h)
{
	if (h->ovh_request_us < 0 && h->ovh_reads == 0)
		return -1;
	return (h->ovh_request_us > 0 ? h->ovh_request_us : 0) +
	    (int64_t)h->ovh_read_sum_us;
}
