/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text exposition (0.0.4) helpers shared by every module that
 * writes series to /metrics. */
#ifndef TOKENTAP_PROMTEXT_H
#define TOKENTAP_PROMTEXT_H

struct evbuffer;

/* Writes name="value" with the value escaped as the format requires
 * (backslash, double quote, newline) and ill-formed UTF-8 replaced by
 * U+FFFD as in JSON (jsonw_utf8_seq): valid UTF-8 whatever clients send. */
void promtext_label(struct evbuffer *out, const char *name, const char *value);

#endif
