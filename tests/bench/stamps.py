# SPDX-License-Identifier: Apache-2.0
"""What the kernel's receive stamps cost, at an equal event rate.

  python3 tests/bench/stamps.py [TPOT] [RUNS]     (default 2ms, 5)

CPU per event falls as a read carries more events, so two proxies
compare only at the same event rate: make bench's throughput section
runs each as fast as it goes, and its pairs differ by up to 15 % in
rate. Here tokentap (timestamps: kernel) and a second tokentap with
timestamps: loop forward the same paced load, 100 streams of 500 tokens
at TPOT (2 ms: about 45,000 events/s, below what one proxy CPU carries),
pinned as make bench pins them, alternating, RUNS runs each; printed:
each run's CPU seconds per million events and events/s, the medians,
and their ratio (the goal: at most 1.03)."""
import os
import statistics
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    tpot = sys.argv[1] if len(sys.argv) > 1 else "2ms"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    b = bench.Bench(types.SimpleNamespace(quick=False, levels=None, runs=1,
                                          shared=False, workers=0))
    args = ["-c", "100", "--ramp", "500ms", "-d", "5s", "--max-tokens", "500",
            "-H", f"X-Mock-TPOT: {tpot}", "--timeout", "120s"]
    res = {"tokentap": [], "tokentap-loop": []}
    b.start()
    b.start_proxies()
    try:
        for i in range(runs):
            order = list(res) if i % 2 == 0 else list(reversed(list(res)))
            for name in order:
                fig, cpu = b.measure(name, args)
                res[name].append((cpu["proxy"] / (fig["output_tokens"] / 1e6),
                                  fig["output_tokens_per_s"]))
    finally:
        b.stop_proxies()
        b.mock.stop()
    med = {}
    for name, v in res.items():
        med[name] = statistics.median(c for c, _ in v)
        print(f"{name:14} " + ", ".join(f"{c:.2f} s/M at {r:,.0f}/s" for c, r in v) +
              f"; median {med[name]:.2f}")
    print(f"kernel / loop: {med['tokentap'] / med['tokentap-loop']:.3f}")


if __name__ == "__main__":
    main()
