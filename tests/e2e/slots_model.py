# SPDX-License-Identifier: Apache-2.0
"""The reference model of `tokentap-mock --slots N`, written from the
README's formulas ("tokentap-mock: a backend with a known model") and
sharing no code with src/: a discrete-event simulation of N slots, first
come first served. A request sent at t takes a slot at g = max(t, the
earliest the slot is free); its first token is due at g + ttft; it holds
its slot hold = ttft + (n - 1) tpot (its last token), so

    TTFT = (g - t) + ttft.

Open loop: Poisson (or constant) arrivals at rate r, the stationary TTFT
percentile from a long run (the first tenth dropped). Closed loop: c users,
each sending its next request `turn` after its last one ended.

The capacity under `ttft_pNN <= limit`: the largest rate (bisection on
common random numbers: the same unit gaps scaled by 1 / r, so every wait
grows with r and the percentile is monotone) or the largest concurrency
whose percentile is within the limit. Percentiles by numpy's default rule
(linear between the two nearest ranks), as tokentap-load's.

    python3 tests/e2e/slots_model.py SLOTS TTFT_MS HOLD_MS LIMIT_MS [PCT]
"""
import heapq
import math
import random
import sys


def quantile(xs, pct):
    """numpy's default (type 7) percentile of xs."""
    xs = sorted(xs)
    h = (len(xs) - 1) * pct / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _waits(slots, hold, arrivals):
    """The wait of each arrival (times ascending) for one of the slots."""
    free = [0.0] * slots
    out = []
    for t in arrivals:
        g = max(t, free[0])
        heapq.heapreplace(free, g + hold)
        out.append(g - t)
    return out


def unit_gaps(n, seed=1, arrivals="poisson"):
    rng = random.Random(seed)
    if arrivals == "constant":
        return [1.0] * n
    return [rng.expovariate(1.0) for _ in range(n)]


def open_ttft(slots, ttft, hold, rate, pct=95, gaps=None, n=200000):
    """The stationary TTFT percentile (ms) at rate r (per s; times in ms)."""
    gaps = gaps or unit_gaps(n)
    t, arr = 0.0, []
    for g in gaps:
        t += g * 1000 / rate
        arr.append(t)
    w = _waits(slots, hold, arr)[len(arr) // 10:]
    return quantile(w, pct) + ttft


def rate_capacity(slots, ttft, hold, limit, pct=95, n=200000, seed=1,
                  arrivals="poisson"):
    """The largest rate (per s) whose stationary TTFT pct is <= limit."""
    if limit < ttft:
        return 0.0
    gaps = unit_gaps(n, seed, arrivals)
    lo, hi = 0.0, slots * 1000 / hold           # past hi no queue is stable
    for _ in range(40):
        mid = (lo + hi) / 2
        if open_ttft(slots, ttft, hold, mid, pct, gaps) <= limit:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-4 * hi:
            break
    return lo


def closed_ttft(slots, ttft, hold, users, pct=95, turn=0.3, n=20000):
    """The TTFT percentile (ms) of a closed loop of `users` users."""
    sends = [(0.0, u) for u in range(users)]
    heapq.heapify(sends)
    free = [0.0] * slots
    out = []
    for _ in range(n):
        t, u = heapq.heappop(sends)
        g = max(t, free[0])
        heapq.heapreplace(free, g + hold)
        out.append(g - t + ttft)
        heapq.heappush(sends, (g + hold + turn, u))
    return quantile(out[n // 10:], pct)


def concurrency_capacity(slots, ttft, hold, limit, pct=95, turn=0.3):
    """The largest number of users whose TTFT pct is <= limit (0: none)."""
    c = 0
    while closed_ttft(slots, ttft, hold, c + 1, pct, turn) <= limit:
        c += 1
        if c > 64 * slots:
            break
    return c


if __name__ == "__main__":
    a = [float(x) for x in sys.argv[1:]]
    s, tt, hold, lim = int(a[0]), a[1], a[2], a[3]
    pct = a[4] if len(a) > 4 else 95
    print(f"rate {rate_capacity(s, tt, hold, lim, pct):.3f}/s, "
          f"concurrency {concurrency_capacity(s, tt, hold, lim, pct)}")
