#!/usr/bin/env python3
"""Writes (or with --check, verifies) the options table in README.md between
the `<!-- options:begin -->` and `<!-- options:end -->` markers, from the
output of build/options-md (itself generated from shim/options.def)."""
import subprocess
import sys

BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"


def main(argv):
    check = argv[1:2] == ["--check"]
    readme, generator = argv[-2], argv[-1]
    table = subprocess.run([generator], check=True, capture_output=True, text=True).stdout
    text = open(readme, encoding="utf-8").read()
    try:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        print(f"{readme}: the {BEGIN} / {END} markers are missing", file=sys.stderr)
        return 1
    new = f"{head}{BEGIN}\n{table}{END}{tail}"
    if check:
        if new != text:
            print(f"{readme}: the options table differs from shim/options.def; "
                  "run 'make docs'", file=sys.stderr)
            return 1
        print("README options table matches shim/options.def")
        return 0
    open(readme, "w", encoding="utf-8").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
