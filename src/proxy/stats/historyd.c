/* SPDX-License-Identifier: Apache-2.0 */
#include "historyd.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <zlib.h>

#include "gauge.h"
#include "headroom.h"
#include "history.h"
#include "jsonw.h"
#include "log.h"
#include "slod.h"
#include "statefile.h"
#include "stats.h"
#include "util.h"
#include "yconf.h"

#define TICK_US 500000
#define FILE_MAX ((size_t)1 << 30)

static struct history *hist;
static unsigned gen;           /* new with each store (a reload's new steps) */
static struct event *runner;   /* the answers' slices (run_jobs) */
static void run_jobs(evutil_socket_t fd, short what, void *arg);
static struct event *tick;
static struct conf *conf;
static char *path;
static uint64_t saved_at;

/* Each SLO's counts as last seen: the steps get what came since. */
static struct slo_seen {
	char name[HISTORY_NAME_MAX];
	uint64_t good, bad;
} *seen;
static size_t n_seen, cap_seen;

static uint64_t now_wall(void)
{
	return (uint64_t)((int64_t)stats_clock() + history_offset(hist));
}

static void tiers_of(const struct conf *c, struct conf_history_step *t)
{
	for (size_t i = 0; i < c->n_stats_history && i < HISTORY_TIERS_MAX; i++) {
		t[i].step_us = c->stats_history[i].step_us;
		t[i].keep_us = c->stats_history[i].keep_us;
	}
}

/* ---- the SLOs' counts ----------------------------------------------------- */

static void on_slo_total(void *arg, const char *name, uint64_t good, uint64_t bad)
{
	uint64_t t = *(const uint64_t *)arg;
	struct slo_seen *s = NULL;

	for (size_t i = 0; i < n_seen && s == NULL; i++)
		if (strncmp(seen[i].name, name, sizeof seen[i].name - 1) == 0)
			s = &seen[i];
	if (s == NULL) {
		if (n_seen == cap_seen) {
			size_t cap = cap_seen ? cap_seen * 2 : 8;
			struct slo_seen *v = realloc(seen, cap * sizeof *v);
			if (v == NULL)
				return;
			seen = v;
			cap_seen = cap;
		}
		s = &seen[n_seen++];
		snprintf(s->name, sizeof s->name, "%s", name);
		s->good = s->bad = 0;
	}
	/* an SLO made anew by a reload counts from 0 again */
	history_slo(hist, name, t, good >= s->good ? good - s->good : good,
	    bad >= s->bad ? bad - s->bad : bad);
	s->good = good;
	s->bad = bad;
}

/* ---- the file ------------------------------------------------------------- */

static int to_file(void *arg, const void *p, size_t n)
{
	return fwrite(p, 1, n, arg) == n ? 0 : -1;
}

static int fill_file(void *arg, FILE *f)
{
	(void)arg;
	return history_save(hist, now_wall(), to_file, f);
}

static void save(void)
{
	if (path != NULL && hist != NULL)
		statefile_write(path, "stats.history_file", fill_file, NULL);
	saved_at = stats_clock();
}

/* A child writing the file (0: none), and a save asked for meanwhile. */
static pid_t saver;
static int save_again;

/* The file written by a child of this process: fork copies the store as
 * it is now (copy on write), and the child encodes, writes, fsyncs and
 * renames it while this thread goes on. A day of 1,024 series is 170 MB:
 * written here it held the main thread 0.2 to 0.45 s once a minute (the
 * fork: a few ms). Where fork fails, written here. */
static void save_async(void)
{
	pid_t pid;

	if (path == NULL || hist == NULL)
		return;
	if (saver > 0) {
		save_again = 1;        /* the one under way has the older store */
		return;
	}
	saved_at = stats_clock();
	pid = fork();
	if (pid == 0)
		_exit(statefile_write(path, "stats.history_file", fill_file, NULL) == 0 ? 0 : 1);
	if (pid < 0) {
		save();
		return;
	}
	saver = pid;
}

/* The child collected once it has ended (block: waiting for it). */
static void reap(int block)
{
	int st;

	if (saver <= 0 || waitpid(saver, &st, block ? 0 : WNOHANG) != saver)
		return;
	saver = 0;
	if (save_again) {
		save_again = 0;
		if (!block)
			save_async();
	}
}

/* The file read into a store of c's steps; NULL (said) when there is
 * none to read. */
static struct history *load(const struct conf *c, int64_t offset)
{
	struct conf_history_step t[HISTORY_TIERS_MAX];
	struct history *h;
	char why[256];
	size_t len;
	uint8_t *bytes;

	if (path == NULL)
		return NULL;
	bytes = (uint8_t *)statefile_read(path, FILE_MAX, &len);
	if (bytes == NULL) {
		if (errno == ENOENT)
			log_info("stats.history_file %s: not there yet; the history starts empty",
			    path);
		else
			log_warn("stats.history_file %s: cannot read (%s); the history starts "
			    "empty", path, errno == ELOOP ? "a symlink" : errno == ENODEV ?
			    "not a regular file" : errno == EFBIG ? "over 1 GiB" : strerror(errno));
		return NULL;
	}
	tiers_of(c, t);
	h = history_load(bytes, len, t, c->n_stats_history,
	    (uint64_t)((int64_t)stats_clock() + offset), why, sizeof why);
	free(bytes);
	if (h == NULL) {
		log_warn("stats.history_file %s: %s; the history starts empty", path, why);
		return NULL;
	}
	log_info("stats.history_file %s: the history of %zu route(s) and SLO(s) read",
	    path, history_n_series(h) - 1);
	return h;
}

static void set_path(const struct conf *c)
{
	free(path);
	path = c->stats_history_file != NULL && c->n_stats_history > 0 ?
	    strdup(c->stats_history_file) : NULL;
}

/* ---- the service ---------------------------------------------------------- */

/* A route or an SLO the config names keeps its series; one a reload
 * removed loses it (history_set_keep). */
static int keep_series(void *arg, enum history_kind kind, const char *name)
{
	const struct conf *c = arg;

	if (kind == HISTORY_ROUTE) {
		for (size_t i = 0; i < c->n_routes; i++)
			if (strncmp(c->routes[i].name, name, HISTORY_NAME_MAX - 1) == 0)
				return 1;
		return 0;
	}
	for (size_t i = 0; i < c->n_slos; i++)
		if (strncmp(c->slos[i].name, name, HISTORY_NAME_MAX - 1) == 0)
			return 1;
	return 0;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t t;
	long peak;

	(void)fd;
	(void)what;
	(void)arg;
	stats_drain();
	t = stats_clock();
	peak = atomic_exchange(&gauge_peak_streams, 0);
	history_concurrency(hist, t, atomic_load(&gauge_streams), peak);
	slod_each_total(on_slo_total, &t);
	history_advance(hist, now_wall());
	reap(0);
	if (path != NULL && t - saved_at >= conf->stats_history_save_every_us)
		save_async();
}

int historyd_start(struct event_base *base, const struct conf *c)
{
	struct conf_history_step t[HISTORY_TIERS_MAX];
	struct timeval tv = { 0, TICK_US };
	int64_t offset = (int64_t)(util_wall_ms() * 1000) - (int64_t)stats_clock();

	set_path(c);
	hist = load(c, offset);
	if (hist == NULL) {
		tiers_of(c, t);
		hist = history_new(t, c->n_stats_history);
	}
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	runner = event_new(base, -1, 0, run_jobs, NULL);
	if (hist == NULL || tick == NULL || runner == NULL) {
		log_error("history: cannot start (out of memory)");
		historyd_stop();
		return -1;
	}
	history_set_offset(hist, offset);
	history_advance(hist, now_wall());
	conf = conf_ref((struct conf *)c);
	history_set_keep(hist, keep_series, conf);
	saved_at = stats_clock();
	stats_set_history(hist);
	event_add(tick, &tv);
	return 0;
}

void historyd_reload(const struct conf *c)
{
	struct conf_history_step t[HISTORY_TIERS_MAX];
	const struct conf_history_step *old;
	size_t n_old;
	int same;

	if (hist == NULL)
		return;
	stats_drain();          /* what finished counts in the steps kept */
	tiers_of(c, t);
	n_old = history_tiers(hist, &old);
	same = n_old == c->n_stats_history;
	for (size_t i = 0; same && i < n_old; i++)
		same = old[i].step_us == t[i].step_us && old[i].keep_us == t[i].keep_us;
	if (!same) {
		struct history *nh = history_retier(hist, t, c->n_stats_history, now_wall());
		if (nh == NULL) {
			log_error("history: out of memory; the previous steps stay");
		} else {
			historyd_cancel();      /* the answers under way read the old steps */
			hist = nh;
			gen++;
			stats_set_history(hist);
			log_info("history: new steps; what was kept is re-bucketed into them");
		}
	}
	conf_unref(conf);
	conf = conf_ref((struct conf *)c);
	history_set_keep(hist, keep_series, conf);
	set_path(c);
	save_async();           /* at once, or when the one under way ends */
}

void historyd_stop(void)
{
	historyd_cancel();
	reap(1);
	save_again = 0;
	if (hist != NULL) {
		stats_drain();          /* the last records count, then none */
		stats_set_history(NULL);
		if (path != NULL)
			save();
	}
	if (tick != NULL)
		event_free(tick);
	tick = NULL;
	if (runner != NULL)
		event_free(runner);
	runner = NULL;
	history_free(hist);
	hist = NULL;
	if (conf != NULL)
		conf_unref(conf);
	conf = NULL;
	free(path);
	path = NULL;
	free(seen);
	seen = NULL;
	n_seen = cap_seen = 0;
}

/* ---- GET /stats/history ---------------------------------------------------- */

/* One point's figures, as its columns show them: counts are whole
 * (exact in a double to 2^53), durations in ms (< 0: no sample). */
enum {
	V_REQUESTS, V_ERRORS, V_OUT_TOKENS, V_SPEED, V_ACTIVE, V_PEAK, V_STALLS,
	V_GOOD, V_BAD, V_OUTCOMES,
	V_DISTS = V_OUTCOMES + OUTCOME_COUNT,     /* 4 of count, p50, p90, p95, p99, max */
	N_V = V_DISTS + 4 * 6
};

static const double quantiles[4] = { 0.50, 0.90, 0.95, 0.99 };
static const char *const q_names[6] = { "count", "p50", "p90", "p95", "p99", "max" };
static const char *const d_names[4] = { "ttft_ms", "tpot_ms", "itl_ms", "ttfo_ms" };

static const struct hist_sparse *dist_of(const struct history_sum *s, int d)
{
	return d == 0 ? &s->ttft : d == 1 ? &s->tpot : d == 2 ? &s->itl : &s->ttfo;
}

static void point_of(const struct history_sum *s, double *v)
{
	uint64_t n = history_sum_requests(s);

	v[V_REQUESTS] = (double)n;
	v[V_ERRORS] = (double)(n - s->outcomes[OUTCOME_OK]);
	v[V_OUT_TOKENS] = (double)s->output_tokens;
	v[V_SPEED] = s->speed_us ? (double)s->speed_tokens * 1e6 / (double)s->speed_us : -1;
	v[V_ACTIVE] = (double)s->active;
	v[V_PEAK] = (double)s->peak;
	v[V_STALLS] = (double)s->stalls;
	v[V_GOOD] = (double)s->good;
	v[V_BAD] = (double)s->bad;
	for (int o = 0; o < OUTCOME_COUNT; o++)
		v[V_OUTCOMES + o] = (double)s->outcomes[o];
	for (int d = 0; d < 4; d++) {
		const struct hist_sparse *h = dist_of(s, d);
		double *x = &v[V_DISTS + 6 * d];
		x[0] = (double)h->count;
		for (int q = 0; q < 4; q++)
			x[1 + q] = h->count ? hist_sparse_quantile(h, quantiles[q]) / 1000.0 : -1;
		x[5] = h->count ? (double)h->max / 1000.0 : -1;
	}
}

/* "name":[...] of value i over the points, after a comma unless *first;
 * ms: durations (3 decimals, null without a sample), else whole counts. */
static void column(struct evbuffer *out, int *first, const char *name, const double *pts,
    size_t n, int i, int ms)
{
	evbuffer_add_printf(out, "%s\"%s\":[", *first ? "" : ",", name);
	*first = 0;
	for (size_t p = 0; p < n; p++) {
		double v = pts[p * N_V + (size_t)i];
		if (p > 0)
			evbuffer_add(out, ",", 1);
		if (ms)
			jsonw_fixed(out, v, 3);
		else
			evbuffer_add_printf(out, "%.0f", v);
	}
	evbuffer_add(out, "]", 1);
}

/* The points' columns, written one part at a time (a part: one column, or
 * a group's opening with its first), so that a slice stops between them:
 * part 0 opens "points"; the last returns 1 (written whole). inner: the
 * group's first column is still to come. */
enum {
	PT_REQUESTS, PT_ERRORS, PT_OUTCOMES,
	PT_DISTS = PT_OUTCOMES + OUTCOME_COUNT,
	PT_TAIL = PT_DISTS + 4 * 6,
	PT_END = PT_TAIL + 5
};

static int column_part(struct evbuffer *out, const double *pts, size_t n,
    enum history_kind kind, int part, int *inner)
{
	static const char *const tail[5] = {
		"output_tokens", "output_tokens_per_s", "active", "max_active", "stalls"
	};
	static const int tail_v[5] = { V_OUT_TOKENS, V_SPEED, V_ACTIVE, V_PEAK, V_STALLS };
	int first = 0;

	if (kind == HISTORY_SLO) {
		if (part == PT_REQUESTS) {
			first = 1;
			evbuffer_add_printf(out, ",\"points\":{");
			column(out, &first, "good", pts, n, V_GOOD, 0);
			return 0;
		}
		column(out, &first, "bad", pts, n, V_BAD, 0);
		evbuffer_add(out, "}", 1);
		return 1;
	}
	if (part == PT_REQUESTS) {
		first = 1;
		evbuffer_add_printf(out, ",\"points\":{");
		column(out, &first, "requests", pts, n, V_REQUESTS, 0);
	} else if (part == PT_ERRORS) {
		column(out, &first, "errors", pts, n, V_ERRORS, 0);
	} else if (part < PT_DISTS) {
		/* the outcomes that happened in these points */
		int o = part - PT_OUTCOMES, any = 0;
		if (o == 0) {
			evbuffer_add_printf(out, ",\"outcomes\":{");
			*inner = 1;
		}
		for (size_t p = 0; p < n && !any; p++)
			any = pts[p * N_V + V_OUTCOMES + (size_t)o] > 0;
		if (any)
			column(out, inner, meter_outcome_name((enum meter_outcome)o), pts, n,
			    V_OUTCOMES + o, 0);
		if (o == OUTCOME_COUNT - 1)
			evbuffer_add(out, "}", 1);
	} else if (part < PT_TAIL) {
		int d = (part - PT_DISTS) / 6, q = (part - PT_DISTS) % 6;
		if (q == 0) {
			evbuffer_add_printf(out, ",\"%s\":{", d_names[d]);
			*inner = 1;
		}
		column(out, inner, q_names[q], pts, n, V_DISTS + 6 * d + q, q > 0);
		if (q == 5)
			evbuffer_add(out, "}", 1);
	} else {
		int t = part - PT_TAIL;
		column(out, &first, tail[t], pts, n, tail_v[t], t == 1);
		if (t == 4) {
			evbuffer_add(out, "}", 1);
			return 1;
		}
	}
	return 0;
}

static double trend_of(const struct hist_sparse *cur, const struct hist_sparse *prev,
    double q)
{
	double c, p;

	if (cur->count == 0 || prev->count == 0)
		return NAN;
	c = hist_sparse_quantile(cur, q);
	p = hist_sparse_quantile(prev, q);
	return p > 0 ? (c - p) / p : NAN;
}

static void json_trend(struct evbuffer *out, const char *name, double v)
{
	evbuffer_add_printf(out, "\"%s\":", name);
	if (isnan(v))
		evbuffer_add(out, "null", 4);
	else
		evbuffer_add_printf(out, "%.4f", v);
}

/* A route's ttft_warning in ms; 0 when it has none (the instance). */
static double warning_ms(const char *route)
{
	for (size_t i = 0; route != NULL && i < conf->n_routes; i++)
		if (strcmp(conf->routes[i].name, route) == 0)
			return (double)conf->routes[i].thresholds.ttft_warning_us / 1000.0;
	return 0;
}

/* The figures over the whole range, named as a /stats group's: quantiles
 * of every request in it, R² and headroom, the trend against the range
 * before it. */
static void summary(struct evbuffer *out, const struct history_series *se,
    const char *route, const struct history_sum *s, uint64_t range_us)
{
	static struct hist dense;
	static struct history_sum cur, prev;
	uint64_t n = history_sum_requests(s), errors = n - s->outcomes[OUTCOME_OK];
	struct headroom_fit fit;
	const struct history_r2 *r2 = &s->r2;
	double t_ttft = NAN, t_tpot = NAN;

	evbuffer_add_printf(out, ",\"summary\":{\"requests\":%llu,\"errors\":%llu,"
	    "\"error_rate\":", (unsigned long long)n, (unsigned long long)errors);
	jsonw_fixed(out, n ? (double)errors / (double)n : -1, 3);
	evbuffer_add_printf(out, ",\"active\":%lld,\"max_active\":%lld", (long long)s->active,
	    (long long)s->peak);
	for (int d = 0; d < 4; d++) {
		hist_init(&dense);
		hist_sparse_merge_into(&dense, dist_of(s, d));
		evbuffer_add_printf(out, ",\"%s\":", d_names[d]);
		stats_json_dist(out, &dense, 1000.0);
	}
	evbuffer_add_printf(out, ",\"output_tokens\":%llu,\"input_tokens\":%llu,"
	    "\"output_tokens_per_s\":", (unsigned long long)s->output_tokens,
	    (unsigned long long)s->input_tokens);
	jsonw_fixed(out, s->speed_us ? (double)s->speed_tokens * 1e6 / (double)s->speed_us : -1, 3);
	/* R² and the trend as /stats has them for a window of the range's
	 * length (the same steps, the same sums); the points' own sums where
	 * the history does not keep the range twice over */
	history_sum_clear(&cur);
	history_sum_clear(&prev);
	if (history_window(hist, se, now_wall(), range_us, &cur, &prev) == 0) {
		t_ttft = trend_of(&cur.ttft, &prev.ttft, 0.95);
		t_tpot = trend_of(&cur.tpot, &prev.tpot, 0.50);
		r2 = &cur.r2;
	}
	headroom_fit((double)r2->n, (double)r2->sx, r2->sy, r2->sxy, (double)r2->sxx, r2->syy,
	    &fit);
	evbuffer_add_printf(out, ",\"ttft_concurrency_r2\":");
	jsonw_fixed(out, fit.ok ? fit.r2 : -1, 4);
	evbuffer_add_printf(out, ",\"ttft_concurrency_slope_ms\":");
	jsonw_fixed(out, fit.ok ? fit.slope : -1, 4);
	evbuffer_add_printf(out, ",\"ttft_concurrency_intercept_ms\":");
	jsonw_fixed(out, fit.ok ? fit.intercept : -1, 4);
	evbuffer_add_printf(out, ",\"headroom_streams\":");
	jsonw_fixed(out, route ? headroom_streams(&fit, warning_ms(route)) : -1, 1);
	evbuffer_add_printf(out, ",\"stalls\":%llu,\"outcomes\":{", (unsigned long long)s->stalls);
	for (int o = 0; o < OUTCOME_COUNT; o++)
		evbuffer_add_printf(out, "%s\"%s\":%llu", o ? "," : "",
		    meter_outcome_name((enum meter_outcome)o), (unsigned long long)s->outcomes[o]);
	evbuffer_add_printf(out, "},\"trend\":{");
	json_trend(out, "ttft_p95", t_ttft);
	evbuffer_add(out, ",", 1);
	json_trend(out, "tpot_p50", t_tpot);
	evbuffer_add(out, "}}", 2);
}

/* ---- the query, a slice at a time ----------------------------------------
 *
 * A query is answered on the main thread's event loop, not in one go (a
 * day of 1,024 series held the thread 10 to 23 s: /healthz waited, the
 * workers' rings overflowed and records were lost, evhttp dropped the
 * answer): in slices of at most SLICE_US (the series' points merged one
 * by one, then their columns written one by one, the clock read between),
 * the answers under way taking turns (run_jobs), each slice followed by a
 * pause as long whatever their number, in which the loop serves /healthz,
 * drains the workers' records (every 50 ms, so their rings never fill),
 * and runs the timers and the other admin requests. The thread sleeps half
 * the time at least, so that the scheduler hands it the CPU at once when
 * a request comes: run flat out at its low priority (main.c), it waited
 * up to a second for its turn on a busy host. What a slice wrote goes out
 * as a chunk (gzipped as it goes when the client takes it). The store is
 * read afresh each slice (a series is found by name; one gone since has
 * no more points); new steps (a reload's) cut the answer short. An answer
 * holds at most POINTS_PAGE points (series × points): the series of a
 * query over more are paged (limit, offset, next_offset), which bounds an
 * answer's work and size (a day of 1,024 series at 1 min: 1.5 million
 * points, 240 MB of JSON in one answer). */

#define SLICE_US 2000
#define POINTS_PAGE 100000

struct key {
	enum history_kind kind;
	char name[HISTORY_NAME_MAX];
};

struct job {
	struct job *next;
	struct evhttp_request *req;
	struct evbuffer *out, *zout;
	z_stream z;
	int gz;
	struct history_view v;
	uint64_t range_us;
	unsigned gen;              /* the store's, when the query began */
	size_t p0;                 /* the first point shown (since) */
	struct key *keys;          /* this page's series, in the answer's order */
	size_t n, i, p;            /* how many; the one at hand, its next point */
	int part, inner;           /* its next part (-1: the head), column_part's */
	int first, in_slos;        /* no series written yet in this list */
	int no_series;             /* route=NAME, not kept: empty points */
	double *pts;
	struct history_sum all;
};

static struct job *jobs;       /* the answers under way, the next to run first */

static int series_begin(struct evbuffer *out, enum history_kind kind, const char *name,
    int first)
{
	evbuffer_add_printf(out, "%s{\"%s\":", first ? "" : ",",
	    kind == HISTORY_SLO ? "slo" : "route");
	jsonw_str(out, kind == HISTORY_INSTANCE ? NULL : name);
	return 0;
}

/* Series i's name and summary, once all its points are merged; its
 * columns follow (column_part). */
static void series_head(struct job *j, const struct history_series *se)
{
	const struct key *k = &j->keys[j->i];

	if (k->kind == HISTORY_SLO && !j->in_slos) {
		evbuffer_add_printf(j->out, "],\"slos\":[");
		j->in_slos = 1;
		j->first = 1;
	}
	series_begin(j->out, k->kind, k->name, j->first);
	j->first = 0;
	if (k->kind == HISTORY_SLO)
		evbuffer_add_printf(j->out, ",\"summary\":{\"good\":%llu,\"bad\":%llu}",
		    (unsigned long long)j->all.good, (unsigned long long)j->all.bad);
	else
		summary(j->out, se, k->kind == HISTORY_ROUTE ? k->name : NULL, &j->all,
		    j->range_us);
}

static void job_unlink(struct job *j)
{
	for (struct job **pp = &jobs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
}

static void job_free(struct job *j)
{
	job_unlink(j);
	if (j->out != NULL)
		evbuffer_free(j->out);
	if (j->zout != NULL)
		evbuffer_free(j->zout);
	if (j->gz)
		deflateEnd(&j->z);
	history_sum_free(&j->all);
	free(j->keys);
	free(j->pts);
	free(j);
}

/* The answer cut short (a reload re-bucketed the store, memory ran out,
 * tokentap stops): the connection closes, so the client sees it cut. */
static void job_abort(struct job *j)
{
	struct evhttp_connection *c = evhttp_request_get_connection(j->req);

	if (c != NULL)
		evhttp_connection_free(c);          /* frees the request */
	else
		evhttp_request_free(j->req);        /* the client had gone */
	job_free(j);
}

/* What was written since the last chunk goes out (through gzip). */
static int job_flush(struct job *j, int finish)
{
	struct evbuffer *send = j->out;

	if (j->gz) {
		unsigned char buf[16384];
		struct evbuffer_iovec iv;
		int rc = Z_OK;
		for (;;) {
			size_t before;
			int flush = finish ? Z_FINISH : Z_NO_FLUSH;
			if (j->z.avail_in == 0 && evbuffer_get_length(j->out) > 0 &&
			    evbuffer_peek(j->out, -1, NULL, &iv, 1) >= 1) {
				j->z.next_in = iv.iov_base;
				j->z.avail_in = (uInt)iv.iov_len;
			}
			if (j->z.avail_in == 0 && !finish)
				break;
			before = j->z.avail_in;
			j->z.next_out = buf;
			j->z.avail_out = sizeof buf;
			rc = deflate(&j->z, evbuffer_get_length(j->out) > before ? Z_NO_FLUSH :
			    flush);
			if (evbuffer_add(j->zout, buf, sizeof buf - j->z.avail_out) < 0)
				return -1;
			evbuffer_drain(j->out, before - j->z.avail_in);
			if (rc == Z_STREAM_END)
				break;
			if (rc != Z_OK && rc != Z_BUF_ERROR)
				return -1;
		}
		send = j->zout;
	}
	if (evbuffer_get_length(send) > 0)
		evhttp_send_reply_chunk(j->req, send);
	return 0;
}

/* A slice of job j: 1 when it has more to do, 0 when it is over (and
 * freed). */
static int job_slice(struct job *j)
{
	static struct history_sum acc;
	uint64_t deadline = util_now_us() + SLICE_US;

	if (gen != j->gen || hist == NULL) {
		job_abort(j);
		return 0;
	}
	if (evhttp_request_get_connection(j->req) == NULL) {
		evhttp_send_reply_end(j->req);      /* the client went: frees it */
		job_free(j);
		return 0;
	}
	while (j->i < j->n) {
		const struct key *k = &j->keys[j->i];
		const struct history_series *se = j->no_series ? NULL :
		    history_find(hist, k->kind, k->name);
		/* the clock is read every 8 points: one is a few µs */
		while (j->p < j->v.points) {
			history_sum_clear(&acc);
			if (se != NULL && history_merge(hist, se, &j->v, j->p, j->p + 1, &acc) < 0)
				goto fail;
			if (j->p >= j->p0)
				point_of(&acc, &j->pts[(j->p - j->p0) * N_V]);
			if (history_sum_merge(&j->all, &acc) < 0)
				goto fail;
			if ((++j->p & 7) == 0 && util_now_us() >= deadline)
				goto yield;
		}
		if (j->part < 0) {
			series_head(j, se);
			j->part = 0;
		}
		for (;;) {
			int done;
			if (util_now_us() >= deadline)
				goto yield;
			done = column_part(j->out, j->pts, j->v.points - j->p0, j->keys[j->i].kind,
			    j->part++, &j->inner);
			/* gzip as it goes: what a slice wrote is what it deflates */
			if (evbuffer_get_length(j->out) >= 65536 && job_flush(j, 0) < 0)
				goto fail;
			if (done)
				break;
		}
		evbuffer_add(j->out, "}", 1);
		history_sum_clear(&j->all);
		j->i++;
		j->p = 0;
		j->part = -1;
	}
	evbuffer_add_printf(j->out, "%s]}\n", j->in_slos ? "" : "],\"slos\":[");
	if (job_flush(j, 1) < 0)
		goto fail;
	evhttp_send_reply_end(j->req);
	job_free(j);
	return 0;
yield:
	if (job_flush(j, 0) < 0)
		goto fail;
	return 1;
fail:
	log_error("history: out of memory; a /stats/history answer is cut short");
	job_abort(j);
	return 0;
}

/* One slice of the first answer under way, which then goes last (the
 * answers take turns), and the pause before the next slice: however many
 * answers are under way, the thread sleeps as long as they work. */
static void run_jobs(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = jobs, **last;
	struct timeval tv = { 0, SLICE_US };

	(void)fd;
	(void)what;
	(void)arg;
	if (j == NULL)
		return;
	jobs = j->next;
	j->next = NULL;
	if (job_slice(j)) {
		for (last = &jobs; *last != NULL; last = &(*last)->next)
			;
		*last = j;
	}
	if (jobs != NULL)
		event_add(runner, &tv);
}

void historyd_cancel(void)
{
	while (jobs != NULL)
		job_abort(jobs);
}

static int parse_duration(const char *v, uint64_t *us)
{
	return v == NULL ? (*us = 0, 0) : util_parse_duration_us(v, us) < 0 || *us == 0 ? -1 : 0;
}

static int configured(const char *route)
{
	for (size_t i = 0; i < conf->n_routes; i++)
		if (strcmp(conf->routes[i].name, route) == 0)
			return 1;
	return 0;
}

static int cmp_series(const void *x, const void *y)
{
	const struct history_series *a = *(const struct history_series *const *)x;
	const struct history_series *b = *(const struct history_series *const *)y;

	if (history_series_kind(a) != history_series_kind(b))
		return (int)history_series_kind(a) - (int)history_series_kind(b);
	return strcmp(history_series_name(a), history_series_name(b));
}

/* The job's page of series: route alone, or [offset, offset + limit) of
 * the instance, the routes and the SLOs by name; the document's head. */
static int job_page(struct job *j, const char *route, size_t offset, size_t limit,
    uint64_t since_ms)
{
	const struct history_series **all = NULL;
	size_t total = route != NULL ? 1 : history_n_series(hist);
	char ts[32], rt[32], st[32];

	while (j->p0 < j->v.points && (j->v.first + j->p0) * j->v.step_us / 1000 < since_ms)
		j->p0++;
	j->pts = malloc((j->v.points - j->p0 + 1) * N_V * sizeof *j->pts);
	j->keys = calloc(limit ? limit : 1, sizeof *j->keys);
	all = malloc((history_n_series(hist) + 1) * sizeof *all);
	if (j->pts == NULL || j->keys == NULL || all == NULL) {
		free(all);
		return -1;
	}
	if (route != NULL) {
		j->keys[0].kind = HISTORY_ROUTE;
		snprintf(j->keys[0].name, sizeof j->keys[0].name, "%s", route);
		j->no_series = history_find(hist, HISTORY_ROUTE, route) == NULL;
		j->n = offset == 0 && limit > 0;
	} else {
		size_t n = history_n_series(hist);
		for (size_t i = 0; i < n; i++)
			all[i] = history_series_at(hist, i);
		qsort(all, n, sizeof *all, cmp_series);
		for (size_t i = offset; i < n && j->n < limit; i++) {
			j->keys[j->n].kind = history_series_kind(all[i]);
			snprintf(j->keys[j->n].name, sizeof j->keys[j->n].name, "%s",
			    history_series_name(all[i]));
			j->n++;
		}
	}
	free(all);
	util_rfc3339_ms(util_wall_ms(), ts);
	util_duration_text(j->range_us, rt, sizeof rt);
	util_duration_text(j->v.step_us, st, sizeof st);
	evbuffer_add_printf(j->out, "{\"range\":\"%s\",\"step\":\"%s\",\"generated_at\":\"%s\","
	    "\"bytes\":%zu,\"series_total\":%zu,\"offset\":%zu,\"limit\":%zu,\"next_offset\":",
	    rt, st, ts, history_bytes(hist), total, offset, limit);
	if (offset + j->n < total)
		evbuffer_add_printf(j->out, "%zu", offset + j->n);
	else
		evbuffer_add_printf(j->out, "null");
	evbuffer_add_printf(j->out, ",\"t\":[");
	for (size_t p = j->p0; p < j->v.points; p++)
		evbuffer_add_printf(j->out, "%s%llu", p > j->p0 ? "," : "",
		    (unsigned long long)((j->v.first + p) * j->v.step_us / 1000));
	evbuffer_add_printf(j->out, "],\"series\":[");
	j->first = 1;
	return 0;
}

int historyd_serve(struct evhttp_request *req, const char *query, int gzip, char *why,
    size_t why_len)
{
	struct evkeyvalq q;
	struct job *j = NULL;
	const char *route, *since, *lim, *off;
	uint64_t range_us, step_us, since_ms = 0, offset = 0, limit = 0;
	size_t per_page;
	int rc = -1;

	TAILQ_INIT(&q);
	why[0] = '\0';
	if (hist == NULL) {
		snprintf(why, why_len, "history: not started");
		return -1;
	}
	if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
		snprintf(why, why_len, "a query that does not parse");
		return -1;
	}
	route = evhttp_find_header(&q, "route");
	since = evhttp_find_header(&q, "since");
	lim = evhttp_find_header(&q, "limit");
	off = evhttp_find_header(&q, "offset");
	if (parse_duration(evhttp_find_header(&q, "range"), &range_us) < 0) {
		snprintf(why, why_len, "range: a duration such as 15m or 1h");
		goto out;
	}
	if (parse_duration(evhttp_find_header(&q, "step"), &step_us) < 0) {
		snprintf(why, why_len, "step: a duration such as 10s or 1m");
		goto out;
	}
	if (since != NULL && yconf_parse_uint(since, &since_ms) < 0) {
		snprintf(why, why_len, "since: milliseconds since 1970 (a point's t)");
		goto out;
	}
	if (off != NULL && yconf_parse_uint(off, &offset) < 0) {
		snprintf(why, why_len, "offset: a series' place in the answers, 0 or more");
		goto out;
	}
	if (route != NULL && !configured(route) &&
	    history_find(hist, HISTORY_ROUTE, route) == NULL) {
		snprintf(why, why_len, "route: not one configured or kept");
		goto out;
	}
	if ((j = calloc(1, sizeof *j)) == NULL) {
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	stats_drain();
	history_advance(hist, now_wall());
	if (history_view(hist, now_wall(), range_us, step_us, &j->v, why, why_len) < 0)
		goto out;
	/* the points an answer may hold, whole series of them */
	per_page = POINTS_PAGE / (j->v.points ? j->v.points : 1);
	if (lim != NULL && (yconf_parse_uint(lim, &limit) < 0 || limit == 0 ||
	    limit > per_page)) {
		snprintf(why, why_len, "limit: 1 to %zu series of %zu points (at most %d points "
		    "an answer)", per_page, j->v.points, POINTS_PAGE);
		goto out;
	}
	if (lim == NULL)
		limit = per_page;
	j->range_us = range_us ? range_us : j->v.points * j->v.step_us;
	j->part = -1;
	j->gen = gen;
	j->req = req;
	j->out = evbuffer_new();
	if (gzip && (j->zout = evbuffer_new()) != NULL &&
	    deflateInit2(&j->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK)
		j->gz = 1;
	if (j->out == NULL || j->gz != gzip || job_page(j, route, (size_t)offset, (size_t)limit, since_ms) < 0) {
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	/* the answer starts now and goes out a slice at a time */
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Vary", "Accept-Encoding");
	if (gzip)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Encoding",
		    "gzip");
	evhttp_send_reply_start(req, 200, "OK");
	/* last in the turns; the first slice at once when it is the only one */
	{
		struct job **last = &jobs;
		while (*last != NULL)
			last = &(*last)->next;
		*last = j;
	}
	if (!event_pending(runner, EV_TIMEOUT, NULL))
		run_jobs(-1, 0, NULL);
	j = NULL;
	rc = 0;
out:
	if (j != NULL) {
		j->req = NULL;
		job_free(j);
	}
	evhttp_clear_headers(&q);
	return rc;
}
