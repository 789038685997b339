/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy's view beside the client's (--tokentap ADMIN_URL): each
 * request paired by id with its line in the access log the admin names
 * (load_tt_find_log, load_tt_pair) when it can be read here; else
 * tokentap's own figures for the requests of a level, read from its admin /stats
 * (GET /stats?window=W&by=route; the route, --tokentap-route, else the one
 * with the most requests in the window). /stats serves sliding windows of
 * six slices each (stats.windows): a window read at time t holds the
 * requests that ended from at least 5/6 of it before t. So the figures
 * are a level's when its requests ended within 5/6 of the window before
 * the read, and none of the level before it did: tokentap-load waits a
 * window and a slice between levels, and warns when a level ran longer
 * than 5/6 of it. An admin token, if tokentap has one, is read from
 * $TOKENTAP_ADMIN_TOKEN. */
#ifndef TOKENTAP_LOAD_TT_H
#define TOKENTAP_LOAD_TT_H

#include <stdint.h>
#include <sys/types.h>

#include "load_result.h"

struct load_tt_conf {
	char host[256];
	unsigned port;
	char *base_path;             /* the admin URL's path, without a trailing / */
	const char *window;          /* NULL: tokentap's default window */
	const char *route;           /* NULL: the busiest */
	uint64_t window_us;          /* learnt from the first read */
};

/* Parses url (http://HOST:PORT[/prefix]). Returns 0, or -1 with *err. */
int load_tt_conf_init(struct load_tt_conf *c, const char *url, const char *window,
    const char *route, const char **err);
void load_tt_conf_free(struct load_tt_conf *c);
/* One read of /stats into *out (out->ok, or out->error). Learns the
 * window's length into c on success. timeout_ms bounds the whole read. */
void load_tt_read(struct load_tt_conf *c, struct load_tt *out, int timeout_ms);
/* How long to wait after a level's last request before the next level
 * starts, so that the next read holds none of it (µs). */
uint64_t load_tt_settle_us(const struct load_tt_conf *c);
/* The longest level the window holds whole (µs). */
uint64_t load_tt_span_us(const struct load_tt_conf *c);

/* Where tokentap's access log is, as its admin says (GET /ui/config.json,
 * "access_log": absolute; null when it writes none to a file), for
 * --tokentap without --tokentap-log: the pairs by id then need no window.
 * Returns 0 with the path in path when it can be opened for reading here,
 * else -1 with why not and the fix in why (the run falls back to /stats
 * windows). */
int load_tt_find_log(const struct load_tt_conf *c, char *path, size_t len, char *why,
    size_t whylen, int timeout_ms);

/* --tokentap-log FILE: pairs every measured request of r's levels with
 * tokentap's access-log line of it, by its X-Request-Id (the log's
 * request_id: <run_id>-<level>-<seq>, <run_id>-<level>r<k>-<seq> for
 * the k-th repeat), into each level's pairs: no /stats window to wait
 * for, and the difference per request, not of two histograms' buckets.
 * A line is written a moment after the client had the last byte: the
 * file is read again, 50 ms apart, until every request is in it or
 * wait_ms passed. The file is read from byte from (its size before the
 * levels: a busy proxy's log is gigabytes of other requests), or whole
 * when it is shorter now (rotated). Returns 0, or -1 with err (the file
 * cannot be read). */
int load_tt_pair(const char *path, off_t from, struct load_result *r, int wait_ms,
    char *err, size_t errlen);

#endif
