/* SPDX-License-Identifier: Apache-2.0 */
/* One request as the statistics see it: the group it counts in (its key)
 * and, once it ended, its figures (its sample). The exchange fills the
 * sample once, from its meter and its vitals, when the request ends; the
 * access log prints it, the ring (ring.h) carries it to the main thread,
 * and there the statistics, the metrics and the SLOs read it by pointer.
 * A new per-request figure touches the meter, this struct, sample_fill
 * and the readers that want it, nothing between. */
#ifndef TOKENTAP_SAMPLE_H
#define TOKENTAP_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "meter.h"
#include "vitals.h"

#define SAMPLE_ROUTE_MAX    64
#define SAMPLE_TENANT_MAX   64
#define SAMPLE_MODEL_MAX    128
#define SAMPLE_UPSTREAM_MAX 200   /* a replica's name (pool.h) */

/* A request may add its tenant or model to the names statistics groups
 * (and so /metrics label sets) are keyed by only when it earned it: the
 * backend accepted the request (2xx), or the operator named it (tenant.c);
 * never when the backend answered 401 or 403 or tokentap refused it.
 * A name not added is "_other"; one already there stays. */
#define SAMPLE_MINT_TENANT 1u
#define SAMPLE_MINT_MODEL  2u

/* The group key a worker sends with each record. */
struct sample_key {
	char route[SAMPLE_ROUTE_MAX];
	char tenant[SAMPLE_TENANT_MAX];
	char model[SAMPLE_MODEL_MAX];
	uint8_t dialect;           /* the stream's, and the operation of its */
	uint8_t op;                /* path (dialect_operation): for OTel labels */
	uint8_t mint;              /* SAMPLE_MINT_*: not part of the key */
	char upstream[SAMPLE_UPSTREAM_MAX];   /* the replica; "-": none */
	/* not part of the key, and last (compared apart): the stream's id
	 * (ring_stream_id), 0: none. Its gauge records go to the group its
	 * +1 went to. */
	uint64_t stream;
};

/* mint: both (the caller says otherwise), upstream "-", stream: none. No
 * printf: a key is built for every batch of token gaps. */
void sample_key_set(struct sample_key *k, const char *route, const char *tenant,
    const char *model, size_t model_len);

/* A TTFT doubted by more than this is uncertain (its first token was
 * read merged with later bytes while the worker was behind). */
#define SAMPLE_UNCERTAIN_US 1000

/* The thresholds a request passed (the access log's "exceeded"). */
enum {
	SAMPLE_TTFT_WARNING = 1,
	SAMPLE_TTFT_CRITICAL = 2,
	SAMPLE_TPOT_WARNING = 4,
	SAMPLE_TPOT_CRITICAL = 8,
	SAMPLE_TTFO_WARNING = 16,
	SAMPLE_TTFO_CRITICAL = 32
};

/* A finished request's figures; durations in µs, -1 where undefined. */
struct sample {
	uint8_t outcome;           /* enum meter_outcome */
	uint8_t exceeded;          /* SAMPLE_* threshold bits */
	uint16_t status;           /* the status the client got; 0: none */
	uint64_t t_us;             /* when it ended (monotonic) */
	int64_t ttft_us, tpot_us, ttfo_us, duration_us;
	/* the server side's (meter_ttft_server_us): from the request's last
	 * byte, what judges the route: the alerts, the SLOs, the headroom
	 * and the slow replicas (0 duration: the request never completed) */
	int64_t ttft_server_us, ttfo_server_us, duration_server_us;
	/* OpenTelemetry's time to first chunk (a stream's): from tokentap's
	 * send of the request's end (t_sent, the replica that answered) to
	 * the first token-bearing event; 0 where the backend answered first */
	int64_t ttfc_us;
	int64_t connect_us;        /* a new upstream connection's; -1: pooled */
	int64_t output_tokens, input_tokens;   /* -1: unknown */
	/* output speed: (N - 1) tokens over the time from the first token to
	 * the last; 0 and 0 where it is not measured (a client held it) */
	uint64_t speed_tokens, speed_us;
	int64_t concurrency;       /* streams open at t0, this one excluded */
	/* stream health */
	uint8_t no_token;          /* ended without a token (meter_no_token) */
	uint8_t judged, buffered;  /* clumping judged, and looked buffered */
	/* TTFT's doubt (meter_ttft_doubt_us; -1: no TTFT); a TTFT the
	 * kernel stamped from a whole read (a plain upstream's, a TLS
	 * one's that OpenSSL kept none of),
	 * and of those one doubted by more than
	 * SAMPLE_UNCERTAIN_US (docs/measurement.md, "Doubt") */
	int64_t ttft_doubt_us;
	uint8_t ttft_stamped, ttft_uncertain;
	uint64_t stalls;           /* those not reported live */
	int64_t ovh_request_us;    /* the proxy's own: -1: none */
	uint64_t ovh_read_sum_us;
	uint16_t ovh_read[VITALS_OVH_BUCKETS];
	/* chunks are not tokens: where N came from, the token events, the
	 * first one's tokens (-1: not told), TPOT's divisor an estimate */
	uint8_t token_source;      /* enum meter_tokens */
	uint8_t tpot_estimated;
	uint64_t token_events;
	int64_t first_event_tokens;
	struct meter_wire wire;    /* what the stream looked like on the wire */
};

/* s from the ended meter m and the exchange's vitals v (NULL: none). */
void sample_fill(struct sample *s, const struct meter *m, const struct vitals *v,
    enum meter_outcome outcome, unsigned status, unsigned exceeded,
    long concurrency);

#endif
