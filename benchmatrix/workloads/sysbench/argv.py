"""sysbench's argv builder: the filters of the workload_sysbench role (a batch's runs ->
sysbench's argv per run, and what the batch needs prepared: fileio test files, OLTP tables).

A run's variables (the spec's ``workload.vars``, rendered for the run):

==================  ==========================================================
``test``            cpu, memory, fileio, threads, mutex, or a database test:
                    oltp_read_only, oltp_read_write, oltp_point_select,
                    oltp_write_only, oltp_update_index, oltp_update_non_index,
                    oltp_insert, oltp_delete, select_random_points,
                    select_random_ranges, bulk_insert (required)
``threads``         ``--threads``, the load level (default 1)
``time``            ``--time`` seconds (default 10)
``events``          ``--events`` (0: no limit)
``rate``            ``--rate`` (events per second in total; 0: no limit)
``percentile``      ``--percentile`` reported as latency_pNN_ms (default 95)
``report_interval`` ``--report-interval`` seconds (progress lines; not parsed)
``options``         ``{name: value}``: the test's own options as ``--name=value``
                    (``_`` in names becomes ``-``), e.g. ``{cpu-max-prime: 20000}``,
                    ``{file-test-mode: rndrd, file-total-size: 1G}``,
                    ``{tables: 4, table-size: 100000, range-size: 100}``; an
                    empty value leaves the option out (sysbench refuses options
                    its test does not know)
``cpus``            CPU list the run (sysbench and, for database tests, the
                    server) is confined to
==================  ==========================================================

fileio runs in a directory per (file-total-size, file-num), prepared once; database
tests use the tables sbtest1..N of (tables, table-size), prepared once per batch
setting. The database connection options are the role's, not the run's.
"""

from __future__ import annotations

import hashlib
import re

from benchmatrix.errors import WorkloadVarsError
from benchmatrix.names import shown
from benchmatrix.workloads.base import filter_module, run_cpus, runs_filter, unknown_variables

SIMPLE_TESTS = ("cpu", "memory", "fileio", "threads", "mutex")
DB_TESTS = ("oltp_read_only", "oltp_read_write", "oltp_point_select", "oltp_write_only", "oltp_update_index",
            "oltp_update_non_index", "oltp_insert", "oltp_delete", "select_random_points",
            "select_random_ranges", "bulk_insert")
KNOWN = {"test", "threads", "time", "events", "rate", "percentile", "report_interval", "options", "cpus"}
OWNED = {"db-driver", "pgsql-host", "pgsql-port", "pgsql-user", "pgsql-password", "pgsql-db", "mysql-host",
         "mysql-port", "mysql-socket", "mysql-user", "mysql-password", "mysql-db", "threads", "time", "events",
         "rate", "percentile", "report-interval", "config-file", "help", "version"}
# sysbench's own defaults for the options that decide what gets prepared.
FILEIO_DEFAULTS = {"file-total-size": "2G", "file-num": "128"}
DB_DEFAULTS = {"tables": "1", "table-size": "10000"}
_OPTION = re.compile(r"^[a-z][a-z0-9-]*$")


def _fail(run, message):
    raise WorkloadVarsError(f"workload_sysbench: run {run.get('run_id', '?')}: {message}")


def _scalar(run, name, value):
    if isinstance(value, bool):
        return "on" if value else "off"
    if not isinstance(value, (int, float, str)):
        _fail(run, f"'{name}' must be a string, number or boolean, not {type(value).__name__}")
    text = str(value)
    if any(ch in text for ch in "\n\r\x00") or not text:
        _fail(run, f"'{name}' is empty or contains a line break or NUL")
    return text


def _number(run, name, value, minimum=0):
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or number < minimum:
        _fail(run, f"'{name}' must be a number >= {minimum}, not {value!r}")
    return f"{number:g}"


def _options(run):
    v = run.get("vars") or {}
    opts = {}
    raw = v.get("options") or {}
    if not isinstance(raw, dict):
        _fail(run, "'options' must be a mapping of option name to value")
    for name, value in raw.items():
        key = str(name).replace("_", "-")
        if not _OPTION.fullmatch(key):
            _fail(run, f"options: {shown(name)} is not a sysbench option name")
        if key in OWNED:
            _fail(run, f"options: '{key}' is set by benchmatrix (use the run variable or the role's connection)")
        if value is None or value == "":
            continue  # left out: lets a templated value drop an option for some cells
        opts[key] = _scalar(run, key, value)
    return opts


def _test(run):
    v = run.get("vars") or {}
    unknown = unknown_variables(v, KNOWN)
    if unknown:
        _fail(run, unknown)
    test = v.get("test")
    if test not in SIMPLE_TESTS + DB_TESTS:
        _fail(run, f"test '{test}' is not one of {', '.join(SIMPLE_TESTS + DB_TESTS)}")
    return test


def fileio_dir(directory, opts):
    size = opts.get("file-total-size", FILEIO_DEFAULTS["file-total-size"])
    num = opts.get("file-num", FILEIO_DEFAULTS["file-num"])
    tag = hashlib.sha256(f"{size}\0{num}".encode()).hexdigest()[:8]
    safe = re.sub(r"[^A-Za-z0-9]", "", f"{size}x{num}")[:24]
    return f"{directory}/fileio-{safe}-{tag}", size, num


def workload_sysbench_needs(runs, directory):
    """What the batch needs prepared: ``{"fileio": [{dir, size, num}], "db": {tables, table_size, test} | None}``."""
    fileio, db = {}, None
    for run in runs or []:
        test = _test(run)
        opts = _options(run)
        if test == "fileio":
            path, size, num = fileio_dir(directory, opts)
            fileio[path] = {"dir": path, "size": size, "num": num}
        elif test in DB_TESTS:
            want = {"tables": opts.get("tables", DB_DEFAULTS["tables"]),
                    "table_size": opts.get("table-size", DB_DEFAULTS["table-size"]), "test": test}
            if db is not None and (db["tables"], db["table_size"]) != (want["tables"], want["table_size"]):
                _fail(run, f"the batch's database tests ask for {db['tables']} x {db['table_size']} and "
                           f"{want['tables']} x {want['table_size']} rows; the database holds one table set at a "
                           "time: keep tables and table-size constant, or make them a knob")
            db = db or want
    return {"fileio": [fileio[k] for k in sorted(fileio)], "db": db}


def workload_sysbench_plan(runs, binary, directory, conn=None):
    """The runs with sysbench's argv (and cwd for fileio); vars removed."""
    commands = []
    pinned = any((r.get("vars") or {}).get("cpus") not in (None, "") for r in runs or [])
    for run in runs or []:
        test = _test(run)
        v = run.get("vars") or {}
        opts = _options(run)
        argv = [binary, test, "--threads=" + _number(run, "threads", v.get("threads", 1), minimum=1),
                "--time=" + _number(run, "time", v.get("time", 10))]
        for name in ("events", "rate", "percentile", "report_interval"):
            if name in v:
                argv.append(f"--{name.replace('_', '-')}=" + _number(run, name, v[name]))
        argv += [f"--{k}={opts[k]}" for k in sorted(opts)]
        item = {k: val for k, val in run.items() if k not in ("vars", "factors")}
        if test in DB_TESTS:
            if not conn:
                _fail(run, f"test {test} needs a database, but no connection is configured")
            argv += ["--db-driver=pgsql", f"--pgsql-host={conn['host']}", f"--pgsql-port={conn['port']}",
                     f"--pgsql-user={conn['user']}", f"--pgsql-db={conn['database']}"]
        if test == "fileio":
            item["cwd"] = fileio_dir(directory, opts)[0]
        argv.append("run")
        item["argv"] = argv
        if pinned:
            cpus = v.get("cpus")
            item["cpus"] = "all" if cpus in (None, "") else run_cpus("workload_sysbench", run, cpus)
        if test in DB_TESTS and conn and conn.get("pidfile"):
            # The provisioned server follows the run's CPUs (vars.cpus or a knob's).
            item["pin_pidfiles"] = [conn["pidfile"]]
        commands.append(item)
    return commands


FilterModule = filter_module(workload_sysbench_plan=runs_filter(workload_sysbench_plan, commands=""),
                             workload_sysbench_needs=runs_filter(workload_sysbench_needs))
