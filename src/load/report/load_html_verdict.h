/* SPDX-License-Identifier: Apache-2.0 */
/* The HTML report's verdict and its knee (load_html.h): the box that says
 * what a run, a sweep or a capacity search found (the SLO, the knee, the
 * capacity, and the generator's own limits), and the knee chart, latency
 * against throughput with the knee and the SLO capacity ringed. */
#ifndef TOKENTAP_LOAD_HTML_VERDICT_H
#define TOKENTAP_LOAD_HTML_VERDICT_H

#include "load_html_page.h"

/* The verdict panel. */
void load_html_verdict(struct load_page *pg);
/* The knee panel: one chart per load axis but prompt tokens. */
void load_html_knee(struct load_page *pg);

#endif
