"""report.py OUTDIR: the benchmark harness's report.

Reads what tools/bench/bench.sh left in OUTDIR/raw (mccl-perf JSON, the
baselines' text tables, the helpers' key=value lines, status.tsv) and writes
OUTDIR/results.txt (one table per case, also printed), OUTDIR/summary.md (the
same tables and the pass/fail of each target) and, for gnuplot, the data
files and scripts OUTDIR/data/case1.gp and case5.gp (-> case1.png,
case5.png).  Standard library only.
"""
import glob
import json
import os
import re
import sys
from statistics import median

SYSNAME = {"mccl": "MCCL", "gloo": "Gloo", "ompi": "OMPI",
           "ompi-yield": "OMPI yield", "tcp": "TCP", "memcpy": "memcpy",
           "mccl-cuda": "MCCL cuda", "mccl-cpu": "MCCL cpu",
           "gloo-cuda": "Gloo cuda", "ddp-mccl": "MCCL DDP",
           "ddp-gloo": "Gloo DDP", "ddp-alone": "one process"}
COLOR = {"mccl": "#9400d3", "gloo": "#009e73", "ompi": "#56b4e9"}


# ---- reading ----

def read_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def read_status(raw):
    """(case, system) -> (state, why); the worst of several lines wins."""
    rank = {"ok": 0, "skipped": 1, "failed": 2}
    st = {}
    for line in read_lines(os.path.join(raw, "status.tsv")):
        f = line.split("\t")
        if len(f) < 3:
            continue
        key, val = (f[0], f[1]), (f[2], f[3] if len(f) > 3 else "")
        if key not in st or rank.get(val[0], 2) > rank.get(st[key][0], 2):
            st[key] = val
    return st


def read_kv(raw, name, prefix):
    """The key=value fields of the first line of raw/name starting prefix."""
    for line in read_lines(os.path.join(raw, name)):
        if line.startswith(prefix + " "):
            return dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
    return None


def json_results(path):
    """The per-size result objects of one mccl-perf -j file, one per line;
    lines cut short (a run that died) are skipped."""
    for line in read_lines(path):
        line = line.strip().lstrip(",").rstrip(",")
        if not line.startswith('{"size"'):
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and "size" in r:
            yield r


def read_mccl(raw, tag):
    """size -> (time_us, busbw) from raw/TAG*.json, out-of-place results;
    from rank 0's text table where the JSON is missing or cut short."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(raw, tag + "*.json"))):
        for r in json_results(path):
            res = r.get("oop") or r.get("ip")
            if res:
                rows[r["size"]] = (res["time_us"], res["busbw"])
    for path in sorted(glob.glob(os.path.join(raw, tag + "*.h0.log"))):
        for line in read_lines(path):
            f = line.split()
            if len(f) >= 13 and not line.startswith("#") and f[0].isdigit():
                size = int(f[0])
                if size not in rows and f[5] != "N/A":
                    rows[size] = (float(f[5]), float(f[7]))
    return rows


def read_wire(raw, name):
    """host -> (bytes, packets) tbf let out, from raw/NAME.before and
    raw/NAME.after (bench.sh's wire_count); None when either is missing."""
    seen = []
    for part in ("before", "after"):
        hosts = {}
        for line in read_lines(os.path.join(raw, f"{name}.{part}")):
            f = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
            try:
                hosts[f["host"]] = (int(f["bytes"]), int(f["pkts"]))
            except (KeyError, ValueError):
                continue
        seen.append(hosts)
    before, after = seen
    if not after or set(before) != set(after):
        return None
    return {h: (after[h][0] - before[h][0], after[h][1] - before[h][1])
            for h in after}


def read_cpu(raw, name):
    """The machine's CPU time between raw/NAME.before and .after: kind
    (user, system, idle, irq, steal) -> share of all of it; None if unread."""
    seen = []
    for part in ("before", "after"):
        c = read_kv(raw, f"{name}.{part}", "cpu")
        try:
            seen.append({k: int(v) for k, v in c.items()})
        except (AttributeError, ValueError):
            return None
    d = {k: seen[1][k] - seen[0].get(k, 0) for k in seen[1]}
    total = sum(d.values())
    return {k: v / total for k, v in d.items()} if total > 0 else None


def read_counts(raw, name, prefix):
    """host -> {key: number} from the lines of raw/NAME.before and
    raw/NAME.after that start with prefix ("PREFIX host=I key=N ...",
    bench.sh lane_count): the two, before and after."""
    seen = []
    for part in ("before", "after"):
        hosts = {}
        for line in read_lines(os.path.join(raw, f"{name}.{part}")):
            words = line.split()
            if not words or words[0] != prefix:
                continue
            f = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            host = f.pop("host", None)
            try:
                hosts[host] = {k: float(v) for k, v in f.items()}
            except ValueError:
                continue
        seen.append(hosts)
    return seen[0], seen[1]


def rate_bytes(rate):
    """tc's rate (e.g. 1gbit, 125mbps) in bytes per second; None if odd."""
    units = [("tbit", 1e12 / 8), ("gbit", 1e9 / 8), ("mbit", 1e6 / 8),
             ("kbit", 1e3 / 8), ("bit", 1 / 8), ("tbps", 1e12),
             ("gbps", 1e9), ("mbps", 1e6), ("kbps", 1e3), ("bps", 1)]
    for u, scale in units:
        if rate.lower().endswith(u):
            try:
                return float(rate[:-len(u)]) * scale
            except ValueError:
                return None
    return None


def read_mccl_both(raw, tag):
    """size -> (out-of-place time_us, in-place time_us) from raw/TAG.json."""
    rows = {}
    for r in json_results(os.path.join(raw, tag + ".json")):
        try:
            rows[r["size"]] = (r["oop"]["time_us"], r["ip"]["time_us"])
        except (KeyError, TypeError):
            continue
    return rows


def read_table(raw, name):
    """size -> (time_us, busbw) from a baseline's nccl-tests style table."""
    rows = {}
    for line in read_lines(os.path.join(raw, name)):
        f = line.split()
        if len(f) == 6 and f[0].isdigit():
            try:
                rows[int(f[0])] = (float(f[2]), float(f[4]))
            except ValueError:
                pass
    return rows


# ---- formatting ----

def hsize(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


def ftime(t):
    return "-" if t is None else (f"{t:.0f}" if t >= 1000 else f"{t:.1f}")


def fbw(b):
    return "-" if b is None else f"{b:.3f}"


def fratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def speedup(data, size, other):
    """MCCL's busbw over other's at size: their time over MCCL's (the
    same thing, but not rounded through busbw)."""
    m = data["mccl"].get(size, (None, None))[0]
    o = data[other].get(size, (None, None))[0]
    return fratio(o, m)


class Table:
    def __init__(self, head):
        self.head = head
        self.rows = []

    def add(self, row):
        self.rows.append([str(c) for c in row])

    def text(self):
        w = [max(len(r[i]) for r in [self.head] + self.rows)
             for i in range(len(self.head))]
        out = []
        for r in [self.head] + self.rows:
            out.append("  ".join(c.rjust(w[i]) for i, c in enumerate(r)))
            if r is self.head:
                out.append("  ".join("-" * x for x in w))
        return "\n".join(out)

    def markdown(self):
        out = ["| " + " | ".join(self.head) + " |",
               "|" + "|".join("---:" for _ in self.head) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(out)


class Report:
    def __init__(self, out):
        self.out = out
        self.raw = os.path.join(out, "raw")
        self.data = os.path.join(out, "data")
        self.status = read_status(self.raw)
        self.meta = {}
        for line in read_lines(os.path.join(self.raw, "meta.txt")):
            if "=" in line:
                k, v = line.split("=", 1)
                self.meta[k] = v
        self.cases = self.meta.get("cases", "").split()
        self.text = []          # results.txt
        self.md = []            # summary.md, per case
        self.verdicts = []      # (case, target, verdict)

    def state(self, case, system):
        s = self.status.get((case, system))
        if s is None:
            s = self.status.get((case, "all"), ("skipped", "not run"))
        return s

    def missing(self, case, system):
        """Why a system has no result in a case ('' if it has one)."""
        state, why = self.state(case, system)
        name = SYSNAME.get(system, system)
        return f"{name} {state}" + (f" ({why})" if why else "")

    def emit(self, case, title, tables, lines):
        lines = lines + self.cpu_line(f"case{case}.cpu", "the whole case")
        self.text.append(f"== case {case}: {title}")
        self.md.append(f"## Case {case}: {title}\n")
        for t in tables:
            self.text.append(t.text())
            self.md.append(t.markdown() + "\n")
        for l in lines:
            self.text.append(l)
            self.md.append(f"- {l}")
        self.text.append("")
        self.md.append("")

    def verdict(self, case, target, checks, mccl_state):
        """checks: [(description, ok or None when not measurable)]."""
        if mccl_state[0] != "ok":
            v = ("FAIL" if mccl_state[0] == "failed" else "SKIPPED") + \
                f" (MCCL {mccl_state[0]}" + \
                (f": {mccl_state[1]})" if mccl_state[1] else ")")
        else:
            done = [c for c in checks if c[1] is not None]
            if not done:
                v = "INCOMPLETE (nothing to compare with)"
            else:
                v = "PASS" if all(ok for _, ok in done) else "FAIL"
            v += ": " + "; ".join(
                f"{d} {'ok' if ok else 'NO' if ok is not None else 'n/a'}"
                for d, ok in checks)
        self.verdicts.append((case, target, v))
        return v

    # ---- the cases ----

    def bw_table(self, sizes, systems, data, ratio_to):
        head = ["size"]
        for s in systems:
            n = SYSNAME[s]
            head += [f"{n} us", f"{n} GB/s"]
        head += [f"MCCL/{SYSNAME[s]}" for s in ratio_to]
        t = Table(head)
        for size in sizes:
            row = [hsize(size)]
            for s in systems:
                tb = data[s].get(size, (None, None))
                row += [ftime(tb[0]), fbw(tb[1])]
            row += [speedup(data, size, s) for s in ratio_to]
            t.add(row)
        return t

    def present(self, case, systems, data):
        lines = ["MCCL/X: X's time over MCCL's (= MCCL's busbw over X's); "
                 "> 1: MCCL faster"]
        for s in systems:
            if not data[s]:
                lines.append("no result: " + self.missing(case, s))
        return lines

    def case1(self):
        data = {"mccl": read_mccl(self.raw, "case1.mccl"),
                "gloo": read_table(self.raw, "case1.gloo.log"),
                "ompi": read_table(self.raw, "case1.ompi.log")}
        link, lname, measures = self.best_link()
        systems = ["mccl", "gloo", "ompi"]
        sizes = sorted(data["mccl"]) or sorted(set(data["gloo"]) |
                                                set(data["ompi"]))
        t = self.bw_table(sizes, systems, data, ["gloo", "ompi"])
        lines = self.present("1", systems, data)
        lk = float(link["GB_s"]) if link else None
        if link:
            lines.append(f"link, measured (one TCP stream h1->h0, "
                         f"{link['seconds']} s, {measures}): "
                         f"{float(link['gbit_s']):.3f} Gbit/s = "
                         f"{lk:.4f} GB/s")
        else:
            lines.append("link not measured: " + self.missing("link", "tcp"))
        multi = self.multi_link()
        if multi:
            lines.append(f"unshaped: TCP with {multi['streams']} connections "
                         f"(MCCL's lanes) h1->h0: {float(multi['GB_s']):.4f} "
                         "GB/s, the link of the target")
        big = max(sizes) if sizes else None
        zc = read_kv(self.raw, "link-zerocopy.log", "bw")
        if zc and link:
            lines.append(
                f"MSG_ZEROCOPY, one stream h1->h0: {float(zc['GB_s']):.4f} "
                f"GB/s, {float(zc['GB_s']) / lk:.2f} x the copying "
                f"stream; the kernel copied {zc.get('copied', '?')} of its "
                f"{zc.get('zerocopy_sends', '?')} sends all the same")
        ring = self.ring_link()
        lines += self.ring_lines(ring, data["mccl"].get(big, (None, None))[1]
                                 if big else None)
        lines += self.case1_wire(link, lname, big)
        lines += self.case1_bf16(data["mccl"], big)
        m = data["mccl"].get(big, (None, None))[1] if big else None
        g = data["gloo"].get(big, (None, None))[1] if big else None
        frac, lk = (0.8, float(multi["GB_s"])) if multi else \
            (link_share(self.meta.get("rate")), lk)
        checks = [(f"busbw {fbw(m)} >= {frac} x link {fbw(lk)}",
                   None if m is None or lk is None else m >= frac * lk),
                  (f">= Gloo {fbw(g)}",
                   None if m is None or g is None else m >= g)]
        v = self.verdict("1", f"busbw at {hsize(big) if big else '?'} "
                         f">= {frac} x link and >= Gloo", checks,
                         self.state("1", "mccl"))
        lines.append(f"target: {v}")
        self.emit("1", "4 hosts x 1 rank, allreduce float32 sum, "
                  f"{self.meta.get('rate', '?')} links", [t], lines)
        self.plot("case1", "Case 1: 4 hosts x 1 rank, "
                  f"{self.meta.get('rate', '?')} links", data, systems, lk)

    def case1_bf16(self, fp32, big):
        """The same sizes with float32 sent as bfloat16 (MCCL_WIRE_DTYPE),
        against float32 on the wire, in the same run."""
        bf16 = read_mccl(self.raw, "case1.bf16")
        if not bf16:
            return ["bfloat16 wire: no result: " +
                    self.missing("1", "mccl-bf16")]
        out = ["bfloat16 wire (MCCL_WIRE_DTYPE=bf16), time over float32's: "
               + ", ".join(f"{hsize(z)} {fratio(bf16[z][0], fp32[z][0])}"
                           for z in sorted(bf16) if z in fp32)]
        conv = [" ".join(f.split()[:-3]) + " " + f.split()[-1] + " x"
                for f in read_lines(os.path.join(self.raw, "wirebw.log"))
                if f.startswith("  wire_")]
        if conv:
            out.append("its conversion, one thread, memory traffic over "
                       "memcpy's (tools/bench/wirebw.c): " + ", ".join(conv))
        t = bf16.get(big, (None, None))[0]
        f = fp32.get(big, (None, None))[0]
        ok = None if t is None or f is None else t <= 0.55 * f
        self.verdicts.append(("1w", f"bfloat16 wire: time at {hsize(big)} "
                              "<= 0.55 x float32's",
                              ("PASS" if ok else "FAIL" if ok is not None
                               else "INCOMPLETE") +
                              f": {fratio(t, f)} x"))
        return out

    def multi_link(self):
        """Unshaped (-r none): TCP over as many connections as MCCL's
        lanes, between the same two hosts; None when not measured."""
        return read_kv(self.raw, "link-multi.log", "bw") or None

    def ring_link(self):
        """Raw TCP in case 1's pattern, every host sending to both
        neighbours at once (bench.sh measure_ring): a dict with each
        host's egress in GB/s ("hosts"), their mean and least, the
        connections per host, and the share of the time each host's link
        was sending; None when not measured."""
        eg, streams, secs = [], 0, []
        for h in range(4):
            got = [read_kv(self.raw, f"link-ring.h{h}.{side}.log", "bw")
                   for side in ("right", "left")]
            got = [g for g in got if g]
            if not got:
                return None
            eg.append(sum(float(g["GB_s"]) for g in got))
            streams = sum(int(g["streams"]) for g in got)
            secs += [float(g["seconds"]) for g in got]
        rate = rate_bytes(self.meta.get("rate", ""))
        wire = read_wire(self.raw, "link-ring.wire")
        busy = ([wire[h][0] / (rate * max(secs)) for h in sorted(wire)]
                if rate and wire else None)
        return {"hosts": eg, "mean": sum(eg) / len(eg), "least": min(eg),
                "streams": streams, "busy": busy}

    @staticmethod
    def ring_lines(ring, busbw):
        """The ring measure in words, and MCCL's busbw over it: a ring
        allreduce's busbw is what each host sends per second."""
        if not ring:
            return ["all links at once: not measured"]
        conns = ("1 connection out of each host, to its right"
                 if ring["streams"] == 1 else
                 f"{ring['streams']} connections out of each host, half "
                 "each way")
        line = (f"all links at once (raw TCP in the ring's pattern, "
                f"{conns}): each host sent {ring['mean']:.4f} GB/s "
                f"(least {ring['least']:.4f}; hosts "
                f"{', '.join(f'{g:.3f}' for g in ring['hosts'])})")
        if ring["busy"]:
            line += (", its link sending "
                     f"{sum(ring['busy']) / len(ring['busy']):.1%} of the "
                     "time")
        out = [line]
        if busbw:
            out.append(f"MCCL's busbw over it: {busbw / ring['mean']:.3f}")
        return out

    def case1_summary(self):
        """Case 1 of this run in one row: the rate, the link (the
        multi-connection one unshaped), each system's busbw at the largest
        size and its fraction of the link, and MCCL's least busbw from
        1 MiB up over its busbw at the largest size (a dip shows there)."""
        mccl = read_mccl(self.raw, "case1.mccl")
        base = {"gloo": read_table(self.raw, "case1.gloo.log"),
                "ompi": read_table(self.raw, "case1.ompi.log")}
        link = self.multi_link() or self.best_link()[0]
        lk = float(link["GB_s"]) if link else None
        big = max(mccl) if mccl else None
        m = mccl[big][1] if big else None
        row = [self.meta.get("rate", "?"), fbw(lk),
               link.get("streams", "1") if link else "-", fbw(m),
               fratio(m, lk)]
        least = [mccl[z][1] for z in mccl if z >= 1 << 20 and mccl[z][1]]
        row.append(fratio(min(least), m) if least and m else "-")
        ring = self.ring_link()
        row += [fbw(ring["mean"]) if ring else "-",
                fratio(m, ring["mean"]) if ring else "-"]
        for s in ("gloo", "ompi"):
            b = base[s].get(big, (None, None))[1] if big else None
            row += [fbw(b), fratio(b, lk)]
        return row

    def best_link(self):
        """The faster of the link measures before and after MCCL's runs
        (steal slows tbf as well, so the higher is nearer the link), its
        name, and both for the record."""
        got = []
        for name, when in (("link", "before"), ("link-after", "after")):
            kv = read_kv(self.raw, f"{name}.log", "bw")
            if kv:
                got.append((float(kv["GB_s"]), name, when, kv))
        if not got:
            return None, None, ""
        best = max(got, key=lambda g: g[0])
        both = ", ".join(f"{when} MCCL {g:.4f} GB/s" for g, _, when, _ in got)
        return best[3], best[1], f"the higher of {both}" \
            if len(got) > 1 else f"{got[0][2]} MCCL only"

    def case1_wire(self, link, lname, size):
        """Where the largest size's busbw goes, from tbf's counters: how
        much of the time each link sent, and how many bytes it sent per
        byte of payload, each against the single-stream link measure."""
        rate = rate_bytes(self.meta.get("rate", ""))
        lw = read_wire(self.raw, f"{lname}.wire")
        mw = read_wire(self.raw, "case1.wire")
        runs = read_mccl_both(self.raw, "case1.wire")
        iters = int(self.meta.get("wire_iters",
                                  self.meta.get("big_iters", "0")))
        if not (rate and link and lw and "1" in lw and mw and size in runs
                and iters):
            return ["wire: not measured (needs the link measure, the wire "
                    "run and tc's counters)"]
        n = len(mw)
        op_s = iters * sum(runs[size]) / 1e6     # every timed op, in and out
        payload = size * 2 * (n - 1) / n        # ring: what each host sends
        ops = 2 * iters
        over = [mw[h][0] / (payload * ops) for h in sorted(mw)]
        busy = [mw[h][0] / (rate * op_s) for h in sorted(mw)]
        lbytes, lsec = int(link["bytes"]), float(link["seconds"])
        lover = lw["1"][0] / lbytes
        lbusy = lw["1"][0] / (rate * lsec)
        mover, mbusy = sum(over) / n, sum(busy) / n
        got = payload * ops / op_s / (lbytes / lsec)
        return [
            f"wire (tbf's counters on each host's eth0, {ops} ops of "
            f"{hsize(size)} in {op_s:.2f} s): each host sent "
            f"{mover:.4f} bytes per byte of payload (headers and ACKs) "
            f"and its link was sending {mbusy:.1%} of the time "
            f"(hosts: {', '.join(f'{b:.1%}' for b in busy)})",
            f"the link measure's stream: {lover:.4f} bytes per byte, "
            f"sending {lbusy:.1%} of its {lsec:.2f} s",
            f"so busbw/link {got:.3f} = link time {mbusy / lbusy:.3f} x "
            f"wire bytes {lover / mover:.3f}"] + \
            self.lane_lines() + self.algo_lines() + \
            self.cpu_line("case1.wire", "the wire run")

    def lane_deltas(self, name, keys):
        """Each host's change in keys of the daemons' lane counters around
        a run (bench.sh lane_count: raw/NAME.before and .after), in host
        order; None where they are missing."""
        before, after = read_counts(self.raw, name, "lanes")
        if not after or set(before) != set(after):
            return None
        try:
            return [{k: after[h][k] - before[h][k] for k in keys}
                    for h in sorted(after)]
        except KeyError:
            return None

    def lane_lines(self):
        """What the wire run's lanes spent waiting for each op's last
        lane, from the daemons' counters around it: lanes that share the
        links unevenly."""
        d = self.lane_deltas("case1.lanes", ("seconds", "wait"))
        if d is None:
            return []
        share = [h["wait"] / h["seconds"] if h["seconds"] > 0 else None
                 for h in d]
        if any(v is None for v in share):
            return ["lanes: the wire run ran none on threads of their own"]
        return [f"lanes: of their time in the wire run, each host's lanes "
                f"spent {sum(share) / len(share):.1%} waiting for the op's "
                f"last lane (hosts: {', '.join(f'{v:.1%}' for v in share)})"]

    def overlap_lines(self, name, what):
        """How many of a run's allreduces each host's daemon overlapped at
        their ends with the next (queued ones: a CUDA tensor's parts), and
        its lanes' time, from the counters around it."""
        d = self.lane_deltas(name, ("allreduces", "overlapped", "seconds"))
        if d is None:
            return []
        per = [f"{h['overlapped']:.0f} of {h['allreduces']:.0f} "
               f"(lanes {h['seconds']:.2f} s)" for h in d]
        return [f"{what}: allreduces overlapped at their ends with the "
                f"next, per host: {', '.join(per)}"]

    def algo_lines(self):
        """The wire run's allreduces by the algorithm AUTO ran between
        nodes, and the link cost the jobs of the large sizes formed with
        (bench.sh cost_snapshot): what AUTO chose from."""
        before, after = read_counts(self.raw, "case1.lanes", "algos")
        ran = {}
        for h, algos in after.items():
            for k, v in algos.items():
                ran[k] = ran.get(k, 0) + v - before.get(h, {}).get(k, 0)
        out = []
        if any(v > 0 for v in ran.values()):
            out.append("algorithms of the wire run's allreduces, all hosts: "
                       + ", ".join(f"{k} {v:.0f}" for k, v in
                                   sorted(ran.items()) if v > 0))
        for tag, what in (("case1.big", "4 MiB up"), ("case1.wire",
                                                       "the wire run")):
            line = read_lines(os.path.join(self.raw, f"{tag}.cost"))
            if line:
                out.append(f"link cost the jobs of {what} formed with "
                           f"(worst of the daemons'): {line[0].strip()}")
        return out

    def cpu_line(self, name, during):
        """The machine's CPU use during a run: steal is time the hypervisor
        gave this VM's CPUs to others, the noise of a shared machine."""
        cpu = read_cpu(self.raw, name)
        if not cpu:
            return []
        kinds = ", ".join(f"{k} {cpu[k]:.0%}" for k in
                          ("user", "system", "irq", "steal", "idle") if k in cpu)
        return [f"CPU of the machine during {during}: {kinds}"]

    def case2(self):
        data = {"mccl": read_mccl(self.raw, "case2.mccl"),
                "gloo": read_table(self.raw, "case2.gloo.log"),
                "ompi": read_table(self.raw, "case2.ompi.log")}
        systems = ["mccl", "gloo", "ompi"]
        sizes = sorted(set(data["mccl"]) | set(data["gloo"]) |
                       set(data["ompi"]))
        t = self.bw_table(sizes, systems, data, ["gloo", "ompi"])
        lines = self.present("2", systems, data)
        big = max(sizes) if sizes else None
        m = data["mccl"].get(big, (None, None))[1] if big else None
        others = [data[s].get(big, (None, None))[1] for s in ("gloo", "ompi")]
        others = [o for o in others if o is not None]
        best = max(others) if others else None
        checks = [(f"busbw {fbw(m)} >= 1.4 x max(OMPI, Gloo) {fbw(best)}",
                   None if m is None or best is None else m >= 1.4 * best)]
        v = self.verdict("2", "busbw >= 1.4 x max(OMPI, Gloo)", checks,
                         self.state("2", "mccl"))
        lines.append(f"target: {v}")
        self.emit("2", "2 hosts x 2 ranks (4 ranks), allreduce float32 sum, "
                  f"{self.meta.get('rate', '?')} links", [t], lines)

    def case6(self):
        """DDP training throughput: rank 0's "ddp ..." line of each run."""
        runs = {s: read_kv(self.raw, f"case6.{s}.log", "ddp")
                for s in ("alone", "mccl", "gloo", "bf16", "hook", "nosync")}
        sps = {s: float(kv["samples_per_s"]) if kv else None
               for s, kv in runs.items()}
        t = Table(["system", "ranks", "samples/s", "x alone", "x gloo"])
        for s, label in (("alone", "one process"), ("mccl", "MCCL"),
                         ("bf16", "MCCL, bfloat16 wire"),
                         ("hook", "MCCL, torch's bf16_compress_hook"),
                         ("nosync", "MCCL, no communication (no_sync)"),
                         ("gloo", "Gloo")):
            kv = runs[s]
            if kv is None:
                continue
            t.add([label, kv.get("ranks", "?"), f"{sps[s]:.1f}",
                   fratio(sps[s], sps["alone"]),
                   fratio(sps[s], sps["gloo"]) if s in ("mccl", "bf16",
                                                         "hook")
                   else "-"])
        lines = [f"no result: {s}: " + self.missing("6", s)
                 for s in ("alone", "mccl", "gloo") if runs[s] is None]
        kv = runs["mccl"] or runs["gloo"] or runs["alone"] or {}
        lines.append(f"model: {kv.get('params', '?')} parameters, global "
                     f"batch {kv.get('batch', '?')}, {kv.get('steps', '?')} "
                     "timed steps, one torch thread a rank")
        m, g = sps["mccl"], sps["gloo"]
        checks = [(f"MCCL {m} samples/s >= 1.3 x Gloo {g}",
                   None if m is None or g is None else m >= 1.3 * g)]
        v = self.verdict("6", "DDP samples/s >= 1.3 x Gloo", checks,
                         self.state("6", "mccl"))
        lines.append(f"target: {v}")
        q = sps["nosync"]
        if q is not None and m is not None:
            lines.append(f"communication left visible: the same ranks "
                         f"without it (no_sync) train {fratio(q, m)} x as "
                         f"fast, so {1 - m / q:.0%} of MCCL's step is "
                         "communication that backward did not hide")
        b, h = sps["bf16"], sps["hook"]
        if b is not None and m is not None:
            lines.append(f"bfloat16 wire (MCCL_WIRE_DTYPE=bf16): "
                         f"{fratio(b, m)} x float32's samples/s" +
                         (f", {fratio(b, h)} x bf16_compress_hook's"
                          if h is not None else ""))
        self.emit("6", "DDP training, 2 hosts x 2 ranks, "
                  f"{self.meta.get('rate', '?')} links", [t], lines)

    def case8(self):
        """GPU tensors: allreduce of CUDA tensors against the CPU path and
        gloo on CUDA, and DDP on CUDA."""
        data = {s: read_table(self.raw, f"case8.{s}.log")
                for s in ("mccl-cuda", "mccl-cpu", "gloo-cuda")}
        sizes = sorted(set().union(*data.values()))
        t = Table(["size"] + [f"{SYSNAME[s]} {u}" for s in data
                              for u in ("us", "GB/s")] +
                  ["cuda/cpu", "MCCL/Gloo cuda"])
        for size in sizes:
            row = [hsize(size)]
            for s in data:
                tb = data[s].get(size, (None, None))
                row += [ftime(tb[0]), fbw(tb[1])]
            bw = {s: data[s].get(size, (None, None))[1] for s in data}
            row += [fratio(bw["mccl-cuda"], bw["mccl-cpu"]),
                    fratio(bw["mccl-cuda"], bw["gloo-cuda"])]
            t.add(row)
        lines = ["cuda/cpu: MCCL's busbw with CUDA tensors over its busbw "
                 "with CPU tensors; MCCL/Gloo cuda: the same over Gloo's, "
                 "both with CUDA tensors; every rank on GPU 0"]
        lines += ["no result: " + self.missing("8", s)
                  for s in data if not data[s]]
        lines += self.overlap_lines("case8.lanes", "the CUDA run")
        runs = {s: read_kv(self.raw, f"case8.{s}.log", "ddp")
                for s in ("ddp-alone", "ddp-mccl", "ddp-gloo")}
        sps = {s: float(kv["samples_per_s"]) if kv else None
               for s, kv in runs.items()}
        d = Table(["system", "ranks", "samples/s", "x alone", "x gloo"])
        for s in runs:
            if runs[s] is not None:
                d.add([SYSNAME[s], runs[s].get("ranks", "?"),
                       f"{sps[s]:.1f}", fratio(sps[s], sps["ddp-alone"]),
                       fratio(sps[s], sps["ddp-gloo"])
                       if s == "ddp-mccl" else "-"])
        lines += ["no result: " + self.missing("8", s)
                  for s in runs if runs[s] is None]
        big = [z for z in sizes if z >= 64 << 20]
        cu, cp, gc = (data[s] for s in ("mccl-cuda", "mccl-cpu",
                                        "gloo-cuda"))

        def ratio_at(a, b, z):
            x, y = a.get(z, (None, None))[1], b.get(z, (None, None))[1]
            return None if x is None or y is None else x / y

        vs_cpu = [ratio_at(cu, cp, z) for z in big]
        vs_gloo = [ratio_at(cu, gc, z) for z in big]
        m, g = sps["ddp-mccl"], sps["ddp-gloo"]
        checks = [("cuda busbw >= 0.9 x cpu from 64 MiB (least "
                   f"{min(vs_cpu):.2f})" if None not in vs_cpu and vs_cpu
                   else "cuda busbw >= 0.9 x cpu from 64 MiB",
                   None if None in vs_cpu or not vs_cpu else
                   min(vs_cpu) >= 0.9),
                  ("cuda busbw >= 1.5 x Gloo cuda from 64 MiB (least "
                   f"{min(vs_gloo):.2f})" if None not in vs_gloo and vs_gloo
                   else "cuda busbw >= 1.5 x Gloo cuda from 64 MiB",
                   None if None in vs_gloo or not vs_gloo else
                   min(vs_gloo) >= 1.5),
                  (f"DDP {m} samples/s >= 1.3 x Gloo {g}",
                   None if m is None or g is None else m >= 1.3 * g)]
        v = self.verdict("8", "CUDA: busbw >= 0.9 x CPU path and >= 1.5 x "
                         "Gloo from 64 MiB; DDP >= 1.3 x Gloo", checks,
                         self.state("8", "mccl-cuda"))
        lines.append(f"target: {v}")
        self.emit("8", "GPU tensors, 2 hosts x 2 ranks, "
                  f"{self.meta.get('rate', '?')} links", [t, d], lines)

    def cpus(self):
        """The machine's CPU count, from meta.txt's host line."""
        m = re.search(r"(\d+) cpus", self.meta.get("host", ""))
        return int(m.group(1)) if m else None

    def lat_table(self, case, systems):
        """Latency case: a table of every system's times, MCCL's median,
        and the lines saying which system has no result."""
        lat = {s: read_kv(self.raw, f"case{case}.{s}.log", "lat")
               for s in systems}
        t = Table(["system", "median us", "p99 us", "mean us", "min us",
                   "median MCCL/system"])
        m = float(lat["mccl"]["median_us"]) if lat["mccl"] else None
        lines = []
        for s in systems:
            d = lat[s]
            if d is None:
                t.add([SYSNAME[s], "-", "-", "-", "-", "-"])
                lines.append("no result: " + self.missing(case, s))
                continue
            med = float(d["median_us"])
            t.add([SYSNAME[s], f"{med:.1f}", f"{float(d['p99_us']):.1f}",
                   f"{float(d['mean_us']):.1f}", f"{float(d['min_us']):.1f}",
                   fratio(m, med)])
        med = {s: float(lat[s]["median_us"]) if lat[s] else None
               for s in systems}
        return t, med, lines

    def case3(self):
        systems = ["mccl", "ompi", "ompi-yield", "gloo"]
        t, med, lines = self.lat_table("3", systems)
        m = med["mccl"]
        tcp = read_kv(self.raw, "case3.tcp.log", "pingpong")
        oneway = float(tcp["oneway_median_us"]) if tcp else None
        if tcp:
            t.add(["TCP one-way", tcp["oneway_median_us"],
                   tcp["oneway_p99_us"], "-", "-", fratio(m, oneway)])
            lines.append(f"TCP one-way latency h1<->h0 = round trip / 2 over "
                         f"{tcp['n']} {tcp['bytes']}-byte ping-pongs; "
                         f"round trip median {tcp['rtt_median_us']} us")
        else:
            lines.append("no TCP ping-pong: " + self.missing("3", "tcp"))
        lines.append("every time is per iteration, the slowest rank's; "
                     "ratio < 1: MCCL faster")
        # 4 hosts: recursive doubling's 2 rounds, each a one-way trip.
        bound = 2 * oneway if oneway else None
        ompi = [med[s] for s in ("ompi", "ompi-yield") if med[s]]
        best = min(ompi) if ompi else None
        checks = [(f"median {ftime(m)} us <= 1.5 x wire bound (2 rounds x "
                   f"one-way) {ftime(bound)} us",
                   None if m is None or bound is None else m <= 1.5 * bound),
                  (f"median <= best Open MPI {ftime(best)} us",
                   None if m is None or best is None else m <= best)]
        v = self.verdict("3", "median <= 1.5 x wire bound and <= Open MPI",
                         checks, self.state("3", "mccl"))
        lines.append(f"target: {v}")
        self.emit("3", "4 hosts x 1 rank, 8-byte allreduce latency", [t],
                  lines)

    def case7(self):
        systems = ["mccl", "ompi", "ompi-yield"]
        t, med, lines = self.lat_table("7", systems)
        m = med["mccl"]
        lines.append("one host, no network: Open MPI over its shared-memory "
                     "transport, MCCL through one daemon; every time is per "
                     "iteration, the slowest rank's")
        ompi = [med[s] for s in ("ompi", "ompi-yield") if med[s]]
        best = min(ompi) if ompi else None
        checks = [(f"median {ftime(m)} us <= 2 x best Open MPI shm "
                   f"{ftime(best)} us",
                   None if m is None or best is None else m <= 2 * best)]
        v = self.verdict("7", "median <= 2 x Open MPI shared memory", checks,
                         self.state("7", "mccl"))
        lines.append(f"target: {v}")
        self.emit("7", "1 host x 8 ranks, 8-byte allreduce latency", [t],
                  lines)

    # ---- case 9: N hosts ----

    def scale_counts(self):
        """The host counts case 9 ran, from its files."""
        found = set()
        for path in glob.glob(os.path.join(self.raw, "case9.n*.*")):
            m = re.match(r"case9\.n(\d+)\.", os.path.basename(path))
            if m:
                found.add(int(m.group(1)))
        return sorted(found)

    def read_model(self, tag):
        """size -> {algo: predicted us, "auto": choice}, and the cost line."""
        model, cost = {}, ""
        for line in read_lines(os.path.join(self.raw, tag + ".model")):
            f = line.split()
            if line.startswith("#"):
                cost = line[1:].strip()
            elif len(f) == 3:
                model.setdefault(int(f[0]), {})[f[1]] = float(f[2])
            elif len(f) == 2 and f[1].startswith("auto:"):
                model.setdefault(int(f[0]), {})["auto"] = f[1][5:]
        return model, cost

    def start_seconds(self, pattern):
        """A job's start: the last rank's T0 to the last rank's T1 over
        the "# start RANK T0 T1" lines of its logs; None without all."""
        t0, t1 = {}, {}
        for path in glob.glob(os.path.join(self.raw, pattern)):
            for line in read_lines(path):
                f = line.split()
                if len(f) == 5 and f[:2] == ["#", "start"]:
                    t0[f[2]], t1[f[2]] = float(f[3]), float(f[4])
        if not t0:
            return None, 0
        return max(t1.values()) - max(t0.values()), len(t0)

    def daemon_summary(self, tag):
        rows = [dict(w.split("=", 1) for w in l.split()[2:])
                for l in read_lines(os.path.join(self.raw, tag + ".daemons"))
                if l.startswith("daemon ")]
        if not rows:
            return None

        def span(k, fmt):
            v = [float(r[k]) for r in rows if r.get(k, "") != ""]
            return f"{fmt(min(v))}-{fmt(max(v))}" if v else "-"
        return (f"{len(rows)} daemons: RSS {span('rss_kb', lambda x: f'{x / 1024:.1f}')} MB, "
                f"{span('fds', lambda x: f'{x:.0f}')} descriptors "
                f"({span('sockets', lambda x: f'{x:.0f}')} sockets), CPU "
                f"{span('cpu_pct', lambda x: f'{x:.2f}')} % of a core")

    def case9_one(self, n):
        tag = f"case9.n{n}"
        auto = read_mccl(self.raw, tag + ".auto")	# .auto-big too
        ompi = read_table(self.raw, tag + ".ompi.log")
        model, cost = self.read_model(tag + ".auto")
        model.update(self.read_model(tag + ".auto-big")[0])
        sizes = sorted(auto) or sorted(ompi)
        t = Table(["size", "MCCL us", "AUTO ran", "OMPI us", "MCCL/OMPI"])
        worse = []
        for s in sizes:
            m = auto.get(s, (None, None))[0]
            o = ompi.get(s, (None, None))[0]
            t.add([hsize(s), ftime(m), model.get(s, {}).get("auto", "-"),
                   ftime(o), fratio(o, m)])
            if m is not None and o is not None and m > o:
                worse.append(hsize(s))
        algos = ["ring", "doubling", "rabenseifner", "direct"]
        meas = {a: read_mccl(self.raw, f"{tag}.{a}") for a in algos}
        preds = {a: self.read_model(f"{tag}.{a}")[0] for a in algos}
        algos = [a for a in algos if meas[a]]
        msizes = sorted(set().union(*[set(meas[a]) for a in algos])) \
            if algos else []
        mt = Table(["size"] + [f"{a} us (model)" for a in algos])
        for s in msizes:
            mt.add([hsize(s)] + [
                f"{ftime(meas[a].get(s, (None,))[0])} "
                f"({ftime(preds[a].get(s, {}).get(a))})" for a in algos])
        lines = ["MCCL/OMPI: Open MPI's time over MCCL's; > 1: MCCL faster. "
                 "AUTO ran: what the cost model chose from the job's link "
                 "cost (" + (cost or "no snapshot") + ")"]
        if not auto:
            lines.append("no MCCL result: " + self.missing(f"9.n{n}", "mccl"))
        if not ompi:
            lines.append("no Open MPI result: " +
                         self.missing(f"9.n{n}", "ompi"))
        form = read_kv(self.raw, tag + ".formation", "formation")
        if form:
            lines.append(f"{n} daemons up and meshed in "
                         f"{form.get('seconds', '?')} s")
        starts = {}
        for sys_, runs in (("MCCL (torch, mccl)", f"{tag}.mccl-start"),
                           ("Gloo", f"{tag}.gloo-start"),
                           ("Open MPI", None)):
            if runs is None:
                pats = [f"{tag}.ompi-start.log"]
            else:
                pats = sorted(os.path.basename(p)[:-len(".r0.log")] +
                              ".r*.log" for p in glob.glob(os.path.join(
                                  self.raw, f"{runs}.*.r0.log")))
            got = [self.start_seconds(p) for p in pats]
            secs = sorted(sec for sec, ranks in got if ranks == n)
            starts[sys_] = median(secs) if secs and len(secs) == len(got) \
                else None
            if starts[sys_] is None:
                shown = "incomplete (" + ", ".join(
                    f"{ranks} of {n} ranks" for _, ranks in got) + ")" \
                    if got else "not run"
            elif len(secs) == 1:
                shown = f"{secs[0]:.3f} s"
            else:
                shown = (f"{starts[sys_]:.3f} s (median of {len(secs)}: " +
                         ", ".join(f"{x:.3f}" for x in secs) + ")")
            lines.append(f"job start, {sys_}: {shown} (last rank's init to "
                         "last rank's first allreduce done)")
        for when in ("idle", "busy"):
            d = self.daemon_summary(f"{tag}.{when}")
            if d:
                lines.append(f"{when} ({'10 s after formation' if when == 'idle' else '10 s after the runs'}): {d}")
        self.emit(f"9.n{n}", f"{n} hosts x 1 rank, allreduce, {self.meta.get('rate', '?')} links",
                  [t] + ([mt] if algos else []),
                  lines + (["model: each forced algorithm's measured time "
                            "(MCCL_ALGO), its prediction in brackets"]
                           if algos else []))
        checks = []
        if n >= 64:
            checks.append((f"MCCL <= Open MPI at every size"
                           + (f" (slower at {', '.join(worse)})" if worse
                              else ""), (not worse) if auto and ompi
                           else None))
        if n >= 128:
            m, g = starts["MCCL (torch, mccl)"], starts["Gloo"]
            checks.append((f"job start {ftime(m and m * 1e3)} ms <= 0.5 x "
                           f"Gloo's {ftime(g and g * 1e3)} ms",
                           None if m is None or g is None else m <= 0.5 * g))
        if checks:
            self.verdict(f"9.n{n}", "64+ hosts: <= Open MPI at every size; "
                         "128: start <= 0.5 x Gloo", checks,
                         self.state(f"9.n{n}", "mccl"))

    def case9(self):
        for n in self.scale_counts():
            self.case9_one(n)

    def case4(self):
        data = {"mccl": read_mccl(self.raw, "case4.mccl"),
                "ompi": read_table(self.raw, "case4.ompi.log")}
        mem = [dict(w.split("=", 1) for w in l.split()[1:])
               for l in read_lines(os.path.join(self.raw, "case4.memcpy.log"))
               if l.startswith("memcpy ")]
        sizes = sorted(set(data["mccl"]) | set(data["ompi"]))
        size = max(sizes) if sizes else None
        traffic = max((float(d["traffic_GB_s"]) for d in mem), default=None)
        bound = 4 * size / traffic / 1e3 if traffic and size else None
        t = Table(["size", "MCCL us", "MCCL GB/s", "OMPI shm us",
                   "OMPI shm GB/s", "bound us", "MCCL/OMPI",
                   "MCCL time/bound"])
        for s in sizes:
            mt, mb = data["mccl"].get(s, (None, None))
            ot, ob = data["ompi"].get(s, (None, None))
            bs = 4 * s / traffic / 1e3 if traffic else None
            t.add([hsize(s), ftime(mt), fbw(mb), ftime(ot), fbw(ob),
                   ftime(bs), fratio(ot, mt), fratio(mt, bs)])
        lines = self.present("4", ["mccl", "ompi"], data)
        lines.append("bound: the memory-traffic bound's time (below); "
                     "MCCL time/bound <= 1.5 is the target")
        for d in mem:
            lines.append(f"memcpy of {hsize(int(d['bytes']))}, {d['threads']} "
                         f"thread(s): {d['copy_GB_s']} GB/s copied = "
                         f"{d['traffic_GB_s']} GB/s of memory traffic")
        if not mem:
            lines.append("no memcpy result: " + self.missing("4", "memcpy"))
        lines.append("bound = 4 x size / best memory traffic rate: an "
                     "out-of-place allreduce of S bytes on 2 ranks reads both "
                     "inputs (2S) and writes both results (2S) at least")
        m = data["mccl"].get(size, (None, None)) if size else (None, None)
        o = data["ompi"].get(size, (None, None))[1] if size else None
        checks = [(f"busbw {fbw(m[1])} >= 2 x OMPI shm {fbw(o)}",
                   None if m[1] is None or o is None else m[1] >= 2 * o),
                  (f"time {ftime(m[0])} us <= 1.5 x bound {ftime(bound)} us",
                   None if m[0] is None or bound is None
                   else m[0] <= 1.5 * bound)]
        v = self.verdict("4", ">= 2 x OMPI shm and <= 1.5 x memory bound",
                         checks, self.state("4", "mccl"))
        lines.append(f"target: {v}")
        self.emit("4", "1 host x 2 ranks, allreduce float32 sum, no network",
                  [t], lines)

    def case5(self):
        data = {"mccl": read_mccl(self.raw, "case5.mccl"),
                "ompi": read_table(self.raw, "case5.ompi.log"),
                "gloo": read_table(self.raw, "case5.gloo.log")}
        systems = ["mccl", "ompi", "gloo"]
        sizes = sorted(set(data["mccl"]) | set(data["ompi"]))
        t = self.bw_table(sizes, systems, data, ["ompi", "gloo"])
        lines = self.present("5", systems, data)
        both = [s for s in sizes if s in data["mccl"] and s in data["ompi"]]
        # The targets: a machine with cores to spare must beat Open
        # MPI everywhere, and clearly on small sizes; two cores less so.
        if (self.cpus() or 0) >= 8:
            bands = [("1K-64K", 1 << 10, 64 << 10, 0.8),
                     ("all sizes", 0, 1 << 62, 1.0)]
        else:
            bands = [("1K-64K", 1 << 10, 64 << 10, 2.0),
                     ("128K-8M", 128 << 10, 8 << 20, 1.0)]
        checks = []
        for name, lo, hi, limit in bands:
            inband = [s for s in both if lo <= s <= hi]
            over = [f"{hsize(s)} {data['mccl'][s][0] / data['ompi'][s][0]:.2f}"
                    for s in inband
                    if data["mccl"][s][0] > limit * data["ompi"][s][0]]
            checks.append((f"{name}: time <= {limit} x OMPI at "
                           f"{len(inband)} sizes"
                           + (f" (over at {', '.join(over)})" if over else ""),
                           None if not inband else not over))
        if both and len(both) < len(sizes):
            checks.append(("every size measured by both", False))
        target = ", ".join(f"{n} <= {l} x OMPI" for n, _, _, l in bands)
        v = self.verdict("5", f"time: {target}", checks,
                         self.state("5", "mccl"))
        lines.append(f"target: {v}")
        self.emit("5", "2 hosts on loopback x 1 rank, allreduce float32 sum",
                  [t], lines)
        self.plot("case5", "Case 5: 2 daemons on loopback x 1 rank", data,
                  systems, None)

    # ---- plots ----

    def plot(self, name, title, data, systems, link):
        os.makedirs(self.data, exist_ok=True)
        curves = []
        for s in systems:
            if not data[s]:
                continue
            path = os.path.join(self.data, f"{name}.{s}.dat")
            with open(path, "w") as f:
                f.write("# size_bytes time_us busbw_GBps\n")
                for size in sorted(data[s]):
                    f.write(f"{size} {data[s][size][0]} {data[s][size][1]}\n")
            curves.append(f"'{name}.{s}.dat' using 1:3 with linespoints "
                          f"lw 2 lc rgb '{COLOR[s]}' title '{SYSNAME[s]}'")
        if not curves:
            return
        if link:
            curves.append(f"{link} with lines dt 2 lw 1 "
                          f"title 'link (TCP, measured)'")
        with open(os.path.join(self.data, f"{name}.gp"), "w") as f:
            f.write(f"""# gnuplot script written by tools/bench/report.py
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {{
    set terminal pngcairo size 1000,600 noenhanced
}} else {{
    set terminal png size 1000,600 noenhanced
}}
set output '../{name}.png'
set title '{title}'
set logscale x 2
set format x '%.0b%B'
set xlabel 'size (bytes)'
set ylabel 'bus bandwidth (GB/s)'
set yrange [0:*]
set grid
set key bottom right
plot {", ".join(curves)}
""")

    def daemon_logs(self, most=5):
        """What the daemons logged (at warning and above): the first lines
        of each log, for the summary."""
        out = []
        for path in sorted(glob.glob(os.path.join(self.raw, "*.mccld-*.log"))):
            lines = [l for l in read_lines(path) if l.strip()]
            if not lines:
                continue
            out.append(f"- `raw/{os.path.basename(path)}`, {len(lines)} "
                       "line(s):")
            out += [f"  - `{l}`" for l in lines[:most]]
        if out:
            out = ["## Daemon logs (warnings and errors; daemons are stopped "
                   "with SIGTERM between cases)", ""] + out + [""]
        return out

    # ---- output ----

    def write(self):
        for c in ("1", "2", "3", "4", "5", "6", "7", "8", "9"):
            if c == "9" and c not in self.cases:
                continue
            if c in self.cases:
                getattr(self, "case" + c)()
            else:
                st = self.status.get((c, "all"))
                self.verdicts.append((c, "-", f"{st[0].upper()} ({st[1]})"
                                      if st else "not run (not asked for)"))
        mccl_cc = read_lines(os.path.join(self.raw, "mccl.cc"))
        head = [f"# MCCL benchmark ({self.meta.get('date', '?')})", "",
                f"Host: {self.meta.get('host', '?')}. "
                f"Open MPI: {self.meta.get('ompi_version', 'not run')}. "
                f"torch: {self.meta.get('torch_version', 'not run')}. "
                "Guest halt polling (guest_halt_poll_ns): "
                f"{self.meta.get('haltpoll_ns', '?')}. "
                "TCP congestion control of the hosts: "
                f"{self.meta.get('tcp_congestion', '?')}"
                + (f", of MCCL's data links: {mccl_cc[0]}" if mccl_cc
                   else "") + "."
                + {"0": " Links that may reorder a flow's packets (-U).",
                   "1": " Links that keep each flow's packets in order "
                        "(RPS)."}.get(self.meta.get("flow_order"), ""), ""]
        if self.meta.get("quick") == "1":
            head += ["**Quick mode (-q): reduced sizes and iterations; the "
                     "targets are checked at the largest size run, and the "
                     "numbers are not meant for comparison.**", ""]
        head += ["Times in microseconds, bandwidths in GB/s (1e9 bytes/s), "
                 "busbw = size / time x 2(n-1)/n as in nccl-tests; MCCL "
                 "and the baselines use out-of-place float32 sum.", "",
                 "## Targets", ""]
        t = Table(["case", "target", "result"])
        for c, target, v in self.verdicts:
            t.add([c, target, v])
        head.append(t.markdown().replace("---:|---:|---:", ":--|:--|:--"))
        head.append("")
        notes = read_lines(os.path.join(self.raw, "notes.txt"))
        if notes:
            head += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
        head += self.daemon_logs()
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write("\n".join(head + self.md) + "\n")
        text = "\n".join(self.text) + "\nTargets:\n" + "\n".join(
            f"  ({c}) {v}" for c, _, v in self.verdicts) + "\n"
        with open(os.path.join(self.out, "results.txt"), "w") as f:
            f.write(text)
        sys.stdout.write(text)


def link_share(rate):
    """Case 1's target busbw over a shaped link of this tc rate (issue
    "Line rate on fast links"): 0.97 up to 10 Gbit/s, 0.9 above, where
    a ring's per-step costs weigh more against the wire."""
    bps = rate_bytes(rate or "")
    return 0.9 if bps is not None and bps > 10e9 / 8 else 0.97


def rates_summary(out, dirs):
    """bench.sh -r A,B,...: every rate's case 1 side by side, as
    fractions of its link, into out/summary.md."""
    t = Table(["rate", "link GB/s", "streams", "MCCL busbw", "MCCL x link",
               "least from 1M / largest", "ring TCP GB/s",
               "MCCL x ring TCP", "Gloo busbw", "Gloo x link",
               "OMPI busbw", "OMPI x link"])
    for d in dirs:
        t.add(Report(d).case1_summary())
    text = ["# MCCL benchmark: case 1 at every rate", "",
            "4 hosts x 1 rank, allreduce float32 sum; busbw (GB/s) at the "
            "largest size; the link is one TCP stream between two of the "
            "hosts in the same run, or, unshaped (none), TCP over as many "
            "connections as MCCL's lanes. \"least from 1M\": MCCL's "
            "lowest busbw from 1 MiB up over its busbw at the largest size "
            "(target >= 0.8). \"ring TCP\": what raw TCP sent out of "
            "each host with all four sending to both neighbours at once, "
            "in the same run. Each rate's own report: RATE/summary.md.", "",
            t.markdown(), ""]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(text))
    sys.stdout.write(t.text() + "\n")
    return 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--rates":
        return rates_summary(sys.argv[2], sys.argv[3:])
    if len(sys.argv) != 2:
        sys.stderr.write("usage: report.py OUTDIR | --rates OUTDIR "
                         "RATEDIR...\n")
        return 2
    Report(sys.argv[1]).write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
