/* SPDX-License-Identifier: Apache-2.0 */
/* The per-request meter against docs/contract.md §4: when an event counts as
 * complete, which bodies are parsed, where the model label comes from, token
 * counts from usage or from events, ITL, and the non-stream JSON body. (TTFT
 * and TPOT arithmetic is also checked through tokentap-load in
 * test_loadstats.) */

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
	/* a coding the meter cannot undo (decode.h reads gzip, deflate, br
	 * and zstd) */
	const char *ce = encoded ? "compress" : NULL;
	meter_response_head(m, 200, ct, ct ? strlen(ct) : 0, ce, ce ? 8 : 0,
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

/* A read of the first token at `at`, floor before it, kernel-stamped
 * and whole, its bytes s (the exchange's part: meter_read_end at `end`
 * bytes of s, and s past them). */
static void read_at(struct meter *m, const char *s, uint64_t at, uint64_t floor,
    size_t end)
{
	m->now = at;
	m->now_floor = floor;
	m->now_kernel = 1;
	m->now_whole = 1;
	meter_body(m, s, end, at);
	if (m->ft_pending)
		meter_read_end(m, s + strlen(s));
}

/* TTFT's doubt (docs/measurement.md, "Doubt"): 0 where the first token's
 * event ended its read (a chunk's CRLF may follow); the stamp minus the
 * floor where later bytes came with it, or where it cannot be judged (a
 * read not whole, a loop time); -1 without a TTFT. */
static void test_ttft_doubt(void **state)
{
	struct meter m;
	const char *chunked = TOK "\r\n";

	(void)state;
	openai(&m, 1000, SSE, 2000);
	assert_int_equal(meter_ttft_doubt_us(&m), -1);
	read_at(&m, TOK, 9000, 2500, strlen(TOK));
	assert_int_equal(meter_ttft_doubt_us(&m), 0);
	meter_free(&m);
	/* a chunk's CRLF after it, framing the exchange's, not the meter's */
	openai(&m, 1000, SSE, 2000);
	read_at(&m, chunked, 9000, 2500, strlen(TOK));
	assert_int_equal(meter_ttft_doubt_us(&m), 0);
	meter_free(&m);
	/* the next token in the same read: stamped with its arrival */
	openai(&m, 1000, SSE, 2000);
	read_at(&m, TOK TOK, 9000, 2500, strlen(TOK TOK));
	assert_int_equal(meter_ttft_doubt_us(&m), 6500);
	meter_free(&m);
	/* a partial line after it */
	openai(&m, 1000, SSE, 2000);
	read_at(&m, TOK "da", 9000, 2500, strlen(TOK "da"));
	assert_int_equal(meter_ttft_doubt_us(&m), 6500);
	meter_free(&m);
	/* the next chunk's size line in the read, after the CRLF */
	openai(&m, 1000, SSE, 2000);
	read_at(&m, TOK "\r\n3a\r\n", 9000, 2500, strlen(TOK));
	assert_int_equal(meter_ttft_doubt_us(&m), 6500);
	meter_free(&m);
	/* the loop's time: never judged complete; no floor: the start */
	openai(&m, 1000, SSE, 2000);
	m.now_kernel = 0;
	meter_body(&m, TOK, strlen(TOK), 9000);
	meter_read_end(&m, TOK + strlen(TOK));
	assert_int_equal(meter_ttft_doubt_us(&m), 8000);
	meter_free(&m);
	/* split across reads: copied, not judged */
	openai(&m, 1000, SSE, 2000);
	read_at(&m, "data: {\"choices\"", 5000, 2500, 16);
	read_at(&m, ":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", 9000, 5500, 32);
	assert_int_equal(meter_ttft_doubt_us(&m), 3500);
	meter_free(&m);
}

/* The other points' doubts, by the same rule (docs/measurement.md,
 * "Doubt"): the start from the client's floor (-1 without one), the head
 * from its read (0 where it ended the read), the first output token where
 * reasoning came first, and the last token, judged at its read's end. */
static void test_point_doubts(void **state)
{
	struct meter m;
	const char *think = "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"h\"}}]}\n\n";

	(void)state;
	meter_init(&m, 1000, DIALECT_OPENAI);
	assert_int_equal(meter_start_doubt_us(&m), -1);
	assert_int_equal(meter_head_doubt_us(&m), -1);
	m.t0_floor = 400;
	assert_int_equal(meter_start_doubt_us(&m), 600);
	m.t0_floor = 1200;                  /* clocks that disagree: unknown */
	assert_int_equal(meter_start_doubt_us(&m), -1);
	/* the head, the read's last bytes, kernel-stamped: its own stamp */
	m.now_floor = 1500;
	m.now_kernel = m.now_whole = 1;
	head(&m, SSE, 0, 2000);
	meter_head_read(&m, 1);
	assert_int_equal(meter_head_doubt_us(&m), 0);
	meter_head_read(&m, 0);             /* body bytes after it */
	assert_int_equal(meter_head_doubt_us(&m), 500);
	m.now_floor = 0;                    /* no floor: the start is */
	meter_head_read(&m, 0);
	assert_int_equal(meter_head_doubt_us(&m), 1000);
	m.now_kernel = 0;                   /* the loop's time: never complete */
	meter_head_read(&m, 1);
	assert_int_equal(meter_head_doubt_us(&m), 1000);
	assert_int_equal(meter_ttfo_doubt_us(&m), -1);
	assert_int_equal(meter_last_token_doubt_us(&m), -1);
	/* reasoning first, alone; then the output token with another */
	read_at(&m, think, 5000, 2500, strlen(think));
	assert_int_equal(meter_ttft_doubt_us(&m), 0);
	assert_int_equal(meter_ttfo_doubt_us(&m), -1);
	assert_int_equal(meter_last_token_doubt_us(&m), 0);
	read_at(&m, TOK TOK, 9000, 5500, strlen(TOK TOK));
	assert_int_equal(meter_ttfo_doubt_us(&m), 3500);
	/* ... the last token is the second, which ended the read */
	assert_int_equal(meter_last_token_doubt_us(&m), 0);
	read_at(&m, TOK "da", 10000, 9200, strlen(TOK "da"));
	assert_int_equal(meter_last_token_doubt_us(&m), 800);
	/* the last token alone, a chunk's CRLF after it: its own stamp */
	read_at(&m, "ta: {}\n\n" TOK "\r\n", 12000, 9500, strlen("ta: {}\n\n" TOK));
	assert_int_equal(meter_last_token_doubt_us(&m), 0);
	assert_int_equal(meter_ttfo_doubt_us(&m), 3500);
	/* a partial event after it */
	read_at(&m, TOK "da", 15000, 12500, strlen(TOK "da"));
	assert_int_equal(meter_last_token_doubt_us(&m), 2500);
	/* a read whose end never came: the last floor judged, older */
	m.now = 20000;
	m.now_floor = 17000;
	feed(&m, "ta: {}\n\n" TOK, 20000);
	assert_int_equal(meter_last_token_doubt_us(&m), 7500);
	meter_free(&m);
	/* two chunks in one read, a token each: the first token ended its
	 * feed, not its read (the second token's judging keeps it due) */
	openai(&m, 1000, SSE, 2000);
	{
		const char *two = TOK "\r\n" "3a\r\n" TOK "\r\n";
		size_t n = strlen(TOK);
		m.now_floor = 2500;
		m.now_kernel = m.now_whole = 1;
		meter_body(&m, two, n, 9000);
		meter_body(&m, two + n + 6, n, 9000);
		meter_read_end(&m, two + strlen(two));
	}
	assert_int_equal(meter_ttft_doubt_us(&m), 6500);
	assert_int_equal(meter_ttfo_doubt_us(&m), 6500);
	assert_int_equal(meter_last_token_doubt_us(&m), 0);
	meter_free(&m);
	/* the first output token is the first token: the same doubt */
	openai(&m, 1000, SSE, 2000);
	read_at(&m, TOK, 9000, 2500, strlen(TOK));
	assert_int_equal(meter_ttfo_doubt_us(&m), 0);
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
	/* 9 tokens in 3 events, and the first event's own not told: it is
	 * taken to carry 3, so the 90 µs from it to the last made 6 */
	assert_int_equal(meter_tpot_us(&m), 90 / 6);
	assert_true(meter_tpot_estimated(&m));
	assert_int_equal(meter_token_source(&m), TOKENS_USAGE);
	assert_true(meter_tokens_per_event(&m) == 3.0);
	assert_int_equal(m.first_event_tokens, -1);
	meter_free(&m);
}

/* Which bodies are parsed (docs/contract.md §4): text/event-stream with
 * parameters and in any case; application/x-ndjson; any body on the ollama
 * dialect but a JSON one; nothing compressed; other types are not streams. */
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

/* The finish reasons: each once, first seen first, at most four; cut to
 * 32 bytes and cleaned to [A-Za-z0-9_.-] (a backend's bytes go to the log
 * and the span); a JSON body's too. */
static void test_finish_reasons(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, "text/event-stream", 10);
	feed(&m, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},"
	    "\"finish_reason\":null}]}\n\n", 20);
	assert_int_equal(m.n_finish, 0);
	assert_null(meter_finish_reason(&m));
	feed(&m, "data: {\"choices\":[{\"index\":1,\"delta\":{},\"finish_reason\":"
	    "\"length\"}]}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
	    "\"stop\"}]}\n\n"
	    "data: {\"choices\":[{\"index\":2,\"delta\":{},\"finish_reason\":"
	    "\"length\"}]}\n\n", 30);
	assert_int_equal(m.n_finish, 2);
	assert_string_equal(meter_finish_reason(&m), "length");
	assert_string_equal(m.finish[1], "stop");
	/* cleaned, cut, and no more than four */
	feed(&m, "data: {\"choices\":[{\"finish_reason\":\"a b\\\"<x>\\u00e9\"},"
	    "{\"finish_reason\":\"0123456789012345678901234567890123456789\"},"
	    "{\"finish_reason\":\"fifth\"}]}\n\n", 40);
	assert_int_equal(m.n_finish, METER_FINISH_MAX);
	assert_string_equal(m.finish[2], "a_b___x__u00e9");
	assert_string_equal(m.finish[3], "01234567890123456789012345678901");
	feed(&m, "data: [DONE]\n\n", 50);
	meter_end(&m, 60);
	assert_string_equal(meter_finish_reason(&m), "length");
	meter_free(&m);

	/* a JSON body's, where its usage is read */
	openai(&m, 0, "application/json", 10);
	feed(&m, "{\"choices\":[{\"message\":{\"content\":\"hi\"},\"finish_reason\":"
	    "\"content_filter\"}],\"usage\":{\"completion_tokens\":2}}", 20);
	meter_end(&m, 30);
	assert_int_equal(m.n_finish, 1);
	assert_string_equal(meter_finish_reason(&m), "content_filter");
	meter_free(&m);

	/* a body that names none: none */
	openai(&m, 0, "application/json", 10);
	feed(&m, "{\"choices\":[{\"finish_reason\":null}]}", 20);
	meter_end(&m, 30);
	assert_null(meter_finish_reason(&m));
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

#define THINK "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"h\"}}]}\n\n"

/* TTFO waits for the first token that is not reasoning; TTFT does not.
 * The reasoning count comes from the usage. */
static void test_ttfo_and_reasoning_tokens(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, SSE, 100);
	feed(&m, THINK, 1000);
	feed(&m, THINK, 2000);
	assert_int_equal(meter_ttft_us(&m), 1000);
	assert_int_equal(meter_ttfo_us(&m), -1);
	feed(&m, TOK, 5000);
	feed(&m, THINK, 6000);                   /* later reasoning moves nothing */
	feed(&m, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":40,"
	    "\"completion_tokens_details\":{\"reasoning_tokens\":30}}}\n\n", 6100);
	meter_end(&m, 6200);
	assert_int_equal(meter_ttft_us(&m), 1000);
	assert_int_equal(meter_ttfo_us(&m), 5000);
	assert_int_equal(meter_reasoning_tokens(&m), 30);
	assert_int_equal(meter_output_tokens(&m), 40);
	meter_free(&m);

	/* without reasoning both are the same point; no reasoning reported */
	openai(&m, 0, SSE, 100);
	feed(&m, TOK, 700);
	meter_end(&m, 800);
	assert_int_equal(meter_ttfo_us(&m), 700);
	assert_int_equal(meter_reasoning_tokens(&m), -1);
	meter_free(&m);

	/* a raw stream: every event answers */
	meter_init(&m, 0, DIALECT_RAW);
	meter_set_dialect(&m, DIALECT_RAW, 1);
	head(&m, SSE, 0, 10);
	feed(&m, "data: x\n\n", 300);
	meter_end(&m, 400);
	assert_int_equal(meter_ttfo_us(&m), 300);
	meter_free(&m);
}

/* The server side's TTFT and TTFO run from the request's last byte
 * (t_req): a client that took 18 s to send its request adds 18 s to
 * TTFT and nothing to them. Undefined before the request completed, 0
 * where the answer came before its end. */
static void test_server_side_from_the_request_end(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 1000, SSE, 19000100);
	assert_int_equal(meter_ttft_server_us(&m), -1);
	m.t_req = 19000000;                      /* the body took 18.999 s */
	feed(&m, THINK, 19040000);
	feed(&m, TOK, 19050000);
	meter_end(&m, 19060000);
	assert_int_equal(meter_ttft_us(&m), 19039000);
	assert_int_equal(meter_ttft_server_us(&m), 40000);
	assert_int_equal(meter_ttfo_us(&m), 19049000);
	assert_int_equal(meter_ttfo_server_us(&m), 50000);
	assert_int_equal(meter_duration_server_us(&m), 60000);
	m.t_req = 0;                             /* never completed */
	assert_int_equal(meter_ttft_server_us(&m), -1);
	assert_int_equal(meter_ttfo_server_us(&m), -1);
	assert_int_equal(meter_duration_server_us(&m), 0);
	m.t_req = 19045000;                      /* answered before its end */
	assert_int_equal(meter_ttft_server_us(&m), 0);
	assert_int_equal(meter_ttfo_server_us(&m), 5000);
	meter_free(&m);
}

/* Tokens in one read share its timestamp: clumped. The gaps between the
 * reads that carried tokens give the median between clumps. */
static void test_clumping(void **state)
{
	struct meter m;
	uint64_t t = 1000;

	(void)state;
	openai(&m, 0, SSE, 100);
	/* 20 clumps of 5 tokens, 200 ms apart: a hop that flushes on a timer */
	for (int c = 0; c < 20; c++, t += 200000)
		feed(&m, TOK TOK TOK TOK TOK, t);
	meter_end(&m, t);
	assert_int_equal(m.token_events, 100);
	assert_int_equal(m.clumped, 80);
	assert_true(meter_clump_share(&m) > 0.80 && meter_clump_share(&m) < 0.81);
	/* within the histogram bucket: 12 % */
	assert_true(meter_clump_gap_us(&m) > 176000 && meter_clump_gap_us(&m) < 224000);
	assert_int_equal(meter_buffered(&m), 1);
	meter_free(&m);

	/* one token a read, 20 ms apart: not buffered */
	openai(&m, 0, SSE, 100);
	t = 1000;
	for (int i = 0; i < 100; i++, t += 20000)
		feed(&m, TOK, t);
	meter_end(&m, t);
	assert_true(meter_clump_share(&m) == 0);
	assert_true(meter_clump_gap_us(&m) > 17600 && meter_clump_gap_us(&m) < 22400);
	assert_int_equal(meter_buffered(&m), 0);
	meter_free(&m);

	/* a fast model read in clumps by a busy proxy: 4 a read, 4 ms apart */
	openai(&m, 0, SSE, 100);
	t = 1000;
	for (int c = 0; c < 50; c++, t += 4000)
		feed(&m, TOK TOK TOK TOK, t);
	meter_end(&m, t);
	assert_true(meter_clump_share(&m) > 0.7);
	assert_int_equal(meter_buffered(&m), 0);
	meter_free(&m);

	/* too few tokens to tell; fewer than two: no share at all */
	openai(&m, 0, SSE, 100);
	feed(&m, TOK TOK TOK, 1000);
	feed(&m, TOK TOK TOK, 300000);
	meter_end(&m, 300001);
	assert_int_equal(meter_buffered(&m), -1);
	meter_free(&m);
	openai(&m, 0, SSE, 100);
	feed(&m, TOK, 1000);
	meter_end(&m, 2000);
	assert_true(meter_clump_share(&m) < 0);
	assert_int_equal(meter_clump_gap_us(&m), -1);
	meter_free(&m);
}

/* A stall: no token for stall_us on an open stream, after its first
 * token. The sweep sees it start and end; a stall between two sweeps, or
 * one the stream ended in, is counted at its end; the longest gap
 * includes the one after the last token. */
static void test_stalls(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, SSE, 100);
	m.stall_us = 10000;
	feed(&m, ": ping\n\n", 30000);           /* before the first token: no stall */
	assert_int_equal(meter_stall_sweep(&m, 30000), 0);
	assert_int_equal(meter_token_gap_us(&m, 30000), -1);
	feed(&m, TOK, 40000);
	assert_int_equal(meter_token_gap_us(&m, 45000), 5000);
	assert_int_equal(meter_stall_sweep(&m, 45000), 0);
	feed(&m, ": ping\n\n", 48000);           /* heartbeats do not count */
	feed(&m, "data: {\"choices\":[{\"delta\":{\"content\":\"\"}}]}\n\n", 49000);
	assert_int_equal(meter_stall_sweep(&m, 50000), 1);
	assert_true(m.stalled);
	assert_int_equal(meter_stall_sweep(&m, 60000), 0);   /* still stalled */
	feed(&m, TOK, 65000);
	assert_int_equal(m.stalls, 1);
	assert_int_equal(meter_stall_sweep(&m, 65100), -1);
	assert_false(m.stalled);
	/* a 12 ms gap between two sweeps: counted when the token comes */
	feed(&m, TOK, 77000);
	assert_int_equal(m.stalls, 2);
	/* the stream ends 30 ms after its last token */
	meter_end(&m, 107000);
	assert_int_equal(m.stalls, 3);
	assert_int_equal(m.gap_max_us, 30000);
	assert_int_equal(m.itl_max_us, 25000);
	assert_int_equal(meter_token_gap_us(&m, 108000), -1);
	meter_free(&m);

	/* stall_us 0: off */
	openai(&m, 0, SSE, 100);
	feed(&m, TOK, 1000);
	assert_int_equal(meter_stall_sweep(&m, 1000000), 0);
	meter_end(&m, 2000000);
	assert_int_equal(m.stalls, 0);
	meter_free(&m);

	/* ended while the sweep saw it stalled: counted once, then over */
	openai(&m, 0, SSE, 100);
	m.stall_us = 10000;
	feed(&m, TOK, 1000);
	assert_int_equal(meter_stall_sweep(&m, 20000), 1);
	meter_end(&m, 30000);
	assert_int_equal(m.stalls, 1);
	assert_int_equal(meter_stall_sweep(&m, 31000), -1);
	meter_free(&m);
}

/* The client holds the stream back (backpressure: tokentap reads nothing
 * meanwhile): the hold's time is no token-free time of the model's (no
 * stall, no token_idle, no gap_max), the gap across it is no ITL sample,
 * and the stream's pace (TPOT, clumping) is the client's from then on. */
static void test_client_hold(void **state)
{
	struct meter m;

	(void)state;
	n_gaps = 0;
	openai(&m, 0, SSE, 100);
	m.itl_fn = on_gap;
	m.stall_us = 10000;
	feed(&m, TOK, 1000);
	feed(&m, TOK, 2000);
	meter_hold(&m, 3000);                    /* the client stops reading */
	assert_int_equal(meter_token_gap_us(&m, 30000), 1000);
	assert_int_equal(meter_stall_sweep(&m, 30000), 0);
	assert_int_equal(meter_held_us(&m, 30000), 27000);
	assert_int_equal(meter_tpot_us(&m), 1000);   /* no hold between its tokens yet */
	meter_unhold(&m, 50000);                 /* and reads again: what was made comes */
	feed(&m, TOK TOK TOK, 50500);
	assert_int_equal(n_gaps, 3);             /* 1000, then the two clumped */
	assert_int_equal(gaps[0], 1000);
	assert_int_equal(gaps[1], 0);
	assert_int_equal(m.stalls, 0);
	assert_int_equal(meter_tpot_us(&m), -1);
	assert_true(meter_client_paced(&m));
	/* a stall of the model's own after the hold still counts, on the
	 * reading clock */
	assert_int_equal(meter_token_gap_us(&m, 55500), 5000);
	assert_int_equal(meter_stall_sweep(&m, 61000), 1);
	meter_hold(&m, 62000);
	meter_end(&m, 90000);                    /* let go while held */
	assert_int_equal(meter_held_us(&m, 90000), 47000 + 28000);
	assert_int_equal(m.gap_max_us, 11500);
	assert_int_equal(m.stalls, 1);
	meter_free(&m);

	/* a hold before the first token leaves the pace alone */
	openai(&m, 0, SSE, 100);
	meter_hold(&m, 200);
	meter_unhold(&m, 900);
	feed(&m, TOK, 1000);
	feed(&m, TOK, 2000);
	meter_end(&m, 2000);
	assert_int_equal(meter_tpot_us(&m), 1000);
	assert_false(meter_client_paced(&m));
	assert_int_equal(meter_held_us(&m, 2000), 700);
	meter_free(&m);
}

/* No token: by outcome; an empty stream is an empty answer, a JSON body is
 * not; unmeasured and never-sent requests are not counted. */
static void test_no_token(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, SSE, 100);
	feed(&m, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", 200);
	feed(&m, "data: [DONE]\n\n", 300);
	meter_end(&m, 400);
	assert_true(meter_no_token(&m, meter_outcome(&m, METER_END_COMPLETE)));
	assert_true(meter_no_token(&m, OUTCOME_CLIENT_ABORT));
	assert_false(meter_no_token(&m, OUTCOME_CONNECT_ERROR));
	assert_false(meter_no_token(&m, OUTCOME_REJECTED));
	assert_false(meter_no_token(&m, OUTCOME_CLIENT_TIMEOUT));
	meter_free(&m);

	openai(&m, 0, SSE, 100);
	feed(&m, TOK, 200);
	meter_end(&m, 300);
	assert_false(meter_no_token(&m, OUTCOME_CLIENT_ABORT));
	meter_free(&m);

	/* a JSON answer: ok is no empty answer; a 500 is an upstream error */
	openai(&m, 0, "application/json", 100);
	meter_end(&m, 300);
	assert_false(meter_no_token(&m, OUTCOME_OK));
	assert_true(meter_no_token(&m, OUTCOME_UPSTREAM_ERROR));
	meter_free(&m);

	/* gave up before the response head, or it never came */
	meter_init(&m, 0, DIALECT_OPENAI);
	meter_end(&m, 300);
	assert_true(meter_no_token(&m, OUTCOME_CLIENT_ABORT));
	assert_true(meter_no_token(&m, OUTCOME_TIMEOUT));
	meter_free(&m);

	/* a coding it cannot read: it cannot tell */
	meter_init(&m, 0, DIALECT_OPENAI);
	head(&m, SSE, 1, 100);
	meter_end(&m, 300);
	assert_false(meter_no_token(&m, OUTCOME_OK));
	meter_free(&m);
}

/* Chunks are not tokens: a backend that batches (5 tokens an event, 8 in
 * the first) with usage on every chunk (vLLM's continuous_usage_stats):
 * N from the usage, the first event's 8 from its count, TPOT over the 15
 * tokens made after the first event, never over the events. */
#define CU(text, n) "data: {\"choices\":[{\"delta\":{\"content\":\"" text "\"}}]," \
	"\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":" #n "}}\n\n"

static void test_chunks_are_not_tokens(void **state)
{
	struct meter m;

	(void)state;
	openai(&m, 0, SSE, 10);
	feed(&m, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}],"
	    "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":0}}\n\n", 20);
	feed(&m, CU("abcdefgh", 8), 100);
	feed(&m, CU("ijklm", 13), 130);
	feed(&m, CU("nopqr", 18), 160);
	feed(&m, CU("stuvw", 23), 190);
	feed(&m, "data: [DONE]\n\n", 200);
	meter_end(&m, 210);
	assert_int_equal(meter_output_tokens(&m), 23);
	assert_int_equal(m.token_events, 4);
	assert_int_equal(m.first_event_tokens, 8);
	assert_int_equal(meter_token_source(&m), TOKENS_CONTINUOUS);
	assert_string_equal(meter_tokens_name(meter_token_source(&m)), "continuous_usage");
	assert_true(meter_tokens_per_event(&m) == 23.0 / 4);
	assert_int_equal(meter_tpot_us(&m), 90 / 15);
	assert_false(meter_tpot_estimated(&m));
	assert_true(meter_speed_tokens(&m) == 15);
	meter_free(&m);

	/* the same events without a count: one token an event, as
	 * docs/contract.md §4 says, and nothing told of the first */
	meter_init(&m, 0, DIALECT_OPENAI);
	head(&m, SSE, 0, 10);
	feed(&m, TOK, 100);
	feed(&m, TOK, 130);
	meter_end(&m, 140);
	assert_int_equal(meter_token_source(&m), TOKENS_EVENTS);
	assert_int_equal(m.first_event_tokens, -1);
	assert_true(meter_tokens_per_event(&m) < 0);
	assert_int_equal(meter_tpot_us(&m), 30);
	meter_free(&m);

	/* TGI: one token an event by its protocol */
	meter_init(&m, 0, DIALECT_TGI);
	head(&m, SSE, 0, 10);
	feed(&m, "data:{\"token\":{\"id\":1,\"text\":\"a\",\"special\":false}}\n\n", 50);
	meter_end(&m, 60);
	assert_int_equal(m.first_event_tokens, 1);
	meter_free(&m);
}

/* The wire report of one stream: CRLF line ends, "data:" without its
 * space, a comment and a ping and an empty delta (keep-alives, 100 µs
 * apart), two events in one read, usage on every chunk, no [DONE]. */
static void test_wire_report(void **state)
{
	struct meter m;
	struct meter_wire w;

	(void)state;
	openai(&m, 0, SSE, 10);
	feed(&m, ": hello\r\n\r\n", 100);
	feed(&m, "event: ping\r\ndata: {}\r\n\r\n", 200);
	feed(&m, "data:{\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":null}]}\r\n\r\n", 300);
	feed(&m, "data:{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":1}}\r\n\r\n"
	    "data:{\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":{\"completion_tokens\":2}}\r\n\r\n", 400);
	meter_end(&m, 500);
	meter_wire(&m, &w);
	assert_int_equal(w.stream, 1);
	assert_int_equal(w.crlf, 11);
	assert_int_equal(w.lf + w.cr, 0);
	assert_int_equal(w.data_bare, 3);
	assert_int_equal(w.data_space, 1);
	assert_int_equal(w.comments, 1);
	assert_int_equal(w.pings, 1);
	assert_int_equal(w.empty_deltas, 1);
	assert_int_equal(w.ka_gaps, 2);
	assert_int_equal(w.ka_span_us, 200);
	assert_int_equal(w.events, 4);
	assert_int_equal(w.event_reads, 3);
	assert_int_equal(w.usage, WIRE_USAGE_EVERY);
	assert_int_equal(w.end, WIRE_END_MISSING);
	assert_int_equal(w.error_in_2xx, 0);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_UPSTREAM_ABORT);
	meter_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_json_unescaped),
		cmocka_unit_test(test_auto_sniffs_the_dialect),
		cmocka_unit_test(test_event_complete_at_its_blank_line),
		cmocka_unit_test(test_first_event_first_token_and_n_from_events),
		cmocka_unit_test(test_ttft_doubt),
		cmocka_unit_test(test_point_doubts),
		cmocka_unit_test(test_itl_and_usage),
		cmocka_unit_test(test_which_bodies_are_parsed),
		cmocka_unit_test(test_json_body_usage),
		cmocka_unit_test(test_finish_reasons),
		cmocka_unit_test(test_model_precedence),
		cmocka_unit_test(test_no_tokens_and_error_event),
		cmocka_unit_test(test_ttfo_and_reasoning_tokens),
		cmocka_unit_test(test_clumping),
		cmocka_unit_test(test_client_hold),
		cmocka_unit_test(test_stalls),
		cmocka_unit_test(test_no_token),
		cmocka_unit_test(test_server_side_from_the_request_end),
		cmocka_unit_test(test_chunks_are_not_tokens),
		cmocka_unit_test(test_wire_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
