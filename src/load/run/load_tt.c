/* SPDX-License-Identifier: Apache-2.0 */
#include "load_tt.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "load_jsonl.h"
#include "load_summary.h"
#include "url.h"
#include "util.h"

#define MAX_RESPONSE (16u << 20)

int load_tt_conf_init(struct load_tt_conf *c, const char *url, const char *window,
    const char *route, const char **err)
{
	struct url u;
	size_t n;

	memset(c, 0, sizeof(*c));
	if ((*err = url_parse(url, &u)) != NULL)
		return -1;
	if (u.tls || u.user != NULL || u.query != NULL) {
		*err = "expected tokentap's admin address, http://HOST:PORT";
		url_free(&u);
		return -1;
	}
	snprintf(c->host, sizeof(c->host), "%s", u.host);
	c->port = u.port;
	c->base_path = strdup(u.path);
	url_free(&u);
	if (c->base_path == NULL) {
		*err = "out of memory";
		return -1;
	}
	n = strlen(c->base_path);
	while (n > 0 && c->base_path[n - 1] == '/')
		c->base_path[--n] = '\0';
	/* "http://h:p/stats" names the endpoint itself */
	if (n >= 6 && strcmp(c->base_path + n - 6, "/stats") == 0)
		c->base_path[n - 6] = '\0';
	c->window = window;
	c->route = route;
	return 0;
}

void load_tt_conf_free(struct load_tt_conf *c)
{
	free(c->base_path);
	c->base_path = NULL;
}

static void fail(struct load_tt *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(struct load_tt *out, const char *fmt, ...)
{
	va_list ap;

	out->ok = 0;
	va_start(ap, fmt);
	vsnprintf(out->error, sizeof(out->error), fmt, ap);
	va_end(ap);
}

/* GET path; the response's body into *body (malloc'd). 0 or -1 (why in out). */
static int get(const struct load_tt_conf *c, const char *path, struct load_tt *out,
    int timeout_ms, char **body, size_t *blen)
{
	struct addrinfo hints, *ai = NULL;
	char port[8], req[1024], *buf = NULL;
	const char *token = getenv("TOKENTAP_ADMIN_TOKEN");
	size_t len = 0, cap = 0;
	uint64_t deadline = util_now_us() + (uint64_t)timeout_ms * 1000;
	int fd = -1, rc = -1, n;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%u", c->port);
	if (getaddrinfo(c->host, port, &hints, &ai) != 0 || ai == NULL) {
		fail(out, "%s: cannot resolve", c->host);
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		fail(out, "cannot connect to tokentap's admin: %s", strerror(errno));
		goto done;
	}
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s:%u\r\n"
	    "User-Agent: tokentap-load/" TOKENTAP_VERSION "\r\n%s%s%s\r\n", path, c->host,
	    c->port, token ? "Authorization: Bearer " : "", token ? token : "",
	    token ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req) || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		fail(out, "%s", "cannot send to tokentap's admin");
		goto done;
	}
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		uint64_t now = util_now_us();
		ssize_t got;

		if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000) + 1) <= 0) {
			fail(out, "%s", "tokentap's admin did not answer in time");
			goto done;
		}
		if (len + 65536 > cap) {
			char *b;
			if (cap >= MAX_RESPONSE) {
				fail(out, "tokentap's %.*s answer is too large",
				    (int)strcspn(path, "?"), path);
				goto done;
			}
			cap = cap ? cap * 2 : 65536 * 2;
			b = realloc(buf, cap + 1);
			if (b == NULL) {
				fail(out, "%s", "out of memory");
				goto done;
			}
			buf = b;
		}
		got = recv(fd, buf + len, cap - len, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			fail(out, "reading tokentap's admin: %s", strerror(errno));
			goto done;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (buf == NULL || len < 12 || strncmp(buf, "HTTP/1.", 7) != 0) {
		fail(out, "%s", "tokentap's admin did not answer HTTP");
		goto done;
	}
	buf[len] = '\0';
	{
		char *sep = strstr(buf, "\r\n\r\n");
		int status = atoi(buf + 9);
		if (sep == NULL) {
			fail(out, "%s", "tokentap's admin answer has no body");
			goto done;
		}
		if (status != 200) {
			char what[160];
			snprintf(what, sizeof(what), "%d: %.120s", status, sep + 4);
			for (char *s = what; *s; s++)
				if (*s == '\n' || *s == '\r')
					*s = ' ';
			fail(out, "tokentap's %.*s answered %s", (int)strcspn(path, "?"), path,
			    what);
			goto done;
		}
		*blen = len - (size_t)(sep + 4 - buf);
		memmove(buf, sep + 4, *blen);
		buf[*blen] = '\0';
	}
	*body = buf;
	buf = NULL;
	rc = 0;
done:
	free(buf);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

static double num_at(const struct load_jl *j, int obj, const char *key)
{
	int v = obj >= 0 ? load_jl_get(j, obj, key) : -1;
	double x;

	if (v < 0 || load_jl_num(j, v, &x) < 0)
		return NAN;
	return x;
}

static void quant(const struct load_jl *j, int grp, const char *key, double q[6],
    uint64_t *count)
{
	static const char *const names[] = {"mean", "p50", "p90", "p95", "p99", "max"};
	int o = load_jl_get(j, grp, key);
	double n = num_at(j, o, "count");

	for (int i = 0; i < 6; i++)
		q[i] = num_at(j, o, names[i]);
	if (count != NULL)
		*count = isnan(n) ? 0 : (uint64_t)n;
}

void load_tt_read(struct load_tt_conf *c, struct load_tt *out, int timeout_ms)
{
	struct load_jl j;
	char path[512], *body = NULL, *s;
	size_t blen = 0, at;
	const char *why;
	int groups, el = -1, best = -1, w;
	double most = -1;

	memset(out, 0, sizeof(*out));
	out->asked = 1;
	snprintf(path, sizeof(path), "%s/stats?by=route%s%s", c->base_path,
	    c->window ? "&window=" : "", c->window ? c->window : "");
	if (get(c, path, out, timeout_ms, &body, &blen) < 0)
		return;
	load_jl_init(&j);
	if (load_jl_parse(&j, body, blen, &at, &why) < 0 ||
	    load_jl_type(&j, 0) != LOAD_JL_OBJECT ||
	    (groups = load_jl_get(&j, 0, "groups")) < 0) {
		fail(out, "%s", "tokentap's /stats answer is not its JSON");
		goto done;
	}
	w = load_jl_get(&j, 0, "window");
	s = w >= 0 ? load_jl_str(&j, w, NULL) : NULL;
	if (s != NULL) {
		snprintf(out->window, sizeof(out->window), "%s", s);
		if (util_parse_duration_us(s, &c->window_us) < 0)
			c->window_us = 0;
		free(s);
	}
	while (load_jl_elem(&j, groups, &el)) {
		int r = load_jl_get(&j, el, "route");
		double req = num_at(&j, el, "requests");
		char *name = r >= 0 ? load_jl_str(&j, r, NULL) : NULL;

		if (c->route != NULL) {
			if (name != NULL && strcmp(name, c->route) == 0)
				best = el;
		} else if (!isnan(req) && req > most) {
			most = req;
			best = el;
		}
		free(name);
	}
	if (best < 0) {
		fail(out, c->route ? "no route \"%s\" in tokentap's /stats" :
		    "%s", c->route ? c->route : "no route in tokentap's /stats window");
		goto done;
	}
	s = load_jl_str(&j, load_jl_get(&j, best, "route"), NULL);
	snprintf(out->group, sizeof(out->group), "%s", s ? s : "");
	free(s);
	out->requests = (uint64_t)fmax(0, num_at(&j, best, "requests"));
	out->errors = (uint64_t)fmax(0, num_at(&j, best, "errors"));
	out->output_tokens_per_s = num_at(&j, best, "output_tokens_per_s");
	quant(&j, best, "ttft_ms", out->ttft, &out->ttft_count);
	quant(&j, best, "tpot_ms", out->tpot, &out->tpot_count);
	quant(&j, best, "itl_ms", out->itl, NULL);
	out->ok = 1;
done:
	load_jl_free(&j);
	free(body);
}

uint64_t load_tt_settle_us(const struct load_tt_conf *c)
{
	/* a window and a slice, and a little for the proxy's 50 ms drains */
	return c->window_us + c->window_us / 6 + 100000;
}

uint64_t load_tt_span_us(const struct load_tt_conf *c)
{
	return c->window_us * 5 / 6;
}

/* ---- where tokentap's access log is ------------------------------------ */

/* The fix said with every reason the log cannot be used. */
#define FIX "pass --tokentap-log FILE with a copy of it readable here"

int load_tt_find_log(const struct load_tt_conf *c, char *path, size_t len, char *why,
    size_t whylen, int timeout_ms)
{
	struct load_tt out;
	struct load_jl j;
	char url[512], *body = NULL, *s = NULL;
	size_t blen = 0, at;
	const char *jwhy;
	int v, fd, rc = -1;

	memset(&out, 0, sizeof(out));
	snprintf(url, sizeof(url), "%s/ui/config.json", c->base_path);
	if (get(c, url, &out, timeout_ms, &body, &blen) < 0) {
		snprintf(why, whylen, "%s; " FIX, out.error);
		jsonw_sanitize(why, '?');
		return -1;
	}
	load_jl_init(&j);
	if (load_jl_parse(&j, body, blen, &at, &jwhy) < 0 ||
	    load_jl_type(&j, 0) != LOAD_JL_OBJECT ||
	    (v = load_jl_get(&j, 0, "access_log")) < 0)
		snprintf(why, whylen, "tokentap's %s does not say where its access log "
		    "is (an older tokentap?); " FIX, url);
	else if ((s = load_jl_str(&j, v, NULL)) == NULL)
		snprintf(why, whylen, "tokentap writes its access log to no file; "
		    "set its access_log to one readable here");
	else if ((fd = open(s, O_RDONLY | O_CLOEXEC)) < 0)
		snprintf(why, whylen, "tokentap's access log %s: %s here; " FIX, s,
		    strerror(errno));
	else if (strlen(s) >= len) {
		close(fd);
		snprintf(why, whylen, "tokentap's access log's path is too long; " FIX);
	} else {
		close(fd);
		memcpy(path, s, strlen(s) + 1);
		rc = 0;
	}
	free(s);
	load_jl_free(&j);
	free(body);
	/* the path is the admin's bytes: printable before stderr and reports */
	if (rc < 0)
		jsonw_sanitize(why, '?');
	return rc;
}

/* ---- --tokentap-log: pairs by request id ------------------------------- */

struct rec {
	char *id;                    /* NULL: an empty bucket */
	double ttft, tpot;           /* ms, NaN: null */
};

struct recs {
	struct rec *v;
	size_t cap, n;               /* cap a power of 2 */
};

static struct rec *rec_find(struct recs *h, const char *id)
{
	size_t i = util_fnv_str(UTIL_FNV_INIT, id) & (h->cap - 1);

	while (h->v[i].id != NULL && strcmp(h->v[i].id, id) != 0)
		i = (i + 1) & (h->cap - 1);
	return &h->v[i];
}

static int rec_put(struct recs *h, char *id, double ttft, double tpot)
{
	struct rec *e;

	if (2 * (h->n + 1) > h->cap) {
		struct recs g = { calloc(h->cap ? 2 * h->cap : 1024, sizeof(struct rec)),
			h->cap ? 2 * h->cap : 1024, 0 };
		if (g.v == NULL)
			return -1;
		for (size_t i = 0; i < h->cap; i++)
			if (h->v[i].id != NULL) {
				*rec_find(&g, h->v[i].id) = h->v[i];
				g.n++;
			}
		free(h->v);
		*h = g;
	}
	e = rec_find(h, id);
	if (e->id != NULL) {
		free(id);               /* a line seen before */
		return 0;
	}
	e->id = id;
	e->ttft = ttft;
	e->tpot = tpot;
	h->n++;
	return 0;
}

static void recs_free(struct recs *h)
{
	for (size_t i = 0; i < h->cap; i++)
		free(h->v[i].id);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* The log's lines of this run (they hold its run id) into h, from byte
 * from on: the run's lines are after the log's end at its start; a log
 * shorter than that now was rotated, and is read whole. */
static int recs_read(struct recs *h, const char *path, off_t from, const char *run_id,
    char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	struct load_jl j;
	struct stat st;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* a line being written at from reads as a tail without the run id */
	if (from > 0 && fstat(fileno(f), &st) == 0 && st.st_size >= from)
		(void)fseeko(f, from, SEEK_SET);
	load_jl_init(&j);
	while ((len = getline(&line, &cap, f)) > 0) {
		size_t at;
		const char *why;
		int id;
		char *s;

		/* a line half written has no newline yet: next time */
		if (line[len - 1] != '\n' || strstr(line, run_id) == NULL)
			continue;
		if (load_jl_parse(&j, line, (size_t)len, &at, &why) < 0 ||
		    load_jl_type(&j, 0) != LOAD_JL_OBJECT ||
		    (id = load_jl_get(&j, 0, "request_id")) < 0 ||
		    (s = load_jl_str(&j, id, NULL)) == NULL)
			continue;
		if (rec_put(h, s, num_at(&j, 0, "ttft_ms"), num_at(&j, 0, "tpot_ms")) < 0) {
			snprintf(err, errlen, "out of memory");
			load_jl_free(&j);
			free(line);
			fclose(f);
			return -1;
		}
	}
	load_jl_free(&j);
	free(line);
	fclose(f);
	return 0;
}

/* The request id a level's sample was sent with: the k-th time a request
 * number comes in a level is its k-th run's (the runs ran one after the
 * other, each from 0). */
static void sample_id(char *buf, size_t len, const struct load_result *r,
    const struct load_level *lv, unsigned k, uint64_t seq)
{
	if (k == 0)
		snprintf(buf, len, "%s-%zu-%llu", r->run_id, lv->index,
		    (unsigned long long)seq);
	else
		snprintf(buf, len, "%s-%zur%u-%llu", r->run_id, lv->index, k,
		    (unsigned long long)seq);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void three(double *v, size_t n, double out[3])
{
	qsort(v, n, sizeof(*v), cmp_dbl);
	out[0] = load_quantile(v, n, 50);
	out[1] = load_quantile(v, n, 95);
	out[2] = n ? v[n - 1] : NAN;
}

/* Pairs one level's measured samples; returns how many of those missing
 * had an answer (their lines may still come), or -1 when memory ran out. */
static long pair_level(struct recs *h, const struct load_result *r, struct load_level *lv)
{
	const struct loadstats *st = &lv->st;
	struct load_tt_pairs *p = &lv->pairs;
	double *dt = malloc((st->n + 1) * sizeof(double));
	double *dp = malloc((st->n + 1) * sizeof(double));
	unsigned *runs = calloc(st->n + 1, sizeof(unsigned));
	char id[96];
	long awaited = 0;

	if (dt == NULL || dp == NULL || runs == NULL) {
		free(dt);
		free(dp);
		free(runs);
		return -1;
	}
	memset(p, 0, sizeof(*p));
	p->asked = 1;
	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *x = &st->v[i];
		unsigned k = x->seq < st->n ? runs[x->seq]++ : 0;
		struct rec *e;

		if (!loadstats_counted(x))
			continue;
		sample_id(id, sizeof id, r, lv, k, x->seq);
		e = h->cap ? rec_find(h, id) : NULL;
		if (e == NULL || e->id == NULL) {
			p->missing++;
			/* one that had an answer went through tokentap: its
			 * line is still to come */
			awaited += x->status != 0;
			continue;
		}
		p->paired++;
		if (x->outcome != OUTCOME_OK)
			continue;
		if (x->ttft_us >= 0 && !isnan(e->ttft))
			dt[p->ttft_n++] = (double)x->ttft_us / 1e3 - e->ttft;
		if (x->tpot_us >= 0 && !isnan(e->tpot))
			dp[p->tpot_n++] = x->tpot_us / 1e3 - e->tpot;
	}
	three(dt, p->ttft_n, p->ttft);
	three(dp, p->tpot_n, p->tpot);
	free(dt);
	free(dp);
	free(runs);
	return awaited;
}

int load_tt_pair(const char *path, off_t from, struct load_result *r, int wait_ms,
    char *err, size_t errlen)
{
	uint64_t deadline = util_now_us() + (uint64_t)wait_ms * 1000;

	for (;;) {
		struct recs h = { NULL, 0, 0 };
		long missing = 0, m;

		if (recs_read(&h, path, from, r->run_id, err, errlen) < 0) {
			recs_free(&h);
			return -1;
		}
		for (size_t i = 0; i < r->nlevels; i++) {
			if ((m = pair_level(&h, r, &r->levels[i])) < 0) {
				recs_free(&h);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			missing += m;
		}
		recs_free(&h);
		if (missing == 0 || util_now_us() >= deadline)
			return 0;
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	}
}
