/* SPDX-License-Identifier: Apache-2.0 */
#include "load_body.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "load_prompts.h"
#include "load_psize.h"
#include "rng.h"
#include "url.h"
#include "util.h"

/* Plain words, so the prompt needs no JSON escaping. */
static const char *const words[] = {
	"the", "model", "answers", "a", "question", "about", "latency", "and",
	"throughput", "of", "streaming", "tokens", "over", "a", "network", "while",
	"the", "proxy", "measures", "time", "to", "first", "token", "for", "each",
	"request", "in", "a", "busy", "cluster", "with", "many", "users", "who",
	"send", "long", "documents", "short", "chats", "or", "code", "to",
	"summarise", "explain", "translate", "review", "please", "write", "clear",
	"careful", "text", "that", "reads", "well", "under", "load", "today",
};

/* Exactly round(tokens x bytes a token) characters of words separated
 * by spaces (load_psize.h); bpt 0: LOAD_PSIZE_DEFAULT. */
static int words_at(struct evbuffer *out, uint32_t tokens, double bpt, uint64_t *rng)
{
	size_t want = load_psize_bytes(tokens, bpt > 0 ? bpt : LOAD_PSIZE_DEFAULT), have = 0;

	while (have < want) {
		const char *w = words[rng_next(rng) % UTIL_ARRAY_LEN(words)];
		size_t n = strlen(w);
		if (have > 0) {
			if (evbuffer_add(out, " ", 1) < 0)
				return -1;
			have++;
		}
		if (n > want - have)
			n = want - have;
		if (evbuffer_add(out, w, n) < 0)
			return -1;
		have += n;
	}
	return 0;
}

/* ... at the request's bytes a token */
static int add_words(struct evbuffer *out, const struct load_req *rq,
    uint32_t tokens, uint64_t *rng)
{
	return words_at(out, tokens, rq->bytes_per_token, rng);
}

int load_body_words(struct evbuffer *out, uint32_t tokens, double bytes_per_token,
    uint64_t *rng)
{
	return words_at(out, tokens, bytes_per_token, rng);
}

/* A string literal, without its NUL. */
#define ADD_LIT(out, s) evbuffer_add((out), (s), sizeof(s) - 1)

/* The shared prefix's words (the same for the same seed), then a blank
 * before what follows; nothing without one. */
static int add_prefix(struct evbuffer *out, const struct load_req *rq)
{
	uint64_t seed = rq->prefix_seed;

	if (rq->prefix_tokens == 0)
		return 0;
	if (add_words(out, rq, rq->prefix_tokens, &seed) < 0)
		return -1;
	return evbuffer_add(out, " ", 1);
}

/* The prompt's own part, unquoted: the file's text escaped, or words. */
static int add_own(struct evbuffer *out, const struct load_req *rq, uint64_t *rng)
{
	struct evbuffer *tmp;
	int rc;

	if (rq->prompt == NULL)
		return add_words(out, rq, rq->prompt_tokens, rng);
	/* the JSON writer's string, without its quotes */
	if ((tmp = evbuffer_new()) == NULL)
		return -1;
	rc = jsonw_strn(tmp, rq->prompt->text, rq->prompt->text_len);
	if (rc == 0 && evbuffer_get_length(tmp) >= 2) {
		evbuffer_drain(tmp, 1);
		rc = evbuffer_remove_buffer(tmp, out, evbuffer_get_length(tmp) - 1) < 0 ?
		    -1 : 0;
	}
	evbuffer_free(tmp);
	return rc;
}

/* The prompt's own part as a JSON string. */
static int add_own_quoted(struct evbuffer *out, const struct load_req *rq, uint64_t *rng)
{
	if (evbuffer_add(out, "\"", 1) < 0 || add_own(out, rq, rng) < 0)
		return -1;
	return evbuffer_add(out, "\"", 1);
}

/* The prompt as a JSON string: the shared prefix (--prefixes), then the
 * file's text escaped by the one JSON writer, or plain words that need no
 * escaping. */
static int add_prompt(struct evbuffer *out, const struct load_req *rq, uint64_t *rng)
{
	if (rq->prompt != NULL && rq->prefix_tokens == 0)
		return jsonw_strn(out, rq->prompt->text, rq->prompt->text_len);
	if (evbuffer_add(out, "\"", 1) < 0 || add_prefix(out, rq) < 0 ||
	    add_own(out, rq, rng) < 0)
		return -1;
	return evbuffer_add(out, "\"", 1);
}

/* A conversation's turn: the history, then the new messages, so that
 * each turn's body opens with the whole of the one before. */
static int add_turn(struct evbuffer *out, const struct load_req *rq)
{
	size_t n = evbuffer_get_length(rq->history);

	if (evbuffer_add(out, "[", 1) < 0 ||
	    (n > 0 && evbuffer_add(out, evbuffer_pullup(rq->history, -1), n) < 0) ||
	    evbuffer_add(out, evbuffer_pullup(rq->ask, -1), evbuffer_get_length(rq->ask)) < 0)
		return -1;
	return evbuffer_add(out, "]", 1);
}

/* A chat's messages: the file's, or one user message with the prompt; a
 * shared prefix (--prefixes) is a system message before them, unless the
 * API has a field of its own for it (Anthropic's "system": %S). */
static int add_messages(struct evbuffer *out, const struct load_req *rq, uint64_t *rng,
    int system_msg)
{
	const struct load_prompt *p = rq->prompt;

	if (rq->ask != NULL)
		return add_turn(out, rq);
	if (rq->prefix_tokens > 0 && system_msg) {
		uint64_t seed = rq->prefix_seed;
		if (ADD_LIT(out, "[{\"role\":\"system\",\"content\":\"") < 0 ||
		    add_words(out, rq, rq->prefix_tokens, &seed) < 0 ||
		    ADD_LIT(out, "\"}") < 0)
			return -1;
		/* the file's messages after it (its array's own bracket dropped) */
		if (p != NULL && p->messages != NULL && p->messages_len > 0 &&
		    p->messages[0] == '[') {
			const char *m = p->messages + 1, *e = p->messages + p->messages_len;
			while (m < e && (*m == ' ' || *m == '\n' || *m == '\t' || *m == '\r'))
				m++;
			if (m < e && *m != ']' && evbuffer_add(out, ",", 1) < 0)
				return -1;
			return evbuffer_add(out, m, (size_t)(e - m));
		}
		if (evbuffer_add(out, ",", 1) < 0)
			return -1;
	} else if (p != NULL && p->messages != NULL) {
		return evbuffer_add(out, p->messages, p->messages_len);
	} else if (evbuffer_add(out, "[", 1) < 0) {
		return -1;
	}
	if (ADD_LIT(out, "{\"role\":\"user\",\"content\":") < 0 ||
	    add_own_quoted(out, rq, rng) < 0)
		return -1;
	return evbuffer_add(out, "}]", 2);
}

/* Writes tpl with %P replaced by the prompt (a JSON string), %G by a
 * chat's messages, %S by Anthropic's "system" member with the shared
 * prefix (nothing without one), %M by the model, %N by the max tokens
 * and %U by the ask for a usage on every chunk, so each dialect's shape
 * reads as the JSON it sends. */
static int fill(struct evbuffer *out, const char *tpl, const struct load_conf *c,
    const struct load_req *rq, uint64_t *rng)
{
	for (const char *s = tpl; *s; s++) {
		int rc;
		if (*s != '%') {
			const char *e = strchr(s, '%');
			size_t n = e != NULL ? (size_t)(e - s) : strlen(s);
			if (evbuffer_add(out, s, n) < 0)
				return -1;
			s += n - 1;
			continue;
		}
		switch (*++s) {
		case 'P':
			rc = add_prompt(out, rq, rng);
			break;
		case 'G':
			rc = add_messages(out, rq, rng, strstr(tpl, "%S") == NULL);
			break;
		case 'S':
			if (rq->prefix_tokens > 0) {
				uint64_t seed = rq->prefix_seed;
				rc = ADD_LIT(out, "\"system\":\"") < 0 ||
				    add_words(out, rq, rq->prefix_tokens, &seed) < 0 ||
				    ADD_LIT(out, "\",") < 0 ? -1 : 0;
			} else {
				rc = 0;
			}
			break;
		case 'U':
			rc = c->continuous_usage ? ADD_LIT(out,
			    ",\"continuous_usage_stats\":true") : 0;
			break;
		case 'M':
			rc = evbuffer_add(out, c->model, strlen(c->model));
			break;
		case 'N':
			rc = evbuffer_add_printf(out, "%u", rq->max_tokens) < 0 ? -1 : 0;
			break;
		default:
			return -1;
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int path_has(const struct load_conf *c, const char *what)
{
	return c->path != NULL && strstr(c->path, what) != NULL;
}

/* Each dialect's streaming request, with only the fields its API takes:
 * Gemini and TGI name the model in the path or the deployment, Gemini
 * streams by path, Dify by response_mode. */
static const char *template_for(const struct load_conf *c)
{
	switch (load_conf_dialect(c)) {
	case DIALECT_OPENAI_RESPONSES:
		return "{\"model\":\"%M\",\"input\":%P,\"max_output_tokens\":%N,"
		    "\"stream\":true}";
	case DIALECT_ANTHROPIC:
		/* the messages before the limit: a conversation's next turn opens
		 * with the whole of its last, whatever limit each asks */
		return "{\"model\":\"%M\",%S\"messages\":%G,\"max_tokens\":%N,"
		    "\"stream\":true}";
	case DIALECT_DIFY:
		return "{\"inputs\":{},\"query\":%P,\"response_mode\":\"streaming\","
		    "\"user\":\"tokentap-load\",\"max_tokens\":%N}";
	case DIALECT_GEMINI:
		return "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":%P}]}],"
		    "\"generationConfig\":{\"maxOutputTokens\":%N}}";
	case DIALECT_TGI:
		return "{\"inputs\":%P,\"parameters\":{\"max_new_tokens\":%N},"
		    "\"stream\":true}";
	case DIALECT_OLLAMA:
		if (path_has(c, "/api/generate"))
			return "{\"model\":\"%M\",\"prompt\":%P,\"stream\":true,"
			    "\"options\":{\"num_predict\":%N}}";
		return "{\"model\":\"%M\",\"messages\":%G,\"stream\":true,"
		    "\"options\":{\"num_predict\":%N}}";
	case DIALECT_OPENAI:
		if (!path_has(c, "/chat/completions") && path_has(c, "/completions"))
			return "{\"model\":\"%M\",\"prompt\":%P,\"max_tokens\":%N,"
			    "\"stream\":true,\"stream_options\":{\"include_usage\":true%U}}";
		/* fall through */
	default:
		return "{\"model\":\"%M\",\"messages\":%G,\"max_tokens\":%N,"
		    "\"stream\":true,\"stream_options\":{\"include_usage\":true%U}}";
	}
}

int load_body_chat(const struct load_conf *c)
{
	return strstr(template_for(c), "%G") != NULL;
}

int load_body_json(struct evbuffer *out, const struct load_conf *c,
    const struct load_req *rq, uint64_t *rng)
{
	return fill(out, template_for(c), c, rq, rng);
}

/* Header fields the request framing owns, whatever -H says. */
static int is_framing(const char *name)
{
	return strcasecmp(name, "Content-Length") == 0 ||
	    strcasecmp(name, "Transfer-Encoding") == 0;
}

/* The request's own header of that name, or NULL. */
static const char *req_header(const struct load_req *rq, const char *name)
{
	for (size_t i = 0; i < rq->nheaders; i++)
		if (strcasecmp(rq->headers[i].name, name) == 0)
			return rq->headers[i].value;
	return NULL;
}

static int add_default(struct evbuffer *out, const struct load_conf *c,
    const struct load_req *rq, const char *name, const char *value)
{
	if (load_conf_header(c, name) != NULL || req_header(rq, name) != NULL)
		return 0;
	return evbuffer_add_printf(out, "%s: %s\r\n", name, value) < 0 ? -1 : 0;
}

/* Headers of -H (those the request does not set itself), then its own. */
static int add_headers(struct evbuffer *out, const struct load_header *h, size_t n,
    const struct load_req *skip)
{
	for (size_t i = 0; i < n; i++) {
		if (is_framing(h[i].name) ||
		    (skip != NULL && req_header(skip, h[i].name) != NULL))
			continue;
		if (evbuffer_add_printf(out, "%s: %s\r\n", h[i].name, h[i].value) < 0)
			return -1;
	}
	return 0;
}

int load_body_request(struct evbuffer *out, const struct load_conf *c,
    const struct load_req *rq, uint64_t *rng)
{
	struct evbuffer *body = evbuffer_new();
	char host[URL_HOST_LEN + 16];
	int rc = -1;

	if (body == NULL)
		return -1;
	if (load_body_json(body, c, rq, rng) < 0)
		goto done;
	url_authority(host, sizeof(host), c->host, c->port, url_default_port(c->tls));
	if (evbuffer_add_printf(out, "POST %s HTTP/1.1\r\n", c->path) < 0 ||
	    add_default(out, c, rq, "Host", host) < 0 ||
	    add_default(out, c, rq, "User-Agent", "tokentap-load/" TOKENTAP_VERSION) < 0 ||
	    add_default(out, c, rq, "Content-Type", "application/json") < 0 ||
	    add_default(out, c, rq, "Accept", load_conf_dialect(c) == DIALECT_OLLAMA ?
	    "application/x-ndjson" : "text/event-stream") < 0 ||
	    (rq->request_id != NULL &&
	    add_default(out, c, rq, "X-Request-Id", rq->request_id) < 0) ||
	    add_headers(out, c->headers, c->nheaders, rq) < 0 ||
	    add_headers(out, rq->headers, rq->nheaders, NULL) < 0)
		goto done;
	if (evbuffer_add_printf(out, "Content-Length: %zu\r\n\r\n",
	    evbuffer_get_length(body)) < 0 || evbuffer_add_buffer(out, body) < 0)
		goto done;
	rc = 0;
done:
	evbuffer_free(body);
	return rc;
}
