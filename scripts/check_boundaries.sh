#!/usr/bin/env bash
# The boundaries between stallscope's components (docs: internal/README.md).
# Fails, naming file and line, when
#   1. a component's source includes a path into another component's
#      folder: `#include "../…"` leaving its own folder, or a quoted include
#      found only in another component's src/;
#   2. a component's CMake compiles another folder's sources, puts another
#      component's src/ (or tests/) on an include path, or links another
#      component's private targets (OBJECT libraries, *_objects,
#      stallscope_loader_internal);
#   3. samples/ uses tests/, internal/ or anything but the installed
#      interface (stallscope::trace, ::loader, ::reader, ::cuda);
#   4. with a build directory: libstallscope_trace exports a symbol outside
#      its public API and the shim's versioned entries (a thread-local, a
#      detail:: symbol the public headers do not use), or a library exports
#      a symbol of internal/ (stallscope::config, ::sys, ::internal).
# Components: libtrace, loader, analyzer, internal, samples and each folder
# of integrations/. tests/ and bench/ are white-box and may look inside.
#
#   scripts/check_boundaries.sh [BUILD_DIR]
# Exit status 0 when clean, 1 with one line per reach-in.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-}
exec python3 - "$build" <<'PY'
import os, re, subprocess, sys

build = sys.argv[1]
root = os.getcwd()
problems = []

def components():
    out = ["libtrace", "loader", "analyzer", "internal", "samples"]
    out += ["integrations/" + d for d in sorted(os.listdir("integrations"))
            if os.path.isdir(os.path.join("integrations", d))]
    return out

COMPONENTS = components()
SOURCES = (".cpp", ".hpp", ".h", ".c", ".cc")

def owner(path):
    rel = os.path.relpath(os.path.abspath(path), root)
    for c in sorted(COMPONENTS, key=len, reverse=True):
        if rel == c or rel.startswith(c + "/"):
            return c
    return rel.split("/")[0]

def files(comp, exts):
    for d, _, names in os.walk(comp):
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.join(d, n)

def report(path, line_no, text, why):
    problems.append("%s:%d: %s: %s" % (path, line_no, why, text.strip()))

# 1. Includes.
include_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
for comp in COMPONENTS:
    own_dirs = [os.path.join(comp, "src"), os.path.join(comp, "include"), comp]
    for f in files(comp, SOURCES):
        for i, line in enumerate(open(f, errors="replace"), 1):
            m = include_re.match(line)
            if not m:
                continue
            inc = m.group(1)
            here = os.path.normpath(os.path.join(os.path.dirname(f), inc))
            if os.path.exists(here):
                if owner(here) != comp:
                    report(f, i, line, "includes a path into " + owner(here))
                continue
            if any(os.path.exists(os.path.join(d, inc)) for d in own_dirs):
                continue
            for other in COMPONENTS + ["tests"]:
                if other == comp:
                    continue
                for sub in ("src", ""):
                    cand = os.path.join(other, sub, inc) if sub else os.path.join(other, inc)
                    if os.path.exists(cand) and "/include/" not in "/" + cand:
                        report(f, i, line, "includes %s (another component's private code)" % cand)
                        break

# 2. and 3. CMake.
path_re = re.compile(r'\$\{(PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR|stallscope_SOURCE_DIR)\}/([^\s")>]+)')
up_re = re.compile(r'\$\{CMAKE_CURRENT_(SOURCE|LIST)_DIR\}/\.\.')
private_targets = set()
for comp in COMPONENTS:
    for f in files(comp, ("CMakeLists.txt", ".cmake")):
        for m in re.finditer(r'add_library\(\s*(\S+)\s+OBJECT', open(f).read()):
            private_targets.add((m.group(1), comp))
private_targets.add(("stallscope_loader_internal", "loader"))
for comp in COMPONENTS:
    for f in files(comp, ("CMakeLists.txt", ".cmake")):
        for i, line in enumerate(open(f), 1):
            code = line.split("#", 1)[0]
            if up_re.search(code):
                report(f, i, line, "reaches out of its folder with ../")
            for m in path_re.finditer(code):
                target = m.group(2)
                top = owner(target)
                if top == comp:
                    continue
                if target.endswith(SOURCES):
                    report(f, i, line, "compiles a source of " + top)
                elif "/src" in "/" + target or top == "tests":
                    report(f, i, line, "uses the private folder " + target)
                elif comp == "samples":
                    report(f, i, line, "uses a path of the stallscope tree (samples build "
                                       "against the installed interface)")
            for name, home in private_targets:
                if home != comp and re.search(r'(?<![\w:])%s(?![\w])' % re.escape(name), code):
                    report(f, i, line, "links %s, private to %s" % (name, home))
            if comp == "samples" and re.search(r'(?<![\w:])stallscope_(internal|sys)\b|stallscope::internal', code):
                report(f, i, line, "links internal code (samples use the installed interface)")

# 4. Exported symbols of the built libraries.
def dynsyms(lib):
    out = subprocess.run(["readelf", "--wide", "--dyn-syms", "-C", lib], capture_output=True,
                         text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(None, 7)
        if len(parts) == 8 and parts[6] != "UND" and parts[4] in ("GLOBAL", "WEAK"):
            syms.append((parts[3], parts[7].split("@")[0]))
    return syms

PUBLIC_CXX = re.compile(r'^stallscope::(record_\w+|intern|attach|ns_per_tick|sample_clock_triple|'
                        r'detect_invariant_tsc|TickConverter::\w+|detail::g_capture|'
                        r'detail::g_ticks_are_tsc|detail::emit(_complete|_for_thread)?)\b')
if build:
    trace = os.path.join(build, "libtrace", "libstallscope_trace.so")
    if not os.path.exists(trace):
        problems.append("%s: not built (build it, or run without a build directory)" % trace)
    else:
        for kind, name in dynsyms(trace):
            if name.startswith("stallscope_") or name in ("_exit", "_Exit") or PUBLIC_CXX.match(name):
                if kind == "TLS" and not name.startswith("stallscope_inline_v"):
                    problems.append("%s: exports the thread-local %s" % (trace, name))
                continue
            problems.append("%s: exports %s, which is not public API" % (trace, name))
    for lib in ["libtrace/libstallscope_trace.so", "libtrace/libstallscope_reader.so",
                "loader/libstallscope_loader.so", "lib/libstallscope_preload.so",
                "lib/libstallscope_cuda.so"]:
        path = os.path.join(build, lib)
        if not os.path.exists(path):
            continue
        for kind, name in dynsyms(path):
            if re.match(r'^stallscope::(config|sys|internal)::', name):
                problems.append("%s: exports %s of internal/" % (path, name))

for p in problems:
    print("check_boundaries: " + p)
if problems:
    print("check_boundaries: %d reach-in(s); what two components share belongs in internal/ "
          "(internal/README.md)" % len(problems))
    sys.exit(1)
print("check_boundaries: clean (%d components%s)" % (len(COMPONENTS),
      ", exports of " + build if build else ""))
PY
