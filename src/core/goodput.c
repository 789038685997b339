/* SPDX-License-Identifier: Apache-2.0 */
#include "goodput.h"

static const char *const names[GOODPUT_TARGETS] = { "ttft", "tpot", "ttfo" };

/* First-output targets wait for something; a pace target does not. */
static const int first_output[GOODPUT_TARGETS] = { 1, 0, 1 };

const char *goodput_target_name(enum goodput_target t)
{
	return names[t];
}

int goodput_any(const struct goodput_targets *t)
{
	for (int i = 0; i < GOODPUT_TARGETS; i++)
		if (t->us[i] > 0)
			return 1;
	return 0;
}

/* 1 when target i is already missed, as far as the request went. */
static int missed(const struct goodput_targets *t, const struct goodput_request *r,
    int i)
{
	int64_t v = r->value_us[i];
	uint64_t lim = t->us[i];

	if (lim == 0)
		return 0;
	if (v >= 0)
		return (uint64_t)v > lim;
	/* a client too slow to send its request or take its answer waited on
	 * itself, not on us */
	if (!first_output[i] || r->outcome == OUTCOME_CLIENT_TIMEOUT)
		return 0;
	/* nothing came: waited the whole duration (a finished answer that is
	 * not a stream delivers its first output with its body) */
	return r->duration_us > 0 && (uint64_t)r->duration_us > lim;
}

enum goodput_verdict goodput_judge(const struct goodput_targets *t,
    const struct goodput_request *r)
{
	int any_missed = 0;

	if (r->outcome != OUTCOME_OK && !meter_outcome_client(r->outcome))
		return GOODPUT_BAD;
	for (int i = 0; i < GOODPUT_TARGETS; i++)
		any_missed |= missed(t, r, i);
	if (any_missed)
		return GOODPUT_BAD;
	return r->outcome == OUTCOME_OK ? GOODPUT_GOOD : GOODPUT_UNCOUNTED;
}
