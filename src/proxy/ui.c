/* SPDX-License-Identifier: Apache-2.0 */
/* The dashboard page and its config endpoint. */
#include "ui.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "jsonw.h"
#include "net.h"
#include "util.h"

/* src/proxy/ui/index.html assembled into .rodata between two labels, so the
 * program needs no file at run time and the page is never copied. The
 * path is relative to the top of the tree, where make runs the compiler;
 * the Makefile lists the page as a prerequisite of this object. */
__asm__(
	"	.pushsection .rodata\n"
	"	.global ui_page_start\n"
	"	.global ui_page_end\n"
	"ui_page_start:\n"
	"	.incbin \"src/proxy/ui/index.html\"\n"
	"ui_page_end:\n"
	"	.popsection\n");

extern const char ui_page_start[];
extern const char ui_page_end[];

/* Everything the page loads comes from this origin; the browser enforces
 * it even if a change to the page ever names another host. */
#define UI_CSP "default-src 'none'; script-src 'unsafe-inline'; " \
	"style-src 'unsafe-inline'; connect-src 'self'; img-src data:; " \
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static void reply_ok(struct evhttp_request *req, const char *type,
    struct evbuffer *b)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_send_reply(req, 200, net_reason(200), b);
}

void ui_serve_page(struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL || evbuffer_add_reference(b, ui_page_start,
	    (size_t)(ui_page_end - ui_page_start), NULL, NULL) != 0) {
		evhttp_send_error(req, 500, NULL);
		goto out;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Security-Policy", UI_CSP);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Referrer-Policy", "no-referrer");
	reply_ok(req, "text/html; charset=utf-8", b);
out:
	if (b != NULL)
		evbuffer_free(b);
}

void ui_serve_config(struct evhttp_request *req, const struct conf *c)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL || ui_config_json(b, c) != 0) {
		evhttp_send_error(req, 500, NULL);
		goto out;
	}
	reply_ok(req, "application/json", b);
out:
	if (b != NULL)
		evbuffer_free(b);
}

/* A threshold in ms; null when it is not set (0). */
static int add_ms(struct evbuffer *out, const char *name, uint64_t us)
{
	int r = evbuffer_add_printf(out, "\"%s\":", name);
	return r | jsonw_fixed(out, us != 0 ? (double)us / 1000.0 : -1, 3);
}

static int add_rate(struct evbuffer *out, const char *name, double v)
{
	if (v < 0)
		return evbuffer_add_printf(out, "\"%s\":null", name);
	return evbuffer_add_printf(out, "\"%s\":%.6g", name, v);
}

static int add_thresholds(struct evbuffer *out, const struct conf_thresholds *t)
{
	static const struct {
		const char *name;
		size_t off;
	} ms[] = {
		{ "ttft_warning_ms", offsetof(struct conf_thresholds, ttft_warning_us) },
		{ "ttft_critical_ms", offsetof(struct conf_thresholds, ttft_critical_us) },
		{ "tpot_warning_ms", offsetof(struct conf_thresholds, tpot_warning_us) },
		{ "tpot_critical_ms", offsetof(struct conf_thresholds, tpot_critical_us) },
		{ "ttfo_warning_ms", offsetof(struct conf_thresholds, ttfo_warning_us) },
		{ "ttfo_critical_ms", offsetof(struct conf_thresholds, ttfo_critical_us) },
		{ "stall_ms", offsetof(struct conf_thresholds, stall_us) },
	};
	int r = 0;

	r |= evbuffer_add_printf(out, "{");
	for (size_t i = 0; i < UTIL_ARRAY_LEN(ms); i++) {
		uint64_t us;
		memcpy(&us, (const char *)t + ms[i].off, sizeof us);
		r |= add_ms(out, ms[i].name, us);
		r |= evbuffer_add_printf(out, ",");
	}
	r |= add_rate(out, "error_rate_warning", t->error_rate_warning);
	r |= evbuffer_add_printf(out, ",");
	r |= add_rate(out, "error_rate_critical", t->error_rate_critical);
	r |= evbuffer_add_printf(out, ",");
	r |= add_rate(out, "ttft_uncertain_warning", t->ttft_uncertain_warning > 0 ?
	    t->ttft_uncertain_warning : -1);
	r |= evbuffer_add_printf(out, ",\"min_stalled\":%llu}",
	    (unsigned long long)t->min_stalled);
	return r < 0 ? -1 : 0;
}

/* "access_log": where a reader beside tokentap finds the log (tokentap-load
 * --tokentap pairs its requests by id there): absolute (a relative path is
 * tokentap's working directory's, which a reader does not share); null
 * when there is none or it is no file (stdout, a pipe, a device). A file
 * not there (moved, deleted) is still named: that is what is configured. */
static int add_access_log(struct evbuffer *out, const char *path)
{
	char cwd[PATH_MAX], full[2 * PATH_MAX + 2];
	struct stat st;
	int r = evbuffer_add_printf(out, "\"access_log\":");

	if (path == NULL || strcmp(path, "-") == 0 ||
	    (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
		return r | jsonw_str(out, NULL);
	if (path[0] == '/')
		return r | jsonw_str(out, path);
	if (getcwd(cwd, sizeof cwd) == NULL)
		return r | jsonw_str(out, NULL);
	snprintf(full, sizeof full, "%s/%s", cwd, path);
	return r | jsonw_str(out, full);
}

/* Each evbuffer_add_printf result is or-ed into r: any -1 leaves r < 0. */
int ui_config_json(struct evbuffer *out, const struct conf *c)
{
	char w[32];
	int r = 0;

	r |= evbuffer_add_printf(out, "{\"windows\":[");
	for (size_t i = 0; i < c->n_stats_windows; i++) {
		util_duration_text(c->stats_windows_us[i], w, sizeof w);
		r |= evbuffer_add_printf(out, "%s\"%s\"", i ? "," : "", w);
	}
	/* the history's steps: the board's ranges and its charts' steps */
	r |= evbuffer_add_printf(out, "],\"history\":[");
	for (size_t i = 0; i < c->n_stats_history; i++) {
		char k[32];
		util_duration_text(c->stats_history[i].step_us, w, sizeof w);
		util_duration_text(c->stats_history[i].keep_us, k, sizeof k);
		r |= evbuffer_add_printf(out, "%s{\"step\":\"%s\",\"keep\":\"%s\"}", i ? "," : "",
		    w, k);
	}
	util_duration_text(c->alerts_window_us, w, sizeof w);
	r |= evbuffer_add_printf(out, "],\"alerts\":{\"window\":\"%s\","
	    "\"quantile\":%g,\"min_samples\":%llu},\"thresholds\":", w,
	    c->alerts_quantile, (unsigned long long)c->alerts_min_samples);
	r |= add_thresholds(out, &c->thresholds);
	r |= evbuffer_add_printf(out, ",\"routes\":[");
	for (size_t i = 0; i < c->n_routes; i++) {
		r |= evbuffer_add_printf(out, "%s{\"name\":", i ? "," : "");
		r |= jsonw_str(out, c->routes[i].name);
		r |= evbuffer_add_printf(out, ",\"thresholds\":");
		r |= add_thresholds(out, &c->routes[i].thresholds);
		r |= evbuffer_add_printf(out, "}");
	}
	r |= evbuffer_add_printf(out, "],");
	r |= add_access_log(out, c->access_log);
	r |= evbuffer_add_printf(out, "}\n");
	return r < 0 ? -1 : 0;
}
