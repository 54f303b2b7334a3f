"""Shared helpers of the bench/ scripts: throw-away projects, timing, memory, tables.

Every benchmark runs benchmatrix in a copy of the project in a temporary directory
whose inventory points ``batch_runner_root`` and ``workload_fio_directory`` into
that directory, so nothing is written into the repository's results/ or into the
shared /var/tmp/benchmatrix. Figures go to bench/results/NAME.json.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# BMX_BENCH_RESULTS redirects the JSON files (the smoke test writes into its tmp_path).
RESULTS = Path(os.environ.get("BMX_BENCH_RESULTS") or BENCH / "results")
PY = sys.executable
PROJECT_PARTS = ["Snakefile", "workflow", "playbooks", "config", "scripts", "profiles"]
PEERS_VENV = BENCH / ".venv-peers"
# The versions the published figures were measured with (bench/README.md).
PEER_PACKAGES = ["ReBench==1.4.0", "reframe-hpc==4.10.4"]
TIMING_PLUGIN_DIR = BENCH / "ansible_timing"
_LOAD_AT_START = os.getloadavg()


# ---------------------------------------------------------------- machine

def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(), "cpu_model": cpu, "python": platform.python_version(),
            "loadavg_at_start": _LOAD_AT_START}


def versions() -> dict[str, str]:
    out = {}
    for mod in ("benchmatrix", "snakemake", "ansible_runner", "pandas"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # pragma: no cover - informational only
            out[mod] = "?"
    try:
        from ansible.release import __version__ as av
        out["ansible_core"] = av
    except Exception:  # pragma: no cover
        out["ansible_core"] = "?"
    return out


def write_result(name: str, data: dict[str, Any]) -> Path:
    """bench/results/NAME.json with the machine, versions and the time of measurement."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": name, "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": {**machine(), "loadavg_at_end": os.getloadavg()}, "versions": versions(),
           "command": " ".join([Path(sys.argv[0]).as_posix()] + sys.argv[1:]), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path


# ---------------------------------------------------------------- numbers

def median(xs: Iterable[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def cv(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.fmean(xs)
    return statistics.stdev(xs) / m if m else None


def slope(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    b = sum((a - mx) * (c - my) for a, c in zip(x, y)) / sxx
    return b, my - b * mx


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "-"
        return f"{v:.{digits}f}"
    return str(v)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain text table (right-aligned numbers)."""
    cells = [[fmt(v) if not isinstance(v, str) else v for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in cells:
        lines.append("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


# ---------------------------------------------------------------- processes

def process_kind(cmdline: list[str], parent_kind: str = "") -> str:
    """What a process of the controller's tree is, from its command line: the Snakemake
    job's entry script, ansible-playbook (its forks: "ansible worker"), an ssh client or
    master, a module run locally, ..."""
    if not cmdline:
        return "?"
    text = " ".join(cmdline)
    base = os.path.basename(cmdline[0])
    if base in ("sh", "bash", "dash"):
        return "shell"
    for script in ("run_batch", "restore_host", "plan", "collect", "report"):
        if f"scripts/{script}.py" in text:
            return f"job {script}.py"
    if "ansible-playbook" in text:
        # A worker is a fork of ansible-playbook: same command line, parent is the playbook.
        return "ansible worker" if parent_kind in ("ansible-playbook", "ansible worker") else "ansible-playbook"
    if "benchmatrix.cli" in text:
        return "bmx cli"
    if "snakemake" in text:
        return "snakemake"
    if base == "ssh" or base.startswith("ssh:"):
        return "ssh master" if "[mux]" in text else "ssh"
    if "AnsiballZ" in text:
        return "ansible module (local)"
    return base


class TreeSampler:
    """Samples a process tree: the summed RSS at each sample (its peak; and the summed
    PSS, which counts a page shared by forks once), and per process kind
    (:func:`process_kind`) how many were seen, how many at once, each one's peak RSS and
    CPU seconds (user + system, as last sampled: a short process's last moments are
    missed), and what the tree held at its RSS peak."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak_tree = 0.0
        self.peak_pss = 0.0
        self.at_peak: dict[str, list[float]] = {}
        self.procs: dict[tuple[int, float], dict[str, Any]] = {}
        self.most_at_once: dict[str, int] = {}

    def sample(self) -> float:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        total = pss = 0
        at_once: dict[str, int] = {}
        held: dict[str, list[float]] = {}
        kinds: dict[int, str] = {}
        for p in procs:  # parents come before their children
            try:
                with p.oneshot():
                    mem = p.memory_full_info()  # smaps_rollup: cheap
                    rss = mem.rss
                    cpu = p.cpu_times()
                    key = (p.pid, p.create_time())
                    info = self.procs.get(key)
                    if info is None:
                        info = self.procs[key] = {"kind": process_kind(p.cmdline(), kinds.get(p.ppid(), "")),
                                                  "rss": 0, "cpu": 0.0}
            except psutil.Error:
                continue
            kinds[p.pid] = info["kind"]
            total += rss
            pss += mem.pss
            held.setdefault(info["kind"], [0, 0.0])
            held[info["kind"]][0] += 1
            held[info["kind"]][1] += rss / 2**20
            info["rss"] = max(info["rss"], rss)
            info["cpu"] = cpu.user + cpu.system
            at_once[info["kind"]] = at_once.get(info["kind"], 0) + 1
        for k, c in at_once.items():
            self.most_at_once[k] = max(self.most_at_once.get(k, 0), c)
        if total / 2**20 > self.peak_tree:
            self.peak_tree = total / 2**20
            self.at_peak = {k: [c, round(m, 1)] for k, (c, m) in held.items()}
        self.peak_pss = max(self.peak_pss, pss / 2**20)
        return total / 2**20

    def kinds(self) -> dict[str, dict[str, Any]]:
        """Per kind: processes seen, most at once, peak RSS (MiB: median and largest of its
        processes), CPU seconds (median per process and sum)."""
        out: dict[str, dict[str, Any]] = {}
        for info in self.procs.values():
            out.setdefault(info["kind"], {"rss": [], "cpu": []})
            out[info["kind"]]["rss"].append(info["rss"] / 2**20)
            out[info["kind"]]["cpu"].append(info["cpu"])
        return {k: {"seen": len(v["rss"]), "most_at_once": self.most_at_once.get(k, 0),
                    "rss_mib_median": round(statistics.median(v["rss"]), 1), "rss_mib_max": round(max(v["rss"]), 1),
                    "cpu_s_median": round(statistics.median(v["cpu"]), 3), "cpu_s_sum": round(sum(v["cpu"]), 2)}
                for k, v in sorted(out.items(), key=lambda kv: -sum(kv[1]["cpu"]))}


def kinds_table(kinds: dict[str, dict[str, Any]]) -> str:
    """:meth:`TreeSampler.kinds` as a text table."""
    return table(["process", "seen", "at once", "RSS MiB (median)", "RSS MiB (max)", "CPU s (median)", "CPU s (sum)"],
                 [[k, v["seen"], v["most_at_once"], v["rss_mib_median"], v["rss_mib_max"], v["cpu_s_median"],
                   v["cpu_s_sum"]] for k, v in kinds.items()])


def run_measured(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
                 timeout: float = 3600, output: Path | None = None, tree_every: float = 0) -> dict[str, Any]:
    """Run a command; wall seconds, exit status and the peak RSS of it and every
    descendant it waited for (wait4's rusage: children are counted, not just the
    process itself: the largest of them). Output goes to ``output`` (or /dev/null).

    ``tree_every`` > 0: also sample the summed RSS of the whole process tree every that
    many seconds (``peak_tree_rss_mib``): what many processes at once hold together,
    which wait4's figure (one process) does not show.
    """
    out = open(output, "wb") if output else subprocess.DEVNULL
    t0 = time.perf_counter()
    next_sample = t0
    sampler = None
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        sampler = TreeSampler(proc.pid)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.perf_counter()
            if now > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            if tree_every and now >= next_sample:
                sampler.sample()
                next_sample = now + tree_every
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if output:
            out.close()
    res = {"wall_s": wall, "rc": proc.returncode, "peak_rss_mib": ru.ru_maxrss / 1024,
           "user_s": ru.ru_utime, "sys_s": ru.ru_stime}
    if tree_every:
        res["peak_tree_rss_mib"] = sampler.peak_tree
        res["peak_tree_pss_mib"] = sampler.peak_pss
        res["tree_kinds"] = sampler.kinds()
        res["tree_at_peak"] = sampler.at_peak
    return res


def python_measured(code: str, *, cwd: Path | None = None, timeout: float = 3600,
                    env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run Python code in a fresh interpreter of this venv. The code prints one JSON
    line last; returns it with wall_s (whole process) and peak_rss_mib (wait4)."""
    with tempfile.NamedTemporaryFile("w+b", suffix=".out", delete=False) as fh:
        out = Path(fh.name)
    try:
        res = run_measured([PY, "-c", code], cwd=cwd, timeout=timeout, output=out, env=env)
        text = out.read_text(errors="replace")
    finally:
        out.unlink(missing_ok=True)
    if res["rc"] != 0:
        raise RuntimeError(f"measured code failed (exit {res['rc']}):\n{text[-3000:]}")
    last = [ln for ln in text.splitlines() if ln.startswith("{")][-1]
    return {**json.loads(last), "process_wall_s": res["wall_s"], "peak_rss_mib": res["peak_rss_mib"]}


def ts(value: str | None) -> float | None:
    """ISO 8601 (a record's timestamps) -> epoch seconds."""
    return datetime.fromisoformat(value).timestamp() if value else None


def self_peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def birth_times(paths: Iterable[Path]) -> dict[str, float | None]:
    """Creation time (statx birth time, ns precision) of each path; None if unknown."""
    paths = [str(p) for p in paths]
    out: dict[str, float | None] = {p: None for p in paths}
    existing = [p for p in paths if os.path.exists(p)]
    if not existing:
        return out
    res = subprocess.run(["stat", "-c", "%.9W %n", *existing], capture_output=True, text=True)
    for line in res.stdout.splitlines():
        value, _, name = line.partition(" ")
        try:
            v = float(value)
        except ValueError:
            continue
        out[name] = v if v > 0 else None
    return out


# ---------------------------------------------------------------- projects

@functools.cache  # once per bench process: every project shares the package
def compile_package() -> None:
    """Compile the package's modules to bytecode once, before anything is timed: an
    installed package has its ``.pyc`` files; a fresh worktree (as the README's commands
    make) has none, and its first campaign's jobs would pay for them."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "benchmatrix")], env=env, check=True,
                   stdout=subprocess.DEVNULL)


class BenchProject:
    """A copy of the project in a temporary directory, localhost paths inside it."""

    def __init__(self, root: Path, inventory_extra: str = ""):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for part in PROJECT_PARTS:
            src = ROOT / part
            if src.is_dir():
                shutil.copytree(src, self.root / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, self.root / part)
        compile_package()
        self.hostwork = self.root / "hostwork"
        self.scratch = self.root / "scratch"
        self.inventory = self.root / "config" / "inventory" / "bench.yml"
        self.inventory.write_text(
            "all:\n  hosts:\n    localhost:\n"
            "      ansible_connection: local\n"
            "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n"
            f"      batch_runner_root: {self.hostwork}\n"
            f"      workload_fio_directory: {self.scratch}\n" + inventory_extra)

    def write_spec(self, name: str, text: str) -> Path:
        path = self.root / "config" / "experiments" / f"{name}.yaml"
        path.write_text(text)
        return path

    def exp(self, name: str) -> Path:
        return self.root / "results" / name

    def env(self, timing_file: Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env["BMX_PROJECT_DIR"] = str(self.root)
        # Bytecode written and used, as a user's jobs do (compile_package): with
        # PYTHONDONTWRITEBYTECODE set (as in this machine's shells) each of a campaign's
        # jobs compiled the package's modules again, about 0.3 CPU-s a job here.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
        if timing_file is not None:
            env.update(timing_env(timing_file))
        return env

    def bmx(self, *args: str, timeout: float = 1800, timing_file: Path | None = None,
            prefix: Sequence[str] = (), extra_env: dict[str, str] | None = None, tree_every: float = 0
            ) -> tuple[subprocess.CompletedProcess, float]:
        """Run ``bmx`` as a user would; returns the process and its wall seconds.

        ``tree_every`` > 0: measured with :func:`run_measured` instead (stdout and stderr
        together in ``stdout``); the process gets a ``memory`` attribute with
        ``peak_rss_mib`` (the largest process) and ``peak_tree_rss_mib`` (all at once).
        """
        env = {**self.env(timing_file), **(extra_env or {})}
        argv = [*prefix, PY, "-m", "benchmatrix.cli", *args]
        if tree_every:
            with tempfile.NamedTemporaryFile(suffix=".out", dir=self.root, delete=False) as fh:
                out = Path(fh.name)
            m = run_measured(argv, cwd=self.root, env=env, timeout=timeout, output=out, tree_every=tree_every)
            res = subprocess.CompletedProcess(argv, m["rc"], out.read_text(errors="replace"), "")
            out.unlink()
            res.memory = {k: m[k] for k in ("peak_rss_mib", "peak_tree_rss_mib", "peak_tree_pss_mib", "tree_kinds",
                                            "tree_at_peak", "user_s", "sys_s")}
            return res, m["wall_s"]
        t0 = time.perf_counter()
        res = subprocess.run(argv, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)
        return res, time.perf_counter() - t0

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def temp_dir(prefix: str, keep: bool = False) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


def timing_env(path: Path) -> dict[str, str]:
    """Environment that makes every Ansible call append its task timings to ``path``
    (bench/ansible_timing/bmx_bench_timing.py, an aggregate callback)."""
    return {"ANSIBLE_CALLBACK_PLUGINS": str(TIMING_PLUGIN_DIR),
            "ANSIBLE_CALLBACKS_ENABLED": "bmx_bench_timing",
            "BMX_BENCH_TIMING_FILE": str(path)}


def read_timing(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def task_seconds(events: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(task, seconds) of one playbook's events: each task_start until the next event."""
    out: list[tuple[str, float]] = []
    for a, b in zip(events, events[1:]):
        if a["event"] == "task_start":
            out.append((a.get("task", ""), b["t"] - a["t"]))
    return out


def split_playbooks(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The events of each playbook call, in order."""
    calls: list[list[dict[str, Any]]] = []
    for e in events:
        if e["event"] == "playbook_start":
            calls.append([])
        if calls:
            calls[-1].append(e)
    return calls


# ---------------------------------------------------------------- bmx phases

#: The task of roles/batch_runner/tasks/call.yml (run_known_batch.yml) as the timing log names it.
ONE_CALL_TASK = "batch_runner : Set the knobs and run the batch in one call"


def bmx_phases(exp: Path, recs: list[dict[str, Any]], events: list[dict[str, Any]], t_start: float,
               t_end: float) -> dict[str, float]:
    """Where the wall time of one `bmx run` went, from file times, records and task stamps.

    Job boundaries: a job's log file is created when its shell starts (birth time) and
    its outputs are written last (mtime). Inside a batch job: batch_started_at (the
    controller, just before ansible-runner), the Ansible task stamps of the timing
    callback, the runs' host-clock start and end, and the records' mtimes.
    """
    logs = exp / "logs"
    batches = []
    for r in recs:
        if r["batch"] not in batches:
            batches.append(r["batch"])
    hosts = sorted({r["host"] for r in recs})
    files = [logs / "snakemake.log", logs / "plan.log", logs / "collect.log"]
    files += [logs / "hosts" / f"{h}.restore.log" for h in hosts]
    files += [logs / "batches" / f"{b}.log" for b in batches]
    born = birth_times(files)

    def b(p: Path) -> float:
        v = born[str(p)]
        if v is None:
            raise RuntimeError(f"no birth time for {p}")
        return v

    def m(*ps: Path) -> float:
        return max(p.stat().st_mtime for p in ps if p.exists())

    out: dict[str, float] = {}

    def add(key: str, seconds: float) -> None:
        out[key] = out.get(key, 0.0) + seconds

    # (start, end, phase) of each job, in time order; the gaps between them are scheduling.
    jobs: list[tuple[float, float]] = []
    sm = b(logs / "snakemake.log")
    add("bmx start (CLI, spec, lock)", sm - t_start)
    plan0, plan1 = b(logs / "plan.log"), m(exp / "plan.csv")
    add("Snakemake start (workflow, DAG)", plan0 - sm)
    add("plan job", plan1 - plan0)
    jobs.append((plan0, plan1))
    # A batch on a known host is one module call (run_known_batch.yml, issue 34).
    plays = [e for e in events if e["playbook"] in ("run_batch.yml", "run_known_batch.yml")]
    starts = [i for i, e in enumerate(plays) if e["event"] == "playbook_start"]
    for k, bid in enumerate(batches):
        mine = [r for r in recs if r["batch"] == bid]
        j0 = b(logs / "batches" / f"{bid}.log")
        j1 = m(exp / "batches" / f"{bid}.done")
        jobs.append((j0, j1))
        t_batch = ts(mine[0]["batch_started_at"])
        ev = plays[starts[k]:starts[k + 1] if k + 1 < len(starts) else None]

        def at(event: str, task: str | None = None, last: bool = False, ev: list = ev, bid: str = bid,
               published: str = "") -> float:
            hits = [e["t"] for e in ev if e["event"] == event and (task is None or e.get("task") == task)
                    and (not published or published in e.get("published", ()))]
            if not hits:
                raise RuntimeError(f"batch {bid}: no {event} {task or published} in the timing log")
            return hits[-1] if last else hits[0]

        pb0 = at("playbook_start")
        # A host's first batch prepares it first (tasks/prepare.yml): facts, tool, runner.
        # run_known_batch.yml imports the role's ensure tasks (no task of that name since
        # 4d3d9e9): there the host's first task, whichever it is.
        named = [e["t"] for e in ev if e["event"] == "task_start"
                 and e.get("task") == "Make sure the workload's environment is up"]
        ensure0 = named[0] if named else at("task_start")
        if ev[0].get("playbook") == "run_known_batch.yml":
            # One call sets the knobs and runs the batch: its knobs count as the runner's start.
            knobs_done = setup0 = run0 = at("task_start", ONE_CALL_TASK)
            run1 = at("task_ok", ONE_CALL_TASK, last=True)
        else:
            knobs_done = at("task_ok", published="bmx_knobs")
            # Since the runner is installed by the host's first batch, a batch has no setup tasks: 0 s.
            setup0 = min([at("task_start", "batch_runner : Run the batch")]
                         + [e["t"] for e in ev if e["event"] == "task_start"
                           and e.get("task") == "batch_runner : Install the batch runner"])
            run0 = at("task_start", "batch_runner : Run the batch")
            run1 = at("task_ok", "batch_runner : Run the batch")
        pb1 = at("playbook_end")
        first = min(ts(r["started_at"]) for r in mine)
        last = max(ts(r["ended_at"]) for r in mine)
        work = sum(r["duration_s"] for r in mine)
        rec_done = max((exp / "runs" / r["run_id"] / str(r["attempt"]) / "record.json").stat().st_mtime for r in mine)
        ans_log = m(logs / "ansible" / f"{bid}.log")
        add("batch job start (Python, spec, plan)", t_batch - j0)
        add("Ansible start (ansible-runner, ansible-playbook)", pb0 - t_batch)
        add("prepare the host (its first batch: facts, tool, runner install)", ensure0 - pb0)
        add("knob check (environment, knobs, report)", knobs_done - ensure0)
        add("build commands (workload role)", setup0 - knobs_done)
        add("runner setup (dirs, copy runner, manifest)", run0 - setup0)
        add("runner start (command task, Python)", first - run0)
        add("workload (runs' own duration)", work)
        add("runner between runs (per run)", (last - first) - work)
        add("runner exit, archive, task return", run1 - last)
        add("fetch archive, remove it, playbook end", pb1 - run1)
        add("Ansible exit (ansible-runner returns)", ans_log - pb1)
        add("parse + write records", rec_done - ans_log)
        add("batch job end (marker)", j1 - rec_done)
        out["parse_s (records' phases.parse_s)"] = out.get("parse_s (records' phases.parse_s)", 0.0) + sum(
            r["phases"].get("parse_s") or 0 for r in mine)
    for h in hosts:
        if not (logs / "hosts" / f"{h}.restore.log").exists():
            continue  # nothing to undo on the host: no restore job (execute.restore.restore_needed)
        r0 = b(logs / "hosts" / f"{h}.restore.log")
        r1 = m(exp / "hosts" / h / "restored.json")
        add("restore_host job", r1 - r0)
        jobs.append((r0, r1))
    c0 = b(logs / "collect.log")
    # One job computes every table, then renders the reports from them in memory.
    r1 = m(exp / "report.html", exp / "report.md")
    add("collect job (every table, then report.html and report.md)", r1 - c0)
    jobs.append((c0, r1))
    jobs.sort()
    gaps = sum(max(jobs[i + 1][0] - max(e for _, e in jobs[:i + 1]), 0.0) for i in range(len(jobs) - 1))
    add("Snakemake scheduling (gaps between jobs)", gaps)
    add("Snakemake exit, bmx status and exit", t_end - r1)
    accounted = sum(v for k, v in out.items() if not k.startswith("parse_s"))
    out["total (bmx run wall)"] = t_end - t_start
    out["unaccounted"] = (t_end - t_start) - accounted
    return out


# ---------------------------------------------------------------- peers

def peers_python() -> Path:
    """The peers' virtualenv (ReBench, ReFrame), made and filled on first use."""
    py = PEERS_VENV / "bin" / "python"
    marker = PEERS_VENV / ".bench-packages"
    want = "\n".join(PEER_PACKAGES)
    if py.is_file() and marker.is_file() and marker.read_text() == want:
        return py
    print(f"bench: installing {', '.join(PEER_PACKAGES)} into {PEERS_VENV} ...", file=sys.stderr, flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(PEERS_VENV)
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PEER_PACKAGES],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(PEER_PACKAGES)} failed:\n{res.stdout}\n{res.stderr}")
    marker.write_text(want)
    return py


def peer_bin(name: str) -> str:
    return str(peers_python().parent / name)
