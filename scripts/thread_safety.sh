#!/usr/bin/env bash
# clang's thread-safety analysis (-Wthread-safety) over every translation unit outside runtime/,
# syntax only: it proves at compile time that fields marked GUARDED_BY(mu) are touched only with
# `mu` held and that REQUIRES(mu) functions are called with it (common/thread_annotations.h).
# runtime/ (and every file that includes torch) is left out: libtorch 1.13's headers do not
# compile with clang 14 in C++20 mode; its threads are OpenMP's, not ours.
# Uses the Release build's compile_commands.json (run scripts/setup.sh first). ~2 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
db=build/compile_commands.json
[[ -f $db ]] || { echo "thread_safety: $db is missing: run scripts/setup.sh" >&2; exit 2; }
/usr/bin/python3 - "$db" <<'PY' | xargs -0 -n 1 -P "$(nproc)" sh -c 'eval "$0"'
import json, shlex, sys
import os
root = os.getcwd()
for entry in json.load(open(sys.argv[1])):
    f = entry["file"]
    ours = f.startswith(tuple(root + d for d in ("/agent/", "/common/", "/shm/", "/tests/agent/model/", "/tests/common/")))
    if not ours or "torch" in entry["command"]:
        continue
    args = shlex.split(entry["command"])
    out = ["clang++"]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD", "-Wall", "-Wextra", "-Werror") or a.startswith("-O"):
            continue
        out.append(a)
    out += ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
    cmd = "cd " + shlex.quote(entry["directory"]) + " && " + " ".join(shlex.quote(a) for a in out)
    sys.stdout.write(cmd + "\0")
PY
echo "thread_safety: clang -Wthread-safety found nothing"
