/* SPDX-License-Identifier: Apache-2.0 */
/* The one PRNG: splitmix64, small and fast, for draws that need to be
 * repeatable from a seed (the mock's text and jitter, tokentap-load's
 * token counts, prompts and arrivals) and for request ids. Not for
 * secrets. The state is one uint64_t the caller owns; any value, 0
 * included, is a valid seed. */
#ifndef TOKENTAP_RNG_H
#define TOKENTAP_RNG_H

#include <stdint.h>

/* The next 64 random bits; advances *state. */
uint64_t rng_next(uint64_t *state);
/* Uniform in [0, 1), 53 bits. */
double rng_unit(uint64_t *state);
/* Uniform in (0, 1): never 0, for log(). */
double rng_unit_open(uint64_t *state);
/* A seed that differs per call and per process: getrandom(2), or the
 * clock when that fails. Never 0. */
uint64_t rng_seed(void);

#endif
