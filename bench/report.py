"""Renders bench/results.json as Markdown, so that every figure comes from the file, not by
hand: the per-version tables of BENCHMARKS.md (between its `<!-- figures -->` markers) and
the summary across versions in docs/speed.md (between its `<!-- speed -->` markers).
    python3 bench/report.py            rewrite both
    python3 bench/report.py --print    print them
"""

import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import round_ratios  # noqa: E402


def x(v):
    return f"{v:.2f}×"


def ms(s):
    return f"{s['median']:.0f} ({s['min']:.0f}–{s['max']:.0f})"


def ratio_range(times, a, b, base=None):
    r = round_ratios(times, a, b, base)
    return statistics.median(r), min(r), max(r)


LABELS = {"DEFAULT next_id": "**`bigint DEFAULT next_id(5, 't_seq')`**",
          "DEFAULT next_id(seq)": "**`bigint DEFAULT next_id('t_shard_seq')`**",
          "bigserial": "`bigserial`",
          "bigserial, again": "`bigserial` again (A/A control)"}


def insert_table(ins, title, sizes=False):
    """Throughput of each table, and its ratio to bigserial within each run (median)."""
    out = [f"| {title} | statements/s, median (min–max) | vs bigserial (within-run median) |"
           + (" table | index |" if sizes else ""),
           "|---|---|---|" + ("---|---|" if sizes else "")]
    for name, t in ins["tps"].items():
        ratio = statistics.median(a / b for a, b in zip(t["runs"], ins["tps"]["bigserial"]["runs"]))
        row = f"| {LABELS.get(name, f'`{name}`')} | {t['median']:,.0f} ({t['min']:,.0f}–{t['max']:,.0f}) | {ratio:.3f}× |"
        if sizes:
            size = ins["sizes_after_1M_rows"][name]
            row += f" {size['table_bytes'] / 2**20:.1f} MB | {size['index_bytes'] / 2**20:.1f} MB |"
        out.append(row)
    return out + [""]


def instructions_table(counted, title):
    """Instructions and L1 instruction-cache misses counted by callgrind."""
    base = counted["bigserial"]["instructions"]
    out = [f"| {title}, counted by callgrind (single-user backend) | instructions | vs `bigserial` | L1 instruction-cache misses |",
           "|---|---|---|---|"]
    for name, c in counted.items():
        out.append(f"| {LABELS.get(name, f'`{name}`').strip('*')} | {c['instructions']:,} | "
                   f"{c['instructions'] / base:.3f}× | {c['l1i_misses']:,.0f} |")
    return out + [""]


def per_version(major, res):
    pc, ins, dec, rat = res["per_call"], res["inserts"], res["decoders"], res["ratios"]
    out = [f"### PostgreSQL {res['postgres']}", ""]
    out.append("| 1M calls: `SELECT count(f()) FROM generate_series(1,1000000)` | ms, median (min–max) | per call, net of the empty query, vs `nextval()` (within-round median, min–max) |")
    out.append("|---|---|---|")
    base = "empty generate_series"
    rows = [("empty `generate_series`", base, None, None),
            ("`nextval('s')`", "nextval()", "nextval()", base),
            ("**`next_id(5, 's')`**", "next_id()", "nextval()", base),
            ("`gen_random_uuid()`", "gen_random_uuid()", "nextval()", base)]
    if "uuidv7()" in pc:
        rows.append(("`uuidv7()` (built in)", "uuidv7()", "nextval()", base))
    rows.append(("Instagram's PL/pgSQL `insta5.next_id()`", "Instagram PL/pgSQL", "nextval()", base))
    four_base = "empty, 4 sequences in rotation"
    rows += [("empty, with the 4-way rotation `(arr)[g % 4 + 1]`", four_base, None, None),
             ("`nextval()`, 4 sequences in rotation", "nextval(), 4 sequences in rotation", "nextval(), 4 sequences in rotation", four_base),
             ("**`next_id()`, 4 sequences in rotation**", "next_id(), 4 sequences in rotation", "nextval(), 4 sequences in rotation", four_base)]
    for label, a, b, empty in rows:
        if b is None:
            out.append(f"| {label} | {ms(pc[a])} | — |")
        else:
            med, lo, hi = ratio_range(pc, a, b, empty)
            out.append(f"| {label} | {ms(pc[a])} | {x(med)} ({lo:.2f}–{hi:.2f}) |")
    out.append("")
    out += insert_table(ins, "INSERT, 4 sessions, single-row, `synchronous_commit=off`", sizes=True)
    if "inserts_100_rows" in res:
        out += insert_table(res["inserts_100_rows"], "INSERT … SELECT of 100 rows, 4 sessions, `synchronous_commit=off`")
    for key, title in (("insert_instructions", "per single-row INSERT"),
                       ("insert_instructions_100_rows", "per row of a 100-row INSERT … SELECT")):
        if res.get(key):
            out += instructions_table(res[key], title)
    out.append("| decoding 1M IDs from a table (15 rounds) | ms, median (min–max) |")
    out.append("|---|---|")
    for name, t in dec.items():
        out.append(f"| {name} | {ms(t)} |")
    out.append("")
    sat = res["saturation"]
    out.append(f"Decoders: `id_timestamp` {x(rat['id_timestamp / SQL arithmetic (whole statement)'])} the SQL "
               f"arithmetic, `id_shard` {x(rat['id_shard / SQL arithmetic (whole statement)'])} (whole statement). "
               f"One shard saturated by one session for 10 s: {sat['ids_per_second_overall']:,.0f} IDs/s overall, "
               f"{(sat['ids_per_second_at_the_lead_bound'] or 0):,.0f} at the lead bound "
               f"({x(rat['saturated shard / layout ceiling (at the lead bound)'])} the ceiling), lead at most "
               f"{sat['max_lead_ms']:.0f} ms.")
    out.append("")
    conc = res["concurrency_ids_per_second"]
    out.append("| pgbench, 1,000 IDs per statement, 3 s, IDs/s | " + " | ".join(f"{c} sessions" for c in next(iter(conc.values()))) + " |")
    out.append("|---|" + "---|" * len(next(iter(conc.values()))))
    for name, per in conc.items():
        out.append(f"| {name} | " + " | ".join(f"{v:,.0f}" for v in per.values()) + " |")
    out.append("")
    took = f"measurement {res['measurement_seconds'] / 60:.1f} min"
    if "command_seconds" in res:
        took += f", whole command for this version {res['command_seconds'] / 60:.1f} min"
    out.append(f"({took}.)")
    out.append("")
    return out


def summary(everything):
    out = ["| PostgreSQL | `next_id`/`nextval` per call, 1 sequence | 4 sequences in rotation | single-row INSERT tps vs `bigserial`: `DEFAULT next_id(shard, seq)` | `DEFAULT next_id(seq)` | A/A control (`bigserial` again) | 100-row INSERT: `next_id(shard, seq)` | `next_id(seq)` | A/A | other |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for major, res in everything.items():
        r = res["ratios"]
        other = f"PL/pgSQL {r['PL/pgSQL / next_id (per call, net)']:.1f}× `next_id`; `gen_random_uuid` {x(r['gen_random_uuid / next_id (per call, net)'])}"
        if "uuidv7 / next_id (per call, net)" in r:
            other += f"; `uuidv7` {x(r['uuidv7 / next_id (per call, net)'])} `next_id` per call, INSERT `next_id`/`uuidv7` {x(r['INSERT tps next_id / uuidv7'])}"
        out.append(f"| {res['postgres'].split()[0]} | **{x(r['next_id / nextval (per call, net of the empty baseline)'])}** | "
                   f"**{x(r['next_id / nextval, 4 sequences in rotation (per call, net)'])}** | "
                   f"**{r['INSERT tps next_id / bigserial']:.3f}×** | "
                   f"**{r['INSERT tps next_id(seq) / bigserial']:.3f}×** | "
                   f"{r.get('INSERT tps bigserial (A/A control) / bigserial', float('nan')):.3f}× | "
                   f"**{r.get('INSERT 100 rows tps next_id / bigserial', float('nan')):.3f}×** | "
                   f"**{r.get('INSERT 100 rows tps next_id(seq) / bigserial', float('nan')):.3f}×** | "
                   f"{r.get('INSERT 100 rows tps bigserial (A/A control) / bigserial', float('nan')):.3f}× | {other} |")
    return out


def speed_summary():
    return "\n".join(["<!-- speed: generated by `python3 bench/report.py` -->"]
                     + summary(json.load(open(os.path.join(HERE, "results.json"))))
                     + ["<!-- /speed -->"])


def render():
    everything = json.load(open(os.path.join(HERE, "results.json")))
    lines = ["<!-- figures: generated by `python3 bench/report.py` from bench/results.json -->", "",
             "The summary across versions is in [docs/speed.md](docs/speed.md).", ""]
    for major, res in everything.items():
        lines += per_version(major, res)
    lines.append("<!-- /figures -->")
    return "\n".join(lines)


if __name__ == "__main__":
    text = render()
    if "--print" in sys.argv:
        print(text)
        print(speed_summary())
    else:
        path = os.path.join(HERE, "..", "BENCHMARKS.md")
        doc = open(path).read()
        doc = re.sub(r"<!-- figures:.*?<!-- /figures -->", lambda _: text, doc, flags=re.S)
        open(path, "w").write(doc)
        path = os.path.join(HERE, "..", "docs", "speed.md")
        doc = open(path).read()
        table = speed_summary()
        doc = re.sub(r"<!-- speed:.*?<!-- /speed -->", lambda _: table, doc, flags=re.S)
        open(path, "w").write(doc)
