"""Holds the Chrome export of a torch_loader.py run against what the program
wrote it did (EXPECTED). Prints every mismatch and exits 1 on any.

usage: check_loader_trace.py CHROME_JSON EXPECTED_JSON
"""

import collections
import json
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def words(text):
    """The key=value words of a mark, values as int where they are."""
    out = {}
    for w in text.split()[2:]:
        k, _, v = w.partition("=")
        out[k] = int(v) if v.isdigit() else v
    return out


def check_guards(exp, by_cat, loader_id, handoffs):
    """The guard-rail marks: the environment at every iterator creation of
    the train loader, its first batch's tensors once, each worker's threads."""
    g, trainer, train = exp.get("guards"), exp["pid"], exp["train"]
    if not g or loader_id is None:
        return
    marks = [e for e in by_cat["mark"] if e["name"].startswith("dataloader ")]
    mine = "loader=%d" % loader_id
    env = [words(e["name"]) for e in marks if e["name"].startswith("dataloader env ") and
           e["name"].split()[2] == mine and e["pid"] == trainer]
    check(len(env) == exp["epochs"], "%d dataloader env marks of the train loader, want %d" % (
        len(env), exp["epochs"]))
    for w in env:
        check(w.get("shm_total") == g["shm_total"], "shm_total %r, want %r" % (
            w.get("shm_total"), g["shm_total"]))
        check(0 < w.get("shm_free", -1) <= g["shm_total"], "shm_free %r" % w.get("shm_free"))
        if g["nofile"] is not None:
            check(w.get("nofile") == g["nofile"], "nofile %r, want %r" % (w.get("nofile"),
                                                                          g["nofile"]))
        check(w.get("fds", 0) >= 3, "fds %r" % w.get("fds"))
        check(w.get("sharing") == g["sharing"], "sharing %r, want %r" % (w.get("sharing"),
                                                                        g["sharing"]))
    batch = [words(e["name"]) for e in marks if e["name"].startswith("dataloader batch ") and
             e["name"].split()[2] == mine]
    check(len(batch) == 1, "%d dataloader batch marks of the train loader, want 1" % len(batch))
    if batch:
        check(batch[0].get("bytes") == g["batch_bytes"] and
              batch[0].get("tensors") == g["batch_tensors"],
              "first batch %r, want %d bytes in %d tensors" % (batch[0], g["batch_bytes"],
                                                               g["batch_tensors"]))
    if not train["num_workers"]:
        return
    pids = {e["args"]["worker_pid"] for e in handoffs}
    threads = {}
    for e in marks:
        if e["name"].startswith("dataloader worker "):
            threads.setdefault(e["pid"], []).append(words(e["name"]))
    check(pids <= set(threads), "worker pids %s, with a dataloader worker mark %s" % (
        sorted(pids), sorted(threads)))
    for pid, ws in threads.items():
        # One mark at the first put, another at a later power-of-two put
        # only when the threads grew (the resource sharer starts in the
        # queue's feeder thread, after the put that the first scan follows).
        counts = [w.get("threads", 0) for w in ws]
        check(1 <= len(ws) <= 17 and counts == sorted(set(counts)),
              "worker %d: dataloader worker marks of %r threads" % (pid, counts))
        # torch runs each DataLoader worker with one thread of its own; after
        # its first put the worker runs its main thread and its data queue's
        # feeder at least, and no more than the feeder and multiprocessing's
        # resource sharer beyond those it began with (no pool: the dataset
        # computes nothing in threads; a helper thread of the start may have
        # ended meanwhile), and one more at most: under forkserver a worker
        # was seen with one thread beyond those (one thread more is no pool:
        # the threads rail counts a pool from two).
        w = ws[-1]
        base = w.get("base", -1)
        check(w.get("torch_threads") == 1 and base >= 1 and
              2 <= w.get("threads", 0) <= base + 3,
              "worker %d: %r" % (pid, w))


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        exp = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    trainer = exp["pid"]
    by_cat = collections.defaultdict(list)
    for e in events:
        by_cat[e.get("cat")].append(e)

    configs = collections.defaultdict(list)  # site -> loader_config events
    for e in by_cat["loader_config"]:
        configs[e["args"]["site"]].append(e)
    loader_ids = {}
    generations = {"train": exp["epochs"], "val": exp["epochs"], "second": exp["epochs"],
                   "sanity": 1}
    for name in ("sanity", "second"):
        if exp.get(name):
            got = configs.get(exp[name]["site"], [])
            check(len(got) == generations[name], "%s: %d loader_config records" % (name,
                                                                                 len(got)))
            if got:
                loader_ids[name] = got[0]["args"]["loader_id"]
    for name in ("train", "val"):
        want = exp[name]
        got = configs.get(want["site"], [])
        if not check(len(got) == exp["epochs"], "%s: %d loader_config records at %s, want %d "
                     "(sites seen: %s)" % (name, len(got), want["site"], exp["epochs"],
                                          sorted(configs))):
            continue
        ids = {e["args"]["loader_id"] for e in got}
        check(len(ids) == 1, "%s: loader ids %s" % (name, ids))
        loader_ids[name] = ids.pop()
        check(sorted(e["args"]["generation"] for e in got) == list(range(exp["epochs"])),
              "%s: generations %s" % (name, [e["args"]["generation"] for e in got]))
        for e in got:
            a = e["args"]
            check(e["pid"] == trainer, "%s: config on pid %s" % (name, e["pid"]))
            for key, field in (("num_workers", "num_workers"), ("batch_size", "batch_size"),
                               ("len", "dataset_len"), ("kind", "dataset_kind")):
                check(a[field] == want[key], "%s: %s=%r, want %r" % (name, field, a[field],
                                                                    want[key]))
            check(e["name"] == want["dataset"], "%s: dataset %r" % (name, e["name"]))
            check(bool(a.get("getitems")) == (name == "train" and exp["getitems"]),
                  "%s: getitems flag %r" % (name, a.get("getitems")))
            if want["num_workers"]:
                check(a["mp_context"] == want["mp_context"], "%s: mp_context %r" % (
                    name, a["mp_context"]))
                check(a["persistent_workers"] == want["persistent"], "%s: persistent %r" % (
                    name, a["persistent_workers"]))
                check(a["prefetch_factor"] == want.get("prefetch_factor", 2),
                      "%s: prefetch_factor %r" % (name, a["prefetch_factor"]))
            else:
                check(a["prefetch_factor"] == 0, "%s: prefetch_factor %r with no workers" % (
                    name, a["prefetch_factor"]))

    train = exp["train"]
    batches = train["batches"]
    # Hand-offs: every batch of every generation, from a known worker.
    handoffs = [e for e in by_cat["batch_handoff"] if e["args"]["loader_id"] ==
                loader_ids.get("train")]
    if train["num_workers"]:
        seen = collections.Counter((e["args"]["generation"], e["args"]["batch_index"])
                                   for e in handoffs)
        want = {(g, b): 1 for g in range(exp["epochs"]) for b in range(batches)}
        check(dict(seen) == want, "train hand-offs %s, want every batch once: %s" % (
            sorted(seen.items()), sorted(want)))
        for e in handoffs:
            a = e["args"]
            check(0 <= a["worker"] < train["num_workers"] and a["worker_pid"] > 0,
                  "hand-off of batch %d from worker %d pid %d" % (a["batch_index"], a["worker"],
                                                                  a["worker_pid"]))
            check(a.get("requested_ts", 0) > 0 and a["requested_ts"] <= e["ts"] + 1e-3,
                  "hand-off of batch %d requested at %s, received %s" % (
                      a["batch_index"], a.get("requested_ts"), e["ts"]))
        check(len({e["args"]["worker_pid"] for e in handoffs}) ==
              train["num_workers"] * (1 if train["persistent"] else exp["epochs"]),
              "worker pids %s" % sorted({e["args"]["worker_pid"] for e in handoffs}))
        # Hand-off waits and epoch start-ups, against the trainer's own clock.
        waited = sum(e["ts"] - e["args"]["requested_ts"] for e in handoffs) * 1e-6
        n = len(handoffs)
        check(abs(waited - exp["waits_s"]) <= 0.15 * exp["waits_s"] + 1e-3 * n,
              "hand-off waits %.4f s, the trainer's next() took %.4f s" % (waited,
                                                                           exp["waits_s"]))
        created = sorted((e["args"]["generation"], e["ts"]) for e in configs[train["site"]])
        for gen, ts in created:
            first = [e["ts"] for e in handoffs if e["args"]["generation"] == gen and
                     e["args"]["batch_index"] == 0]
            want = exp["startups_s"][gen]
            if check(first, "no first batch of generation %d" % gen):
                got = (first[0] - ts) * 1e-6
                check(abs(got - want) <= 0.15 * want + 5e-3,
                      "epoch %d start-up %.4f s, the trainer saw %.4f s" % (gen, got, want))
    else:
        check(not handoffs, "hand-offs without workers")

    # The workers' fetches: one per hand-off, on the worker's pid, ending by
    # the receive; samples and collates inside them.
    samples = by_cat["sample"]
    fetches = {}
    for e in samples:
        a = e["args"]
        if a["part"] == "fetch" and e["pid"] != trainer:
            fetches.setdefault((e["pid"], a["batch_index"]), []).append(e)
    for h in handoffs:
        a = h["args"]
        got = fetches.get((a["worker_pid"], a["batch_index"]), [])
        ends = [f["ts"] + f["dur"] for f in got if f["ts"] + f["dur"] <= h["ts"] + 1e-3]
        check(ends, "no fetch of batch %d on worker pid %d ends by its receive" % (
            a["batch_index"], a["worker_pid"]))
    per_sample = "next" if train["kind"] == "iterable" else "getitem"
    n_train = exp["epochs"] * batches
    if train["num_workers"]:
        mine = [e for e in samples if e["pid"] != trainer]
    else:
        mine = [e for e in samples if e["args"]["loader_id"] == loader_ids.get("train")]
        check(all(e["pid"] == trainer and e["args"]["worker"] == -1 for e in mine),
              "train samples off the trainer with num_workers=0")
    parts = collections.Counter(e["args"]["part"] for e in mine)
    check(parts["fetch"] == n_train, "train fetches %d, want %d" % (parts["fetch"], n_train))
    check(parts["collate"] == n_train, "train collates %d, want %d" % (parts["collate"], n_train))
    if exp["getitems"]:
        check(parts["getitems"] == n_train and parts["getitem"] == 0,
              "train getitems spans %d, getitem %d" % (parts["getitems"], parts["getitem"]))
    else:
        check(parts[per_sample] == n_train * train["batch_size"],
              "train %s spans %d, want %d" % (per_sample, parts[per_sample],
                                              n_train * train["batch_size"]))
    if train["num_workers"]:
        for e in samples:
            if e["pid"] != trainer:
                check(e["args"]["loader_id"] == 0 and e["args"]["worker"] >= 0,
                      "worker sample %s" % e["args"])
    # The validation loader (num_workers=0): its samples on the trainer.
    val = exp["val"]
    n_val = exp["epochs"] * val["batches"]
    val_samples = [e for e in samples if e["args"]["loader_id"] == loader_ids.get("val")]
    vparts = collections.Counter(e["args"]["part"] for e in val_samples)
    check(vparts["fetch"] == n_val and vparts["collate"] == n_val and
          vparts["getitem"] == n_val * val["batch_size"], "val samples %s" % dict(vparts))
    check(all(e["pid"] == trainer and e["args"]["worker"] == -1 for e in val_samples),
          "val samples off the trainer")
    # Evaluation loops are phases; data waits carry batch indices.
    n_sanity = exp["sanity"]["batches"] if exp.get("sanity") else 0
    n_second = exp["epochs"] * exp["second"]["batches"] if exp.get("second") else 0
    phases = [e for e in events if e.get("name") == "phase:eval" and e.get("ph") in "XBb"]
    want_phases = exp["epochs"] + (1 if n_sanity else 0)
    check(len(phases) == want_phases, "%d phase:eval ranges, want %d" % (len(phases),
                                                                       want_phases))
    waits = [e for e in by_cat["data_wait"] if e.get("name") == "data_wait" and
             e["pid"] == trainer and e.get("ph") in "Xb"]  # b: drawn as an async span
    n_waits = n_train + n_val + n_sanity + n_second
    check(len(waits) == n_waits, "%d data waits, want %d" % (len(waits), n_waits))
    idx = collections.Counter(e.get("args", {}).get("corr", 0) for e in waits)
    n_gen = exp["epochs"] * (3 if n_second else 2) + (1 if n_sanity else 0)
    check(idx[0] == n_gen, "data waits with batch index 0: %d, want %d" % (idx[0], n_gen))
    # Steps: one per optimizer step, none for the ends of epochs or the
    # evaluation loops.
    steps = [e for e in events if e.get("cat") == "step" and e.get("ph") in "XBb" and
             e["pid"] == trainer]
    check(len(steps) == exp["steps"], "%d steps, want %d" % (len(steps), exp["steps"]))
    # Steps tile the iterations: each from one ask for a batch to the next.
    ends = {e["id"]: e["ts"] for e in events if e.get("cat") == "step" and e.get("ph") == "e"}
    total = sum(e["dur"] if e["ph"] == "X" else ends.get(e.get("id"), e["ts"]) - e["ts"]
                for e in steps) * 1e-6
    want = exp["iterations_s"]
    check(abs(total - want) <= 0.05 * want + 2e-3,
          "steps last %.4f s in all, the trainer's iterations %.4f s" % (total, want))

    check_guards(exp, by_cat, loader_ids.get("train"), handoffs)

    for f in failures:
        print("MISMATCH:", f)
    print("%d mismatches" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
