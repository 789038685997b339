/* SPDX-License-Identifier: Apache-2.0 */
#include "load_prompts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "load_conf.h"
#include "load_jsonl.h"

#define MAX_PROBLEMS 20

struct reader {
	struct load_prompts *p;
	const char *path;
	FILE *err;
	struct load_jl j;
};

static int problem(struct reader *rd, size_t line, size_t off, const char *msg)
{
	fprintf(rd->err, "%s:%zu:%zu: %s\n", rd->path, line, off + 1, msg);
	return -1;
}

/* The evbuffer's bytes as a malloc'd string. */
static char *take(struct evbuffer *b, size_t *len)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);

	if (s == NULL)
		return NULL;
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	*len = n;
	return s;
}

/* "messages": each {"role": string, "content": string}; re-written with
 * the one JSON writer, and their contents joined as the text. */
static int messages(struct reader *rd, size_t line, int arr, struct load_prompt *pr)
{
	struct evbuffer *js = evbuffer_new(), *text = evbuffer_new();
	int el = -1, first = 1, rc = -1;

	if (js == NULL || text == NULL)
		goto done;
	if (load_jl_type(&rd->j, arr) != LOAD_JL_ARRAY) {
		problem(rd, line, load_jl_off(&rd->j, arr), "messages: expected an array");
		goto done;
	}
	evbuffer_add(js, "[", 1);
	while (load_jl_elem(&rd->j, arr, &el)) {
		int role = -1, content = -1, k = -1;
		char *r, *c;
		size_t rl, cl;

		if (load_jl_type(&rd->j, el) == LOAD_JL_OBJECT) {
			role = load_jl_get(&rd->j, el, "role");
			content = load_jl_get(&rd->j, el, "content");
		}
		if (role < 0 || content < 0 ||
		    load_jl_type(&rd->j, role) != LOAD_JL_STRING ||
		    load_jl_type(&rd->j, content) != LOAD_JL_STRING) {
			problem(rd, line, load_jl_off(&rd->j, el), "messages: each message is "
			    "{\"role\": \"...\", \"content\": \"...\"} (text content only)");
			goto done;
		}
		while (load_jl_next(&rd->j, el, &k)) {
			if (!load_jl_is(&rd->j, k, "role") && !load_jl_is(&rd->j, k, "content")) {
				problem(rd, line, load_jl_off(&rd->j, k), "messages: a message has "
				    "only \"role\" and \"content\"");
				goto done;
			}
		}
		r = load_jl_str(&rd->j, role, &rl);
		c = load_jl_str(&rd->j, content, &cl);
		if (r == NULL || c == NULL) {
			free(r);
			free(c);
			goto done;
		}
		evbuffer_add_printf(js, "%s{\"role\":", first ? "" : ",");
		jsonw_strn(js, r, rl);
		evbuffer_add(js, ",\"content\":", sizeof(",\"content\":") - 1);
		jsonw_strn(js, c, cl);
		evbuffer_add(js, "}", 1);
		if (!first)
			evbuffer_add(text, "\n\n", 2);
		evbuffer_add(text, c, cl);
		first = 0;
		free(r);
		free(c);
	}
	if (first) {
		problem(rd, line, load_jl_off(&rd->j, arr), "messages: at least one message");
		goto done;
	}
	evbuffer_add(js, "]", 1);
	pr->messages = take(js, &pr->messages_len);
	pr->text = take(text, &pr->text_len);
	rc = pr->messages != NULL && pr->text != NULL ? 0 : -1;
done:
	if (js != NULL)
		evbuffer_free(js);
	if (text != NULL)
		evbuffer_free(text);
	return rc;
}

static int max_tokens(struct reader *rd, size_t line, int v, struct load_prompt *pr)
{
	double x;

	if (load_jl_num(&rd->j, v, &x) < 0 || x < 1 || x != floor(x) ||
	    x > LOAD_CONF_MAX_TOKENS)
		return problem(rd, line, load_jl_off(&rd->j, v),
		    "max_tokens: expected a whole number from 1 to 1000000");
	pr->max_tokens = (uint32_t)x;
	return 0;
}

static int object(struct reader *rd, size_t line, struct load_prompt *pr)
{
	int k = -1, have = 0;

	while (load_jl_next(&rd->j, 0, &k)) {
		int v = k + 1;
		if (load_jl_is(&rd->j, k, "text") || load_jl_is(&rd->j, k, "prompt")) {
			pr->text = load_jl_str(&rd->j, v, &pr->text_len);
			if (pr->text == NULL)
				return problem(rd, line, load_jl_off(&rd->j, v),
				    "text: expected a string");
			have++;
		} else if (load_jl_is(&rd->j, k, "messages")) {
			if (messages(rd, line, v, pr) < 0)
				return -1;
			have++;
		} else if (load_jl_is(&rd->j, k, "max_tokens") ||
		    load_jl_is(&rd->j, k, "output_tokens")) {
			if (max_tokens(rd, line, v, pr) < 0)
				return -1;
		} else {
			return problem(rd, line, load_jl_off(&rd->j, k), "unknown key (text, "
			    "prompt, messages, max_tokens)");
		}
	}
	if (have != 1)
		return problem(rd, line, 0, "expected one of \"text\", \"prompt\" or "
		    "\"messages\"");
	return 0;
}

static int prompt_line(void *arg, const char *line, size_t len, size_t lineno)
{
	struct reader *rd = arg;
	struct load_prompts *p = rd->p;
	struct load_prompt pr;
	const char *why;
	size_t at;

	if (load_jl_parse(&rd->j, line, len, &at, &why) < 0)
		return problem(rd, lineno, at, why);
	memset(&pr, 0, sizeof(pr));
	if (load_jl_type(&rd->j, 0) == LOAD_JL_STRING) {
		pr.text = load_jl_str(&rd->j, 0, &pr.text_len);
	} else if (load_jl_type(&rd->j, 0) != LOAD_JL_OBJECT) {
		return problem(rd, lineno, 0, "expected a string or an object");
	} else if (object(rd, lineno, &pr) < 0) {
		free(pr.text);
		free(pr.messages);
		return -1;
	}
	if (pr.text == NULL || p->n == SIZE_MAX / 2)
		return problem(rd, lineno, 0, "out of memory");
	pr.tokens = pr.text_len / 4 > LOAD_CONF_MAX_TOKENS ? LOAD_CONF_MAX_TOKENS :
	    pr.text_len < 4 ? 1 : (uint32_t)(pr.text_len / 4);
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct load_prompt *v = realloc(p->v, cap * sizeof(*v));
		if (v == NULL) {
			free(pr.text);
			free(pr.messages);
			problem(rd, lineno, 0, "out of memory");
			return -2;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = pr;
	return 0;
}

int load_prompts_read(struct load_prompts *p, const char *path, FILE *err)
{
	struct reader rd = { .p = p, .path = path, .err = err };
	int rc;

	memset(p, 0, sizeof(*p));
	load_jl_init(&rd.j);
	rc = load_jl_read_file(path, err, MAX_PROBLEMS, prompt_line, &rd);
	load_jl_free(&rd.j);
	if (rc == 0 && p->n == 0) {
		fprintf(err, "%s:1:1: no prompts\n", path);
		rc = -1;
	}
	if (rc == 0 && (p->path = strdup(path)) == NULL)
		rc = -1;
	if (rc < 0)
		load_prompts_free(p);
	return rc;
}

void load_prompts_free(struct load_prompts *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].text);
		free(p->v[i].messages);
	}
	free(p->v);
	free(p->path);
	memset(p, 0, sizeof(*p));
}
