/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_talk.c: the answer text each chat dialect's events
 * carry (reasoning and bookkeeping events none), and a conversation's
 * bodies: turn 2's messages open with turn 1's, then the answer as
 * received (split anywhere, escaped again) and the new message. */
#include <event2/buffer.h>

#include "load_session.h"
#include "load_talk.h"

#include "unit.h"

static void text_is(enum dialect_id d, const char *ev, const char *want)
{
	const char *s = NULL;
	size_t n = 0;
	int got = load_talk_text(d, ev, strlen(ev), &s, &n);

	if (want == NULL) {
		assert_int_equal(got, 0);
		return;
	}
	assert_int_equal(got, 1);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(s, want, n);
}

static void test_text(void **state)
{
	(void)state;
	text_is(DIALECT_OPENAI, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi \\\"x\\\"\"}}]}",
	    "Hi \\\"x\\\"");
	text_is(DIALECT_OPENAI, "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", "");
	text_is(DIALECT_OPENAI, "{\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}", NULL);
	text_is(DIALECT_OPENAI, "{\"choices\":[{\"delta\":{\"content\":null}}]}", NULL);
	text_is(DIALECT_OPENAI, "{\"choices\":[],\"usage\":{\"prompt_tokens\":3}}", NULL);
	/* a nested "content" elsewhere is not the delta's */
	text_is(DIALECT_OPENAI, "{\"x\":{\"delta\":{\"content\":\"no\"}},\"choices\":[{\"delta\":{}}]}",
	    NULL);
	text_is(DIALECT_OPENAI, "[DONE]", NULL);
	text_is(DIALECT_ANTHROPIC, "{\"type\":\"content_block_delta\",\"index\":0,"
	    "\"delta\":{\"type\":\"text_delta\",\"text\":\"yes\"}}", "yes");
	text_is(DIALECT_ANTHROPIC, "{\"type\":\"content_block_delta\",\"index\":0,"
	    "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}", NULL);
	text_is(DIALECT_ANTHROPIC, "{\"type\":\"message_delta\",\"delta\":{\"text\":\"no\"}}", NULL);
	text_is(DIALECT_OLLAMA, "{\"model\":\"m\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"ok\"},\"done\":false}", "ok");
	text_is(DIALECT_OLLAMA, "{\"model\":\"m\",\"done\":true}", NULL);
}

static char *body_of(const struct load_conf *c, struct load_req *rq)
{
	struct evbuffer *b = evbuffer_new();
	uint64_t rng = 1;
	char *s;

	assert_non_null(b);
	assert_int_equal(load_body_json(b, c, rq, &rng), 0);
	s = unit_take(b);
	evbuffer_free(b);
	return s;
}

static void test_history(void **state)
{
	struct load_conf c;
	struct load_msg msgs[2] = { { "tool", "42", 2 }, { "user", "so?", 3 } };
	struct load_turn turns[3] = {
		{ "first \"q\"", 9, NULL, 0, 0, 5, -1, 1 },
		{ "second", 6, NULL, 0, 0, 7, 250000, 2 },
		{ NULL, 0, msgs, 2, 0, 0, -1, 3 },
	};
	struct load_session se = { "s", turns, 3, 3, 0 };
	struct load_talk t;
	struct load_req rq;
	const char *err;
	uint64_t rng = 1;
	char *body;
	/* the answer in two events, split across feeds */
	const char *stream = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
	    "data: {\"choices\":[{\"delta\":{\"content\":\"A\\u00e9\\n\"}}]}\n\n"
	    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hidden\"}}]}\n\n"
	    "data: {\"choices\":[{\"delta\":{\"content\":\"\\\"b\\\"\"}}]}\n\ndata: [DONE]\n\n";

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	assert_int_equal(load_conf_set_url(&c, "http://h/v1/chat/completions", &err), 0);
	assert_int_equal(load_talk_init(&t, DIALECT_OPENAI), 0);
	load_talk_begin(&t, &se, 0, 4);
	assert_true(load_talk_more(&t));
	memset(&rq, 0, sizeof rq);
	assert_int_equal(load_talk_turn(&t, &c, &rng, &rq), 0);
	assert_int_equal(t.turn, 1);
	assert_int_equal(rq.max_tokens, 5);
	body = body_of(&c, &rq);
	assert_string_equal(body, "{\"model\":\"tokentap-load\",\"messages\":[{\"role\":\"user\","
	    "\"content\":\"first \\\"q\\\"\"}],\"max_tokens\":5,\"stream\":true,"
	    "\"stream_options\":{\"include_usage\":true}}");
	free(body);
	for (size_t i = 0; i < strlen(stream); i += 7)
		load_talk_feed(&t, stream + i, strlen(stream) - i < 7 ? strlen(stream) - i : 7);
	assert_int_equal(load_talk_answered(&t, 1, 1000), 0);
	assert_int_equal(t.end_us, 1000);
	assert_true(load_talk_more(&t));
	assert_int_equal(load_talk_think(&t, &c, &rng), 250000);
	memset(&rq, 0, sizeof rq);
	assert_int_equal(load_talk_turn(&t, &c, &rng, &rq), 0);
	body = body_of(&c, &rq);
	/* the answer as received, escaped again by the one writer */
	assert_string_equal(body, "{\"model\":\"tokentap-load\",\"messages\":[{\"role\":\"user\","
	    "\"content\":\"first \\\"q\\\"\"},{\"role\":\"assistant\",\"content\":"
	    "\"A\xc3\xa9\\u000a\\\"b\\\"\"},{\"role\":\"user\",\"content\":\"second\"}],"
	    "\"max_tokens\":7,\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
	free(body);
	/* 9 + 6 bytes asked, 7 answered: 22 at 4 a token, rounded
	 * (load_psize_tokens) */
	assert_int_equal(rq.prompt_tokens, 6);
	assert_int_equal(load_talk_answered(&t, 1, 3000), 0);
	/* a turn of the file's messages, as they are */
	memset(&rq, 0, sizeof rq);
	assert_int_equal(load_talk_turn(&t, &c, &rng, &rq), 0);
	body = body_of(&c, &rq);
	assert_non_null(strstr(body, "{\"role\":\"user\",\"content\":\"second\"},"
	    "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"tool\","
	    "\"content\":\"42\"},{\"role\":\"user\",\"content\":\"so?\"}],\"max_tokens\":"));
	free(body);
	/* a failed turn ends the session */
	assert_int_equal(load_talk_answered(&t, 0, 2000), 0);
	assert_false(load_talk_more(&t));
	/* a drawn session: synthetic messages of --prompt-tokens, --think-time */
	c.think.a_us = 42;
	load_talk_begin(&t, NULL, 3, 5);
	assert_int_equal(t.turns, 3);
	memset(&rq, 0, sizeof rq);
	assert_int_equal(load_talk_turn(&t, &c, &rng, &rq), 0);
	assert_int_equal(t.ask_chars, 400);
	assert_int_equal(rq.prompt_tokens, 100);
	assert_int_equal(load_talk_think(&t, &c, &rng), 42);
	load_talk_free(&t);
	load_conf_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_history),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
