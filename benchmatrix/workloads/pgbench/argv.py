"""pgbench's argv builder: the filters of the workload_pgbench role (``workload_pgbench_plan``:
a batch's runs -> pgbench's argv per run, plus the custom script files those runs need).

A run's variables (the spec's ``workload.vars``, rendered for the run):

==================  ==========================================================
``builtin``         a builtin script (``select-only``, ``tpcb-like``,
                    ``simple-update``), optionally ``NAME@WEIGHT``; or a list
``scripts``         custom scripts: ``[{name, text | file, weight}]``; ``file`` is
                    relative to the project directory; text and file are Jinja2
                    templates with the cell's factors and the run's variables
``think_ms``        think time: ``\\sleep THINK_MS ms`` appended to every script
                    (a builtin then runs as a custom script with its own text)
``clients``         ``-c`` (default 1)
``threads``         ``-j`` (default 1)
``duration``        ``-T`` seconds (default 10), or
``transactions``    ``-t`` per client (instead of duration)
``rate``            ``-R`` transactions per second (throttling)
``latency_limit``   ``-L`` ms
``protocol``        ``-M`` simple, extended or prepared
``max_tries``       ``--max-tries``
``connect``         ``-C``: a new connection per transaction
``per_statement``   ``-r``: per-statement latencies (default true)
``progress``        ``-P`` seconds (default: the role's; pgbench prints the latency
                    stddev only with it); 0 turns it off
``vacuum``          false adds ``-n`` (no vacuum before the run; default true when
                    the run uses a builtin, false with custom scripts only)
``define``          ``{name: value}``: ``-D name=value`` script variables
``options``         ``{name: value}``: any other long option, ``--name=value``
``scale``           scale factor of the initialization (used by the role, not here)
``cpus``            CPU list the run (pgbench and the server) is confined to
==================  ==========================================================

Every value becomes its own argv item; values never pass through a shell. Template
values may not contain line breaks or backslashes, so a factor level can never add a
line or a meta-command (``\\shell``) to a script.
"""

from __future__ import annotations

import hashlib
import os
import re

from benchmatrix.errors import WorkloadVarsError
from benchmatrix.names import shown
from benchmatrix.workloads.base import (
    filter_module,
    refuse_characters,
    render_template,
    run_cpus,
    runs_filter,
    unknown_variables,
)

BUILTINS = ("select-only", "tpcb-like", "simple-update")
KNOWN = {"builtin", "scripts", "think_ms", "clients", "threads", "duration", "transactions", "rate",
         "latency_limit", "protocol", "max_tries", "connect", "per_statement", "progress", "vacuum",
         "define", "options", "scale", "cpus"}
# Options the role owns: output, connection, scripts and initialization.
OWNED = {"host", "port", "username", "dbname", "file", "builtin", "initialize", "init-steps", "scale",
         "log", "log-prefix", "aggregate-interval", "sampling-rate", "report-per-command", "report-latencies",
         "progress", "client", "jobs", "time", "transactions", "no-vacuum", "connect", "rate", "latency-limit",
         "protocol", "max-tries", "define", "show-script", "debug"}
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_OPTION = re.compile(r"^[a-z][a-z0-9-]*$")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_SCRIPT_VALUE = refuse_characters("\n\r\x00\\", "a line break, NUL or backslash")


def _fail(run, message):
    raise WorkloadVarsError(f"workload_pgbench: run {run.get('run_id', '?')}: {message}")


def _render(run, text, context, where):
    try:
        return render_template(text, context, _SCRIPT_VALUE)
    except ValueError as exc:
        _fail(run, f"{where}: {exc}")
    except Exception as exc:  # Jinja2 syntax and undefined-variable errors, bounds exceeded
        _fail(run, f"{where}: template error: {exc}")


def _scalar(run, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        _fail(run, f"'{name}' must be a string or number, not {type(value).__name__}")
    text = str(value)
    if any(ch in text for ch in "\n\r\x00"):
        _fail(run, f"'{name}' contains a line break or NUL")
    return text


def _number(run, name, value, minimum=0, integer=True):
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        _fail(run, f"'{name}' must be a number, not {value!r}")
    if isinstance(value, bool) or number < minimum:
        _fail(run, f"'{name}' must be a number >= {minimum}, not {value!r}")
    if integer and float(value) != number:
        _fail(run, f"'{name}' must be a whole number, not {value!r}")
    return str(number)


def _weighted(run, item):
    text = _scalar(run, "builtin", item)
    name, sep, weight = text.partition("@")
    if name not in BUILTINS:
        _fail(run, f"builtin '{name}' is not one of {', '.join(BUILTINS)}")
    return name, (_number(run, "builtin weight", weight) if sep else None)


def _think_line(run, think_ms):
    ms = _number(run, "think_ms", think_ms, integer=False)
    return f"\\sleep {float(ms):g} ms\n"


def _scripts(run, v, context, base_dir, builtin_texts):
    """[(name, text or None for a plain builtin, weight)] of one run."""
    out = []
    builtins = v.get("builtin")
    if builtins is not None and not isinstance(builtins, list):
        builtins = [builtins]
    think = v.get("think_ms")
    think = None if think in (None, 0, "0", "") else think
    for item in builtins or []:
        name, weight = _weighted(run, item)
        if think is None:
            out.append((name, None, weight))
            continue
        text = builtin_texts.get(name)
        if not text:
            _fail(run, f"the text of builtin '{name}' is unknown (pgbench --show-script failed?)")
        out.append((name, text.rstrip("\n") + "\n" + _think_line(run, think), weight))
    scripts = v.get("scripts") or []
    if not isinstance(scripts, list):
        _fail(run, "'scripts' must be a list of {name, text or file, weight}")
    for i, item in enumerate(scripts, start=1):
        if not isinstance(item, dict):
            _fail(run, f"scripts[{i}] must be a mapping with text or file")
        unknown = set(item) - {"name", "text", "file", "weight"}
        if unknown:
            _fail(run, f"scripts[{i}] has unknown key(s) {', '.join(sorted(unknown))}")
        if ("text" in item) == ("file" in item):
            _fail(run, f"scripts[{i}] needs exactly one of text and file")
        if "file" in item:
            path = str(item["file"])
            full = path if os.path.isabs(path) else os.path.join(base_dir, path)
            try:
                with open(full, encoding="utf-8") as fh:
                    source = fh.read()
            except OSError as exc:
                _fail(run, f"scripts[{i}]: cannot read {full}: {exc.strerror or exc}")
            default_name = os.path.splitext(os.path.basename(path))[0]
        else:
            source = str(item["text"])
            default_name = f"script{i}"
        name = str(item.get("name") or default_name)
        if not _NAME.fullmatch(name):
            _fail(run, f"scripts[{i}]: {shown(name)} is not a usable script name (letters, digits, _ . -)")
        text = _render(run, source, context, f"scripts[{i}] ({name})")
        if not text.endswith("\n"):
            text += "\n"
        if think is not None:
            text += _think_line(run, think)
        weight = _number(run, f"scripts[{i}].weight", item["weight"]) if "weight" in item else None
        out.append((name, text, weight))
    if not out:
        name = "tpcb-like"
        out.append((name, None, None) if think is None else
                   (name, (builtin_texts.get(name) or _fail(run, "builtin text unknown")).rstrip("\n") + "\n"
                    + _think_line(run, think), None))
    names = [n for n, t, _ in out if t is not None]
    if len(set(names)) != len(names):
        _fail(run, f"two scripts share a name ({', '.join(names)}); give each a distinct name")
    return out


# shape: the run and the role's filter options (conn, binary, directory, base dir, builtin texts, progress)
def pgbench_run(run, conn, binary, directory, base_dir, builtin_texts, progress):
    """(argv, files {path: text}, cwd, inputs {name: path}) of one run."""
    v = dict(run.get("vars") or {})
    unknown = unknown_variables(v, KNOWN)
    if unknown:
        _fail(run, unknown)
    context = dict(run.get("factors") or {})
    context.update(v)
    context.update({"run_id": run.get("run_id"), "attempt": run.get("attempt")})
    scripts = _scripts(run, v, context, base_dir, builtin_texts)
    custom = [(n, t, w) for n, t, w in scripts if t is not None]

    argv = [binary]
    # pgbench's own default (vacuum the pgbench tables, empty pgbench_history) keeps the
    # runs of a builtin comparable; custom scripts may not use those tables at all.
    if not v.get("vacuum", v.get("builtin") is not None or not v.get("scripts")):
        argv.append("--no-vacuum")
    argv += ["--client", _number(run, "clients", v.get("clients", 1), minimum=1),
             "--jobs", _number(run, "threads", v.get("threads", 1), minimum=1)]
    if "transactions" in v and "duration" in v:
        _fail(run, "set either duration or transactions, not both")
    if "transactions" in v:
        argv += ["--transactions", _number(run, "transactions", v["transactions"], minimum=1)]
    else:
        argv += ["--time", _number(run, "duration", v.get("duration", 10), minimum=1)]
    prog = v.get("progress", progress)
    if prog not in (None, 0, "0", False):
        argv += ["--progress", _number(run, "progress", prog, minimum=1)]
    if v.get("per_statement", True):
        argv.append("--report-per-command")
    if "rate" in v:
        argv += ["--rate", _number(run, "rate", v["rate"], integer=False)]
    if "latency_limit" in v:
        argv += ["--latency-limit", _number(run, "latency_limit", v["latency_limit"], integer=False)]
    if "protocol" in v:
        if v["protocol"] not in ("simple", "extended", "prepared"):
            _fail(run, "protocol must be simple, extended or prepared")
        argv += ["--protocol", v["protocol"]]
    if "max_tries" in v:
        argv.append("--max-tries=" + _number(run, "max_tries", v["max_tries"]))
    if v.get("connect"):
        argv.append("--connect")
    for name, value in sorted((v.get("define") or {}).items()):
        if not _VAR.fullmatch(str(name)):
            _fail(run, f"define: {shown(name)} is not a variable name")
        argv += ["--define", f"{name}={_scalar(run, 'define.' + str(name), value)}"]
    for name, value in sorted((v.get("options") or {}).items()):
        key = str(name).replace("_", "-")
        if not _OPTION.fullmatch(key):
            _fail(run, f"options: {shown(name)} is not a pgbench option name")
        if key in OWNED:
            _fail(run, f"options: '{key}' is set by benchmatrix (use the variable of the same meaning)")
        argv.append(f"--{key}" if value is None or value is True else f"--{key}={_scalar(run, key, value)}")

    files, inputs, cwd = {}, {}, None
    if custom:
        digest = hashlib.sha256("\0".join(f"{n}\0{t}" for n, t, _ in custom).encode()).hexdigest()[:16]
        cwd = f"{directory}/scripts/{digest}"
        for name, text, _ in custom:
            files[f"{cwd}/{name}.sql"] = text
            inputs[f"{name}.sql"] = f"{cwd}/{name}.sql"
    for name, text, weight in scripts:
        suffix = f"@{weight}" if weight is not None else ""
        if text is None:
            argv += ["--builtin", name + suffix]
        else:
            argv += ["--file", f"{name}.sql{suffix}"]
    argv += ["--host", str(conn["host"]), "--port", str(conn["port"]), "--username", str(conn["user"]),
             "--", str(conn["database"])]
    return argv, files, cwd, inputs


# shape: the Ansible filter's arguments as the role passes them, the last two with defaults
def workload_pgbench_plan(runs, conn, binary, directory, base_dir, builtin_texts=None, progress=1):
    """Commands (the runs with argv, cwd, inputs; vars removed) and the script files to write.

    Returns:
        ``{"commands": [...], "files": [{"path", "content"}], "dirs": [...]}``.
    """
    commands, files = [], {}
    pinned = any((r.get("vars") or {}).get("cpus") not in (None, "") for r in runs or [])
    for run in runs or []:
        argv, run_files, cwd, inputs = pgbench_run(run, conn, binary, directory, base_dir,
                                                   builtin_texts or {}, progress)
        item = {k: v for k, v in run.items() if k not in ("vars", "factors")}
        item["argv"] = argv
        if cwd:
            item["cwd"] = cwd
            item["inputs"] = inputs
        cpus = (run.get("vars") or {}).get("cpus")
        if pinned:
            # Once one run of the batch confines pgbench, every run sets its CPUs, so no
            # run inherits the confinement of the one before it.
            item["cpus"] = "all" if cpus in (None, "") else run_cpus("workload_pgbench", run, cpus)
        if conn.get("pidfile"):
            # The provisioned server follows the run's CPUs (vars.cpus, or the cpus a
            # knob such as knob_cpu_affinity sets); without any, all the runner's CPUs.
            item["pin_pidfiles"] = [conn["pidfile"]]
        commands.append(item)
        files.update(run_files)
    return {"commands": commands,
            "files": [{"path": p, "content": files[p]} for p in sorted(files)],
            "dirs": sorted({os.path.dirname(p) for p in files})}


def workload_pgbench_builtins(runs):
    """Names of the builtin scripts whose text the batch needs (builtins with think time)."""
    names = set()
    for run in runs or []:
        v = run.get("vars") or {}
        if v.get("think_ms") in (None, 0, "0", ""):
            continue
        builtins = v.get("builtin")
        if builtins is None and not v.get("scripts"):
            builtins = ["tpcb-like"]
        if builtins is not None and not isinstance(builtins, list):
            builtins = [builtins]
        for item in builtins or []:
            names.add(str(item).partition("@")[0])
    return sorted(n for n in names if n in BUILTINS)


def workload_pgbench_builtin_texts(results):
    """``pgbench --show-script`` results (a registered loop) -> {name: script text}."""
    texts = {}
    for res in results or []:
        name = res.get("item")
        lines = [ln for ln in str(res.get("stderr", "")).splitlines() if not ln.startswith("-- ")]
        texts[name] = "\n".join(lines).strip("\n") + "\n"
    return texts


def workload_pgbench_scales(runs, default):
    """The scale factors the batch's runs ask for (``vars.scale``, else the default)."""
    return sorted({int((run.get("vars") or {}).get("scale", default)) for run in runs or []})


FilterModule = filter_module(workload_pgbench_plan=runs_filter(workload_pgbench_plan, commands="commands"),
                             workload_pgbench_builtins=runs_filter(workload_pgbench_builtins),
                             workload_pgbench_builtin_texts=workload_pgbench_builtin_texts,
                             workload_pgbench_scales=runs_filter(workload_pgbench_scales))
