/* The per-request meter against SPEC §4: when an event counts as complete,
 * which bodies are parsed, where the model label comes from, token counts
 * from usage or from events, ITL, and the non-stream JSON body. (TTFT and
 * TPOT arithmetic is also checked through tokentap-load in test_loadstats.) */

#include "json.h"
#include "meter.h"

#include "unit.h"

#define SSE "text/event-stream"
#define TOK "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"

static void feed(struct meter *m, const char *s, uint64_t at)
{
	meter_body(m, s, strlen(s), at);
}

static void head(struct meter *m, const char *ct, int encoded, uint64_t at)
{
	const char *ce = encoded ? "br" : NULL;
	meter_response_head(m, 200, ct, ct ? strlen(ct) : 0, ce, ce ? 2 : 0,
	    1 << 20, at);
}

/* An OpenAI request started at t0 whose response head (type ct) came at
 * t_head. */
static void openai(struct meter *m, uint64_t t0, const char *ct, uint64_t t_head)
{
	meter_init(m, t0, DIALECT_OPENAI);
	head(m, ct, 0, t_head);
}

/* An event is complete at the read that delivered its blank line: a token
 * split over three reads is timed at the third. */
static void test_event_complete_at_its_blank_line(void **state)
{
	struct meter m;
	const char *t = TOK;
	size_t n = strlen(t);

	(void)state;
	openai(&m, 1000, SSE, 2000);
	meter_body(&m, t, 10, 3000);
	meter_body(&m, t + 10, n - 11, 4000);   /* all but the last '\n' */
	assert_int_equal(m.token_events, 0);
	assert_int_equal(m.t_first_event, 0);
	meter_body(&m, t + n - 1, 1, 5000);
	assert_int_equal(m.token_events, 1);
	assert_int_equal(m.t_first_event, 5000);
	assert_int_equal(m.t_first_token, 5000);
	assert_int_equal(meter_ttft_us(&m), 4000);
	meter_end(&m, 6000);
	meter_free(&m);
}

/* A comment is no event; a role chunk is an event but no token: the
 * first event and the first token are different points; N counts token
 * events when the stream reports no usage; TPOT over N - 1 gaps. */
static void test_first_event_first_token_and_n_from_events(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, SSE, 100);
	feed(&m, ": keep-alive\n\n", 150);
	feed(&m, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n", 200);
	feed(&m, TOK, 1000);
	feed(&m, TOK, 1500);
	feed(&m, TOK TOK, 3000);                 /* two in one read: one time */
	feed(&m, "data: [DONE]\n\n", 3100);
	meter_end(&m, 3200);
	assert_int_equal(m.t_first_event, 200);
	assert_int_equal(m.t_first_token, 1000);
	assert_int_equal(m.t_last_token, 3000);
	assert_int_equal(m.events, 6);
	assert_int_equal(meter_output_tokens(&m), 4);
	assert_false(meter_tokens_from_usage(&m));
	assert_int_equal(meter_tpot_us(&m), (3000 - 1000) / 3);
	assert_int_equal(m.itl_max_us, 1500);
	assert_true(m.end_seen);
	meter_free(&m);
}

static uint64_t gaps[8];
static int n_gaps;

static void on_gap(void *arg, uint64_t gap)
{
	(void)arg;
	if (n_gaps < 8)
		gaps[n_gaps++] = gap;
}

/* The ITL callback sees each gap between consecutive token events, and
 * the last usage report wins over the token events for N. */
static void test_itl_and_usage(void **state)
{
	struct meter m;

	(void)state;
	n_gaps = 0;
	openai(&m, 0, SSE, 10);
	m.itl_fn = on_gap;
	feed(&m, TOK, 100);
	feed(&m, TOK, 130);
	feed(&m, TOK, 190);
	feed(&m, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":9}}\n\n", 200);
	meter_end(&m, 210);
	assert_int_equal(n_gaps, 2);
	assert_int_equal(gaps[0], 30);
	assert_int_equal(gaps[1], 60);
	assert_int_equal(meter_output_tokens(&m), 9);
	assert_true(meter_tokens_from_usage(&m));
	assert_int_equal(meter_input_tokens(&m), 7);
	assert_int_equal(meter_tpot_us(&m), 90 / 8);
	meter_free(&m);
}

/* Which bodies are parsed (SPEC §4): text/event-stream with parameters and
 * in any case; application/x-ndjson; any body on the ollama dialect but a
 * JSON one; nothing compressed; other types are not streams. */
static void test_which_bodies_are_parsed(void **state)
{
	static const struct {
		const char *ct;
		int encoded;
		enum dialect_id d;
		enum meter_parse want;
	} cases[] = {
		{ "text/event-stream", 0, DIALECT_OPENAI, METER_PARSE_SSE },
		{ "Text/Event-Stream; charset=utf-8", 0, DIALECT_OPENAI, METER_PARSE_SSE },
		{ "text/event-stream ;charset=utf-8", 0, DIALECT_OPENAI, METER_PARSE_SSE },
		{ "text/event-streams", 0, DIALECT_OPENAI, METER_PARSE_NONE },
		{ "text/event-stream", 1, DIALECT_OPENAI, METER_PARSE_NONE },
		{ "application/x-ndjson", 0, DIALECT_OPENAI, METER_PARSE_NDJSON },
		{ "application/x-ndjson", 0, DIALECT_OLLAMA, METER_PARSE_NDJSON },
		{ NULL, 0, DIALECT_OLLAMA, METER_PARSE_NDJSON },
		{ "text/plain", 0, DIALECT_OLLAMA, METER_PARSE_NDJSON },
		{ "application/json; charset=utf-8", 0, DIALECT_OLLAMA, METER_PARSE_NONE },
		{ "application/json", 0, DIALECT_OPENAI, METER_PARSE_NONE },
		{ NULL, 0, DIALECT_OPENAI, METER_PARSE_NONE },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct meter m;
		meter_init(&m, 0, cases[i].d);
		head(&m, cases[i].ct, cases[i].encoded, 10);
		if (m.parse != cases[i].want)
			fail_msg("case %zu (%s): parse %d, want %d", i,
			    cases[i].ct ? cases[i].ct : "no type", (int)m.parse,
			    (int)cases[i].want);
		assert_int_equal(m.stream, cases[i].want != METER_PARSE_NONE);
		meter_free(&m);
	}
}

/* A response that is not a stream has no TTFT or TPOT; its usage comes
 * from the JSON body, read in pieces. */
static void test_json_body_usage(void **state)
{
	struct meter m;
	const char *body = "{\"id\":\"x\",\"model\":\"gpt-x\",\"choices\":[{\"message\":"
	    "{\"content\":\"hello\"}}],\"usage\":{\"prompt_tokens\":11,"
	    "\"completion_tokens\":22}}";
	size_t n = strlen(body);

	(void)state;
	openai(&m, 0, "application/json", 10);
	meter_body(&m, body, n / 2, 20);
	meter_body(&m, body + n / 2, n - n / 2, 30);
	meter_end(&m, 40);
	assert_false(m.stream);
	assert_int_equal(meter_ttft_us(&m), -1);
	assert_int_equal(meter_tpot_us(&m), -1);
	assert_int_equal(meter_output_tokens(&m), 22);
	assert_int_equal(meter_input_tokens(&m), 11);
	assert_string_equal(m.model, "gpt-x");
	assert_int_equal(m.model_src, MODEL_RESPONSE);
	meter_free(&m);

	/* no usage in it: the counts stay undefined */
	openai(&m, 0, "application/json", 10);
	feed(&m, "{\"choices\":[]}", 20);
	meter_end(&m, 30);
	assert_int_equal(meter_output_tokens(&m), -1);
	assert_int_equal(meter_input_tokens(&m), -1);
	meter_free(&m);
}

/* The model label: the request body's beats the Gemini path's, which
 * beats the first response chunk's; later chunks do not change it; a
 * label longer than the buffer is cut, not overflowed. */
static void test_model_precedence(void **state)
{
	struct meter m;
	char longname[METER_MODEL_MAX * 2];

	(void)state;
	openai(&m, 0, SSE, 10);
	feed(&m, "data: {\"model\":\"from-chunk\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", 20);
	feed(&m, "data: {\"model\":\"later\",\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n", 30);
	assert_string_equal(m.model, "from-chunk");
	meter_offer_model(&m, MODEL_PATH, "from-path", 9);
	assert_string_equal(m.model, "from-path");
	meter_offer_model(&m, MODEL_REQUEST, "from-request", 12);
	assert_string_equal(m.model, "from-request");
	meter_offer_model(&m, MODEL_PATH, "path-again", 10);
	meter_offer_model(&m, MODEL_REQUEST, "", 0);
	assert_string_equal(m.model, "from-request");
	meter_free(&m);

	memset(longname, 'm', sizeof longname);
	for (size_t len = METER_MODEL_MAX - 1; len <= sizeof longname; len++) {
		meter_init(&m, 0, DIALECT_OPENAI);
		meter_offer_model(&m, MODEL_REQUEST, longname, len);
		assert_int_equal(m.model_len, METER_MODEL_MAX - 1);
		assert_int_equal(strlen(m.model), METER_MODEL_MAX - 1);
		meter_free(&m);
	}
}

/* A stream with no token event: TTFT and TPOT undefined, N = 0; an error
 * event in it is noted. */
static void test_no_tokens_and_error_event(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, SSE, 10);
	feed(&m, "data: {\"error\":{\"message\":\"overloaded\"}}\n\n", 20);
	meter_end(&m, 30);
	assert_int_equal(meter_ttft_us(&m), -1);
	assert_int_equal(meter_tpot_us(&m), -1);
	assert_int_equal(meter_output_tokens(&m), 0);
	assert_true(m.error_seen);
	assert_false(m.end_seen);
	meter_free(&m);
}

/* `auto` on a path that names no API: the first events tell the dialect;
 * a ping that tells nothing is no token; a stream none of whose first
 * events tells is raw from its first event on (every event a token). */
static void test_auto_sniffs_the_dialect(void **state)
{
	struct meter m;

	(void)state;
	meter_init(&m, 1000, DIALECT_RAW);
	meter_set_dialect(&m, DIALECT_RAW, 1);
	head(&m, SSE, 0, 1500);
	feed(&m, "event: ping\ndata: {\"type\": \"ping\"}\n\n", 2000);
	feed(&m, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n", 3000);
	feed(&m, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
	    "\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n", 4000);
	assert_int_equal(m.dialect, DIALECT_ANTHROPIC);
	assert_int_equal(m.events, 3);
	assert_int_equal(m.token_events, 1);
	assert_int_equal(meter_ttft_us(&m), 3000);       /* not the ping's 1000 */
	meter_end(&m, 5000);
	/* anthropic has an end marker: none came, so the stream was cut */
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_UPSTREAM_ABORT);
	meter_free(&m);

	/* five events that name no dialect: raw, every event a token */
	meter_init(&m, 1000, DIALECT_RAW);
	meter_set_dialect(&m, DIALECT_RAW, 1);
	head(&m, SSE, 0, 1500);
	for (int i = 0; i < 5; i++)
		feed(&m, "data: hello\n\n", 2000 + (uint64_t)i * 100);
	assert_int_equal(m.dialect, DIALECT_RAW);
	assert_int_equal(m.token_events, 5);
	assert_int_equal(meter_ttft_us(&m), 1000);
	assert_int_equal(m.t_last_token, 2400);
	assert_int_equal(meter_tpot_us(&m), 100);
	meter_end(&m, 3000);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_OK);
	meter_free(&m);

	/* two, and the body ends: still raw, both tokens */
	meter_init(&m, 1000, DIALECT_RAW);
	meter_set_dialect(&m, DIALECT_RAW, 1);
	head(&m, SSE, 0, 1500);
	feed(&m, "data: a\n\n", 2000);
	feed(&m, "data: b\n\n", 2500);
	assert_int_equal(m.token_events, 0);
	meter_end(&m, 3000);
	assert_int_equal(m.token_events, 2);
	assert_int_equal(meter_ttft_us(&m), 1000);
	assert_int_equal(meter_tpot_us(&m), 500);
	meter_free(&m);
}

/* The model a client writes with JSON escapes is one label value: PHP's
 * "meta-llama\/Llama" is meta-llama/Llama; \u escapes become UTF-8 (a
 * pair one character, a lone surrogate U+FFFD); control characters '?'. */
static void test_model_json_unescaped(void **state)
{
	struct meter m;
	char out[64];
	(void)state;
	meter_init(&m, 1, DIALECT_OPENAI);
	meter_offer_model(&m, MODEL_REQUEST, "meta-llama\\/Llama", 17);
	assert_string_equal(m.model, "meta-llama/Llama");
	meter_free(&m);
	meter_init(&m, 1, DIALECT_OPENAI);
	meter_offer_model(&m, MODEL_RESPONSE, "a\\u00e9\\ud83d\\ude00\\ud800x\\n\\u0000", 34);
	assert_string_equal(m.model, "a\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx??");
	meter_free(&m);
	/* a Gemini path is not JSON: left as it is */
	meter_init(&m, 1, DIALECT_GEMINI);
	meter_offer_model(&m, MODEL_PATH, "a\\/b", 4);
	assert_string_equal(m.model, "a\\/b");
	meter_free(&m);
	/* an escape cut short at the end (the scanner keeps 127 bytes) goes */
	assert_int_equal(json_unescape(out, sizeof out, "ab\\u00", 6), 2);
	assert_int_equal(json_unescape(out, sizeof out, "ab\\", 3), 2);
	assert_int_equal(json_unescape(out, sizeof out, "\\uZZZZ", 6), 7);
	assert_string_equal(out, "\xef\xbf\xbdZZZZ");
	assert_int_equal(json_unescape(out, 4, "abcdef", 6), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_json_unescaped),
		cmocka_unit_test(test_auto_sniffs_the_dialect),
		cmocka_unit_test(test_event_complete_at_its_blank_line),
		cmocka_unit_test(test_first_event_first_token_and_n_from_events),
		cmocka_unit_test(test_itl_and_usage),
		cmocka_unit_test(test_which_bodies_are_parsed),
		cmocka_unit_test(test_json_body_usage),
		cmocka_unit_test(test_model_precedence),
		cmocka_unit_test(test_no_tokens_and_error_event),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
