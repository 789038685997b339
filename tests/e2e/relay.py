# SPDX-License-Identifier: Apache-2.0
"""A buffering hop for the clumping tests: a TCP relay that passes what the
client sends at once, but holds what the upstream sends and flushes it
every `interval` seconds, as a CDN or a proxy that flushes on a timer does.

  with FlushingRelay(upstream_port, interval=0.2) as r:
      ... connect to r.port ...

Run as a program it relays until interrupted:
  python3 tests/e2e/relay.py LISTEN_PORT UPSTREAM_PORT [INTERVAL_S]
"""
import socket
import sys
import threading
import time


class _Pair:
    """One client connection and its upstream connection."""

    def __init__(self, client, upstream_port, interval):
        self.client = client
        self.up = socket.create_connection(("127.0.0.1", upstream_port))
        self.interval = interval
        self.held = bytearray()
        self.lock = threading.Lock()
        self.up_done = False
        for s in (self.client, self.up):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for fn in (self.client_to_up, self.up_to_held, self.flusher):
            threading.Thread(target=fn, daemon=True).start()

    def client_to_up(self):
        try:
            while True:
                d = self.client.recv(65536)
                if not d:
                    self.up.shutdown(socket.SHUT_WR)
                    return
                self.up.sendall(d)
        except OSError:
            self.close()

    def up_to_held(self):
        try:
            while True:
                d = self.up.recv(65536)
                if not d:
                    break
                with self.lock:
                    self.held += d
        except OSError:
            pass
        with self.lock:
            self.up_done = True

    def flusher(self):
        """Every interval, what came in since goes out in one send."""
        try:
            while True:
                time.sleep(self.interval)
                with self.lock:
                    data, done = bytes(self.held), self.up_done
                    self.held.clear()
                if data:
                    self.client.sendall(data)
                if done:
                    break
        except OSError:
            pass
        self.close()

    def close(self):
        for s in (self.client, self.up):
            try:
                s.close()
            except OSError:
                pass


class FlushingRelay:
    def __init__(self, upstream_port, interval=0.2, port=0):
        self.upstream_port = upstream_port
        self.interval = interval
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", port))
        self.srv.listen(1024)
        self.port = self.srv.getsockname()[1]
        self.pairs = []
        self.running = True
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while self.running:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            try:
                self.pairs.append(_Pair(c, self.upstream_port, self.interval))
            except OSError:
                c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.running = False
        self.srv.close()
        for p in self.pairs:
            p.close()


if __name__ == "__main__":
    relay = FlushingRelay(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.2,
                          port=int(sys.argv[1]))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
