/* The JSON access log (SPEC §5): one line per request, written when it
 * ends, with a single write(2) so lines from worker threads never mix. */
#ifndef TOKENTAP_ACCESSLOG_H
#define TOKENTAP_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>

#include "meter.h"

struct health;
/* An attempt that was left for another replica (failover.h). */
struct accesslog_attempt {
	const char *upstream;        /* the replica's name */
	const char *reason;          /* failover_reason_name() */
	unsigned status;             /* the response's, for "status"; else 0 */
	uint64_t us;                 /* from the attempt's start to leaving it */
};

struct accesslog_entry {
	const char *request_id;
	const char *client;
	const char *route;           /* NULL: no route matched */
	const char *tenant;
	const char *model;
	const char *method;
	const char *target;          /* request target; secrets are masked */
	size_t target_len;
	unsigned status;             /* 0: none was sent */
	enum meter_outcome outcome;
	const char *upstream;        /* the replica that answered (or was tried
	                              * last); NULL: none */
	const struct accesslog_attempt *attempts;   /* those left before it */
	unsigned n_attempts;
	const struct meter *m;
	uint64_t bytes_in;
	uint64_t bytes_out;
	long concurrency;
	unsigned exceeded;           /* ACCESSLOG_EXCEEDED_* bits */
	const struct health *health; /* the proxy's overhead, stalls; may be NULL */
	char *const *mask;           /* query parameters masked besides the */
	size_t n_mask;               /* built-in credential names */
};

enum {
	ACCESSLOG_TTFT_WARNING = 1,
	ACCESSLOG_TTFT_CRITICAL = 2,
	ACCESSLOG_TPOT_WARNING = 4,
	ACCESSLOG_TPOT_CRITICAL = 8,
	ACCESSLOG_TTFO_WARNING = 16,
	ACCESSLOG_TTFO_CRITICAL = 32
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
