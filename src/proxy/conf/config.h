/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration (docs/contract.md §2): loaded from YAML with libyaml,
 * validated whole, then read-only. A loaded config is shared by worker threads
 * and reference-counted: each request keeps the config it started with, so a
 * SIGHUP reload never changes a stream in flight. */
#ifndef TOKENTAP_CONFIG_H
#define TOKENTAP_CONFIG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ere.h"

#include "dialect_names.h"
#include "goodput.h"

/* Durations are kept in microseconds, sizes in bytes. */

struct conf_kv {
	char *name;
	char *value;
};

/* Where a key's value is in the file (1-based), for errors found after
 * loading: a certificate that does not load. */
struct conf_pos {
	size_t line, col;
};

#define CONF_BACKLOG 4096        /* listen[].backlog's default */

struct conf_listen {
	char *address;          /* as written, "0.0.0.0:8080" */
	char host[256];         /* "" = any address */
	unsigned port;
	uint64_t backlog;       /* listen(2)'s, default 4096 */
	char *tls_cert;         /* NULL: plain TCP */
	char *tls_key;
	struct conf_pos tls_cert_at, tls_key_at;
	void *tls_ctx;          /* SSL_CTX, made by tls_prepare() */
};

struct conf_timeouts {
	uint64_t client_header_us;
	uint64_t client_body_us;       /* the longest pause of a request body's
	                                * upload (between two reads) */
	uint64_t connect_us;
	uint64_t first_byte_us;
	uint64_t idle_us;
	uint64_t shutdown_us;
	uint64_t send_us;              /* a client that takes no bytes this long */
	uint64_t upstream_keepalive_us; /* an idle pooled connection's life */
	uint64_t token_idle_us;        /* no token this long ends a stream; 0: off */
	uint64_t first_token_us;       /* a replica's first token by then, else the
	                                * next replica (0: no deadline) */
};

/* A threshold that is not configured is 0 (durations) or < 0 (rates). */
struct conf_thresholds {
	uint64_t ttft_warning_us;
	uint64_t ttft_critical_us;
	uint64_t tpot_warning_us;
	uint64_t tpot_critical_us;
	double error_rate_warning;
	double error_rate_critical;
	uint64_t ttfo_warning_us;      /* time to the first answer token */
	uint64_t ttfo_critical_us;
	uint64_t stall_us;             /* a token-free gap this long is a stall; 0: off */
	uint64_t min_stalled;          /* StreamStalled: streams stalled at once */
	uint64_t min_healthy;   /* a route's: PoolUnhealthy below this many
	                         * serving replicas (0: no rule) */
	double ttft_uncertain_warning; /* TTFTUncertain: the share of the
	                         * kernel-stamped TTFTs doubted by over 1 ms
	                         * (sample.h) above which the worker is behind;
	                         * 0: no rule (the default: a backend that
	                         * writes several events at once is doubted
	                         * alike, a read cannot tell) */
};

struct conf_tls {
	int verify;             /* default 1 */
	char *ca_file;
	char *sni;              /* default: the upstream host */
	char *client_cert;
	char *client_key;
	struct conf_pos at, ca_file_at, client_cert_at;   /* at: the tls map */
};

/* One replica of a route's pool as written: `upstream:`, or an item of
 * `upstreams:`. A DNS name stands for every address it resolves to. */
struct conf_upstream {
	char *url;              /* as written */
	uint64_t weight;        /* default 1 */
	int tls;                /* https:// */
	char host[256];
	unsigned port;          /* default 80 / 443 */
	char *base;             /* base path without trailing '/', "" if none */
};

enum conf_balance { BALANCE_LEAST_STREAMS, BALANCE_ROUND_ROBIN, BALANCE_HASH };

#define CONF_UPSTREAMS_MAX 64   /* replicas a route lists */
#define CONF_RETRIES_MAX   8    /* extra attempts a request may make */
#define CONF_RETRY_ON_MAX  16
#define CONF_UPGRADES_MAX  8
#define CONF_UPGRADE_LEN   32

/* The throughput probe (health.throughput): on a pool, a stream is held
 * after its first token until `tokens` more came or `window` passed, and
 * one whose replica made them slower than min_rate goes to another
 * replica before any byte reached the client. Off while min_rate is 0. */
struct conf_throughput {
	double min_rate;        /* tokens per second; 0: off */
	uint64_t tokens;        /* tokens after the first: 16 */
	uint64_t window_us;     /* at most this long after the first token: 2s */
};

/* A pool's health rules: passive (every request's fate), and active checks
 * when path is set. */
struct conf_health {
	char *path;             /* GET this on every replica; NULL: no checks */
	uint64_t interval_us;   /* 10s */
	uint64_t timeout_us;    /* 2s */
	uint64_t failures;      /* consecutive failures that eject: 1 */
	uint64_t backoff_us;    /* the first ejection (1s), doubled each time */
	uint64_t backoff_max_us; /* 30s */
	double ttft_factor;     /* TTFT p95 over this many times the pool's
	                         * median: a quarter of its share (3; 0: off) */
	struct conf_throughput throughput;
};

struct pool;

struct conf_route {
	char *name;
	/* match: every key given must match; none given matches everything */
	char *match_path_prefix;
	char *match_host;
	struct conf_kv *match_headers;
	size_t n_match_headers;

	/* the replicas; upstream* repeat the first one's (messages, -t) */
	struct conf_upstream *upstreams;
	size_t n_upstreams;
	char *upstream;         /* as written */
	int upstream_tls;       /* https:// (any replica's) */
	char upstream_host[256];
	unsigned upstream_port; /* default 80 / 443 */
	char *upstream_base;    /* base path without trailing '/', "" if none */
	enum conf_balance balance;     /* least_streams */
	char *hash_header;      /* balance hash: this header's value, else the tenant */
	uint64_t retries;       /* extra attempts on another replica: 1 */
	unsigned retry_on[CONF_RETRY_ON_MAX];   /* 502 503 429 */
	size_t n_retry_on;
	uint64_t dns_ttl_us;    /* names are resolved again this often: 30s */
	struct conf_health health;
	struct pool *pool;      /* the replicas' shared state (poold.c attaches
	                         * it; NULL in a config only checked) */

	enum dialect_id dialect;
	int strip_prefix;
	int preserve_host;
	int request_buffering;  /* read the body whole before connecting */
	/* upgrades: the protocols a client may switch to (Upgrade, 101),
	 * names without case: websocket */
	char upgrades[CONF_UPGRADES_MAX][CONF_UPGRADE_LEN];
	size_t n_upgrades;
	struct conf_kv *set_headers;
	size_t n_set_headers;
	struct conf_tls tls;
	void *tls_ctx;          /* SSL_CTX for https upstreams, made by tls_prepare() */
	/* the global values with this route's overrides applied */
	struct conf_thresholds thresholds;
	struct conf_timeouts timeouts;
	/* mutable: a log line said once per loaded config */
	atomic_int warned_encoding;
};

enum conf_notify_type { NOTIFY_LOG, NOTIFY_WEBHOOK, NOTIFY_ALERTMANAGER };

struct conf_notify {
	enum conf_notify_type type;
	char *url;
	struct conf_kv *headers;
	size_t n_headers;
	uint64_t timeout_us;         /* default 5s */
	uint64_t repeat_interval_us; /* alertmanager, default 1m */
};

/* An SLO (slos:): the requests of its match (every key given must match)
 * judged good or bad against its targets (goodput.h), with an error
 * budget of 1 - objective over period. */
struct conf_slo {
	char *name;                  /* [A-Za-z0-9_.:-], at most 63 bytes */
	char *match_route, *match_tenant, *match_model;  /* NULL: any */
	struct goodput_targets targets;
	double objective;            /* 0.99 */
	uint64_t period_us;          /* 28d */
};

/* A multi-window burn-rate alert (alerts.burn_rates, SLOBurnRate): fires
 * while both windows burn the budget faster than rate. */
struct conf_burn {
	int critical;                /* severity: 1 critical, 0 warning */
	uint64_t long_us, short_us;
	double rate;
};

/* OpenTelemetry export (otel:, otelconf.h): spans and metrics over
 * OTLP/HTTP. Unset values are filled from the OTel SDKs' environment
 * variables, then the defaults. */
enum conf_otel_protocol { OTEL_PROTOBUF, OTEL_JSON };

struct conf_otel {
	char *endpoint;              /* base URL (/v1/traces, /v1/metrics); NULL: none */
	char *traces_url, *metrics_url;   /* the full URLs */
	int protocol;                /* enum conf_otel_protocol */
	int gzip;
	struct conf_kv *headers;     /* sent with every export; never logged */
	size_t n_headers;
	/* OTEL_EXPORTER_OTLP_TRACES_HEADERS, _METRICS_HEADERS: instead of
	 * headers for one signal, when the file gives no otel.headers */
	struct conf_kv *traces_headers, *metrics_headers;
	size_t n_traces_headers, n_metrics_headers;
	uint64_t timeout_us;         /* one export request: 10s */
	struct conf_tls tls;         /* as a route's */
	void *tls_ctx;               /* SSL_CTX, by tls_prepare() */
	char *service_name;          /* tokentap */
	struct conf_kv *resource;    /* more resource attributes */
	size_t n_resource;
	int traces;                  /* spans exported (with an endpoint) */
	double sample;               /* requests without a traceparent: 0 */
	uint64_t queue;              /* spans waiting for export, in all: 2048 */
	uint64_t batch;              /* spans per export request: 512 */
	uint64_t delay_us;           /* a batch waits at most this: 1s */
	int metrics;                 /* metrics exported (with an endpoint) */
	uint64_t interval_us;        /* 60s */
	int delta;                   /* temporality: cumulative (0) or delta */
	int explicit_buckets;        /* histograms: exponential (0) or explicit */
	struct conf_pos at;          /* the otel: map */
};
/* Where the times of reads come from (docs/measurement.md, "Where each
 * time comes from"): the kernel's receive stamps, or the event loop's
 * clock. */
enum conf_timestamps { TIMESTAMPS_KERNEL, TIMESTAMPS_LOOP };
/* read_order: a worker behind reads the upstreams still waiting for their
 * first token before the streams in flight, or all as they come */
enum conf_read_order { READ_ORDER_FIRST_TOKEN, READ_ORDER_EVEN };

struct conf {
	char *path;                  /* the file it was loaded from */
	atomic_int refs;

	struct conf_listen *listen;  /* default: one, 127.0.0.1:8080 */
	size_t n_listen;

	char *admin_address;         /* default "127.0.0.1:9464" */
	char admin_host[256];
	unsigned admin_port;
	char *admin_token;           /* NULL: no token */

	int workers;                 /* "auto" is resolved at load: CPU count */
	enum conf_timestamps timestamps;  /* kernel */
	enum conf_read_order read_order;  /* first_token */

	struct conf_timeouts timeouts; /* 10s 5s 120s 60s 30s */

	uint64_t max_connections;    /* 10000 */
	uint64_t max_header_bytes;   /* 32k */
	uint64_t max_body_bytes;     /* 16m */
	uint64_t max_event_bytes;
	uint64_t client_backlog;     /* bytes queued to slow clients, in all */    /* 1m */
	uint64_t request_buffers;    /* request bodies held in memory, in all: 16m */
	uint64_t upstream_keepalive; /* idle connections a worker keeps a replica: 256 */

	char *tenant_header;         /* NULL: none */
	struct conf_kv *tenant_api_keys; /* name -> sha256 hex (lowercase) */
	size_t n_tenant_api_keys;
	uint64_t max_tenants;        /* 1000 */
	uint64_t max_models;         /* 100 */
	/* tenants the operator names by header value (besides api_keys):
	 * these get their own label in /metrics */
	char **tenant_header_values;
	size_t n_tenant_header_values;
	char *tenant_header_pattern;     /* POSIX extended (ere.h), matched whole */
	struct ere tenant_header_re;     /* compiled, when the pattern is set */
	int tenant_header_re_ok;
	/* models the operator names: with either set, only these get their
	 * own label in /stats and /metrics; without, a model earns its label
	 * with a response 2xx (stats.h, SAMPLE_MINT_MODEL) */
	char **model_names;
	size_t n_model_names;
	char *model_pattern;
	struct ere model_re;
	int model_re_ok;

	uint64_t metrics_max_series;     /* 20000 */
	int metrics_names;               /* enum metrics_names: tokentap */
	int metrics_hashed_tenants;      /* metrics.tenants: hashed */
	uint64_t metrics_expiration_us;  /* 10m: a label set idle this long goes; 0: never */

	struct conf_route *routes;
	size_t n_routes;

	char *access_log;            /* NULL: off; "-": stdout */
	char **access_log_mask;      /* query parameters masked too */
	size_t n_access_log_mask;

	uint64_t *stats_windows_us;  /* default 1m 5m 1h */
	size_t n_stats_windows;
	char *stats_file;            /* NULL: off */
	struct conf_pos access_log_at, stats_file_at;   /* for conf_check_paths */
	uint64_t stats_interval_us;  /* 10s */
	/* the statistics' memory (history.h): its steps, finest first; none:
	 * off. Default 10s for 1h, 1m for 24h. */
	struct conf_history_step {
		uint64_t step_us;
		uint64_t keep_us;      /* a whole number of steps */
	} *stats_history;
	size_t n_stats_history;
	/* where it is kept across restarts: stats.history_file, else
	 * slo_state + ".history", else stats.file + ".history"; NULL: memory only */
	char *stats_history_file;
	struct conf_pos stats_history_file_at;
	uint64_t stats_history_save_every_us;  /* 1m: the file's save */

	uint64_t alerts_evaluate_every_us; /* 10s */
	uint64_t alerts_window_us;         /* 1m */
	double alerts_quantile;            /* 0.95 */
	uint64_t alerts_min_samples;       /* 10 */
	uint64_t alerts_for_us;            /* 0 */
	double alerts_hysteresis;          /* 0.1 */
	int alerts_per_tenant;             /* 0 */
	struct conf_thresholds thresholds; /* 1000ms 2000ms 100ms 200ms, rates and
	                                    * ttfo unset, stall 10s, min_stalled 1 */
	struct conf_notify *notify;        /* default: none */
	size_t n_notify;

	struct conf_slo *slos;             /* default: none */
	size_t n_slos;
	char *slo_state;                   /* NULL: the budgets live in memory only */
	struct conf_pos slo_state_at;
	struct conf_burn *burn_rates;      /* default: the SRE Workbook's three */
	size_t n_burn_rates;
	uint64_t burn_min_requests;        /* per window, 10 */

	struct conf_otel otel;             /* default: no export */
};

/* Loads and validates a config file. Every problem found is written to errs
 * as one line "FILE:LINE:COL: message" (FILE as given). Returns the config,
 * or NULL when there was any problem. */
struct conf *conf_load(const char *path, FILE *errs);
/* The files the config names that tokentap writes (access_log, stats.file,
 * slo_state) can be: the file writable and not a directory, or its
 * directory there, a directory and writable; slo_state a regular file (not
 * a symlink, FIFO, ...) in a writable directory. What start would fail on,
 * found by -t and by a reload, reported as FILE:LINE:COL. 0 or -1. */
int conf_check_paths(const struct conf *c, FILE *errs);

/* The same from a string; name stands for the file in messages. */
struct conf *conf_load_string(const char *name, const char *text, size_t len,
    FILE *errs);

/* A config with every default and no routes (used before the first load
 * and by tests). */
struct conf *conf_default(void);

/* workers: auto, the CPUs this process may run on (1 to 256). */
int conf_auto_workers(void);

/* Reference counting: conf_load returns a config holding one reference. */
struct conf *conf_ref(struct conf *c);
void conf_unref(struct conf *c);

#define CONF_HISTORY_STEPS_MAX      4       /* stats.history's steps */
#define CONF_HISTORY_KEEP_STEPS_MAX 100000  /* what one keeps, in its steps */

/* Whether stats.history's steps t can be kept: steps of whole seconds,
 * each coarser one a multiple of the finer one's and no longer than its
 * span, spans growing, at most CONF_HISTORY_KEEP_STEPS_MAX steps each.
 * NULL, or what is wrong. */
const char *conf_history_check(const struct conf_history_step *t, size_t n);

#endif
