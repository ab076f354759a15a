#!/usr/bin/env python3
"""Writes (or with --check, verifies) the part of FILE between its lines that
contain `PART:begin` and `PART:end`, from what a generator prints:
README.md's options table and bin/dlshim's flags, both from
shim/base/options.def through build/options-md (PART `options`, the
default); docs/design.md's lock table from shim/base/locks.def through
scripts/locks-md (PART `locks`).

    update-generated.py [--check] [--part PART] FILE GENERATOR [ARGS...]"""
import subprocess
import sys

def main(argv):
    args = argv[1:]
    check = args[:1] == ["--check"]
    if check:
        args = args[1:]
    part = "options"
    if args[:1] == ["--part"]:
        part, args = args[1], args[2:]
    BEGIN, END = part + ":begin", part + ":end"
    path, generator = args[0], args[1:]
    made = subprocess.run(generator, check=True, capture_output=True, text=True).stdout
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    try:
        i = next(n for n, l in enumerate(lines) if BEGIN in l)
        j = next(n for n, l in enumerate(lines) if END in l and n > i)
    except StopIteration:
        print(f"{path}: the {BEGIN} / {END} lines are missing", file=sys.stderr)
        return 1
    new = "".join(lines[:i + 1]) + made + "".join(lines[j:])
    if check:
        if new != "".join(lines):
            print(f"{path}: its generated part ({part}) differs from its table; run 'make docs'",
                  file=sys.stderr)
            return 1
        print(f"{path}: the generated part ({part}) matches its table")
        return 0
    open(path, "w", encoding="utf-8").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
