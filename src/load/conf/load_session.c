/* SPDX-License-Identifier: Apache-2.0 */
#include "load_session.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "load_jsonl.h"
#include "rng.h"
#include "util.h"

#define MAX_PROBLEMS 20
#define MAX_DELAY_MS (30.0 * 86400 * 1000)
/* A ShareGPT file is one JSON value, read whole: at most this big. */
#define MAX_SHAREGPT_BYTES (1024u * 1024 * 1024)

/* ---- think times and turn counts --------------------------------------- */

static int duration(const char *s, size_t n, uint64_t *us)
{
	char buf[64];

	if (n == 0 || n >= sizeof buf)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return util_parse_duration_us(buf, us);
}

int load_think_parse(const char *s, struct load_think *t, const char **err)
{
	const char *dash;

	*err = "expected DUR, uniform:MIN-MAX or exp:MEAN (durations: 500ms, 2s)";
	memset(t, 0, sizeof *t);
	if (strncmp(s, "uniform:", 8) == 0) {
		s += 8;
		dash = strchr(s, '-');
		if (dash == NULL || duration(s, (size_t)(dash - s), &t->a_us) < 0 ||
		    duration(dash + 1, strlen(dash + 1), &t->b_us) < 0 || t->b_us < t->a_us)
			return -1;
		t->kind = LOAD_THINK_UNIFORM;
	} else if (strncmp(s, "exp:", 4) == 0) {
		if (duration(s + 4, strlen(s + 4), &t->a_us) < 0)
			return -1;
		t->kind = LOAD_THINK_EXP;
	} else if (duration(s, strlen(s), &t->a_us) < 0) {
		return -1;
	}
	/* a day at most: a think time is seconds to minutes */
	if (t->a_us > 86400000000ull || t->b_us > 86400000000ull) {
		*err = "a think time of at most a day";
		return -1;
	}
	return 0;
}

uint64_t load_think_draw(const struct load_think *t, uint64_t *rng)
{
	double x;

	switch (t->kind) {
	case LOAD_THINK_UNIFORM:
		return t->a_us + (uint64_t)(rng_unit(rng) * (double)(t->b_us - t->a_us + 1));
	case LOAD_THINK_EXP:
		x = -log(rng_unit_open(rng)) * (double)t->a_us;
		return x > 864e8 ? 86400000000ull : (uint64_t)x;
	default:
		return t->a_us;
	}
}

void load_think_name(const struct load_think *t, char *buf, size_t len)
{
	char a[32], b[32];

	util_duration_text(t->a_us, a, sizeof a);
	util_duration_text(t->b_us, b, sizeof b);
	if (t->kind == LOAD_THINK_UNIFORM)
		snprintf(buf, len, "uniform:%s-%s", a, b);
	else if (t->kind == LOAD_THINK_EXP)
		snprintf(buf, len, "exp:%s", a);
	else
		snprintf(buf, len, "%s", a);
}

int load_session_parse_turns(const char *s, struct load_range *r, const char **err)
{
	if (strncmp(s, "uniform:", 8) == 0)
		s += 8;
	if (load_conf_parse_range(s, r, err) < 0 || r->min == 0 ||
	    r->max > LOAD_SESSION_MAX_TURNS) {
		*err = "expected K, MIN-MAX or uniform:MIN-MAX turns (1 to 1000)";
		return -1;
	}
	return 0;
}

/* ---- the sessions ------------------------------------------------------- */

struct reader {
	struct load_sessions *s;
	const char *path;
	FILE *err;
	struct load_jl j;
	const char *text;            /* ShareGPT: the whole file */
};

static void problem(struct reader *rd, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void problem(struct reader *rd, size_t line, size_t col, const char *fmt, ...)
{
	va_list ap;

	fprintf(rd->err, "%s:%zu:%zu: ", rd->path, line, col);
	va_start(ap, fmt);
	vfprintf(rd->err, fmt, ap);
	va_end(ap);
	fputc('\n', rd->err);
}

static void free_turn(struct load_turn *t)
{
	for (size_t i = 0; i < t->nmsgs; i++) {
		free(t->msgs[i].role);
		free(t->msgs[i].content);
	}
	free(t->msgs);
	free(t->text);
}

static void free_session(struct load_session *se)
{
	for (size_t i = 0; i < se->n; i++)
		free_turn(&se->v[i]);
	free(se->v);
	free(se->id);
}

void load_sessions_free(struct load_sessions *s)
{
	for (size_t i = 0; i < s->n; i++)
		free_session(&s->v[i]);
	free(s->v);
	free(s->path);
	memset(s, 0, sizeof *s);
}

/* The session of that id, a new one at the end when none has it (or
 * always, fresh: ShareGPT's conversations are each their own). */
static struct load_session *session(struct load_sessions *s, const char *id, int fresh)
{
	struct load_session *se;

	/* the last first: a trace's turns come near their session's */
	for (size_t i = s->n; i > 0 && !fresh; i--)
		if (strcmp(s->v[i - 1].id, id) == 0)
			return &s->v[i - 1];
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct load_session *v = realloc(s->v, cap * sizeof *v);
		if (v == NULL)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	se = &s->v[s->n];
	memset(se, 0, sizeof *se);
	if ((se->id = strdup(id)) == NULL)
		return NULL;
	s->n++;
	return se;
}

static int add_turn(struct load_sessions *s, struct load_session *se,
    const struct load_turn *t)
{
	if (se->n == se->cap) {
		size_t cap = se->cap ? se->cap * 2 : 8;
		struct load_turn *v = realloc(se->v, cap * sizeof *v);
		if (v == NULL)
			return -1;
		se->v = v;
		se->cap = cap;
	}
	se->v[se->n++] = *t;
	s->turns++;
	return 0;
}

static const char *const keys[] = {
	"session_id", "turn", "delay_ms", "prompt", "prompt_tokens", "max_tokens",
	"messages",
};

/* A whole number in [lo, hi]; -1 after reporting. */
static int whole(struct reader *rd, size_t line, int tok, const char *key,
    double lo, double hi, double *out)
{
	if (load_jl_num(&rd->j, tok, out) < 0 || *out < lo || *out > hi ||
	    *out != floor(*out)) {
		problem(rd, line, load_jl_off(&rd->j, tok) + 1, "%s: expected a whole "
		    "number from %.0f to %.0f", key, lo, hi);
		return -1;
	}
	return 0;
}

static int unknown_key(struct reader *rd, size_t line, int k)
{
	char *name = load_jl_str(&rd->j, k, NULL);
	const char *hint = NULL;
	size_t best = 3;

	for (size_t i = 0; name != NULL && i < UTIL_ARRAY_LEN(keys); i++) {
		size_t d = util_edit_distance(name, keys[i]);
		if (d < best) {
			best = d;
			hint = keys[i];
		}
	}
	problem(rd, line, load_jl_off(&rd->j, k) + 1, "unknown key '%.64s'%s%s%s "
	    "(session_id, turn, delay_ms, prompt, prompt_tokens, messages, max_tokens)",
	    name ? name : "?", hint ? "; did you mean '" : "", hint ? hint : "",
	    hint ? "'?" : "");
	free(name);
	return -1;
}

/* "messages": [{"role": "...", "content": "..."}, ...], at least one. */
static int messages(struct reader *rd, size_t line, int arr, struct load_turn *t)
{
	int el = -1;
	size_t n = 0;

	if (load_jl_type(&rd->j, arr) == LOAD_JL_ARRAY)
		while (load_jl_elem(&rd->j, arr, &el))
			n++;
	if (n == 0)
		goto bad;
	if ((t->msgs = calloc(n, sizeof *t->msgs)) == NULL)
		return -1;
	el = -1;
	while (load_jl_elem(&rd->j, arr, &el)) {
		struct load_msg *m = &t->msgs[t->nmsgs++];
		int role = load_jl_type(&rd->j, el) == LOAD_JL_OBJECT ?
		    load_jl_get(&rd->j, el, "role") : -1;
		int content = role >= 0 ? load_jl_get(&rd->j, el, "content") : -1;
		m->role = role >= 0 ? load_jl_str(&rd->j, role, NULL) : NULL;
		m->content = content >= 0 ? load_jl_str(&rd->j, content, &m->content_len) : NULL;
		if (m->role == NULL || m->content == NULL || m->role[0] == '\0') {
			arr = el;
			goto bad;
		}
	}
	return 0;
bad:
	problem(rd, line, load_jl_off(&rd->j, arr) + 1, "messages: expected an array "
	    "of {\"role\": \"...\", \"content\": \"...\"} (strings)");
	return -1;
}

/* One member of a line into t (and *id, *turn). */
static int member(struct reader *rd, size_t line, int k, struct load_turn *t,
    char **id, double *turn)
{
	int v = k + 1;
	double x;

	if (load_jl_is(&rd->j, k, "session_id")) {
		if (load_jl_num(&rd->j, v, &x) == 0 && x == floor(x) && fabs(x) < 1e15) {
			if (asprintf(id, "%.0f", x) < 0)
				*id = NULL;
		} else if ((*id = load_jl_str(&rd->j, v, NULL)) == NULL) {
			problem(rd, line, load_jl_off(&rd->j, v) + 1, "session_id: expected "
			    "a string or a number");
			return -1;
		}
	} else if (load_jl_is(&rd->j, k, "turn")) {
		return whole(rd, line, v, "turn", 1, LOAD_SESSION_MAX_TURNS, turn);
	} else if (load_jl_is(&rd->j, k, "delay_ms")) {
		if (load_jl_num(&rd->j, v, &x) < 0 || x < 0 || x > MAX_DELAY_MS) {
			problem(rd, line, load_jl_off(&rd->j, v) + 1, "delay_ms: expected a "
			    "time in ms from 0 to %.0f (30 days)", MAX_DELAY_MS);
			return -1;
		}
		t->delay_us = (int64_t)llround(x * 1e3);
	} else if (load_jl_is(&rd->j, k, "prompt")) {
		if ((t->text = load_jl_str(&rd->j, v, &t->text_len)) == NULL) {
			problem(rd, line, load_jl_off(&rd->j, v) + 1, "prompt: expected a string");
			return -1;
		}
	} else if (load_jl_is(&rd->j, k, "messages")) {
		return messages(rd, line, v, t);
	} else if (load_jl_is(&rd->j, k, "prompt_tokens")) {
		if (whole(rd, line, v, "prompt_tokens", 1, LOAD_CONF_MAX_TOKENS, &x) < 0)
			return -1;
		t->prompt_tokens = (uint32_t)x;
	} else if (load_jl_is(&rd->j, k, "max_tokens")) {
		if (whole(rd, line, v, "max_tokens", 1, LOAD_CONF_MAX_TOKENS, &x) < 0)
			return -1;
		t->max_tokens = (uint32_t)x;
	} else {
		return unknown_key(rd, line, k);
	}
	return 0;
}

/* A line: one turn, the next of its session. */
static int trace_line(void *arg, const char *line, size_t len, size_t lineno)
{
	struct reader *rd = arg;
	struct load_turn t;
	struct load_session *se;
	char *id = NULL;
	double turn = 0;
	const char *why;
	size_t at;
	int k = -1, bad = 0;

	if (load_jl_parse(&rd->j, line, len, &at, &why) < 0) {
		problem(rd, lineno, at + 1, "%s", why);
		return -1;
	}
	if (load_jl_type(&rd->j, 0) != LOAD_JL_OBJECT) {
		problem(rd, lineno, 1, "expected a JSON object");
		return -1;
	}
	memset(&t, 0, sizeof t);
	t.delay_us = -1;
	t.line = lineno;
	while (load_jl_next(&rd->j, 0, &k))
		bad |= member(rd, lineno, k, &t, &id, &turn) < 0;
	if (!bad && (id == NULL || turn == 0)) {
		problem(rd, lineno, 1, "a turn needs \"session_id\" and \"turn\"");
		bad = 1;
	}
	if (!bad && (t.text != NULL) + (t.prompt_tokens > 0) + (t.msgs != NULL) > 1) {
		problem(rd, lineno, 1, "\"prompt\", \"prompt_tokens\" or \"messages\": one of them");
		bad = 1;
	}
	se = bad ? NULL : session(rd->s, id, 0);
	if (!bad && se == NULL) {
		problem(rd, lineno, 1, "out of memory");
		bad = 2;
	}
	if (!bad && (size_t)turn != se->n + 1) {
		problem(rd, lineno, 1, "session '%.64s': turn %.0f after %s%zu (turns are "
		    "1, 2, ... in the order of the file)", id, turn, se->n ? "turn " : "",
		    se->n);
		bad = 1;
	}
	if (!bad && se->n == 0)
		se->start_us = t.delay_us > 0 ? (uint64_t)t.delay_us : 0;
	if (!bad && add_turn(rd->s, se, &t) < 0) {
		problem(rd, lineno, 1, "out of memory");
		bad = 2;
	}
	free(id);
	if (bad)
		free_turn(&t);
	return bad == 2 ? -2 : -bad;
}

static int by_start(const void *a, const void *b)
{
	const struct load_session *x = a, *y = b;

	if (x->start_us != y->start_us)
		return x->start_us < y->start_us ? -1 : 1;
	/* file order among equals: the first turn's line */
	return x->v[0].line < y->v[0].line ? -1 : x->v[0].line > y->v[0].line;
}

static int finish(struct reader *rd, int rc)
{
	load_jl_free(&rd->j);
	if (rc == 0 && rd->s->n == 0) {
		fprintf(rd->err, "%s: no session in it\n", rd->path);
		rc = -1;
	}
	if (rc < 0) {
		load_sessions_free(rd->s);
		return -1;
	}
	qsort(rd->s->v, rd->s->n, sizeof *rd->s->v, by_start);
	return 0;
}

int load_sessions_read(struct load_sessions *s, const char *path, FILE *err)
{
	struct reader rd = { s, path, err, {0}, NULL };

	memset(s, 0, sizeof *s);
	load_jl_init(&rd.j);
	if ((s->path = strdup(path)) == NULL)
		return finish(&rd, -1);
	return finish(&rd, load_jl_read_file(path, err, MAX_PROBLEMS, trace_line, &rd));
}

/* ---- ShareGPT ----------------------------------------------------------- */

/* FILE:LINE:COL of byte off of the whole text. */
static void at_off(struct reader *rd, size_t off, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && rd->text[i]; i++) {
		if (rd->text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int sg_problem(struct reader *rd, int tok, const char *what)
{
	size_t line, col;

	at_off(rd, load_jl_off(&rd->j, tok), &line, &col);
	problem(rd, line, col, "%s", what);
	return -1;
}

/* One message of a conversation: a user's a turn, a recorded answer the
 * turn before's max_tokens; others (system) are left out. */
static int sg_message(struct reader *rd, struct load_session *se, int m)
{
	int from = load_jl_get(&rd->j, m, "from"), val = load_jl_get(&rd->j, m, "value");
	char *who, *text;
	size_t len, line, col;
	struct load_turn t;
	int rc = 0;

	if (from < 0 || val < 0)
		return sg_problem(rd, m, "a message needs \"from\" and \"value\"");
	who = load_jl_str(&rd->j, from, NULL);
	text = load_jl_str(&rd->j, val, &len);
	if (who == NULL || text == NULL) {
		free(who);
		free(text);
		return sg_problem(rd, who == NULL ? from : val, "expected a string");
	}
	if (strcmp(who, "human") == 0 || strcmp(who, "user") == 0) {
		memset(&t, 0, sizeof t);
		t.text = text;
		t.text_len = len;
		t.delay_us = -1;
		at_off(rd, load_jl_off(&rd->j, m), &line, &col);
		t.line = line;
		text = NULL;
		if (se->n >= LOAD_SESSION_MAX_TURNS)
			rc = sg_problem(rd, m, "more than 1000 turns in a conversation");
		else if (add_turn(rd->s, se, &t) < 0)
			rc = sg_problem(rd, m, "out of memory");
		if (rc < 0)
			free(t.text);
	} else if ((strcmp(who, "gpt") == 0 || strcmp(who, "assistant") == 0 ||
	    strcmp(who, "chatgpt") == 0) && se->n > 0 && se->v[se->n - 1].max_tokens == 0) {
		/* the answer as long as the recorded one: 4 characters a token */
		uint64_t tok = (len + 3) / 4;
		se->v[se->n - 1].max_tokens = tok == 0 ? 1 : tok > LOAD_CONF_MAX_TOKENS ?
		    LOAD_CONF_MAX_TOKENS : (uint32_t)tok;
	}
	free(who);
	free(text);
	return rc;
}

static int sg_conversation(struct reader *rd, int obj, size_t index)
{
	int conv = -1, m = -1, problems = 0;
	struct load_session *se;
	char id[32];

	if (load_jl_type(&rd->j, obj) == LOAD_JL_OBJECT)
		conv = load_jl_get(&rd->j, obj, "conversations");
	if (conv < 0 || load_jl_type(&rd->j, conv) != LOAD_JL_ARRAY)
		return sg_problem(rd, obj, "expected an object with a \"conversations\" array");
	snprintf(id, sizeof id, "%zu", index);
	if ((se = session(rd->s, id, 1)) == NULL)
		return sg_problem(rd, obj, "out of memory");
	while (load_jl_elem(&rd->j, conv, &m))
		problems -= sg_message(rd, se, m);
	/* one with no user message has nothing to send */
	if (se->n == 0) {
		free_session(se);
		rd->s->n--;
	}
	return problems ? -1 : 0;
}

static char *slurp(const char *path, FILE *err, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (f == NULL) {
		fprintf(err, "%s: %s\n", path, strerror(errno));
		return NULL;
	}
	do {
		if (n + 65536 + 1 > cap) {
			char *b = cap < MAX_SHAREGPT_BYTES ? realloc(buf, cap ? cap * 2 : 65536 * 2) :
			    NULL;
			if (b == NULL) {
				fprintf(err, "%s: %s\n", path, cap < MAX_SHAREGPT_BYTES ?
				    "out of memory" : "larger than 1 GiB");
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = b;
			cap = cap ? cap * 2 : 65536 * 2;
		}
		got = fread(buf + n, 1, 65536, f);
		n += got;
	} while (got > 0);
	if (ferror(f)) {
		fprintf(err, "%s: read error\n", path);
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

int load_sessions_read_sharegpt(struct load_sessions *s, const char *path, FILE *err)
{
	struct reader rd = { s, path, err, {0}, NULL };
	size_t len, at, line, col, index = 0;
	const char *why;
	char *text;
	int el = -1, problems = 0, broken = 0;

	memset(s, 0, sizeof *s);
	s->sharegpt = 1;
	load_jl_init(&rd.j);
	if ((s->path = strdup(path)) == NULL)
		return finish(&rd, -1);
	if ((text = slurp(path, err, &len)) == NULL)
		return finish(&rd, -1);
	rd.text = text;
	if (load_jl_parse(&rd.j, text, len, &at, &why) < 0) {
		at_off(&rd, at, &line, &col);
		problem(&rd, line, col, "%s", why);
		broken = 1;
	} else if (load_jl_type(&rd.j, 0) != LOAD_JL_ARRAY) {
		broken = -sg_problem(&rd, 0, "expected ShareGPT's array of conversations");
	}
	while (!broken && problems < MAX_PROBLEMS && load_jl_elem(&rd.j, 0, &el))
		problems += sg_conversation(&rd, el, index++) < 0;
	problems += broken;
	free(text);
	return finish(&rd, problems ? -1 : 0);
}
