/* SPDX-License-Identifier: Apache-2.0 */
/* Choosing one replica of a pool (pure: the caller gives the candidates,
 * their weights and loads, and the randomness). Three ways, as a route's
 * `balance` says:
 *   least_streams  power of two random choices: two candidates drawn by
 *                  weight, the one with fewer open streams per weight wins
 *                  (near the least loaded without every worker herding to
 *                  the same one between two updates of the counts);
 *   round_robin    a ticket from a shared counter walks the weights;
 *   hash           rendezvous (highest random weight) hashing of a key:
 *                  a replica that joins takes about 1/N of the keys from
 *                  the others and a leaving one's keys spread over the
 *                  rest, the others keeping theirs. */
#ifndef TOKENTAP_BALANCE_H
#define TOKENTAP_BALANCE_H

#include <stddef.h>
#include <stdint.h>

struct balance_cand {
	uint64_t weight;        /* > 0 */
	uint64_t load;          /* open streams */
	uint64_t id;            /* a stable hash of the replica (hash) */
};

/* Each returns the index of the chosen candidate, or -1 when n is 0. */
long balance_least(const struct balance_cand *c, size_t n, uint64_t *rng);
long balance_round_robin(const struct balance_cand *c, size_t n, uint64_t ticket);
long balance_hash(const struct balance_cand *c, size_t n, uint64_t key);

/* A 64-bit hash of bytes (FNV-1a, then mixed): keys and replica ids. */
uint64_t balance_key(const char *s, size_t len);

#endif
