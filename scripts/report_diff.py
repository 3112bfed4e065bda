#!/usr/bin/env python3
"""Field-by-field diff of JSON reports written by two builds.

Usage: report_diff.py OLD_DIR NEW_DIR [--rel 1e-6] [--abs 1e-9] [--ignore PATH_REGEX]...
                      [--added-ok] [--ordered]

Compares OLD_DIR/X.json with NEW_DIR/X.json for every X in either. Numbers
agree when |a - b| <= abs + rel * max(|a|, |b|) (floating-point sums taken
in another order); strings, booleans, nulls and the shape of objects and
arrays must agree exactly. Prints one line per differing field, as
`run: path: old -> new`, then a count per field path with runs collapsed
(array indices become []; arrays of objects with a unique name, id or rank
are matched by it, and with --ordered their order must agree too: the
first remedy is the answer), and exits 1 when anything differs. Standard
library only.
"""
import argparse
import collections
import json
import math
import os
import re
import sys

# Fields that name the build or the moment of analysis, not the analysis.
DEFAULT_IGNORE = [r"^\.stallscope_version$", r"^\.generated", r"\.analyzer_version$"]


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return ("<unreadable: %s>" % e.strerror)
    if not text.strip():
        return "<empty>"
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        return "<not JSON: %s>" % e


def same_number(a, b, rel, abs_):
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= abs_ + rel * max(abs(a), abs(b))


def short(v):
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 120 else s[:117] + "..."


# Arrays of objects told apart by one of these keys (stages by name,
# remedies by id, ranks by rank) are matched by it, not by position.
KEYS = ("name", "id", "rank")


def keyed(v):
    if not v or not all(isinstance(x, dict) for x in v):
        return None
    for k in KEYS:
        vals = [x.get(k) for x in v]
        if all(isinstance(x, (str, int)) for x in vals) and len(set(vals)) == len(vals):
            return k
    return None


def diff(a, b, path, out, args):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = "%s.%s" % (path, k)
            if k not in a:
                out.append((p, "<absent>", short(b[k])))
            elif k not in b:
                out.append((p, short(a[k]), "<absent>"))
            else:
                diff(a[k], b[k], p, out, args)
    elif isinstance(a, list) and isinstance(b, list) and keyed(a) and keyed(b):
        key = keyed(a)
        ka = {x[key]: x for x in a}
        kb = {x[key]: x for x in b}
        if args.ordered and list(ka) != list(kb):
            out.append(("%s(order of %s)" % (path, key), short(list(ka)), short(list(kb))))
        for k in list(ka) + [k for k in kb if k not in ka]:
            p = "%s[%s=%s]" % (path, key, k)
            if k not in ka:
                out.append((p, "<absent>", short(kb[k])))
            elif k not in kb:
                out.append((p, short(ka[k]), "<absent>"))
            else:
                diff(ka[k], kb[k], p, out, args)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = "%s[%d]" % (path, i)
            if i >= len(a):
                out.append((p, "<absent>", short(b[i])))
            elif i >= len(b):
                out.append((p, short(a[i]), "<absent>"))
            else:
                diff(a[i], b[i], p, out, args)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            not isinstance(a, bool) and not isinstance(b, bool):
        if not same_number(a, b, args.rel, args.abs):
            out.append((path, short(a), short(b)))
    elif a != b:
        out.append((path, short(a), short(b)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rel", type=float, default=1e-6)
    ap.add_argument("--abs", type=float, default=1e-9)
    ap.add_argument("--ignore", action="append", default=[])
    ap.add_argument("--added-ok", action="store_true",
                    help="fields only the new report has are additions: counted apart, "
                         "not differences")
    ap.add_argument("--ordered", action="store_true",
                    help="arrays matched by name, id or rank must also list them in the "
                         "same order")
    args = ap.parse_args()
    ignore = [re.compile(p) for p in DEFAULT_IGNORE + args.ignore]
    names = sorted({n for d in (args.old, args.new) for n in os.listdir(d) if n.endswith(".json")})
    by_field = collections.Counter()
    added = collections.Counter()
    differing = 0
    for n in names:
        found = []
        diff(load(os.path.join(args.old, n)), load(os.path.join(args.new, n)), "", found, args)
        found = [f for f in found if not any(r.search(f[0]) for r in ignore)]
        if args.added_ok:
            for f in found:
                if f[1] == "<absent>":
                    added[re.sub(r"\[\d+\]", "[]", f[0])] += 1
            found = [f for f in found if f[1] != "<absent>"]
        if not found:
            continue
        differing += 1
        for path, a, b in found:
            print("%s: %s: %s -> %s" % (n[:-5], path or ".", a, b))
            by_field[re.sub(r"\[\d+\]", "[]", path)] += 1
    print("report_diff: %d of %d reports differ (rel %g, abs %g)" %
          (differing, len(names), args.rel, args.abs))
    for field, count in by_field.most_common():
        print("  %6d  %s" % (count, field))
    if added:
        print("report_diff: fields only the new reports have (additions):")
        for field, count in sorted(added.items()):
            print("  %6d  %s" % (count, field))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
