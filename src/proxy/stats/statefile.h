/* SPDX-License-Identifier: Apache-2.0 */
/* Files of state tokentap keeps across a restart (slo_state, the
 * history): written whole or not at all, read back only from a regular
 * file. */
#ifndef TOKENTAP_STATEFILE_H
#define TOKENTAP_STATEFILE_H

#include <stddef.h>
#include <stdio.h>

/* Writes path through fill (0 or -1) into a temporary beside it
 * (path.tmp, made anew: O_EXCL, never through a link: O_NOFOLLOW), then
 * fsync and rename: the file is the old one or the new one, whole. Only a
 * regular file (or none) is replaced: a symlink or anything else put at
 * path is left as it is. Problems are logged as "what path: ...".
 * Returns 0 or -1. */
int statefile_write(const char *path, const char *what,
    int (*fill)(void *arg, FILE *f), void *arg);

/* The file's bytes (at most max); NULL with errno (ELOOP: a symlink;
 * ENODEV: not a regular file; EFBIG: over max). Opened non-blocking: a
 * FIFO there would hold the caller until some process wrote to it. */
char *statefile_read(const char *path, size_t max, size_t *len);

#endif
