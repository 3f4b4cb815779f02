#!/usr/bin/python3
"""The ledger as a rediscovery benchmark for the steered searches (not run by make test or make bench:
it takes minutes to an hour).

For every ledger entry of class bug with a minimal case, the case's model is searched from fresh
inputs: its recorded inputs (the values that trigger the bug) are replaced, seeded by the run's seed,
either by the campaign's draws (--inputs campaign: `quorum search` draws them as a campaign does,
data/values.h: uniform values with edge values and subnormals) or by a plain normal distribution
(--inputs normal: N(0, 1), no edge value); the model's weights stay the case's. Each method gets the
same evaluation budget and seeds on the entry's own backend, with `--stop_at ENTRY`: a failure another
ledger entry (or nothing) labels is gone past, so a run rediscovers the entry when it meets it within the
budget. Random search draws the campaign's inputs whatever --inputs says: it is the campaign's own
generator, the baseline. An entry whose trigger lives in the weights is found at the first evaluation by
every method: the table says so ("weights"), it measures no search. grist is GRIST's library target: it
looks for NaN/Inf only (the entries of another kind are out of its reach) inside the data range [-1, 1].

Usage: /usr/bin/python3 bench/ledger_rediscovery.py [--build build] [--budget 100] [--seeds 3]
       [--methods random,ga,ga-edge,ga-audee,diverge,grist] [--inputs campaign|normal] [--filter TEXT]
       [--out DIR] [--from DIR/results.jsonl,...: tabulate earlier runs instead]
Prints one markdown row per entry and a summary per method (entries rediscovered on every seed, on
any seed, median evaluations to the first trigger over every rediscovery, and over the entries both it
and random search rediscover).
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = {
    "random": ["--method", "random"],
    "ga": ["--method", "ga", "--ga_operators", "floats"],
    "ga-edge": ["--method", "ga", "--ga_operators", "floats", "--fitness", "edge"],
    "ga-audee": ["--method", "ga", "--ga_operators", "audee"],
    "diverge": ["--method", "diverge"],
    "grist": ["--method", "grist"],
}


def entries(filter_text):
    for path in sorted(glob.glob(os.path.join(ROOT, "src/backends/*/known_differences.json"))):
        ledger = json.load(open(path))
        for e in ledger["entries"]:
            if e["class"] != "bug" or not e.get("case"):
                continue
            if filter_text and filter_text not in e["id"]:
                continue
            e.setdefault("backend", ledger["backend"])
            yield e


def normal_start(model, seed, work, entry_id):
    """A bundle-shaped directory: the model and its graph inputs drawn from N(0, 1), seeded."""
    import numpy as np
    d = os.path.join(work, "normal", entry_id, str(seed))
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    json.dump(model, open(os.path.join(d, "model.json"), "w"))
    rng = np.random.default_rng(seed)
    for v in model["inputs"]:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", v["name"])
        np.save(os.path.join(d, "inputs", name + ".npy"),
                rng.standard_normal(v["shape"]).astype(np.float32))
    return d


def search(quorum, entry, model_path, method, seed, budget, out):
    case = entry["case"]
    mode = "both" if case.get("mode") == "train" else "infer"
    cmd = [quorum, "search", *METHODS[method], "--model", model_path, "--backends", entry["backend"],
           "--mode", mode, "--budget", str(budget), "--seed", str(seed), "--out", out, "--stop_at", entry["id"]]
    if case.get("loss"):
        cmd += ["--loss", case["loss"]]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    if "nothing to search: the model holds no vulnerable operation" in p.stdout:
        return {"na": True}
    result = re.search(r"^result: (.*)$", p.stdout, re.M)
    if not result:
        return {"error": (p.stderr.strip().splitlines() or ["no result"])[-1][:120]}
    fields = dict(kv.split("=", 1) for kv in result.group(1).split())
    known = fields.get("known", "none")
    met = [m.rsplit("@", 1)[0] for m in fields.get("met", "none").split(",") if m != "none"]
    return {"found": fields.get("found") == "1", "evaluations": int(fields.get("evaluations", 0)),
            "known": "" if known == "none" else known, "met": met}


def cell_of(runs, entry_id):
    """(markdown cell, the runs that rediscovered the entry, runs counted; 0: not applicable)."""
    if all(r.get("na") for r in runs):
        return ("n/a", [], 0)
    hits = [r for r in runs if r.get("known") == entry_id]
    errors = [r["error"] for r in runs if "error" in r]
    others = sorted({k for r in runs for k in r.get("met", []) if k != entry_id})
    cell = "%d/%d" % (len(hits), len(runs))
    if hits:
        cell += " (%s)" % ", ".join(str(r["evaluations"]) for r in hits)
    if others:
        cell += "; met " + ", ".join(others)
    if errors:
        cell += "; error: " + errors[0]
    return (cell, hits, len(runs))


def tabulate(order, results, methods):
    """One row per entry, then the summary. `results`: entry -> method -> runs (seed order)."""
    print("| entry | backend | " + " | ".join(methods) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in methods) + " |")
    summary = {m: {"all": 0, "any": 0, "evals": [], "by_entry": {}} for m in methods}
    counted = 0
    for entry_id, backend in order:
        if entry_id not in results:
            print("| %s | %s | %s |" % (entry_id, backend, " | ".join("no graph input" for _ in methods)))
            continue
        cells = {m: cell_of(results[entry_id].get(m, []), entry_id) for m in methods}
        # Found at the first evaluation by every method that looks for any failure (GRIST looks for NaN/Inf
        # only): the trigger is in the weights or the model itself.
        general = [c for m, c in cells.items() if m != "grist" and c[2]]
        firsts = [r["evaluations"] for c in general for r in c[1]]
        weights = bool(general) and all(len(c[1]) == c[2] for c in general) and max(firsts) <= 1
        print("| %s | %s | %s |" % (entry_id, backend,
                                    " | ".join(("weights " if weights and cells[m][2] else "") + cells[m][0]
                                               for m in methods)))
        sys.stdout.flush()
        if weights:
            continue
        counted += 1
        for m in methods:
            cell, hits, n = cells[m]
            summary[m]["all"] += bool(n) and len(hits) == n
            summary[m]["any"] += bool(hits)
            summary[m]["evals"] += [r["evaluations"] for r in hits]
            if hits:
                summary[m]["by_entry"][entry_id] = [r["evaluations"] for r in hits]
    print("\n%d entries whose trigger is in the inputs (the others: no graph input, or found at the first "
          "evaluation by every method)" % counted)
    base = summary.get("random", {}).get("by_entry", {})
    for m in methods:
        ev = summary[m]["evals"]
        both = [k for k in summary[m]["by_entry"] if k in base]
        mine = [x for k in both for x in summary[m]["by_entry"][k]]
        theirs = [x for k in both for x in base[k]]
        print("- %s: rediscovered on every seed %d, on some seed %d; median evaluations to the trigger %s; "
              "on the %d entries it and random search both rediscover: %s against random's %s"
              % (m, summary[m]["all"], summary[m]["any"], statistics.median(ev) if ev else "-", len(both),
                 statistics.median(mine) if mine else "-", statistics.median(theirs) if theirs else "-"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--inputs", default="campaign", choices=["campaign", "normal"])
    ap.add_argument("--methods", default="random,ga,ga-audee")
    ap.add_argument("--filter", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--from", dest="from_", default="",
                    help="tabulate earlier runs' results.jsonl files (comma-separated) instead of running")
    a = ap.parse_args()
    quorum = os.path.join(a.build, "quorum")
    methods = a.methods.split(",")
    for m in methods:
        if m not in METHODS:
            sys.exit("--methods: one of " + ", ".join(METHODS))
    order = [(e["id"], e["backend"]) for e in entries(a.filter)]
    results = {}
    if a.from_:
        for path in a.from_.split(","):
            for line in open(path):
                r = json.loads(line)
                if r["method"] in methods:
                    results.setdefault(r.pop("entry"), {}).setdefault(r.pop("method"), []).append(r)
        print("tabulated from %s\n" % a.from_)
        tabulate(order, results, methods)
        return
    work = a.out or tempfile.mkdtemp(prefix="quorum_rediscovery_")
    os.makedirs(work, exist_ok=True)
    print("budget %d evaluations, seeds 1..%d, starting inputs %s; raw results in %s\n"
          % (a.budget, a.seeds, "drawn as the campaign draws them" if a.inputs == "campaign"
             else "from N(0, 1)", work))
    raw = open(os.path.join(work, "results.jsonl"), "w")
    for e in entries(a.filter):
        model = dict(e["case"]["model"])
        if not model.get("inputs"):
            continue
        model_path = os.path.join(work, e["id"] + ".json")
        json.dump(model, open(model_path, "w"))
        for m in methods:
            for s in range(1, a.seeds + 1):
                start = normal_start(model, s, work, e["id"]) if a.inputs == "normal" and m != "random" else model_path
                r = search(quorum, e, start, m, s, a.budget, os.path.join(work, "out", e["id"], m))
                raw.write(json.dumps({"entry": e["id"], "method": m, "seed": s, **r}) + "\n")
                results.setdefault(e["id"], {}).setdefault(m, []).append(r)
        raw.flush()
    tabulate(order, results, methods)


if __name__ == "__main__":
    main()
