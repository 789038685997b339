/* SPDX-License-Identifier: Apache-2.0 */
/* --shard I/N: one plan run on N machines, each sending an exact share of
 * it, so that the union of the shards' requests IS the one-machine plan
 * and `tokentap-load merge` computes every figure from all of them.
 *
 * The plan's requests are numbered 0, 1, 2, ... (their seq) as one
 * machine would send them: an open loop's arrivals in schedule order
 * (every shard draws the whole schedule from the seed and sends only its
 * own), a closed loop's in the order its users start them, a trace's by
 * line. Shard I sends the requests whose seq is I modulo N: its k-th is
 * seq k N + I. What a request asks (its prompt, its sizes, its prefix) is
 * a function of the seed and its seq alone (load_shard_rng), not of what
 * the generator drew before it, so request 7 asks the same on shard 1 of
 * 3 as in the run on one machine. A closed loop's users are dealt the same
 * way (user j to shard j mod N), as is an open loop's -c; a count (-n,
 * --warmup-requests) counts seqs of the whole plan.
 *
 * Why every N-th and not N seeds: N seeded schedules at rate / N are a
 * load of the same mean but not the plan (a Poisson process split by
 * turns is not Poisson, and N independent ones are not the seeded one);
 * a split by seq is exact for every arrival process, a trace and a count.
 * Pure. */
#ifndef TOKENTAP_LOAD_SHARD_H
#define TOKENTAP_LOAD_SHARD_H

#include <stdint.h>

#define LOAD_SHARD_MAX 4096u

/* "I/N", 0 <= I < N <= LOAD_SHARD_MAX. Returns 0, or -1 with *err. */
int load_shard_parse(const char *s, uint32_t *index, uint32_t *count,
    const char **err);
/* The seq of shard i's k-th request (n 0: no sharding, k itself). */
uint64_t load_shard_seq(uint64_t k, uint32_t i, uint32_t n);
/* Whether the plan's request seq is shard i's. */
int load_shard_mine(uint64_t seq, uint32_t i, uint32_t n);
/* How many of the plan's [from, from + count) are shard i's: its share of
 * a count of requests, or of users (from 0). */
uint64_t load_shard_share(uint64_t from, uint64_t count, uint32_t i, uint32_t n);
/* The generator state request seq draws what it asks from: the seed
 * and seq mixed (splitmix64's finaliser), the same on every shard. */
uint64_t load_shard_rng(uint64_t seed, uint64_t seq);

#endif
