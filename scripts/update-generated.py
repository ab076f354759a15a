#!/usr/bin/env python3
"""Writes (or with --check, verifies) the part of FILE between its lines that
contain `options:begin` and `options:end`, from what a generator prints:
README.md's options table and scripts/dlshim's flags, both from
shim/options.def through build/options-md.

    update-generated.py [--check] FILE GENERATOR [ARGS...]"""
import subprocess
import sys

BEGIN, END = "options:begin", "options:end"


def main(argv):
    check = argv[1:2] == ["--check"]
    args = argv[2:] if check else argv[1:]
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
            print(f"{path}: its generated part differs from shim/options.def; run 'make docs'",
                  file=sys.stderr)
            return 1
        print(f"{path}: the generated part matches shim/options.def")
        return 0
    open(path, "w", encoding="utf-8").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
