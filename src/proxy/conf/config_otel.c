/* SPDX-License-Identifier: Apache-2.0 */
/* otel: the OpenTelemetry export's keys (docs/alerts-and-metrics.md,
 * "OpenTelemetry"), and the OTel SDKs' environment variables
 * (OTEL_EXPORTER_OTLP_ENDPOINT and friends, as the specification names them)
 * for what the file leaves unset: a container or a unit file sets the
 * collector the way it sets it for every other OTel-instrumented program. The
 * file wins over the environment, the environment over the defaults. */
#include "config_schema.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "url.h"
#include "util.h"

#define UNSET (-1)

static void kv_free(struct conf_kv **kv, size_t *n)
{
	for (size_t i = 0; i < *n; i++) {
		free((*kv)[i].name);
		free((*kv)[i].value);
	}
	free(*kv);
	*kv = NULL;
	*n = 0;
}

void conf_otel_free(struct conf_otel *o)
{
	kv_free(&o->headers, &o->n_headers);
	kv_free(&o->traces_headers, &o->n_traces_headers);
	kv_free(&o->metrics_headers, &o->n_metrics_headers);
	kv_free(&o->resource, &o->n_resource);
	free(o->endpoint);
	free(o->traces_url);
	free(o->metrics_url);
	free(o->service_name);
	free(o->tls.ca_file);
	free(o->tls.sni);
	free(o->tls.client_cert);
	free(o->tls.client_key);
}

/* ---- keys ----------------------------------------------------------------- */

/* An export URL: http or https, no credentials (they would reach the
 * logs: headers carry keys), no query. NULL or the problem. */
static const char *url_problem(const char *s)
{
	struct url u;
	const char *problem = url_parse(s, &u);

	if (problem == NULL && u.user != NULL)
		problem = "must not contain credentials (use otel.headers)";
	else if (problem == NULL && u.query != NULL)
		problem = "must not contain a query";
	url_free(&u);
	return problem;
}

static void url_fn(struct yconf *ld, yaml_node_t *v, const char *path, char **out)
{
	char *s = yconf_is_null(v) ? NULL : yconf_scalar(ld, v, path, "a URL");
	const char *problem;

	if (s == NULL)
		return;
	if ((problem = url_problem(s)) != NULL) {
		yconf_err(ld, v, "%s: %s", path, problem);
		free(s);
		return;
	}
	free(*out);
	*out = s;
}

static void endpoint_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	url_fn(ld, v, path, &((struct conf_otel *)base)->endpoint);
}

static void traces_url_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	url_fn(ld, v, path, &((struct conf_otel *)base)->traces_url);
}

static void metrics_url_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	url_fn(ld, v, path, &((struct conf_otel *)base)->metrics_url);
}

static void protocol_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const char *const names[] = { "protobuf", "json" };
	int t = yconf_enum(ld, v, path, "protocol", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		((struct conf_otel *)base)->protocol = t;
}

static void compression_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const char *const names[] = { "none", "gzip" };
	int t = yconf_enum(ld, v, path, "compression", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		((struct conf_otel *)base)->gzip = t;
}

static void temporality_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const char *const names[] = { "cumulative", "delta" };
	int t = yconf_enum(ld, v, path, "temporality", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		((struct conf_otel *)base)->delta = t;
}

static void histograms_fn(struct yconf *ld, yaml_node_t *v, void *base, const char *path)
{
	static const char *const names[] = { "exponential", "explicit" };
	int t = yconf_enum(ld, v, path, "histograms", names, UTIL_ARRAY_LEN(names));
	if (t >= 0)
		((struct conf_otel *)base)->explicit_buckets = t;
}

static void traces_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	const struct conf_otel *o = base;
	if (o->queue != 0 && o->batch != 0 && o->batch > o->queue)
		yconf_err(ld, m, "%s: batch (%llu) is above queue (%llu)", path,
		    (unsigned long long)o->batch, (unsigned long long)o->queue);
}

static void otel_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct conf_otel *o = base;
	(void)ld;
	(void)path;
	o->at.line = m->start_mark.line + 1;
	o->at.col = m->start_mark.column + 1;
}

#define KEY(n, t, f, fl, min, max) \
	{ .name = n, .type = t, .flags = fl, .off = offsetof(struct conf_otel, f), \
	  .lo = min, .hi = max }
#define FUNC(n, f) { .name = n, .type = YCONF_FUNC, .fn = f }

static const struct yconf_key traces_keys[] = {
	KEY("enabled", YCONF_BOOL, traces, 0, 0, 0),
	{ .name = "sample", .type = YCONF_FLOAT, .off = offsetof(struct conf_otel, sample),
	  .flo = 0, .fhi = 1 },
	KEY("queue", YCONF_UINT, queue, 0, 1, 65536),
	KEY("batch", YCONF_UINT, batch, 0, 1, 4096),
	KEY("delay", YCONF_DURATION, delay_us, 0, 1000, 0),
	FUNC("endpoint", traces_url_fn),
};
static const struct yconf_section traces_section = {
	traces_keys, UTIL_ARRAY_LEN(traces_keys), traces_check
};

static const struct yconf_key metrics_keys[] = {
	KEY("enabled", YCONF_BOOL, metrics, 0, 0, 0),
	KEY("interval", YCONF_DURATION, interval_us, 0, 100000, 0),
	FUNC("temporality", temporality_fn),
	FUNC("histograms", histograms_fn),
	FUNC("endpoint", metrics_url_fn),
};
static const struct yconf_section metrics_section = {
	metrics_keys, UTIL_ARRAY_LEN(metrics_keys), NULL
};

static const struct yconf_key otel_keys[] = {
	FUNC("endpoint", endpoint_fn),
	FUNC("protocol", protocol_fn),
	FUNC("compression", compression_fn),
	{ .name = "headers", .type = YCONF_MAP, .flags = YCONF_HEADER,
	  .off = offsetof(struct conf_otel, headers),
	  .n_off = offsetof(struct conf_otel, n_headers), .put = conf_kv_put },
	KEY("timeout", YCONF_DURATION, timeout_us, 0, 1000, 0),
	{ .name = "tls", .type = YCONF_SECTION, .off = offsetof(struct conf_otel, tls),
	  .sub = &conf_tls_section },
	KEY("service_name", YCONF_STRING, service_name, 0, 0, 0),
	{ .name = "resource", .type = YCONF_MAP, .off = offsetof(struct conf_otel, resource),
	  .n_off = offsetof(struct conf_otel, n_resource), .put = conf_kv_put },
	{ .name = "traces", .type = YCONF_SECTION, .sub = &traces_section },
	{ .name = "metrics", .type = YCONF_SECTION, .sub = &metrics_section },
};
const struct yconf_section conf_otel_section = {
	otel_keys, UTIL_ARRAY_LEN(otel_keys), otel_check
};

void conf_otel_init(struct conf_otel *o)
{
	memset(o, 0, sizeof *o);
	o->protocol = o->gzip = o->traces = o->metrics = o->delta =
	    o->explicit_buckets = UNSET;
	o->sample = UNSET;
	o->tls.verify = 1;
}

/* ---- the environment ------------------------------------------------------ */

struct env {
	const char *(*get)(const char *name);
	FILE *errs;
	int bad;
};

static const char *env_get(struct env *e, const char *name)
{
	const char *v = e->get(name);
	return v != NULL && *v != '\0' ? v : NULL;
}

static void env_err(struct env *e, const char *name, const char *msg, const char *value)
{
	if (e->errs != NULL) {
		fprintf(e->errs, "environment: %s: %s", name, msg);
		if (value != NULL)
			fprintf(e->errs, ", got '%.64s'", value);
		fputc('\n', e->errs);
	}
	e->bad = 1;
}

static void env_str(struct env *e, const char *name, char **out)
{
	const char *v = env_get(e, name);
	if (*out == NULL && v != NULL && (*out = strdup(v)) == NULL)
		env_err(e, name, "out of memory", NULL);
}

static void env_url(struct env *e, const char *name, char **out)
{
	const char *v = env_get(e, name), *problem;

	if (*out != NULL || v == NULL)
		return;
	/* not echoed: it may carry credentials */
	if ((problem = url_problem(v)) != NULL)
		env_err(e, name, problem, NULL);
	else if ((*out = strdup(v)) == NULL)
		env_err(e, name, "out of memory", NULL);
}

/* Milliseconds, as the specification's variables give durations. */
static void env_ms(struct env *e, const char *name, uint64_t *out_us, uint64_t min_us)
{
	const char *v = env_get(e, name);
	uint64_t ms;

	if (*out_us != 0 || v == NULL)
		return;
	if (yconf_parse_uint(v, &ms) != 0 || ms > UINT64_MAX / 1000 || ms * 1000 < min_us)
		env_err(e, name, "expected a number of milliseconds", v);
	else
		*out_us = ms * 1000;
}

static void env_uint(struct env *e, const char *name, uint64_t *out, uint64_t hi)
{
	const char *v = env_get(e, name);
	uint64_t n;

	if (*out != 0 || v == NULL)
		return;
	if (yconf_parse_uint(v, &n) != 0 || n < 1 || n > hi)
		env_err(e, name, "expected a positive number", v);
	else
		*out = n;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A W3C Baggage-style value: percent-escapes decoded, space trimmed;
 * *len its length (a %00 is a byte of it). */
static char *decoded(const char *p, size_t n, size_t *len)
{
	char *s = malloc(n + 1);
	size_t o = 0;

	if (s == NULL)
		return NULL;
	while (n > 0 && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '%' && i + 2 < n && hexval(p[i + 1]) >= 0 &&
		    hexval(p[i + 2]) >= 0) {
			s[o++] = (char)(hexval(p[i + 1]) << 4 | hexval(p[i + 2]));
			i += 2;
		} else {
			s[o++] = p[i];
		}
	}
	s[o] = '\0';
	*len = o;
	return s;
}

/* A header's value holds a control character (CR, LF, NUL, any other
 * below space but tab, DEL): it would split, cut or poison the head. */
static int has_control(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f)
			return 1;
	return 0;
}

/* "k1=v1,k2=v2" (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES)
 * added to a map the file did not give. header: names must be header
 * names. Values are never echoed. */
static void env_pairs(struct env *e, const char *name, struct conf_kv **kv, size_t *n,
    int header)
{
	const char *v = env_get(e, name), *p;

	if (*n != 0 || v == NULL)
		return;
	for (p = v; *p != '\0';) {
		const char *end = strchr(p, ','), *eq;
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p), kn = 0, vn = 0;
		struct conf_kv *grown;
		char *k, *val;
		int ok = 1;

		eq = memchr(p, '=', len);
		if (eq == NULL) {
			if (len > 0 && strspn(p, " \t") < len)
				env_err(e, name, "expected key=value pairs separated by ','", NULL);
			goto next;
		}
		k = decoded(p, (size_t)(eq - p), &kn);
		val = decoded(eq + 1, len - (size_t)(eq - p) - 1, &vn);
		if (k == NULL || val == NULL || *k == '\0' || kn != strlen(k))
			ok = 0;
		for (size_t i = 0; ok && header && k[i] != '\0'; i++)
			ok = util_is_tchar((unsigned char)k[i]);
		if (ok && header && has_control(val, vn)) {
			env_err(e, name, "a value holds a control character (CR, LF, NUL, "
			    "another below space but tab, or DEL), percent-encoded or not",
			    NULL);
			free(k);
			free(val);
			goto next;
		}
		if (!ok || (grown = realloc(*kv, (*n + 1) * sizeof **kv)) == NULL) {
			env_err(e, name, k == NULL || val == NULL ? "out of memory" :
			    "a key is empty or not a header name", NULL);
			free(k);
			free(val);
			goto next;
		}
		*kv = grown;
		(*kv)[*n].name = k;
		(*kv)[(*n)++].value = val;
next:
		p = end != NULL ? end + 1 : p + len;
	}
}

static void env_choice(struct env *e, const char *name, int *out,
    const char *const *names, const int *values, size_t n, const char *want)
{
	const char *v = env_get(e, name);

	if (*out != UNSET || v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(v, names[i]) == 0) {
			*out = values[i];
			return;
		}
	env_err(e, name, want, v);
}

/* The sampler: tokentap's is always parent-based (a client's sampled flag
 * is followed); the variable sets the ratio of the traces it starts. */
static void env_sampler(struct env *e, struct conf_otel *o)
{
	const char *s = env_get(e, "OTEL_TRACES_SAMPLER");
	const char *arg = env_get(e, "OTEL_TRACES_SAMPLER_ARG");
	char *end;
	double r;

	if (o->sample != UNSET || s == NULL)
		return;
	if (strcmp(s, "always_on") == 0 || strcmp(s, "parentbased_always_on") == 0) {
		o->sample = 1;
	} else if (strcmp(s, "always_off") == 0 || strcmp(s, "parentbased_always_off") == 0) {
		o->sample = 0;
	} else if (strcmp(s, "traceidratio") == 0 ||
	    strcmp(s, "parentbased_traceidratio") == 0) {
		r = arg != NULL ? strtod(arg, &end) : 1;
		if (arg != NULL && (*end != '\0' || !(r >= 0 && r <= 1)))
			env_err(e, "OTEL_TRACES_SAMPLER_ARG", "expected a ratio from 0 to 1", arg);
		else
			o->sample = r;
	} else {
		env_err(e, "OTEL_TRACES_SAMPLER", "expected always_on, always_off, "
		    "traceidratio or their parentbased_ forms", s);
	}
}

static void env_apply(struct env *e, struct conf_otel *o)
{
	static const char *const protos[] = { "http/protobuf", "http/json" };
	static const int proto_v[] = { OTEL_PROTOBUF, OTEL_JSON };
	static const char *const comps[] = { "none", "gzip" };
	static const int comp_v[] = { 0, 1 };
	static const char *const temps[] = { "cumulative", "delta", "lowmemory" };
	static const int temp_v[] = { 0, 1, 1 };
	static const char *const none[] = { "otlp", "none" };
	static const int none_v[] = { 1, 0 };
	int file_headers = o->n_headers > 0;

	env_url(e, "OTEL_EXPORTER_OTLP_ENDPOINT", &o->endpoint);
	env_url(e, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &o->traces_url);
	env_url(e, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &o->metrics_url);
	env_choice(e, "OTEL_EXPORTER_OTLP_PROTOCOL", &o->protocol, protos, proto_v, 2,
	    "expected http/protobuf or http/json (tokentap exports OTLP over HTTP)");
	env_choice(e, "OTEL_EXPORTER_OTLP_COMPRESSION", &o->gzip, comps, comp_v, 2,
	    "expected gzip or none");
	env_pairs(e, "OTEL_EXPORTER_OTLP_HEADERS", &o->headers, &o->n_headers, 1);
	/* checked whatever the file says; used where it gives no headers */
	env_pairs(e, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", &o->traces_headers,
	    &o->n_traces_headers, 1);
	env_pairs(e, "OTEL_EXPORTER_OTLP_METRICS_HEADERS", &o->metrics_headers,
	    &o->n_metrics_headers, 1);
	if (file_headers) {
		kv_free(&o->traces_headers, &o->n_traces_headers);
		kv_free(&o->metrics_headers, &o->n_metrics_headers);
	}
	env_ms(e, "OTEL_EXPORTER_OTLP_TIMEOUT", &o->timeout_us, 1000);
	env_str(e, "OTEL_EXPORTER_OTLP_CERTIFICATE", &o->tls.ca_file);
	env_str(e, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &o->tls.client_cert);
	env_str(e, "OTEL_EXPORTER_OTLP_CLIENT_KEY", &o->tls.client_key);
	if ((o->tls.client_cert == NULL) != (o->tls.client_key == NULL))
		env_err(e, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
		    "and OTEL_EXPORTER_OTLP_CLIENT_KEY go together", NULL);
	env_str(e, "OTEL_SERVICE_NAME", &o->service_name);
	env_pairs(e, "OTEL_RESOURCE_ATTRIBUTES", &o->resource, &o->n_resource, 0);
	env_sampler(e, o);
	env_choice(e, "OTEL_TRACES_EXPORTER", &o->traces, none, none_v, 2,
	    "expected otlp or none");
	env_choice(e, "OTEL_METRICS_EXPORTER", &o->metrics, none, none_v, 2,
	    "expected otlp or none");
	env_uint(e, "OTEL_BSP_MAX_QUEUE_SIZE", &o->queue, 65536);
	env_uint(e, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &o->batch, 4096);
	env_ms(e, "OTEL_BSP_SCHEDULE_DELAY", &o->delay_us, 1000);
	env_ms(e, "OTEL_METRIC_EXPORT_INTERVAL", &o->interval_us, 100000);
	env_choice(e, "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", &o->delta,
	    temps, temp_v, 3, "expected cumulative, delta or lowmemory");
}

/* base + "/v1/" + signal, one slash between (the specification's rule
 * for OTEL_EXPORTER_OTLP_ENDPOINT). */
static char *signal_url(const char *base, const char *signal)
{
	size_t n = strlen(base);
	char *s;

	while (n > 0 && base[n - 1] == '/')
		n--;
	return asprintf(&s, "%.*s/v1/%s", (int)n, base, signal) < 0 ? NULL : s;
}

int conf_otel_finish(struct conf *c, const char *(*get)(const char *name), FILE *errs)
{
	struct conf_otel *o = &c->otel;
	struct env e = { get, errs, 0 };

	if (get != NULL)
		env_apply(&e, o);
	if (o->protocol == UNSET)
		o->protocol = OTEL_PROTOBUF;
	if (o->gzip == UNSET)
		o->gzip = 0;
	if (o->timeout_us == 0)
		o->timeout_us = 10000000;
	if (o->service_name == NULL && (o->service_name = strdup("tokentap")) == NULL)
		e.bad = 1;
	if (o->traces == UNSET)
		o->traces = 1;
	if (o->sample == UNSET)
		o->sample = 0;
	if (o->queue == 0)
		o->queue = 2048;
	if (o->batch == 0)
		o->batch = o->queue < 512 ? o->queue : 512;
	if (o->batch > o->queue) {
		if (errs != NULL)
			fprintf(errs, "%s: otel.traces.batch (%llu) is above the queue (%llu)\n",
			    c->path ? c->path : "config", (unsigned long long)o->batch,
			    (unsigned long long)o->queue);
		e.bad = 1;
	}
	if (o->delay_us == 0)
		o->delay_us = 1000000;
	if (o->metrics == UNSET)
		o->metrics = 1;
	if (o->interval_us == 0)
		o->interval_us = 60000000;
	if (o->delta == UNSET)
		o->delta = 0;
	if (o->explicit_buckets == UNSET)
		o->explicit_buckets = 0;
	if (o->endpoint != NULL && o->traces_url == NULL &&
	    (o->traces_url = signal_url(o->endpoint, "traces")) == NULL)
		e.bad = 1;
	if (o->endpoint != NULL && o->metrics_url == NULL &&
	    (o->metrics_url = signal_url(o->endpoint, "metrics")) == NULL)
		e.bad = 1;
	/* a signal without a URL is not exported */
	if (o->traces_url == NULL)
		o->traces = 0;
	if (o->metrics_url == NULL)
		o->metrics = 0;
	return e.bad ? -1 : 0;
}
