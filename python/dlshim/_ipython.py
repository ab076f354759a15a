"""`%load_ext dlshim` (IPython, Jupyter): attaches the shim to the kernel,
shows each violation in the output of the cell that caused it, with its
Python line, and adds the %dlshim magic: `%dlshim` shows the status,
`%dlshim report` the HTML report of this kernel's log (report.py).

Unless DLSHIM_LOG names one, the log is a jsonl file of the kernel's own
(written line by line: DLSHIM_LOG_BUFFER=0), which the cell hook reads
from where it last stopped; with the user's own log the hook shows the
latest violation from the status instead."""
import json
import os
import tempfile

from . import _attach


class Extension:
    def __init__(self, ip):
        self.ip = ip
        self.log = None
        self.offset = 0
        self.violations = 0

    def start(self):
        options = {}
        if "DLSHIM_LOG" not in os.environ:
            fd, self.log = tempfile.mkstemp(prefix=f"dlshim-kernel-{os.getpid()}-",
                                            suffix=".jsonl")
            os.close(fd)
            options = {"log": self.log, "format": "jsonl", "log_buffer": 0}
        _attach.attach(options)
        s = _attach.status()
        self.violations = s["violations"] if s else 0
        self.ip.events.register("post_run_cell", self.after_cell)
        self.ip.register_magic_function(self.magic, "line", "dlshim")

    def new_violations(self):
        """The violations logged since the last cell, as lines to show."""
        s = _attach.status()
        if s is None or s["violations"] == self.violations:
            return []
        count, self.violations = s["violations"] - self.violations, s["violations"]
        if not self.log:
            where = f" at {s['last_violation_py']}" if s["last_violation_py"] else ""
            return [f"dlshim: {count} violation(s), last {s['last_violation']}{where}"]
        lines = []
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next cell
        self.offset += end
        for raw in data[:end].splitlines():
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            if ev.get("event") == "violation":
                where = f" at {ev['py']}" if ev.get("py") else ""
                lines.append(f"dlshim: {ev.get('kind')}{where}: {ev.get('detail', '')}")
        return lines

    def after_cell(self, result):
        import sys
        for line in self.new_violations():
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def magic(self, line):
        """%dlshim: the status; %dlshim report: the HTML report, inline."""
        arg = line.strip()
        if arg == "report":
            return self.report()
        if arg:
            raise ValueError(f"dlshim: %dlshim takes nothing or `report`, not {arg!r}")
        return Status(_attach.status())

    def report(self):
        from . import report
        if not self.log:
            raise ValueError("dlshim: %dlshim report needs the kernel's own log "
                             "(DLSHIM_LOG is set: run dlshim-report on it)")
        events, problems = report.read_log(self.log)
        org = report.origins(events)
        events.sort(key=lambda e: org.get(e["pid"], 0) + e["t_ns"])
        r = report.analyse(events)
        return Html(report.render_html(r, events, report.tables(r), problems,
                                       [os.path.basename(self.log)]))


class Status(dict):
    """dlshim.status() shown as text and as a small table."""

    def __repr__(self):
        if not self:
            return "dlshim: not tracking this kernel"
        last = self["last_violation"] or "none"
        where = f" at {self['last_violation_py']}" if self["last_violation_py"] else ""
        kinds = ", ".join(f"{k} {n}" for k, n in self["violations_by_kind"].items())
        return (f"dlshim: {self['violations']} violation(s){f' ({kinds})' if kinds else ''}, "
                f"{self['shares']} share(s), {self['copies']} of them copies, "
                f"{self['outstanding']} outstanding; last violation: {last}{where}")

    def __init__(self, status):
        super().__init__(status or {})


class Html:
    def __init__(self, text):
        self.text = text

    def _repr_html_(self):
        return self.text


_loaded = None


def load(ip):
    global _loaded
    if _loaded is None:
        _loaded = Extension(ip)
        _loaded.start()
