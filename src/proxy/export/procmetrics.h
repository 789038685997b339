/* SPDX-License-Identifier: Apache-2.0 */
/* The process metrics every Prometheus exporter has (client_golang's
 * process collector): CPU seconds, resident and virtual memory, open and
 * allowed descriptors, start time; read from /proc at each scrape. And
 * what the process lost: the lines its log files could not write
 * (logfile.h), and the error-log lines its kinds suppressed (log.h). */
#ifndef TOKENTAP_PROCMETRICS_H
#define TOKENTAP_PROCMETRICS_H

struct evbuffer;
struct promout;

void procmetrics_write(struct promout *o);
/* tokentap_log_lines_lost_total{log}, tokentap_log_bytes_lost_total{log}
 * and tokentap_log_lines_suppressed_total{kind} */
void procmetrics_logs(struct promout *o);
/* ,"logs":{"access":{"lines_lost":N,"bytes_lost":N},"stats":{...}},
 * "log_lines_suppressed":{"malformed_request":N,...} */
void procmetrics_logs_json(struct evbuffer *out);

#endif
