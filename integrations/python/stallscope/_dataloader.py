"""The PyTorch DataLoader seen from inside (trace format 1.1 records).

Installed by ``torch_hooks.patch`` into torch's own modules, never by
importing torch:

* ``DataLoader.__init__``: where the loader was built (the user's
  ``file:line``; torch, Lightning and accelerate frames skipped) and the
  ``stallscope run --set`` settings applied (``_settings``).
* ``DataLoader.__iter__``: a ``loader_config`` record at every iterator
  creation and every persistent-worker ``_reset`` (generation 0, 1, 2 …).
* the multi-process iterator: a ``batch_handoff`` for every batch that came
  back from a worker (its worker and worker pid, when the trainer asked for
  it and when it came back).
* a worker's loop: its index queue and data queue are read through taps,
  so every batch's fetch is a span from the index's arrival to the put (the
  put time the trainer cannot see), with the batch index the trainer sent.
* the dataset fetchers: one span per ``__getitem__`` (or ``next()`` of an
  IterableDataset, or a batch-level ``__getitems__``) and one per collate,
  in a worker or, with ``num_workers=0``, on the trainer thread. Per-sample
  spans are taken only while they cost under 2 % of the samples they time:
  for cheaper samples the fetch and collate spans remain.
* the pin-memory thread: a range around each batch's ``pin_memory``.
* guard-rail facts as marks: at every iterator creation ``dataloader env``
  (/dev/shm free and total bytes, RLIMIT_NOFILE, open descriptors, torch's
  sharing strategy); the first batch of each loader ``dataloader batch``
  (its tensors' bytes and count); each worker, after its 1st, 2nd, 4th,
  8th … put whenever its threads grew, ``dataloader worker`` (its threads
  then and at its start, stallscope's own left out, and torch's thread
  count there): a pool a worker starts after its first batch is seen.

Every hook swallows its own errors, records nothing when the recorder is
absent, and leaves torch's behaviour as it was.
"""

import sys
import threading
import weakref

import stallscope
from stallscope import _settings

# Packages whose frames are not where the user built a loader.
_SKIP_PACKAGES = frozenset(("torch", "lightning", "pytorch_lightning", "lightning_fabric",
                            "accelerate", "stallscope"))

_tls = threading.local()
_loaders = weakref.WeakKeyDictionary()    # DataLoader -> _LoaderInfo
_iterators = weakref.WeakKeyDictionary()  # iterator -> _IterInfo
_sent = weakref.WeakKeyDictionary()       # multi-process iterator -> {batch index: worker id}
_worker = {"ctx": None}                   # this worker process's _WorkerCtx


class _LoaderInfo:
    __slots__ = ("site", "applied", "generation", "__weakref__")

    def __init__(self, site, applied):
        self.site, self.applied, self.generation = site, applied, -1


class _IterInfo:
    __slots__ = ("loader_id", "generation", "last_got", "__weakref__")

    def __init__(self, loader_id, generation):
        self.loader_id, self.generation = loader_id, generation
        self.last_got = -1  # the batch index _get_data returned last


# ---- Recording helpers: direct C calls, 0 ticks and no-ops without a recorder.

class _Rec:
    """The C entry points, bound once."""
    now = None
    sample = None
    handoff = None


def _bind():
    """Binds the recorder's entry points, as calls that keep the GIL (short
    calls: no hand-over of the GIL to another thread on every record)."""
    if _Rec.now is not None:
        return True
    held = stallscope._fn_holding_gil  # pylint: disable=protected-access
    now, sample = held("stallscope_clock_now"), held("stallscope_sample_record")
    handoff = held("stallscope_batch_handoff_record")
    if now is None or sample is None or handoff is None:
        return False
    _Rec.sample, _Rec.handoff, _Rec.now = sample, handoff, now
    return True


def _now():
    return _Rec.now() if _Rec.now is not None else 0


# ---- Construction: site and settings.

def _site(loader):
    """``path:line`` of the innermost frame outside torch and its wrappers
    (a subclass's ``__init__`` calling ``super().__init__`` is skipped too)."""
    try:
        f = sys._getframe(2)  # pylint: disable=protected-access
    except ValueError:
        return ""
    while f is not None:
        path = f.f_code.co_filename
        package = str(f.f_globals.get("__name__", "")).partition(".")[0]
        if (package not in _SKIP_PACKAGES and not path.startswith("<frozen")
                and f.f_locals.get("self") is not loader):
            return "%s:%d" % (path, f.f_lineno)
        f = f.f_back
    return ""


def _dataset_class(dataset):
    return type(dataset).__name__


def patch_init(cls):
    """Wraps ``DataLoader.__init__``: records the site, applies settings."""
    import inspect  # pylint: disable=import-outside-toplevel
    original = cls.__init__
    if getattr(original, "_stallscope_hook", False):
        return
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None

    def __init__(self, *args, **kwargs):
        applied = []
        site = ""
        try:
            site = _site(self)
            if signature is not None and _settings.settings():
                try:
                    bound = signature.bind(self, *args, **kwargs)
                except TypeError:
                    _settings.next_ordinal()
                    raise
                bound.apply_defaults()
                dataset = bound.arguments.get("dataset")
                applied = _settings.apply(bound, signature.parameters, site,
                                          _dataset_class(dataset))
                if applied:
                    args, kwargs = bound.args[1:], bound.kwargs
            else:
                _settings.next_ordinal()
        except TypeError:
            pass  # arguments torch itself refuses: its own error follows
        except Exception as e:  # pylint: disable=broad-except
            _settings.say("set refused at %s: %r" % (site or "?", e))
        original(self, *args, **kwargs)
        try:
            _loaders[self] = _LoaderInfo(site, applied)
        except Exception:  # pylint: disable=broad-except
            pass

    cls.__init__ = _transparent(original, __init__)


# ---- Iterator creation: the configuration.

def _mp_context(loader):
    import multiprocessing  # pylint: disable=import-outside-toplevel
    ctx = getattr(loader, "multiprocessing_context", None)
    try:
        if ctx is not None:
            return ctx.get_start_method()
        method = multiprocessing.get_start_method(allow_none=True)
        if method:
            return method
        # Not fixed yet: the platform's default, read without fixing it.
        default = multiprocessing.context._default_context  # pylint: disable=protected-access
        return default._default_context.get_start_method()  # pylint: disable=protected-access
    except Exception:  # pylint: disable=broad-except
        return None


def _name(obj):
    if obj is None:
        return None
    n = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if isinstance(n, str):
        return n
    return type(obj).__name__


def _record_config(loader, it, info, created):
    dataset = loader.dataset
    kind = getattr(loader, "_dataset_kind", None)
    workers = loader.num_workers or 0
    pin = stallscope.PIN_OFF
    if loader.pin_memory:
        pin = stallscope.PIN_ON if getattr(it, "_pin_memory", True) else stallscope.PIN_INACTIVE
    length = 0
    if kind == 0:
        try:
            length = len(dataset)
        except Exception:  # pylint: disable=broad-except
            length = 0
    getitems = getattr(dataset, "__getitems__", None)
    flags = (stallscope.LOADER_GETITEMS if getitems else 0) | (
        stallscope.LOADER_OVERRIDDEN if info.applied else 0)
    batch_sampler = getattr(loader, "batch_sampler", None)
    stallscope.record_loader_config(
        id(loader), info.generation, num_workers=workers,
        prefetch_factor=(loader.prefetch_factor or 0) if workers else 0,
        batch_size=loader.batch_size or 0, pin_memory=pin,
        persistent_workers=loader.persistent_workers, drop_last=loader.drop_last,
        in_order=getattr(loader, "in_order", True), mp_context=_mp_context(loader) if workers else 0,
        timeout_ms=int((loader.timeout or 0) * 1000), dataset_len=length,
        dataset_kind={0: "map", 1: "iterable"}.get(kind), dataset=_dataset_class(dataset),
        collate_fn=_name(loader.collate_fn), sampler=_name(type(loader.sampler)),
        batch_sampler=_name(type(batch_sampler)) if batch_sampler is not None else None,
        site=info.site, flags=flags, ts=created)
    _record_env(id(loader))


# ---- Guard-rail facts: what limits more workers besides CPUs (the analyzer's
# checks before it proposes them). A few syscalls per iterator, once per
# batch of the first only; each fact left out when it cannot be read.

_batch_seen = set()  # loader ids whose first batch was measured
_MAX_WALK = 256      # containers and tensors looked at in one batch


def _record_env(loader_id):
    """``dataloader env``: /dev/shm free and total bytes, RLIMIT_NOFILE's
    soft limit, the descriptors open now and torch's sharing strategy."""
    import os  # pylint: disable=import-outside-toplevel
    words = ["dataloader env loader=%d" % loader_id]
    try:
        st = os.statvfs("/dev/shm")
        words.append("shm_free=%d shm_total=%d" % (st.f_bavail * st.f_frsize,
                                                   st.f_blocks * st.f_frsize))
    except (OSError, AttributeError):
        pass
    try:
        import resource  # pylint: disable=import-outside-toplevel
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            words.append("nofile=%d" % soft)
    except (ImportError, OSError, ValueError):
        pass
    try:
        words.append("fds=%d" % len(os.listdir("/proc/self/fd")))
    except OSError:
        pass
    mp = sys.modules.get("torch.multiprocessing")
    try:
        strategy = mp.get_sharing_strategy() if mp is not None else None
        if isinstance(strategy, str) and strategy.isidentifier():
            words.append("sharing=%s" % strategy)
    except Exception:  # pylint: disable=broad-except
        pass
    stallscope.mark(" ".join(words))


def _tensor_bytes(batch):
    """(bytes, tensors) of the tensors in a batch (nested lists, tuples,
    dicts), looking at no more than _MAX_WALK objects."""
    total = count = seen = 0
    pending = [batch]
    while pending and seen < _MAX_WALK:
        x = pending.pop()
        seen += 1
        if isinstance(x, (list, tuple)):
            pending.extend(x)
        elif isinstance(x, dict):
            pending.extend(x.values())
        elif hasattr(x, "element_size") and hasattr(x, "nelement"):
            total += x.element_size() * x.nelement()
            count += 1
    return total, count


def batch_received(it, batch):
    """The trainer got a batch from iterator ``it``: the first of each
    loader gives ``dataloader batch`` (its tensors' bytes and count)."""
    info = _iterators.get(it)
    if info is None or info.loader_id in _batch_seen or len(_batch_seen) >= 4096:
        return
    _batch_seen.add(info.loader_id)
    nbytes, tensors = _tensor_bytes(batch)
    if tensors:
        stallscope.mark("dataloader batch loader=%d bytes=%d tensors=%d" % (info.loader_id, nbytes,
                                                                            tensors))


def _own_threads():
    """This process's threads, stallscope's own left out (the recorder's
    threads are named ``stallscope-*`` in /proc, the Python stack
    sampler's only in ``threading``); None when /proc cannot tell."""
    import os  # pylint: disable=import-outside-toplevel
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    n = 0
    for tid in tids[:4096]:
        try:
            with open("/proc/self/task/%s/comm" % tid, "rb") as f:
                if not f.read().startswith(b"stallscope"):
                    n += 1
        except OSError:
            n += 1  # exited meanwhile, or unreadable: counted
    ours = sum(1 for t in threading.enumerate() if t.name.startswith("stallscope"))
    return max(1, n - ours)


_THREAD_SCANS = 1 << 16  # the last put after which a worker's threads are counted


def _record_worker_threads(base, said):
    """``dataloader worker``: this worker process's threads now, at its
    start (``base``), and torch's thread count, when more than the
    ``said`` recorded before; returns the most recorded."""
    threads = _own_threads()
    if threads is None or threads <= said:
        return said
    words = ["dataloader worker threads=%d" % threads]
    if base is not None:
        words.append("base=%d" % base)
    torch = sys.modules.get("torch")
    try:
        if torch is not None:
            words.append("torch_threads=%d" % torch.get_num_threads())
    except Exception:  # pylint: disable=broad-except
        pass
    stallscope.mark(" ".join(words))
    return threads


def patch_iter(cls):
    """Wraps ``DataLoader.__iter__``: the settings re-checked, then the
    configuration of the iterator it returns (a new one, or a persistent
    one ``_reset``)."""
    original = cls.__iter__
    if getattr(original, "_stallscope_hook", False):
        return

    def __iter__(self):
        created = _now() if _bind() else 0  # before the workers start
        info = _loaders.get(self)
        if info is not None and info.applied:
            try:
                _settings.recheck(self, info.applied, info.site)
            except Exception:  # pylint: disable=broad-except
                pass
        it = original(self)
        try:
            if info is None:
                info = _loaders[self] = _LoaderInfo("", [])
            info.generation += 1
            _iterators[it] = _IterInfo(id(self), info.generation)
            if created:
                _record_config(self, it, info, created)
        except Exception:  # pylint: disable=broad-except
            pass
        return it

    cls.__iter__ = _transparent(original, __iter__)


# ---- The trainer side of a batch.

def next_started(it, start):
    """Called by the ``__next__`` hook before the batch is fetched: sets the
    fetch context of a single-process iterator and when the wait began."""
    _tls.requested = start
    it_info = _iterators.get(it)
    if it_info is None or getattr(it, "_num_workers", 1) != 0:
        _tls.ctx = None
        return
    _tls.ctx = (it_info.loader_id, it_info.generation, getattr(it, "_num_yielded", 0), -1)


def next_ended():
    _tls.ctx = None


def patch_multiprocess_iter(cls):
    """The worker and index of each batch (``_try_put_index``, ``_get_data``)
    and its hand-off (``_next_data``)."""
    put = cls.__dict__.get("_try_put_index")
    get = cls.__dict__.get("_get_data")
    nxt = cls.__dict__.get("_next_data")
    if put is None or get is None or nxt is None or getattr(nxt, "_stallscope_hook", False):
        return

    def _try_put_index(self, *args, **kwargs):
        before = getattr(self, "_send_idx", None)
        out = put(self, *args, **kwargs)
        try:
            sent = self._send_idx
            if before is not None and sent != before:  # (the first ones come before __iter__ returns)
                workers = _sent.get(self)
                if workers is None or len(workers) > 4096:
                    workers = _sent[self] = {}
                workers[sent - 1] = self._task_info[sent - 1][0]
        except Exception:  # pylint: disable=broad-except
            pass
        return out

    def _get_data(self, *args, **kwargs):
        got = get(self, *args, **kwargs)
        try:
            info = _iterators.get(self)
            if info is not None and isinstance(got, tuple) and isinstance(got[0], int):
                info.last_got = got[0]
        except Exception:  # pylint: disable=broad-except
            pass
        return got

    def _next_data(self, *args, **kwargs):
        data = nxt(self, *args, **kwargs)
        try:
            received = _now()
            info = _iterators.get(self)
            if info is not None and received:
                if getattr(self, "_in_order", True):
                    batch = self._rcvd_idx - 1
                else:
                    batch = info.last_got
                workers = _sent.get(self)
                worker = workers.pop(batch, -1) if workers is not None else -1
                pid = 0
                if worker >= 0:
                    pid = self._workers[worker].pid or 0
                _Rec.handoff(received, received, getattr(_tls, "requested", 0) or 0,
                             info.loader_id, info.generation, batch, worker, pid)
        except Exception:  # pylint: disable=broad-except
            pass
        return data

    cls._try_put_index = _transparent(put, _try_put_index)
    cls._get_data = _transparent(get, _get_data)
    cls._next_data = _transparent(nxt, _next_data)


# ---- A worker's loop: the taps on its queues.

class _WorkerCtx:
    __slots__ = ("worker", "generation", "batch", "count", "start", "ordinal", "cost", "mean",
                 "spans", "over", "said", "puts", "threads_said", "base_threads")

    def __init__(self, worker):
        self.worker = worker
        self.generation = 0
        self.batch = -1   # the batch being fetched, -1 = none
        self.count = 0    # its samples, 0 = unknown
        self.start = 0    # when its index arrived
        self.ordinal = 0  # IterableDataset items so far
        self.cost = 0     # ticks a per-sample span costs (measured)
        self.mean = 0     # ticks a sample takes (measured)
        self.spans = True  # per-sample spans on
        self.over = 0      # batches in a row whose spans cost more than the budget
        self.said = False
        self.puts = 0              # batches put
        self.threads_said = 0      # the most threads recorded (0 none yet)
        self.base_threads = None   # its threads when its loop began


class _IndexTap:
    """The worker's index queue, read through: notes each batch index and
    each resume (the next generation)."""

    def __init__(self, queue, ctx):
        self._q, self._ctx = queue, ctx

    def get(self, *args, **kwargs):
        r = self._q.get(*args, **kwargs)
        try:
            ctx = self._ctx
            if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], int):
                ctx.batch, ctx.start = r[0], _now()
                ctx.count = len(r[1]) if isinstance(r[1], (list, tuple, range)) else 0
            elif r is not None and type(r).__name__ == "_ResumeIteration":
                ctx.generation += 1
                ctx.ordinal = 0
        except Exception:  # pylint: disable=broad-except
            pass
        return r

    def __getattr__(self, name):
        return getattr(self._q, name)


class _DataTap:
    """The worker's data queue, written through: a batch's put ends its
    fetch span."""

    def __init__(self, queue, ctx):
        self._q, self._ctx = queue, ctx

    def put(self, obj, *args, **kwargs):
        try:
            ctx = self._ctx
            if (ctx.batch >= 0 and isinstance(obj, tuple) and len(obj) == 2
                    and obj[0] == ctx.batch and _Rec.sample is not None
                    and type(obj[1]).__name__ != "_IterableDatasetStopIteration"):
                _Rec.sample(ctx.start, _now(), 0, ctx.generation, ctx.batch, ctx.batch,
                            ctx.worker, stallscope.SAMPLE_FETCH, ctx.count)
                ctx.batch = -1
        except Exception:  # pylint: disable=broad-except
            pass
        out = self._q.put(obj, *args, **kwargs)
        ctx = self._ctx
        ctx.puts += 1
        # After the put its queue's feeder thread runs. A pool may start
        # later (a transform or a library used from some batch on): scanned
        # again at puts 2, 4, 8 … (a /proc walk each, rarer and rarer).
        if ctx.puts & (ctx.puts - 1) == 0 and ctx.puts <= _THREAD_SCANS:
            try:
                ctx.threads_said = _record_worker_threads(ctx.base_threads, ctx.threads_said)
            except Exception:  # pylint: disable=broad-except
                pass
        return out

    def __getattr__(self, name):
        return getattr(self._q, name)


def wrap_worker_args(loop, args, kwargs, worker):
    """The worker loop's arguments with its two queues tapped."""
    import inspect  # pylint: disable=import-outside-toplevel
    _tls.ctx = None  # a forked worker does not carry the trainer's batch
    try:
        _settings.worker_sharing()
    except Exception:  # pylint: disable=broad-except
        pass
    if not _bind():
        return args, kwargs
    ctx = _WorkerCtx(worker if isinstance(worker, int) else -1)
    try:
        ctx.base_threads = _own_threads()
    except Exception:  # pylint: disable=broad-except
        pass
    _worker["ctx"] = ctx
    names = list(inspect.signature(loop).parameters)
    args = list(args)
    for name, tap in (("index_queue", _IndexTap), ("data_queue", _DataTap)):
        if name in kwargs:
            kwargs[name] = tap(kwargs[name], ctx)
        elif name in names and names.index(name) < len(args):
            i = names.index(name)
            args[i] = tap(args[i], ctx)
    return tuple(args), kwargs


# ---- The fetchers: samples and collate.

_BUDGET = 0.02  # the most per-sample spans may cost, as a fraction of the samples' time


def _context():
    """(loader id, generation, batch index, worker, worker ctx or None), or None."""
    ctx = getattr(_tls, "ctx", None)
    if ctx is not None:
        return ctx + (None,)
    w = _worker["ctx"]
    if w is not None and w.batch >= 0:
        return (0, w.generation, w.batch, w.worker, w)
    return None


def _budget_of(w):
    """The span budget of a worker, or of the calling (trainer) thread."""
    if w is not None:
        return w
    b = getattr(_tls, "budget", None)
    if b is None:
        b = _tls.budget = _WorkerCtx(-1)
    return b


def _us_per_tick():
    """Microseconds per recorder tick, from two readings of both clocks."""
    import time  # pylint: disable=import-outside-toplevel
    t0, n0 = _Rec.now(), time.perf_counter_ns()
    time.sleep(0.001)
    t1, n1 = _Rec.now(), time.perf_counter_ns()
    return (n1 - n0) / 1000.0 / max(t1 - t0, 1)


def _judge(b, mean, cost):
    """After a batch timed with spans (its samples' mean time and a span's
    cost, in ticks: only their ratio counts): turns the spans off when they
    cost more than the budget three batches in a row (the first calls of a
    process are slow, a busy machine preempts)."""
    b.mean = mean
    b.cost = cost if b.cost == 0 else (b.cost + cost) / 2
    if cost <= _BUDGET * mean:
        b.over = 0
        return
    b.over += 1
    if b.over >= 3:
        b.spans = False
        if not b.said:
            b.said = True
            us = _us_per_tick()
            stallscope.mark("sample spans off: items take %.1f us, a span %.1f us" % (
                b.mean * us, b.cost * us))


def _load_items(ctx, items, one, part):
    """[one(i) for i in items], each item a span while the budget allows;
    ``one`` raising StopIteration ends the list early (an IterableDataset).
    Returns (items loaded, ended early)."""
    loader_id, gen, batch, worker, w = ctx
    b = _budget_of(w)
    rec, now = _Rec.sample, _Rec.now
    data = []
    ended = False
    t0 = now()
    if not b.spans:
        try:
            for i in items:
                data.append(one(i))
        except StopIteration:
            ended = True
        if data:  # cheap enough again? (a span's cost as last measured)
            b.mean = (now() - t0) / len(data)
            b.spans = b.cost <= _BUDGET * b.mean
            b.over = 0
        return data, ended
    inside = 0
    times = []  # recorded after the loop: the calls between samples stay few
    for i in items:
        s = now()
        try:
            d = one(i)
        except StopIteration:
            ended = True
            break
        e = now()
        times.append((s, e, i))
        inside += e - s
        data.append(d)
    r0 = now()
    if part == stallscope.SAMPLE_NEXT:
        for s, e, _ in times:
            rec(s, e, loader_id, gen, batch, b.ordinal, worker, part, 1)
            b.ordinal += 1
    else:
        for k, (s, e, i) in enumerate(times):
            rec(s, e, loader_id, gen, batch, _index(i, k), worker, part, 1)
    if data:
        # A span's cost: the typical gap between two timed samples (a thread
        # descheduled there once is not the spans' doing) and its record.
        gaps = sorted(times[k + 1][0] - times[k][1] for k in range(len(times) - 1))
        gap = gaps[len(gaps) // 2] if gaps else times[0][0] - t0
        _judge(b, inside / len(data), gap + (now() - r0) / len(data))
    return data, ended


def _index(i, fallback):
    return i if isinstance(i, int) and i >= 0 else fallback


def _collate(ctx, fetcher, data, count, t_first):
    loader_id, gen, batch, worker, _ = ctx
    rec, now = _Rec.sample, _Rec.now
    c0 = now()
    out = fetcher.collate_fn(data)
    c1 = now()
    rec(c0, c1, loader_id, gen, batch, batch, worker, stallscope.SAMPLE_COLLATE, count)
    if worker < 0:  # the trainer's own fetch (a worker's fetch ends at its put)
        rec(t_first, c1, loader_id, gen, batch, batch, worker, stallscope.SAMPLE_FETCH, count)
    return out


def patch_fetchers(module):
    """Wraps ``fetch`` of the map-style and iterable fetchers. Each does what
    torch's does (the same calls in the same order; ``__getitems__`` where
    the dataset has it), with spans around the samples and the collate."""
    mapped = getattr(module, "_MapDatasetFetcher", None)
    iterable = getattr(module, "_IterableDatasetFetcher", None)
    if mapped is not None and not getattr(mapped.fetch, "_stallscope_hook", False):
        original_map = mapped.fetch

        def fetch(self, possibly_batched_index):
            ctx = _context() if _Rec.sample is not None else None
            if ctx is None:
                return original_map(self, possibly_batched_index)
            t0 = _Rec.now()
            if self.auto_collation:
                getitems = getattr(self.dataset, "__getitems__", None)
                if getitems:
                    data = getitems(possibly_batched_index)
                    _Rec.sample(t0, _Rec.now(), ctx[0], ctx[1], ctx[2], ctx[2], ctx[3],
                                stallscope.SAMPLE_GETITEMS, len(possibly_batched_index))
                else:
                    dataset = self.dataset
                    data, _ = _load_items(ctx, possibly_batched_index,
                                          lambda i: dataset[i], stallscope.SAMPLE_GETITEM)
                count = len(data)
            else:
                data = self.dataset[possibly_batched_index]
                _Rec.sample(t0, _Rec.now(), ctx[0], ctx[1], ctx[2],
                            _index(possibly_batched_index, 0), ctx[3],
                            stallscope.SAMPLE_GETITEM, 1)
                count = 1
            return _collate(ctx, self, data, count, t0)

        mapped.fetch = _transparent(original_map, fetch)

    if iterable is not None and not getattr(iterable.fetch, "_stallscope_hook", False):
        original_iter = iterable.fetch

        def fetch(self, possibly_batched_index):  # pylint: disable=function-redefined
            ctx = _context() if _Rec.sample is not None else None
            if ctx is None or not hasattr(self, "dataset_iter") or not hasattr(self, "ended"):
                return original_iter(self, possibly_batched_index)
            if self.ended:
                raise StopIteration
            source = self.dataset_iter
            t0 = _Rec.now()
            if self.auto_collation:
                data, ended = _load_items(ctx, possibly_batched_index, lambda _: next(source),
                                          stallscope.SAMPLE_NEXT)
                if ended:
                    self.ended = True
                if len(data) == 0 or (self.drop_last and len(data) < len(possibly_batched_index)):
                    raise StopIteration
                count = len(data)
            else:
                data = next(source)
                b = _budget_of(ctx[4])
                _Rec.sample(t0, _Rec.now(), ctx[0], ctx[1], ctx[2], b.ordinal, ctx[3],
                            stallscope.SAMPLE_NEXT, 1)
                b.ordinal += 1
                count = 1
            return _collate(ctx, self, data, count, t0)

        iterable.fetch = _transparent(original_iter, fetch)


# ---- The pin-memory thread.

def patch_pin_memory(module):
    original = getattr(module, "pin_memory", None)
    if original is None or getattr(original, "_stallscope_hook", False):
        return

    def pin_memory(*args, **kwargs):
        if _Rec.now is None or threading.current_thread() is threading.main_thread():
            return original(*args, **kwargs)
        if not getattr(_tls, "named", False):
            _tls.named = True
            stallscope.thread_name("DataLoader pin_memory")
        with stallscope.range("DataLoader pin_memory"):
            return original(*args, **kwargs)

    module.pin_memory = _transparent(original, pin_memory)


def _transparent(original, wrapper):
    from stallscope.torch_hooks import _transparent as t  # pylint: disable=import-outside-toplevel
    return t(original, wrapper)
