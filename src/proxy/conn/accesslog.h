/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON access log (docs/contract.md §5): one line per request, written
 * when it ends, with a single write(2) so lines from worker threads never
 * mix. */
#ifndef TOKENTAP_ACCESSLOG_H
#define TOKENTAP_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>

#include "meter.h"
#include "sample.h"

/* An attempt that was left for another replica (failover.h). */
struct accesslog_attempt {
	const char *upstream;        /* the replica's name */
	const char *reason;          /* failover_reason_name() */
	unsigned status;             /* the response's, for "status"; else 0 */
	uint64_t us;                 /* from the attempt's start to leaving it */
};

/* One line: the request's own words (names, target, replicas) beside its
 * meter (the timeline, for the phases and the stream's details) and its
 * sample (sample.h: the figures the statistics count, so both agree). */
struct accesslog_entry {
	const char *request_id;
	const uint8_t *trace_id;     /* W3C trace context: 16 bytes, 8 bytes; */
	const uint8_t *span_id;      /* NULL: none */
	const char *client;
	const char *route;           /* NULL: no route matched */
	const char *tenant;
	const char *model;
	const char *method;
	const char *target;          /* request target; secrets are masked */
	size_t target_len;
	const char *upstream;        /* the replica that answered (or was tried
	                              * last); NULL: none */
	const struct accesslog_attempt *attempts;   /* those left before it */
	unsigned n_attempts;
	const struct meter *m;
	const struct sample *s;
	const struct vitals *vitals; /* the proxy's overhead; may be NULL */
	uint64_t bytes_in;
	uint64_t bytes_out;
	char *const *mask;           /* query parameters masked besides the */
	size_t n_mask;               /* built-in credential names */
};

/* Opens path ("-" = stdout); NULL turns the log off. Returns 0 or -1. */
int accesslog_open(const char *path);
/* Reopens the same path (SIGUSR1, after logrotate moved the file). */
int accesslog_reopen(void);
void accesslog_close(void);
void accesslog_write(const struct accesslog_entry *e);
/* The request target t as the log shows it, into out (at most cap - 1
 * bytes; the rest cut, never half a value): the value of each credential
 * parameter (key, api_key, token, ... and the names in more: the config's
 * access_log_mask) replaced by ***, its name compared without case and
 * with its percent-escapes decoded; in the query (separated by & or ;) and
 * in the path too, as a matrix parameter (/models;key=...) or a segment of
 * its own (/models/key=...). Returns the length. */
size_t accesslog_mask_target(const char *t, size_t len, char *const *more,
    size_t n_more, char *out, size_t cap);
/* Formats e into buf (no newline written past len-1); returns the length. */
size_t accesslog_format(const struct accesslog_entry *e, char *buf, size_t len);

#endif
