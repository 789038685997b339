/* SPDX-License-Identifier: Apache-2.0 */
/* The files tokentap appends lines to: the access log (worker threads) and
 * the stats file (the main thread).
 *
 * A line is in the file whole or not at all. A write that fails (a full
 * disk, a quota, a file-size limit) loses its line: counted per file
 * (tokentap_log_lines_lost_total and tokentap_log_bytes_lost_total{log},
 * "logs" in /stats) and said on stderr at most once every
 * LOGFILE_WARN_EVERY_S with the count since. A short write is finished if
 * the rest goes, else cut back (ftruncate) to where its line began, so the
 * next line never lands on a torn one. */
#ifndef TOKENTAP_LOGFILE_H
#define TOKENTAP_LOGFILE_H

#include <stddef.h>
#include <stdint.h>

#define LOGFILE_WARN_EVERY_S 10

enum logfile_kind { LOGFILE_ACCESS, LOGFILE_STATS, LOGFILES };

struct logfile;

struct logfile *logfile_of(enum logfile_kind kind);

/* Opens path for appending (the access log's "-" is stdout; a FIFO that no
 * process reads fails here, said, instead of holding the caller), in place
 * of the file open before, which stays when this fails. The same path
 * again is a reopen (logrotate). 0 or -1 (said). */
int logfile_open(struct logfile *l, const char *path);
int logfile_reopen(struct logfile *l);
void logfile_close(struct logfile *l);
/* 1 while a file is open: a caller skips formatting a line for none. */
int logfile_enabled(const struct logfile *l);

/* Appends buf (one or more whole lines); 0, or -1 when it was lost. Any
 * thread. */
int logfile_write(struct logfile *l, const void *buf, size_t len);

void logfile_lost(const struct logfile *l, uint64_t *lines, uint64_t *bytes);

/* Its name in /stats and /metrics (procmetrics.h): "access", "stats". */
const char *logfile_label(const struct logfile *l);

#endif
