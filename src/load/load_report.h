/* What tokentap-load prints about a run: a table for people and a JSON
 * object for scripts, with the same figures (durations in ms, speeds in
 * tokens/s, null where undefined). */
#ifndef TOKENTAP_LOAD_REPORT_H
#define TOKENTAP_LOAD_REPORT_H

#include <stdio.h>

#include "load_conf.h"
#include "load_run.h"
#include "loadstats.h"

struct load_report {
	const struct load_conf *conf;
	const struct loadstats *st;
	const struct load_run_info *info;
};

void load_report_table(FILE *f, const struct load_report *rp);
/* Goodput and attainment against the run's per-request targets
 * (loadstats_goodput): one line of the table; nothing without targets. */
void load_report_goodput_line(FILE *f, const struct load_report *rp);
/* The same as a JSON member "goodput" (null without targets), after a
 * comma and a newline, indented. */
void load_report_goodput_json(FILE *f, const struct load_report *rp, int indent);
/* The run's members, without the braces, so a caller can add its own;
 * samples: add every request's measurements (kept in st). indent: spaces
 * before each member. */
void load_report_json_members(FILE *f, const struct load_report *rp,
    int samples, int indent);

#endif
