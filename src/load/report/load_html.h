/* SPDX-License-Identifier: Apache-2.0 */
/* The HTML report of a load_result (--report FILE.html, or tokentap-load
 * report RUN.json --html FILE): one self-contained page for a review, no
 * script and no external resource (its Content-Security-Policy allows
 * none), charts as inline SVG (load_svg.h), every figure also in a data
 * attribute. Panels, each where it applies (a single run has no load
 * axis): the verdict (knee, capacity), the levels table, TTFT and
 * end-to-end latency against load, TPOT and ITL against load, output
 * tokens/s against load, the knee (latency against throughput) with the
 * SLO capacity marked, errors by cause per level, the ITL CDF, TTFT
 * against input length with its fit, the time slices and a request
 * timeline of the longest level, and tokentap's view beside the client's.
 * Every text from the command line, the target, the server or a saved
 * document is escaped. */
#ifndef TOKENTAP_LOAD_HTML_H
#define TOKENTAP_LOAD_HTML_H

#include <stdio.h>

#include "load_result.h"

/* Most requests the timeline draws (evenly spread over the level), and
 * points the input-length scatter draws. */
#define LOAD_HTML_TIMELINE 300
#define LOAD_HTML_SCATTER 1000
/* Most levels the ITL CDF draws (evenly spread, the first and last in). */
#define LOAD_HTML_CDF_LEVELS 8

void load_html_write(FILE *f, const struct load_result *r);

#endif
