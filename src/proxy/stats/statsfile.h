/* SPDX-License-Identifier: Apache-2.0 */
/* stats.file: the /stats snapshot (first window, by route) appended as one
 * JSON line every stats.interval; reopened on SIGUSR1. */
#ifndef TOKENTAP_STATSFILE_H
#define TOKENTAP_STATSFILE_H

#include <stdint.h>

#include "config.h"

int statsfile_configure(const struct conf *c);
void statsfile_tick(uint64_t now_us);
void statsfile_reopen(void);
void statsfile_close(void);

#endif
