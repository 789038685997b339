/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for tokentap-load's saved documents: the input is a
 * document (docs/load-schema.md) read by load_read, as `tokentap-load
 * report` and `compare` read one; each that reads is reported (the table,
 * the HTML report, the CSV) and compared with itself under rules, as the
 * commands would. Out-of-bounds reads, overflowing conversions and leaks
 * are ASan's and UBSan's to find. Seeds: tests/fixtures/load. Run by
 * tests/fuzz/run.sh SECONDS load_read (make fuzz-load); make test runs
 * the same checks as a deterministic mutation run in
 * tests/unit/test_load_read.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load_compare.h"
#include "load_html.h"
#include "load_json.h"
#include "load_read.h"
#include "load_report.h"

static char path[64];
static FILE *devnull;
static struct load_cmp_opts opts;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char why[200];
	int fd;

	(void)argc;
	(void)argv;
	strcpy(path, "/tmp/fuzz_load_read_XXXXXX");
	fd = mkstemp(path);
	devnull = fopen("/dev/null", "w");
	if (fd < 0 || devnull == NULL)
		abort();
	close(fd);
	load_cmp_opts_init(&opts);
	opts.resamples = 40;
	if (load_cmp_parse_rules(&opts, "tpot_p50>+10% ttft_p95>+20ms error_rate>+1% "
	    "output_tokens_per_s<-5% itl_p99>+1%", why, sizeof why) < 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct load_doc d;
	FILE *f = fopen(path, "wb");

	if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	if (load_read(&d, path, devnull) < 0)
		return 0;
	load_report_table(devnull, &d.r);
	load_html_write(devnull, &d.r);
	load_csv_write(devnull, &d.r);
	load_compare(devnull, &d.r, "A", &d.r, "B", &opts);
	load_doc_free(&d);
	return 0;
}
