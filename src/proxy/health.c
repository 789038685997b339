#include "health.h"

#include <string.h>

void health_begin(struct health *h)
{
	memset(h, 0, sizeof *h);
	h->ovh_request_us = -1;
}

int64_t health_overhead_us(const struct health *h)
{
	if (h->ovh_request_us < 0 && h->ovh_reads == 0)
		return -1;
	return (h->ovh_request_us > 0 ? h->ovh_request_us : 0) +
	    (int64_t)h->ovh_read_sum_us;
}
