/* SPDX-License-Identifier: Apache-2.0 */
/* The history's service on the main thread (history.h is the store): the
 * statistics' drained records feed it (stats_set_history); every half
 * second it takes the instance's concurrency and the SLOs' counts and
 * closes the steps that ended; its file (stats.history_file, else beside
 * slo_state or stats.file) is read at start, written every
 * stats.history_save_every (a minute), at a reload and at exit, whole (statefile.h). GET /stats/history reads it. */
#ifndef TOKENTAP_HISTORYD_H
#define TOKENTAP_HISTORYD_H

#include <stddef.h>

#include "config.h"

struct event_base;
struct evbuffer;
struct evhttp_request;

/* Starts with c's steps, the file read when there is one (a missing,
 * damaged or future one is said and the history starts empty). 0 or -1. */
int historyd_start(struct event_base *base, const struct conf *c);
/* New steps re-bucket what is kept (the old steps that divide the new
 * ones); a new file is written at once. */
void historyd_reload(const struct conf *c);
/* Writes the file, then frees everything. */
void historyd_stop(void);

/* GET /stats/history answered on req for the query string (range, step,
 * route, since, offset, limit), gzipped when gzip: -1 with why when a
 * parameter is wrong (a 400 to send); else the answer is under way, its
 * head sent and its series written and sent a slice of at most a few ms
 * at a time on the event loop (the document's "Query cost" is in
 * historyd.c). */
int historyd_serve(struct evhttp_request *req, const char *query, int gzip, char *why,
    size_t why_len);
/* The answers under way are cut short (their connections closed): before
 * the admin server that holds their requests is freed. */
void historyd_cancel(void);

#endif
