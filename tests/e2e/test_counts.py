"""Statistics never silently lose what the access log has (issue 22):
100,000 requests over 10,000 groups, while /metrics is scraped over and
over (each scrape keeps the main thread, the statistics' reader, away)."""
import json
import socket
import threading
import time

from harness import Proc, Tokentap, binary, free_port, raw_request, wait_port

# 100,000 requests: the sanitizer build would take minutes for the same
SANITIZER_SKIP = {"test_every_request_is_counted_while_scrapes_run"}

TENANTS, MODELS = 200, 50


def client(port, first, count, errors):
    """Keep-alive requests, pipelined 50 at a time: tenant and model vary."""
    s = socket.create_connection(("127.0.0.1", port))
    done, buf = 0, b""
    try:
        while done < count:
            batch = min(50, count - done)
            out = b""
            for i in range(first + done, first + done + batch):
                body = b'{"model":"m%d","max_tokens":1}' % (i % MODELS)
                out += (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"X-Tenant-Id: t%d\r\nContent-Length: %d\r\n\r\n%s"
                        % (i // MODELS % TENANTS, len(body), body))
            s.sendall(out)
            seen = 0
            while seen < batch:
                d = s.recv(1 << 20)
                if not d:
                    raise AssertionError("tokentap closed the connection")
                buf += d
                seen += buf.count(b"\r\n0\r\n\r\n")
                buf = buf[buf.rfind(b"\r\n0\r\n\r\n") + 7:] if b"\r\n0\r\n\r\n" in buf else buf
            done += batch
    except Exception as e:         # noqa: BLE001 - reported by the test
        errors.append(repr(e))
    finally:
        s.close()


def test_every_request_is_counted_while_scrapes_run():
    mock_port = free_port()
    n, threads = 100000, 4
    with Proc([binary("tokentap-mock"), "-l", f"127.0.0.1:{mock_port}", "--ttft", "0ms",
               "--tpot", "0ms"]):
        wait_port(mock_port)
        conf = ("workers: 2\ntenant: {header: X-Tenant-Id}\n"
                "routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n"
                f"    upstream: http://127.0.0.1:{mock_port}\n")
        with Tokentap(conf) as t:
            stop = threading.Event()

            def scrape():
                while not stop.is_set():
                    raw_request(t.admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                                b"Connection: close\r\n\r\n", timeout=60)

            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
            errors = []
            per = n // threads
            ts = [threading.Thread(target=client, args=(t.port, k * per, per, errors))
                  for k in range(threads)]
            for th in ts:
                th.start()
            for th in ts:
                th.join(300)
            stop.set()
            scraper.join(120)
            assert not errors, errors

            def get(path):
                out = raw_request(t.admin, b"GET %s HTTP/1.1\r\nHost: x\r\n"
                                  b"Connection: close\r\n\r\n" % path.encode(), timeout=60)
                return out.split(b"\r\n\r\n", 1)[1]

            deadline = time.monotonic() + 10
            while True:
                routes = json.loads(get("/stats?by=route"))["groups"]
                total = sum(g["requests"] for g in routes if g["route"] == "chat")
                if total >= n or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert total == n, f"/stats counted {total} of {n}"
            # 10,000 rows: past /stats' default page of 1,000
            doc = json.loads(get("/stats?by=route,tenant,model&limit=10000"))
            assert not doc["truncated"], doc["total_groups"]
            chat = [g for g in doc["groups"] if g["route"] == "chat"]
            assert len(chat) == TENANTS * MODELS, len(chat)
            assert all(g["active"] == 0 for g in chat), [g for g in chat if g["active"]][:3]
            metrics = get("/metrics").decode()
            assert "tokentap_stats_dropped_total 0\n" in metrics
