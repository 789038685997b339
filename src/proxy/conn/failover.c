/* SPDX-License-Identifier: Apache-2.0 */
#include "failover.h"

static const char *const reason_names[FAILOVER_REASON_COUNT] = {
	"connect_error", "connect_timeout", "closed", "first_byte_timeout",
	"status", "first_token_timeout", "throughput",
};

const char *failover_reason_name(enum failover_reason why)
{
	return why < FAILOVER_REASON_COUNT ? reason_names[why] : "-";
}

int failover_resend_ok(enum failover_reason why, int idempotent)
{
	switch (why) {
	case FAILOVER_CONNECT:
	case FAILOVER_CONNECT_TIMEOUT:
	case FAILOVER_STATUS:
	case FAILOVER_FIRST_TOKEN:
	case FAILOVER_THROUGHPUT:
		return 1;
	default:
		return idempotent;
	}
}

/* Retry-After: 0 (delay-seconds) asks for no wait; a later time or date
 * says the backend wants no request now, from us neither. */
static int retry_after_zero(const char *v, size_t len)
{
	size_t i = 0;
	while (i < len && (v[i] == ' ' || v[i] == '\t'))
		i++;
	if (i == len)
		return 1;         /* empty: as if absent */
	for (; i < len && v[i] == '0'; i++)
		;
	while (i < len && (v[i] == ' ' || v[i] == '\t'))
		i++;
	return i == len;
}

int failover_status(const struct conf_route *r, unsigned status,
    const char *retry_after, size_t retry_after_len)
{
	for (size_t i = 0; i < r->n_retry_on; i++) {
		if (r->retry_on[i] != status)
			continue;
		if (status == 429 && retry_after != NULL)
			return retry_after_zero(retry_after, retry_after_len);
		return 1;
	}
	return 0;
}

int failover_unhealthy_status(unsigned status)
{
	return status == 502 || status == 503 || status == 504;
}

int failover_unhealthy(enum failover_reason why, unsigned status)
{
	return why != FAILOVER_STATUS || failover_unhealthy_status(status);
}
