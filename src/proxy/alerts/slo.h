/* SPDX-License-Identifier: Apache-2.0 */
/* SLOs (slos:), pure: no clock, no I/O beyond the buffers given.
 *
 * Each finished request is judged per SLO whose match it meets (goodput.h)
 * and counted good or bad in fixed buckets of wall-clock time: a ring over
 * the SLO's period for the error budget (5-minute buckets over 28 days), a
 * ring over the longest burn window for the burn rates (buckets a fifth of
 * the shortest), and one small ring per /stats window for attainment and
 * goodput there. Burn-rate pairs (the SRE Workbook's multi-window,
 * multi-burn-rate alerts) fire while both of their windows burn the budget
 * faster than their rate, each window holding at least burn_min_requests.
 * The budget and burn rings are written to and read from a state file's
 * text. */
#ifndef TOKENTAP_SLO_H
#define TOKENTAP_SLO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alert.h"
#include "config.h"
#include "goodput.h"

struct evbuffer;
struct promout;

#define SLO_MAX_BUCKETS 131072   /* per SLO: 1 MiB of counts at most */

/* A finished request as the statistics saw it; t_us is when it ended, on
 * the wall clock. */
struct slo_request {
	const char *route, *tenant, *model;
	struct goodput_request r;
	uint64_t t_us;
};

struct slo_set;

struct slo_set *slo_new(void);
void slo_free(struct slo_set *s);

/* The SLOs, pairs and windows of c. An SLO that keeps its name keeps its
 * counts (as long as its buckets keep their length) and its pairs' states;
 * a pair that goes away while firing is reported resolved through fn.
 * Returns 0 or -1 (out of memory: the old SLOs stay). */
int slo_configure(struct slo_set *s, const struct conf *c, uint64_t now_us,
    void (*fn)(void *arg, const struct alert_transition *t), void *arg);
size_t slo_count(const struct slo_set *s);

/* Counts q in every SLO it matches. */
void slo_record(struct slo_set *s, const struct slo_request *q);
/* Each SLO's requests judged good and bad since the start (the counters of
 * tokentap_slo_requests_total), for the history's steps. */
void slo_each_total(const struct slo_set *s,
    void (*fn)(void *arg, const char *name, uint64_t good, uint64_t bad), void *arg);
/* 1 when counts changed since the last slo_state_write. */
int slo_dirty(const struct slo_set *s);

/* Evaluates every pair at now; each change to firing or back goes to fn. */
void slo_evaluate(struct slo_set *s, uint64_t now_us,
    void (*fn)(void *arg, const struct alert_transition *t), void *arg);

/* GET /slo: {"generated_at", "slos": [...]} */
void slo_json(struct slo_set *s, struct evbuffer *out, uint64_t now_us);
/* tokentap_slo_requests_total{slo,result} and tokentap_slo_objective{slo}. */
void slo_prometheus(const struct slo_set *s, struct promout *out);
/* The pairs as /alerts rules and tokentap_alert_firing lines
 * (alert_set_outside's hooks). */
void slo_alert_json(void *set, struct evbuffer *out, int *first);
void slo_alert_prometheus(void *set, struct promout *out);

/* The budget and burn rings as text (the state file). Returns 0 or -1. */
int slo_state_write(struct slo_set *s, FILE *f);
/* How far ahead of now a state file's buckets may begin and still count
 * (as now's): clocks of hosts that share a file drift apart by
 * milliseconds under NTP, by seconds before it syncs. A minute is also the
 * burn ring's bucket at the default pairs (a fifth of 5m): what it keeps
 * moves by at most a bucket. */
#define SLO_STATE_AHEAD_US (60 * 1000000ull)

/* The clock a state file is read against, and who hears what was dropped
 * for being ahead of it (note: one message per section, "line 2: ..."). */
struct slo_state_clock {
	uint64_t now_us;                        /* the wall clock */
	void (*note)(void *arg, const char *msg);
	void *arg;
};

/* Reads what slo_state_write wrote into the SLOs of the same names (their
 * counts replaced; buckets of another length are re-bucketed, those older
 * than a ring holds dropped). A number with a sign or past its type's
 * range is an error. No ring is left ahead of clk->now_us: buckets up to
 * SLO_STATE_AHEAD_US after it count as now's, later ones are dropped (said
 * through clk->note, once per section), the older ones kept. Errors are
 * all or nothing:
 * on -1 nothing changed and why says what is wrong ("line 3: ..."). */
int slo_state_read(struct slo_set *s, const char *text, size_t len,
    const struct slo_state_clock *clk, char *why, size_t why_len);

#endif
