#include "promtext.h"

#include <event2/buffer.h>

void promtext_label(struct evbuffer *out, const char *name, const char *v)
{
	evbuffer_add_printf(out, "%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(out, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, v, 1);
	}
	evbuffer_add(out, "\"", 1);
}
