/* SPDX-License-Identifier: Apache-2.0 */
#include "procmetrics.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "log.h"
#include "logfile.h"
#include "promout.h"

/* Descriptors open, the one reading the directory left out. */
static double open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	double n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

/* Wall-clock seconds when the process started: its start in clock ticks
 * after boot (/proc/self/stat field 22) plus the boot time (/proc/stat). */
static double start_time(void)
{
	char buf[1024], *p;
	unsigned long long ticks = 0, btime = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;
	int field = 2;          /* the space before field 3 makes it 3 */

	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces: count fields after its ')' */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	for (p++; *p && field < 22; p++)
		if (*p == ' ' && p[1] != ' ')
			field++;
	if (sscanf(p, "%llu", &ticks) != 1 || (f = fopen("/proc/stat", "r")) == NULL)
		return -1;
	while (fgets(buf, sizeof buf, f) != NULL)
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return (double)btime + (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

static void memory(double *rss, double *vsz)
{
	unsigned long long size = 0, resident = 0;
	double page = (double)sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "r");

	*rss = *vsz = -1;
	if (f == NULL)
		return;
	if (fscanf(f, "%llu %llu", &size, &resident) == 2) {
		*vsz = (double)size * page;
		*rss = (double)resident * page;
	}
	fclose(f);
}

void procmetrics_write(struct promout *o)
{
	struct promout_labels none = { .n = 0 };
	struct rusage ru;
	struct rlimit rl;
	double rss, vsz, v;

	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		promout_family(o, "process_cpu_seconds_total",
		    "Total user and system CPU time spent in seconds.", PROMPROTO_COUNTER);
		promout_sample(o, &none, (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		    ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6);
	}
	if ((v = open_fds()) >= 0) {
		promout_family(o, "process_open_fds", "Number of open file descriptors.",
		    PROMPROTO_GAUGE);
		promout_sample(o, &none, v);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		promout_family(o, "process_max_fds",
		    "Maximum number of open file descriptors.", PROMPROTO_GAUGE);
		promout_sample(o, &none, (double)rl.rlim_cur);
	}
	memory(&rss, &vsz);
	if (rss >= 0) {
		promout_family(o, "process_virtual_memory_bytes",
		    "Virtual memory size in bytes.", PROMPROTO_GAUGE);
		promout_sample(o, &none, vsz);
		promout_family(o, "process_resident_memory_bytes",
		    "Resident memory size in bytes.", PROMPROTO_GAUGE);
		promout_sample(o, &none, rss);
	}
	if ((v = start_time()) >= 0) {
		promout_family(o, "process_start_time_seconds",
		    "Start time of the process since unix epoch in seconds.", PROMPROTO_GAUGE);
		promout_sample(o, &none, v);
	}
}

void procmetrics_logs(struct promout *o)
{
	const struct log_limit *lim;
	static const char *const names[2] = {
		"tokentap_log_lines_lost_total", "tokentap_log_bytes_lost_total",
	};
	static const char *const help[2] = {
		"Lines the access log or the stats file lost: their write failed (a full "
		"disk, a quota, a file-size limit).",
		"Bytes of the lines lost.",
	};

	for (int k = 0; k < 2; k++) {
		promout_family(o, names[k], help[k], PROMPROTO_COUNTER);
		for (int i = 0; i < LOGFILES; i++) {
			struct logfile *l = logfile_of((enum logfile_kind)i);
			struct promout_labels lb = { .n = 0 };
			uint64_t v[2];
			logfile_lost(l, &v[0], &v[1]);
			promout_label(&lb, "log", logfile_label(l));
			promout_sample(o, &lb, (double)v[k]);
		}
	}
	promout_family(o, "tokentap_log_lines_suppressed_total",
	    "Error-log lines of a kind a client or a peer can cause, left out over "
	    "the kind's burst an interval.", PROMPROTO_COUNTER);
	for (size_t i = 0; (lim = log_limit_at(i)) != NULL; i++) {
		struct promout_labels lb = { .n = 0 };
		promout_label(&lb, "kind", lim->kind);
		promout_sample(o, &lb, (double)log_limit_suppressed(lim));
	}
}

void procmetrics_logs_json(struct evbuffer *out)
{
	const struct log_limit *lim;

	evbuffer_add_printf(out, ",\"logs\":{");
	for (int i = 0; i < LOGFILES; i++) {
		struct logfile *l = logfile_of((enum logfile_kind)i);
		uint64_t lines, bytes;
		logfile_lost(l, &lines, &bytes);
		evbuffer_add_printf(out, "%s\"%s\":{\"lines_lost\":%" PRIu64 ",\"bytes_lost\":%"
		    PRIu64 "}", i ? "," : "", logfile_label(l), lines, bytes);
	}
	evbuffer_add_printf(out, "},\"log_lines_suppressed\":{");
	for (size_t i = 0; (lim = log_limit_at(i)) != NULL; i++) {
		if (i > 0)
			evbuffer_add(out, ",", 1);
		jsonw_str(out, lim->kind);
		evbuffer_add_printf(out, ":%" PRIu64, log_limit_suppressed(lim));
	}
	evbuffer_add(out, "}", 1);
}
