"""Settings to try without editing the program: ``stallscope run --set``.

``stallscope run --set 'dataloader[train.py:42].num_workers=4' -- python
train.py`` passes ``STALLSCOPE_SET`` (``KEY=VALUE`` items joined by ``;``)
to the program; the DataLoader hooks apply each ``dataloader`` setting to
the DataLoader constructions it selects, bound by signature, and fix or
refuse dependent arguments so the constructor never raises because of a
setting. The variable may be written by hand, so everything is validated
again here. ``loader.*`` settings are for stallscope's own loader and the
sample trainer and are ignored here.

What became of each setting goes to stderr and, as a mark starting with
``set ``, into the trace (docs/attach.md "Trying a setting").
"""

import os
import sys

import stallscope

FIELDS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory",
          "sharing_strategy")
_STRATEGIES = ("file_descriptor", "file_system")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
_MAX_WORKERS = 1024


class Setting:
    """One ``dataloader`` setting: a selector (None, an int, a site or a
    dataset class name), a field and its value."""

    __slots__ = ("key", "text", "selector", "field", "value", "used")

    def __init__(self, key, text, selector, field, value):
        self.key, self.text = key, text  # text: the normalized value as given
        self.selector, self.field, self.value = selector, field, value
        self.used = False

    def matches(self, ordinal, site, dataset_class):
        s = self.selector
        if s is None:
            return True
        if isinstance(s, int):
            return s == ordinal
        if ":" in s and s.rsplit(":", 1)[1].isdigit():
            return site == s or site.endswith("/" + s)
        return s == dataset_class

    def item(self):
        return "%s=%s" % (self.key, self.text)


def _value(field, raw):
    """(value, normalized text) or raises ValueError naming the problem."""
    v = raw.strip().lower()
    if field in ("persistent_workers", "pin_memory"):
        if v in _TRUE:
            return True, "true"
        if v in _FALSE:
            return False, "false"
        raise ValueError("'%s' is not a boolean (true or false)" % raw)
    if field == "sharing_strategy":
        if v in _STRATEGIES:
            return v, v
        raise ValueError("'%s' is not a sharing strategy (file_descriptor or file_system)" % raw)
    if field == "prefetch_factor" and v == "none":
        return None, "none"
    lo = 0 if field == "num_workers" else 1
    if not v.isdigit() or int(v) < lo or int(v) > _MAX_WORKERS:
        raise ValueError("'%s' is not an integer in [%d, %d]%s" % (
            raw, lo, _MAX_WORKERS, " or none" if field == "prefetch_factor" else ""))
    return int(v), str(int(v))


def _selector(text):
    if text == "":
        raise ValueError("an empty selector [] (use [N], [file:line] or [DatasetClass])")
    return int(text) if text.isdigit() else text


def parse(env_value):
    """(settings, problems): the ``dataloader`` settings of ``env_value`` and
    one message for each item that is not a valid setting."""
    settings, problems = [], []
    for item in (env_value or "").split(";"):
        item = item.strip()
        if not item:
            continue
        key, eq, raw = item.partition("=")
        key = key.strip()
        try:
            if not eq:
                raise ValueError("no '=' (use KEY=VALUE)")
            if key.startswith("loader."):
                continue  # stallscope's own loader and the sample trainer
            if not key.startswith("dataloader"):
                raise ValueError("unknown namespace (known: dataloader, loader)")
            rest = key[len("dataloader"):]
            selector = None
            if rest.startswith("["):
                close = rest.find("]")
                if close < 0:
                    raise ValueError("no ']' closes the selector")
                selector = _selector(rest[1:close])
                rest = rest[close + 1:]
            if not rest.startswith("."):
                raise ValueError("no field (use dataloader.FIELD or dataloader[SELECTOR].FIELD)")
            field = rest[1:]
            if field not in FIELDS:
                raise ValueError("unknown field '%s' (known: %s)" % (field, ", ".join(FIELDS)))
            value, text = _value(field, raw)
            settings.append(Setting(key, text, selector, field, value))
        except ValueError as e:
            problems.append("set refused %s: %s" % (item, e))
    return settings, problems


def say(line):
    """``line`` to stderr and as a mark into the trace."""
    try:
        sys.stderr.write("stallscope: %s\n" % line)
    except Exception:  # pylint: disable=broad-except
        pass
    try:
        stallscope.mark(line)
    except Exception:  # pylint: disable=broad-except
        pass


_state = {"parsed": False, "settings": [], "built": 0}


def settings():
    """The valid ``dataloader`` settings of this process's ``STALLSCOPE_SET``,
    parsed once (the problems are said then)."""
    if not _state["parsed"]:
        _state["parsed"] = True
        found, problems = parse(os.environ.get("STALLSCOPE_SET", ""))
        _state["settings"] = found
        for p in problems:
            say(p)
        if found:
            import atexit  # pylint: disable=import-outside-toplevel
            atexit.register(say_unmatched)
    return _state["settings"]


def say_unmatched():
    """At exit: the settings no DataLoader construction matched."""
    for s in _state["settings"]:
        if not s.used:
            built = _state["built"]
            say("set unmatched %s: none of the %d DataLoader%s built matched %s" % (
                s.item(), built, "" if built == 1 else "s",
                "[%s]" % s.selector if s.selector is not None else "it"))


def next_ordinal():
    """The construction order of the DataLoader being built (0 = the
    first): every construction counts, whether a setting matched it or not."""
    ordinal = _state["built"]
    _state["built"] += 1
    return ordinal


def _default(params, name, fallback):
    p = params.get(name)
    if p is None or p.default is p.empty:
        return fallback
    return p.default


def apply(bound, params, site, dataset_class):
    """Applies the matching settings to ``bound`` (an ``inspect.BoundArguments``
    of ``DataLoader.__init__``, defaults applied) in place, then fixes the
    arguments that depend on them. Returns the ``(field, value)`` pairs
    applied, for the re-check at iterator creation. Says what it did."""
    ordinal = next_ordinal()
    chosen = [s for s in settings() if s.matches(ordinal, site, dataset_class)]
    if not chosen:
        return []
    args = bound.arguments
    applied = []
    # num_workers first: the others are judged against its final value.
    chosen.sort(key=lambda s: s.field != "num_workers")
    for s in chosen:
        s.used = True
        if s.field == "sharing_strategy":
            _apply_sharing(s, site)
            continue
        if s.field not in args:
            say("set refused %s at %s: this torch's DataLoader has no '%s'" % (
                s.item(), site, s.field))
            continue
        old = args[s.field]
        workers = args.get("num_workers", 0) or 0
        value = s.value
        if s.field == "prefetch_factor":
            if workers == 0 and value is not None:
                say("set refused %s at %s: prefetch_factor needs num_workers > 0 (it is 0)" % (
                    s.item(), site))
                continue
            if value is None and _default(params, "prefetch_factor", None) is not None:
                value = _default(params, "prefetch_factor", 2)  # torch 1.x takes no None
        if s.field == "persistent_workers" and value and workers == 0:
            say("set refused %s at %s: persistent_workers needs num_workers > 0 (it is 0)" % (
                s.item(), site))
            continue
        args[s.field] = value
        applied.append((s.field, value))
        say("set applied %s at %s (was %s)" % (s.item(), site, _text(old)))
    _fix_dependents(bound, params, site)
    return applied


def _set_sharing(value):
    """torch.multiprocessing's sharing strategy set to ``value``: the one
    before, or None where it cannot be set."""
    try:
        import torch.multiprocessing as mp  # pylint: disable=import-outside-toplevel
        old = mp.get_sharing_strategy()
        if value not in mp.get_all_sharing_strategies():
            return None
        mp.set_sharing_strategy(value)
        return old
    except Exception:  # pylint: disable=broad-except
        return None


def _apply_sharing(s, site):
    """A ``sharing_strategy`` setting: torch's strategy is process-wide, so it
    holds from this DataLoader's construction on for every tensor this
    process passes; the workers set it again (worker_sharing)."""
    old = _set_sharing(s.value)
    if old is None:
        say("set refused %s at %s: this torch cannot use the %s strategy" % (
            s.item(), site, s.value))
        return
    say("set applied %s at %s (was %s; process-wide, and in the workers)" % (
        s.item(), site, old))


def worker_sharing():
    """In a DataLoader worker: the sharing strategy a ``sharing_strategy``
    setting asks for, since the worker pickles the batches it puts (spawn
    and forkserver workers start with torch's default). Quiet: the trainer
    said it. A receiver rebuilds a tensor by the way it was sent, so a
    worker and a trainer on different strategies still agree."""
    found, _ = parse(os.environ.get("STALLSCOPE_SET", ""))  # the problems were said
    for s in found:
        if s.field == "sharing_strategy":
            _set_sharing(s.value)


def _text(v):
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _fix_dependents(bound, params, site):
    """Arguments the DataLoader constructor would refuse next to the applied
    settings, put to what it accepts (each said)."""
    args = bound.arguments
    if (args.get("num_workers", 0) or 0) != 0:
        return
    pf_default = _default(params, "prefetch_factor", None)
    if "prefetch_factor" in args and args["prefetch_factor"] != pf_default:
        say("set adjusted dataloader.prefetch_factor=%s at %s: num_workers=0 takes no "
            "prefetch_factor (was %s)" % (_text(pf_default), site, _text(args["prefetch_factor"])))
        args["prefetch_factor"] = pf_default
    if args.get("persistent_workers"):
        say("set adjusted dataloader.persistent_workers=false at %s: num_workers=0 has no "
            "workers to keep" % site)
        args["persistent_workers"] = False
    if args.get("multiprocessing_context") is not None:
        say("set adjusted dataloader.multiprocessing_context=none at %s: num_workers=0 starts "
            "no processes" % site)
        args["multiprocessing_context"] = None
    if args.get("timeout"):
        say("set adjusted dataloader.timeout=0 at %s: num_workers=0 takes no timeout" % site)
        args["timeout"] = 0


def recheck(loader, applied, site):
    """At iterator creation: a setting the program changed after construction
    is put back, and said."""
    for field, value in applied:
        try:
            now = getattr(loader, field)
        except AttributeError:
            continue
        if now == value or field == "persistent_workers":  # torch refuses to change that one
            continue
        try:
            setattr(loader, field, value)
        except Exception as e:  # pylint: disable=broad-except
            say("set refused dataloader.%s=%s at %s: the program set %s=%s after construction "
                "and it cannot be put back (%s)" % (field, _text(value), site, field, _text(now),
                                                   e))
            continue
        say("set reassigned dataloader.%s=%s at %s: the program set %s=%s after construction; "
            "put back" % (field, _text(value), site, field, _text(now)))
