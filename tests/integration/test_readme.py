"""The README's sample runs are what the programs print today: each block
marked `<!-- readme-sample: COMMAND -->` is COMMAND's output (stdout line
by line, stderr beside it, as on a terminal), with the values that change
from run to run (times, pids, addresses, lifetimes) set aside."""
import re
import shlex
import subprocess

import pytest

from conftest import BUILD, ROOT, base_env

README = ROOT / "README.md"
# The commands name the checkout's own build: the plain suite runs them.
pytestmark = pytest.mark.skipif(BUILD != ROOT / "build",
                                reason="the README's commands use build/, not this variant")

VARYING = [
    (re.compile(r"^dlshim: +\d+\.\d+ \d+/\d+ "), "dlshim: T PID/TID "),
    (re.compile(r"0x[0-9a-f]+"), "ADDR"),
    (re.compile(r"(lifetime_ns|clock_origin_ns)=\d+"), r"\1=N"),
    (re.compile(r"\d+ us after"), "N us after"),
]


def samples():
    text = README.read_text()
    for m in re.finditer(r"<!-- readme-sample: (.*?) -->\n```\n\$ (.*?)\n(.*?)```", text, re.S):
        assert m.group(1) == m.group(2), "the marker and the $ line name one command"
        yield m.group(1), m.group(3).splitlines()


def normal(line):
    for pattern, repl in VARYING:
        line = pattern.sub(repl, line)
    return re.sub(r" +", " ", line)


@pytest.mark.parametrize("command, shown", list(samples()))
def test_readme_sample_is_the_real_output(command, shown):
    env = {k: v for k, v in base_env().items() if k != "LD_PRELOAD"}
    r = subprocess.run(["stdbuf", "-oL"] + shlex.split(command), cwd=ROOT, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout
    assert [normal(l) for l in r.stdout.splitlines()] == [normal(l) for l in shown]


def test_there_are_samples_to_check():
    assert len(list(samples())) >= 1


def test_without_the_shim_the_sample_program_crashes_as_the_readme_says():
    r = subprocess.run([str(ROOT / "build" / "examples" / "exchange"), "--double-release"],
                       capture_output=True, env=base_env(), timeout=60)
    assert r.returncode == -11  # "a segmentation fault, exit status 139"
