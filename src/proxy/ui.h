/* SPDX-License-Identifier: Apache-2.0 */
/* The live dashboard of docs/contract.md §5 (GET /ui): a static page, built
 * into the binary, that reads /stats and /alerts from the browser; and
 * /ui/config.json, the windows and per-route thresholds the page colours
 * figures against (/stats does not carry them), and where the access log
 * is (tokentap-load --tokentap pairs its requests there by id). */
#ifndef TOKENTAP_UI_H
#define TOKENTAP_UI_H

#include "config.h"

struct evbuffer;
struct evhttp_request;

/* Answers /ui and /ui/ with the page. The page holds no data, so admin.c
 * serves it before the token check: a browser cannot send a bearer token
 * when navigating, and the page asks for it on its first 401. */
void ui_serve_page(struct evhttp_request *req);
/* Answers /ui/config.json for c (behind the token like /stats). */
void ui_serve_config(struct evhttp_request *req, const struct conf *c);

/* {"windows": ["1m", ...], "alerts": {...}, "routes": [{"name": ...,
 * "thresholds": {"ttft_warning_ms": ..., ...}}], "access_log": "/abs/path"},
 * null where a threshold is off or there is no log file. Returns 0 or -1
 * (out of memory). */
int ui_config_json(struct evbuffer *out, const struct conf *c);

#endif
