# SPDX-License-Identifier: Apache-2.0
"""Arithmetic and presentation of the benchmark figures: medians of runs,
differences and ratios, and the same tables as plain text and Markdown."""
import math
import statistics


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def quantile(sorted_values, q):
    """The value of rank ceil(q * n) (as tokentap's histograms define it)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def medians(runs, keys):
    """{key: median over runs of run[key]} for each key."""
    return {k: median([r.get(k) for r in runs]) for k in keys}


def diff(a, b):
    return None if a is None or b is None else a - b


def ratio(a, b):
    """a / b; None where b is no positive base (an added latency of nginx
    below zero makes no scale)."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


def sane(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


# ---- formatting -------------------------------------------------------------

def num(v, digits=0, sign=False):
    if not sane(v):
        return "-"
    text = f"{v:+,.{digits}f}" if sign else f"{v:,.{digits}f}"
    return text


def times(v):
    return "-" if not sane(v) else f"{v:.2f}x"


class Section:
    """A titled table with notes under it."""

    def __init__(self, title, header, rows, notes=()):
        self.title = title
        self.header = header
        self.rows = rows
        self.notes = list(notes)

    def text(self):
        cols = list(zip(*([self.header] + self.rows))) if self.rows else [
            [h] for h in self.header]
        widths = [max(len(str(c)) for c in col) for col in cols]
        out = [self.title]
        for i, row in enumerate([self.header] + self.rows):
            cells = []
            for j, cell in enumerate(row):
                cell = str(cell)
                # first column left, figures right
                cells.append(cell.ljust(widths[j]) if j == 0 else cell.rjust(widths[j]))
            out.append("  " + "  ".join(cells).rstrip())
            if i == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
        out += ["  " + n for n in self.notes]
        return "\n".join(out)

    def markdown(self):
        # figures right-aligned, words (path, proxy) left
        def is_text(j):
            return all(not str(r[j])[:1].isdigit() and str(r[j])[:1] not in "+-"
                       for r in self.rows)
        align = ["---" if j == 0 or is_text(j) else "---:"
                 for j in range(len(self.header))]
        out = [f"**{self.title}**", "",
               "| " + " | ".join(self.header) + " |",
               "|" + "|".join(align) + "|"]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        if self.notes:
            out.append("")
            out += [n + "  " for n in self.notes]
        return "\n".join(out)
