/* SPDX-License-Identifier: Apache-2.0 */
#include "promtext.h"

#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"

/* What stands for the byte (or ill-formed sequence) at v[0..n), with its
 * input length in *in; NULL when it passes as it is. */
static const char *label_escape(const char *v, size_t n, size_t *in)
{
	int valid;

	*in = 1;
	switch (v[0]) {
	case '\\':
		return "\\\\";
	case '"':
		return "\\\"";
	case '\n':
		return "\\n";
	}
	if ((unsigned char)v[0] < 0x80)
		return NULL;
	*in = jsonw_utf8_seq(v, n, &valid);
	return valid ? NULL : JSONW_REPLACEMENT;
}

void promtext_label(struct evbuffer *out, const char *name, const char *v)
{
	size_t n = strlen(v), start = 0, i = 0, in;

	evbuffer_add_printf(out, "%s=\"", name);
	while (i < n) {
		const char *rep = label_escape(v + i, n - i, &in);
		if (rep != NULL) {
			evbuffer_add(out, v + start, i - start);
			evbuffer_add(out, rep, strlen(rep));
			start = i + in;
		}
		i += in;
	}
	evbuffer_add(out, v + start, n - start);
	evbuffer_add(out, "\"", 1);
}
