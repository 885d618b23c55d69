#!/usr/bin/env python3
"""Turn one tests/bench/run scratch directory into the results.

Reads DIR/data.tsv (rep, row, metric, value), DIR/meta (key=value),
DIR/meta.rows (row, id, label, group, kind), DIR/meta.na and DIR/coldstart.
Writes OUT/latest.md, OUT/latest.tsv, OUT/latest.png and timestamped copies
OUT/bench-STAMP.{md,tsv,png}.

Every cell is "value · ratio" where the ratio is taken per repetition against
the same repetition's baseline row (direct (wrk) for TLS rows, direct
(cbench) for CONNECT rows) and the median over repetitions is shown with the
spread [min-max] of the per-repetition ratios. For CPU and memory the
baseline is the origin server itself (the upstream nginx serving the same
requests without a proxy): the ratio says what the proxy costs relative to
the server behind it.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

METRICS = [
    # key, header, unit formatter, higher is better
    ("new", "new TLS conn/s", lambda v: f"{v:,.0f}", True),
    ("ka", "keep-alive req/s", lambda v: f"{v:,.0f}", True),
    ("bulk", "bulk MB/s", lambda v: f"{v:,.0f}", True),
    ("cpu", "CPU µs/req", lambda v: f"{v:.1f}", False),
    ("cpu_conn", "CPU µs/new conn", lambda v: f"{v:.1f}", False),
    ("cpu_bulk", "CPU ms/GiB bulk", lambda v: f"{v:.0f}", False),
    ("hwm", "peak RSS", lambda v: f"{v / 1024:.1f} MiB", False),
    ("idle", "RSS/idle conn", lambda v: f"{v:.2f} KiB", False),
]
# the bar of issue 7 for sandgate with one worker (passthrough and CONNECT)
BAR = {"new": (">=", 0.75), "ka": (">=", 0.80), "bulk": (">=", 0.90)}
BAR_ABS = {"idle": ("<=", 3.0), "cpu": ("<=", 10.0)}
BAR_ROWS = {"sg_tp", "sg_connect", "sg_inspect"}
# interception with one injected header: its own bar (issue 7)
BAR_INSPECT = {"new": (">=", 0.35), "ka": (">=", 0.45), "bulk": (">=", 0.60)}
BAR_INSPECT_ABS = {"idle": ("<=", 40.0)}
# The floor row (tests/bench/floor.c: a relay with no logic) is judged
# against the same bar: where it misses, no relay meets the bar here.
BAR_REF_ROWS = {"floor"}
# chart labels (gnuplot: \n is a line break)
SHORT = {
    "sg_tp": "sandgate\\ntransparent\\n1 worker", "haproxy": "HAProxy\\nSNI",
    "nginx_stream": "nginx stream\\nssl_preread", "sniproxy": "sniproxy", "floor": "floor\\n(bare relay)",
    "sg_tp_auto": "sandgate\\ntransparent\\nworkers auto",
    "sg_connect": "sandgate\\nCONNECT\\n1 worker", "tinyproxy": "tinyproxy\\nCONNECT",
    "squid": "squid\\nCONNECT", "sg_connect_auto": "sandgate\\nCONNECT\\nworkers auto",
    "sg_inspect": "sandgate\\ninspect", "squid_bump": "squid\\nssl_bump",
    "mitmdump": "mitmdump",
}


def load(d):
    meta = {}
    with open(os.path.join(d, "meta")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    rows = []
    with open(os.path.join(d, "meta.rows")) as f:
        for line in f:
            _, rid, label, group, kind = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
            rows.append(dict(id=rid, label=label, group=group, kind=kind))
    na = {}
    if os.path.exists(os.path.join(d, "meta.na")):
        with open(os.path.join(d, "meta.na")) as f:
            for line in f:
                _, rid, why = line.rstrip("\n").split("\t", 2)
                na[rid] = why
    data = defaultdict(dict)     # (row, metric) -> {rep: value}
    errors = defaultdict(list)
    with open(os.path.join(d, "data.tsv")) as f:
        for line in f:
            rep, row, metric, value = line.rstrip("\n").split("\t", 3)
            if metric == "error":
                errors[row].append(f"rep {rep}: {value}")
                continue
            try:
                data[(row, metric)][int(rep)] = float(value)
            except ValueError:
                pass
    cold = ""
    p = os.path.join(d, "coldstart")
    if os.path.exists(p):
        cold = open(p).read().strip()
    return meta, rows, na, data, errors, cold


def baseline_of(row):
    return "direct" if row["kind"] == "tls" else "direct_cb"


def stats(row, metric, data):
    """(median value, median ratio, min ratio, max ratio, n) or None."""
    vals = data.get((row["id"], metric), {})
    if not vals:
        return None
    base = data.get((baseline_of(row), metric), {})
    ratios = [v / base[r] for r, v in vals.items() if base.get(r)]
    med = statistics.median(vals.values())
    if not ratios:
        return (med, None, None, None, len(vals))
    return (med, statistics.median(ratios), min(ratios), max(ratios), len(vals))


def cell(row, metric, fmt, data):
    s = stats(row, metric, data)
    if s is None:
        return "—"
    med, r, lo, hi, n = s
    out = fmt(med)
    if r is None:
        return out
    out += f" · **{r:.2f}x**"
    if n > 1 and hi - lo >= 0.005:
        out += f" [{lo:.2f}–{hi:.2f}]"
    return out


def bar_check(row, data):
    misses, ok = [], []
    inspect = row["id"] == "sg_inspect"
    for m, (op, lim) in (BAR_INSPECT if inspect else BAR).items():
        s = stats(row, m, data)
        if not s or s[1] is None:
            misses.append(f"{m}: no figure")
            continue
        (ok if s[1] >= lim else misses).append(f"{m} {s[1]:.2f}x {op} {lim}")
    for m, (op, lim) in (BAR_INSPECT_ABS if inspect else BAR_ABS).items():
        s = stats(row, m, data)
        if not s:
            misses.append(f"{m}: no figure")
            continue
        (ok if s[0] <= lim else misses).append(f"{m} {s[0]:.1f} {op} {lim}")
    return misses, ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stamp", required=True)
    a = ap.parse_args()
    meta, rows, na, data, errors, cold = load(a.dir)
    os.makedirs(a.out, exist_ok=True)

    dur = meta.get("duration", "?")
    reps_done = meta.get("reps_done", "?")
    L = []
    L.append(f"# sandgate benchmark — {meta.get('date', '?')}")
    L.append("")
    if meta.get("quick") == "1":
        L.append("**Quick run (BENCH_QUICK=1): short durations, one repetition — for developing "
                 "the harness, not for quoting.**")
        L.append("")
    if meta.get("note"):
        L.append(f"**{meta['note']}**")
        L.append("")
    try:
        cores = int(meta.get("host", "").split(",")[0].split()[-2])
        # the load at the start is others' work; at the end it is mostly ours
        busy = float(meta.get("load_start", "0").split()[0]) >= 0.5 * cores
    except (ValueError, IndexError):
        busy = False
    if busy:
        L.append("**Taken on a busy machine** (see the load averages): other work shared the "
                 "cores, so absolute figures and spreads are noisy; ratios within one "
                 "repetition are the figures to read.")
        L.append("")
    L.append(f"- machine: {meta.get('host', '?')}; load average at start {meta.get('load_start', '?')}, "
             f"at end {meta.get('load_end', '?')}; everything (clients, proxy, upstream) on loopback "
             "on the same cores")
    L.append(f"- sandgate {meta.get('sandgate', '?')}; HAProxy {meta.get('haproxy', '?')}, "
             f"nginx {meta.get('nginx', '?')}, sniproxy {meta.get('sniproxy', '?')}, "
             f"tinyproxy {meta.get('tinyproxy', '?')}, squid {meta.get('squid', '?')}, "
             f"mitmproxy {meta.get('mitmproxy', '?')}, "
             f"wrk {meta.get('wrk', '?')}, OpenSSL {meta.get('openssl', '?')}")
    L.append(f"- new TLS conn/s: `wrk -t{meta.get('threads')} -c{meta.get('conns')} -d{dur}s "
             "-H 'Connection: close'` (TLS rows) or `cbench -t2 -c32 -d" + dur +
             "` (CONNECT rows: CONNECT, full TLS handshake, one GET /1k, close); "
             "keep-alive req/s: the same without `Connection: close`; "
             "bulk: curl of a 100 MiB file, median of 3; every handshake is a full one "
             "(no tickets, no session cache)")
    L.append("- CPU µs/req: the proxy's on-CPU time (schedstat of its threads; utime+stime "
             "when threads come and go) over the keep-alive run ÷ requests "
             "(µs/new conn: the same over the new-connection run; ms/GiB: over the bulk "
             "transfers); peak RSS: VmHWM after the "
             "load runs; RSS/idle conn: VmRSS delta with "
             f"{meta.get('idle_n', '?')} idle connections held (handshake + one request each) "
             f"÷ {meta.get('idle_n', '?')}; multi-process peers are summed over their processes")
    L.append(f"- cells: median value · **median ratio to direct** [spread of the per-repetition "
             f"ratios]; {reps_done} of {meta.get('reps', '?')} repetition(s). For CPU and memory, "
             "\"direct\" is the origin server (upstream nginx, 1 worker) serving the same load: "
             "the ratio is what the proxy costs relative to the server behind it "
             "(lower is better). TLS rows divide by direct (wrk), CONNECT rows by direct (cbench).")
    if meta.get("budget_cut"):
        L.append(f"- **time budget reached**: stopped at {meta['budget_cut']}")
    L.append(f"- run time {meta.get('elapsed', '?')} s")
    L.append("")
    hdr = "| | " + " | ".join(h for _, h, _, _ in METRICS) + " | bar (issue 7) |"
    L.append(hdr)
    L.append("|" + "---|" * (len(METRICS) + 2))
    groups = [("baseline", "baseline"), ("passthrough", "passthrough (SNI)"),
              ("connect", "explicit proxy (CONNECT)"), ("interception", "interception")]
    bar_notes = []
    for g, gname in groups:
        L.append(f"| *{gname}* |" + " |" * (len(METRICS) + 1))
        for row in rows:
            if row["group"] != g:
                continue
            if row["id"] in na:
                L.append(f"| {row['label']} | " + " | ".join([na[row["id"]]] * len(METRICS)) + " | |")
                continue
            cells = [cell(row, m, fmt, data) for m, _, fmt, _ in METRICS]
            if errors.get(row["id"]) and not any(data.get((row["id"], m)) for m, *_ in METRICS):
                cells = ["failed: " + "; ".join(errors[row["id"]])] + ["—"] * (len(METRICS) - 1)
            b = ""
            if row["id"] in BAR_ROWS or row["id"] in BAR_REF_ROWS:
                misses, ok = bar_check(row, data)
                b = "meets" if not misses else "misses: " + ", ".join(misses)
                if row["id"] in BAR_REF_ROWS:
                    b = "(reference) " + b
                bar_notes.append((row["label"], misses, ok))
            L.append(f"| {row['label']} | " + " | ".join(cells) + f" | {b} |")
    L.append("")
    # sandgate against the floor, repetition by repetition
    fl = [m for m, *_ in METRICS if data.get(("floor", m))]
    if fl:
        L.append("sandgate against the floor (the same figure of the floor row in the same "
                 "repetition; medians of the per-repetition ratios; for CPU and memory lower is "
                 "better). Only the transparent row: it has the floor's client, path and "
                 "redirect; the CONNECT rows have another client and one more exchange.")
        L.append("")
        for rid in ("sg_tp",):
            parts = []
            for m, h, _, _ in METRICS:
                sv, fv = data.get((rid, m), {}), data.get(("floor", m), {})
                r = [sv[k] / fv[k] for k in sv if fv.get(k)]
                if r:
                    parts.append(f"{h} {statistics.median(r):.2f}")
            row = next((x for x in rows if x["id"] == rid), None)
            if parts and row:
                L.append(f"- {row['label']}: " + ", ".join(parts))
        L.append("")
    # errors and load errors
    notes = []
    for row in rows:
        for m in ("new_err", "ka_err"):
            vals = data.get((row["id"], m), {})
            bad = {r: v for r, v in vals.items() if v > 0}
            if bad:
                notes.append(f"- {row['label']}: {m.split('_')[0]} run had errors "
                             + ", ".join(f"rep {r}: {int(v)}" for r, v in sorted(bad.items())))
        for e in errors.get(row["id"], []):
            notes.append(f"- {row['label']}: {e}")
    if notes:
        L.append("Errors during the run:")
        L.extend(notes)
        L.append("")
    L.append("## adapter cold start")
    L.append("")
    L.append(cold or "n/a (adapters not built)")
    L.append("")
    md = "\n".join(L)

    base = os.path.join(a.out, f"bench-{a.stamp}")
    with open(base + ".md", "w") as f:
        f.write(md)
    shutil.copyfile(os.path.join(a.dir, "data.tsv"), base + ".tsv")

    # the chart: ratios to direct of the three throughput figures
    dat = os.path.join(a.dir, "chart.dat")
    with open(dat, "w") as f:
        for g, _ in groups:
            for row in rows:
                if row["group"] != g or g == "baseline" or row["id"] in na:
                    continue
                vals = []
                for m in ("new", "ka", "bulk"):
                    s = stats(row, m, data)
                    vals.append(f"{s[1]:.3f}" if s and s[1] is not None else "0")
                label = SHORT.get(row["id"], row["label"]).replace('"', "'")
                f.write(f"\"{label}\" " + " ".join(vals) + "\n")
    png = base + ".png"
    title = (f"ratio to direct (median of {reps_done}), {meta.get('date', '')}, "
             f"load average {meta.get('load_start', '?').split()[0]} -> {meta.get('load_end', '?').split()[0]}")
    if meta.get("quick") == "1":
        title += " — QUICK RUN"
    gp = f"""
set terminal pngcairo size 1400,700 font "sans,10" noenhanced
set bmargin 5
set output "{png}"
set title "{title}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside top center horizontal
set yrange [0:1.15]
set grid ytics
set ylabel "x direct (higher is better)"
set xtics nomirror font "sans,9"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5 lc rgb "black"
set arrow from graph 0, first 0.75 to graph 1, first 0.75 nohead dt 3 lw 1 lc rgb "#4472c4"
set label "bar: new conn 0.75" at graph 0.004, first 0.735 left tc rgb "#4472c4" font "sans,8"
set arrow from graph 0, first 0.80 to graph 1, first 0.80 nohead dt 3 lw 1 lc rgb "#ed7d31"
set label "keep-alive 0.80" at graph 0.004, first 0.815 left tc rgb "#ed7d31" font "sans,8"
set arrow from graph 0, first 0.90 to graph 1, first 0.90 nohead dt 3 lw 1 lc rgb "#70ad47"
set label "bulk 0.90" at graph 0.004, first 0.915 left tc rgb "#70ad47" font "sans,8"
plot "{dat}" using 2:xtic(1) title "new TLS conn/s" lc rgb "#4472c4", \\
     "" using 3 title "keep-alive req/s" lc rgb "#ed7d31", \\
     "" using 4 title "bulk MB/s" lc rgb "#70ad47"
"""
    with open(os.path.join(a.dir, "chart.gp"), "w") as f:
        f.write(gp)
    r = subprocess.run(["gnuplot", os.path.join(a.dir, "chart.gp")], capture_output=True, text=True)
    if r.returncode != 0:
        print("report: gnuplot failed: " + r.stderr, file=sys.stderr)
    for ext in (".md", ".tsv", ".png"):
        if os.path.exists(base + ext):
            shutil.copyfile(base + ext, os.path.join(a.out, "latest" + ext))
    return 0


if __name__ == "__main__":
    sys.exit(main())
