/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-mock: a simulated LLM backend speaking the dialects of
 * docs/contract.md §4 with scheduled TTFT, TPOT, jitter, token counts and
 * faults. Options, listeners, worker threads and shutdown live here. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "log.h"
#include "mock_conn.h"
#include "mock_prefix.h"
#include "net.h"
#include "rxtime.h"
#include "util.h"

#define MAX_LISTEN 16
#define MAX_WORKERS 64

struct worker {
	struct mock_worker w;
	struct event *accept_ev[MAX_LISTEN];
	int lfd[MAX_LISTEN];
	struct event *resume_ev;       /* re-enables accepting after EMFILE */
	pthread_t thread;
	int started;
};

struct options {
	const char *listen[MAX_LISTEN];
	int nlisten;
	int workers;
	const char *log_path;
	uint64_t prefix_window_us;     /* --prefix-cache; 0: off */
	double prefix_cost;            /* --prefix-cache-cost */
};

enum { OPT_WORKERS = 256, OPT_LOG, OPT_SLOTS, OPT_PREFIX_CACHE, OPT_PREFIX_COST,
	OPT_KNOB };

static const struct option long_opts[] = {
	{"listen", required_argument, NULL, 'l'},
	{"workers", required_argument, NULL, OPT_WORKERS},
	{"log", required_argument, NULL, OPT_LOG},
	{"slots", required_argument, NULL, OPT_SLOTS},
	{"prefix-cache", required_argument, NULL, OPT_PREFIX_CACHE},
	{"prefix-cache-cost", required_argument, NULL, OPT_PREFIX_COST},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	/* The knobs of mock_params, under their own names. */
	{"ttft", required_argument, NULL, OPT_KNOB},
	{"role-delay", required_argument, NULL, OPT_KNOB},
	{"tpot", required_argument, NULL, OPT_KNOB},
	{"jitter", required_argument, NULL, OPT_KNOB},
	{"tokens", required_argument, NULL, OPT_KNOB},
	{"tokens-per-chunk", required_argument, NULL, OPT_KNOB},
	{"prefill-per-token", required_argument, NULL, OPT_KNOB},
	{"ttft-per-stream", required_argument, NULL, OPT_KNOB},
	{"tpot-per-stream", required_argument, NULL, OPT_KNOB},
	{"first-chunk-tokens", required_argument, NULL, OPT_KNOB},
	{"continuous-usage", required_argument, NULL, OPT_KNOB},
	{"usage", required_argument, NULL, OPT_KNOB},
	{"keepalive", required_argument, NULL, OPT_KNOB},
	{"fault", required_argument, NULL, OPT_KNOB},
	{"seed", required_argument, NULL, OPT_KNOB},
	{"framing", required_argument, NULL, OPT_KNOB},
	{"stamp", required_argument, NULL, OPT_KNOB},
	{"reasoning", required_argument, NULL, OPT_KNOB},
	{"stall", required_argument, NULL, OPT_KNOB},
	{"heartbeat", required_argument, NULL, OPT_KNOB},
	{"clump", required_argument, NULL, OPT_KNOB},
	{"prompt-bytes-per-token", required_argument, NULL, OPT_KNOB},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fputs("usage: tokentap-mock [options]\n"
	    "A simulated LLM backend: OpenAI, Responses, Anthropic, Dify, Gemini,\n"
	    "TGI and Ollama streams with scheduled timing, chosen by request path.\n"
	    "\n"
	    "  -l, --listen ADDR:PORT     listen here (default 127.0.0.1:8000; repeatable)\n"
	    "      --workers N            event-loop threads (default 1)\n"
	    "      --log FILE             one JSON line per finished request\n"
	    "      --slots N              decode at most N sequences at once; the others\n"
	    "                             wait, first come first served, and their TTFT\n"
	    "                             counts the wait (default: no limit)\n"
	    "      --prefix-cache WINDOW  a prefix cache: the leading 64-byte blocks (16\n"
	    "                             tokens) of a body seen within WINDOW prefill at\n"
	    "                             --prefix-cache-cost of the price (default: off)\n"
	    "      --prefix-cache-cost F  a cached token's share of --prefill-per-token,\n"
	    "                             0 to 1 (default 0.1)\n"
	    "      --ttft DUR             request read -> first token (default 300ms)\n"
	    "      --role-delay DUR       request read -> head and first non-token event (0)\n"
	    "      --tpot DUR             gap between token events (default 20ms)\n"
	    "      --jitter SPEC          none | uniform:DUR | normal:DUR | exp:DUR\n"
	    "      --tokens N             output tokens (default: the request's max tokens, else 50)\n"
	    "      --tokens-per-chunk K   tokens per event (default 1)\n"
	    "      --first-chunk-tokens K the first token event's tokens (default: as the rest)\n"
	    "      --continuous-usage on|off  OpenAI: a usage (the counts so far) on every\n"
	    "                             chunk, as vLLM's continuous_usage_stats (also\n"
	    "                             asked by the request's stream_options; default off)\n"
	    "      --prefill-per-token DUR  extra TTFT per input token\n"
	    "      --prompt-bytes-per-token R  input tokens (usage's prompt tokens) are\n"
	    "                             the prompt's text bytes / R, rounded up: every\n"
	    "                             content, prompt, input, text, inputs, query and\n"
	    "                             system string of the body; R from 0.1 to 1000,\n"
	    "                             0 the default: body bytes / 4\n"
	    "      --ttft-per-stream DUR  extra TTFT per other stream in progress here\n"
	    "                             (a backend whose TTFT grows with concurrency)\n"
	    "      --tpot-per-stream DUR  extra gap per other sequence decoding (holding a\n"
	    "                             slot; without --slots, in progress)\n"
	    "      --usage on|off         report token counts (default on)\n"
	    "      --keepalive DUR        keep-alive comment this often while waiting\n"
	    "      --fault SPEC           status:CODE | error-after:N | close-after:N |\n"
	    "                             stall-after:N\n"
	    "      --seed N               seed of token text and jitter (default 1)\n"
	    "      --framing chunked|close  response body framing (default chunked)\n"
	    "      --stamp on|off         open each token event with the SSE comment\n"
	    "                             \": ts=US\", its CLOCK_MONOTONIC send time in us\n"
	    "                             (not for NDJSON; default off)\n"
	    "      --reasoning N          the first N tokens are reasoning, in each API's\n"
	    "                             own shape (reasoning_content, thinking_delta,\n"
	    "                             reasoning deltas, thought parts, thinking)\n"
	    "      --stall N:DUR          after N tokens, none for DUR, then the rest\n"
	    "      --heartbeat DUR        during a stall, a no-token event this often\n"
	    "                             (a ping, an empty delta, a comment; default 1s,\n"
	    "                             0: silence)\n"
	    "      --clump N              write N token events at once, every N gaps\n"
	    "                             (a batching backend; default 1)\n"
	    "  -h, --help                 this text\n"
	    "  -V, --version              print the version\n"
	    "\n"
	    "Every knob but --slots and --prefix-cache* can be set per request with\n"
	    "the header"
	    " X-Mock-<name>, e.g. X-Mock-TTFT: 50ms. Durations take us, ms, s, m.\n"
	    "\n"
	    "The model: a request read at t takes a slot at g (t, or when the slot it\n"
	    "waited for was freed); its first token is due at g + ttft +\n"
	    "prefill-per-token x (input tokens - cached + cost x cached) +\n"
	    "ttft-per-stream x streams in progress;\n"
	    "each next event tpot + tpot-per-stream x (sequences decoding - 1) after\n"
	    "the one before (+ jitter); its slot is freed with its last event. So\n"
	    "TTFT = wait + ttft + prefill, TPOT = tpot + tpot-per-stream x (d - 1).\n", f);
}

static int parse_options(int argc, char **argv, struct options *o,
    struct mock_params *p)
{
	int ch, idx;

	while ((ch = getopt_long(argc, argv, "l:hV", long_opts, &idx)) != -1) {
		switch (ch) {
		case 'l':
			if (o->nlisten == MAX_LISTEN) {
				log_error("too many --listen (max %d)", MAX_LISTEN);
				return -1;
			}
			o->listen[o->nlisten++] = optarg;
			break;
		case OPT_WORKERS: {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end != '\0' || v < 1 || v > MAX_WORKERS) {
				log_error("--workers: 1 to %d", MAX_WORKERS);
				return -1;
			}
			o->workers = (int)v;
			break;
		}
		case OPT_LOG:
			o->log_path = optarg;
			break;
		case OPT_SLOTS: {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end != '\0' || v < 1 || v > 1000000) {
				log_error("--slots: 1 to 1000000");
				return -1;
			}
			mock_slots_configure((unsigned)v);
			break;
		}
		case OPT_PREFIX_CACHE:
			if (util_parse_duration_us(optarg, &o->prefix_window_us) < 0 ||
			    o->prefix_window_us == 0) {
				log_error("--prefix-cache: a duration above 0");
				return -1;
			}
			break;
		case OPT_PREFIX_COST: {
			char *end;
			o->prefix_cost = strtod(optarg, &end);
			if (end == optarg || *end != '\0' || !(o->prefix_cost >= 0) ||
			    o->prefix_cost > 1) {
				log_error("--prefix-cache-cost: 0 to 1");
				return -1;
			}
			break;
		}
		case OPT_KNOB: {
			const char *name = long_opts[idx].name;
			int k = mock_params_find(name, strlen(name));
			if (k < 0 || mock_params_set(p, k, optarg) < 0) {
				log_error("--%s: invalid value \"%s\"", name, optarg);
				return -1;
			}
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("tokentap-mock %s\n", TOKENTAP_VERSION);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		log_error("unexpected argument \"%s\"", argv[optind]);
		usage(stderr);
		exit(2);
	}
	if (o->nlisten == 0)
		o->listen[o->nlisten++] = "127.0.0.1:8000";
	/* --seed seeds the run, each request its own seed drawn from it;
	 * only X-Mock-Seed pins the seed of one request. */
	p->has_seed = 0;
	return 0;
}

/* SO_REUSEPORT when there are several workers: each its own socket, the
 * kernel spreading the connections. Returns the fd or -1. */
static int listen_on(const char *addr, int reuseport)
{
	char host[256], what[300];
	unsigned port;

	snprintf(what, sizeof what, "--listen %s", addr);
	if (util_split_hostport(addr, host, sizeof host, &port) < 0) {
		log_error("%s: expected ADDR:PORT", what);
		return -1;
	}
	return net_listen(host, port, reuseport, 4096, what);
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct worker *wk = arg;

	(void)fd;
	(void)what;
	for (int i = 0; i < MAX_LISTEN && wk->accept_ev[i] != NULL; i++)
		event_add(wk->accept_ev[i], NULL);
}

static void server_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct worker *wk = arg;
	int one = 1;

	(void)what;
	/* A bounded batch keeps a connect storm from starving the streams. */
	for (int i = 0; i < 64; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			/* out of descriptors: stop for a moment, not spin */
			if (net_accept_pause(wk->resume_ev, errno))
				for (int j = 0; j < MAX_LISTEN && wk->accept_ev[j]; j++)
					event_del(wk->accept_ev[j]);
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		mock_conn_new(&wk->w, fd);
	}
}

static int worker_init(struct worker *wk, unsigned id, const struct options *o,
    const struct mock_config *cfg)
{
	memset(wk, 0, sizeof *wk);
	for (int i = 0; i < MAX_LISTEN; i++)
		wk->lfd[i] = -1;
	wk->w.id = id;
	wk->w.cfg = cfg;
	/* epoll's millisecond timeout is too coarse for TPOT: PRECISE_TIMER
	 * uses a timerfd; NO_CACHE_TIME makes each timer relative to the
	 * real now, not the start of a busy loop turn. */
	wk->w.base = net_base_new(EVENT_BASE_FLAG_PRECISE_TIMER |
	    EVENT_BASE_FLAG_NO_CACHE_TIME);
	if (wk->w.base == NULL) {
		log_error("mock: cannot create an event base");
		return -1;
	}
	rxtime_clock_init(&wk->w.rx);
	wk->resume_ev = evtimer_new(wk->w.base, accept_resume, wk);
	if (wk->resume_ev == NULL)
		return -1;
	for (int i = 0; i < o->nlisten; i++) {
		wk->lfd[i] = listen_on(o->listen[i], o->workers > 1);
		if (wk->lfd[i] < 0)
			return -1;
		/* the accepted sockets inherit it; a kernel without: the loop's clock */
		(void)rxtime_enable(wk->lfd[i]);
		wk->accept_ev[i] = event_new(wk->w.base, wk->lfd[i],
		    EV_READ | EV_PERSIST, server_accept, wk);
		if (wk->accept_ev[i] == NULL || event_add(wk->accept_ev[i], NULL) < 0)
			return -1;
	}
	return 0;
}

static void worker_free(struct worker *wk)
{
	mock_conn_free_all(&wk->w);
	for (int i = 0; i < MAX_LISTEN; i++) {
		if (wk->accept_ev[i] != NULL)
			event_free(wk->accept_ev[i]);
		if (wk->lfd[i] >= 0)
			close(wk->lfd[i]);
	}
	if (wk->resume_ev != NULL)
		event_free(wk->resume_ev);
	if (wk->w.base != NULL)
		event_base_free(wk->w.base);
	mock_buf_free(&wk->w.ev);
	mock_buf_free(&wk->w.out);
}

static void *worker_run(void *arg)
{
	struct worker *wk = arg;

	event_base_dispatch(wk->w.base);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker workers[MAX_WORKERS];
	struct options o = { .workers = 1, .prefix_cost = 0.1 };
	struct mock_config cfg = { .log_fd = -1 };
	sigset_t stop;
	int sig = 0, n = 0, rc = 1;

	mock_params_init(&cfg.defaults);
	if (parse_options(argc, argv, &o, &cfg.defaults) < 0)
		return 2;
	if (o.prefix_window_us > 0 &&
	    mock_prefix_configure(o.prefix_window_us, o.prefix_cost) < 0) {
		log_error("--prefix-cache: out of memory");
		return 1;
	}
	/* 10,000 streams need more descriptors than the usual soft limit */
	net_raise_nofile();
	net_reserve_fds(65536);      /* before the worker threads: see net.c */
	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads() < 0) {
		log_error("mock: libevent without thread support");
		return 1;
	}
	if (o.log_path != NULL) {
		cfg.log_fd = open(o.log_path, O_WRONLY | O_CREAT | O_APPEND |
		    O_CLOEXEC, 0644);
		if (cfg.log_fd < 0) {
			log_error("--log %s: %s", o.log_path, strerror(errno));
			return 1;
		}
	}
	/* Workers inherit the blocked set; only sigwait() below sees them. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	for (n = 0; n < o.workers; n++)
		if (worker_init(&workers[n], (unsigned)n, &o, &cfg) < 0)
			goto out;
	for (int i = 0; i < n; i++) {
		if (pthread_create(&workers[i].thread, NULL, worker_run,
		    &workers[i]) != 0) {
			log_error("mock: cannot start a worker thread");
			goto out;
		}
		workers[i].started = 1;
	}
	log_info("tokentap-mock %s: listening on %s%s, %d worker%s",
	    TOKENTAP_VERSION, o.listen[0], o.nlisten > 1 ? " and more" : "",
	    o.workers, o.workers > 1 ? "s" : "");
	sigwait(&stop, &sig);
	log_info("tokentap-mock: signal %d, exiting", sig);
	rc = 0;
out:
	/* loopexit, not loopbreak: a worker may not have entered its loop yet
	 * (the port answers before it does), and the loop's start clears a
	 * break asked before it; loopexit is an event the loop then runs. */
	for (int i = 0; i < n; i++)
		if (workers[i].started)
			event_base_loopexit(workers[i].w.base, NULL);
	for (int i = 0; i < n; i++)
		if (workers[i].started)
			pthread_join(workers[i].thread, NULL);
	for (int i = 0; i <= n && i < o.workers; i++)
		worker_free(&workers[i]);
	if (cfg.log_fd >= 0)
		close(cfg.log_fd);
	libevent_global_shutdown();
	return rc;
}
