"""The batch runner's archive: tar members it packs itself, and the controller's reader.

The runner writes the member headers of the usual files itself (issue 34: tarfile's
addfile cost a fifth of a millisecond a run); names and sizes it cannot pack go through
tarfile's own encoder. The controller reads archives with read_archive (tarfile's
reader cost 0.1 ms a run); tarfile is the reference both are checked against. Real
files; nothing is mocked but a file whose size changes while it is archived.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from host_layout import leave_run

from benchmatrix.host import batch_runner


def _manifest(workdir: Path, run_ids: list[str]) -> dict:
    return {"archive": str(workdir / "batches" / "b1.tar.gz"),
            "runs": [{"run_id": r, "attempt": 1} for r in run_ids]}


def _archive(workdir: Path, run_ids: list[str]) -> str:
    manifest = _manifest(workdir, run_ids)
    return batch_runner._archive(manifest, str(workdir), batch_runner.finished_runs(str(workdir), manifest["runs"]))


def test_members_read_back_with_their_names_contents_modes_and_times(tmp_path):
    long_id = "cell-" + "x" * 120  # a path over tar's 100-byte name field
    blobs = {
        "r1": {"stdout": b"runtime: 5us\n", "stderr": b"a warning\n", "counters.json": b'{"samples": []}',
               "inputs/job.fio": b"[job]\nrw=read\n"},
        "r\u00e9": {"stdout": bytes(range(256)) * 5},  # a name that is not ASCII
        long_id: {"stdout": b"x" * 512, "usage.json": b'{"wall_s": 1}'},  # one block: no padding
    }
    # What the run's result says it has goes in: r1's counters, long_id's usage.
    results = {"r1": {"counters": {"file": "counters.json"}}, long_id: {"usage": {"wall_s": 1}}}
    expected = {}
    for run_id, files in blobs.items():
        line = leave_run(tmp_path, run_id, files, **results.get(run_id, {}))
        expected.update({f"runs/{run_id}/1/{name}": data for name, data in {"stderr": b"", **files}.items()})
        expected[f"runs/{run_id}/1/result.json"] = line
    # Not finished (no result line): not archived; a file its result does not name: left out.
    leave_run(tmp_path, "r4", {"stdout": b"unfinished"}, finished=False)
    leave_run(tmp_path, "r5", {"usage.json": b"{}"})
    expected.update({"runs/r5/1/stdout": b"", "runs/r5/1/stderr": b"",
                     "runs/r5/1/result.json": leave_run(tmp_path, "r5", {}, finished=False)})
    os.chmod(batch_runner.run_file(str(tmp_path), "r1", 1, "stdout"), 0o640)
    os.utime(batch_runner.run_file(str(tmp_path), "r1", 1, "stdout"), (1_700_000_000, 1_700_000_000))

    path = _archive(tmp_path, [*blobs, "r4", "r5"])

    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == sorted(expected)
        for name, data in expected.items():
            assert members[name].isfile()
            assert tar.extractfile(members[name]).read() == data, name
        st = os.stat(batch_runner.run_file(str(tmp_path), "r1", 1, "stdout"))
        m = members["runs/r1/1/stdout"]
        assert (m.mode, m.uid, m.gid, m.mtime) == (0o640, st.st_uid, st.st_gid, 1_700_000_000)


def test_a_header_packed_here_is_the_one_tarfile_would_write(tmp_path):
    f = tmp_path / "stdout"
    f.write_bytes(b"abc")
    st = os.lstat(f)
    info = tarfile.TarInfo("runs/r1/1/stdout")
    info.type, info.mode, info.uid, info.gid = tarfile.REGTYPE, st.st_mode & 0o7777, st.st_uid, st.st_gid
    info.size, info.mtime = st.st_size, int(st.st_mtime)
    ours = batch_runner._tar_header("runs/r1/1/stdout", st)
    theirs = info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    assert len(ours) == 512
    # tarfile writes "0000000\0" into the device fields of a regular file; here they are
    # NUL bytes, which every reader takes for 0. The rest is byte for byte the same,
    # the checksum aside (it covers those fields).
    blank = slice(329, 345)
    assert ours[:148] == theirs[:148] and ours[156:329] == theirs[156:329] and ours[345:] == theirs[345:]
    assert ours[blank] == bytes(16)
    assert tarfile.TarInfo.frombuf(ours, "utf-8", "surrogateescape").size == 3  # its checksum holds


def test_a_file_that_grows_while_archived_keeps_the_size_its_header_says_and_one_that_shrank_fails(
        tmp_path, monkeypatch):
    line = leave_run(tmp_path, "r1", {"stdout": b"short"})
    real_lstat = os.lstat
    seen = {"size": 3}

    def sized(path, *a, **kw):  # the size read before the copy: 3 (the file grew since) or 9 (it shrank)
        st = real_lstat(path, *a, **kw)
        if str(path).endswith("stdout"):
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
                                   seen["size"], st.st_atime, st.st_mtime, st.st_ctime))
        return st

    monkeypatch.setattr(batch_runner.os, "lstat", sized)
    path = _archive(tmp_path, ["r1"])
    with tarfile.open(path) as tar:  # what a survivor appended after the run is left out
        assert tar.extractfile("runs/r1/1/stdout").read() == b"sho"
        assert tar.extractfile("runs/r1/1/result.json").read() == line
    seen["size"] = 9
    with pytest.raises(OSError, match="shrank while it was archived"):
        _archive(tmp_path, ["r1"])


def _tar_bytes(fmt: int, members: list[tuple[str, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _read(data: bytes) -> list[tuple[str, bool, bytes]]:
    return [(name, regular, b"".join(iter(chunk, b"")))
            for name, regular, chunk in batch_runner.read_archive(io.BytesIO(data))]


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_the_reader_reads_what_tarfile_writes(fmt):
    deep = "runs/" + "/".join(["d" * 40] * 3) + "/stdout"  # over 100 bytes: a long name, or a ustar prefix
    members = [("runs/a/1/stdout", b"out\n"), ("runs/a/1/inputs", None), (deep, b"y" * 3000),
               ("runs/a/1/empty", b""), ("runs/a/1/big", os.urandom((1 << 20) + 700))]
    if fmt != tarfile.USTAR_FORMAT:  # ustar has no way to write a name that is not ASCII
        members.append(("runs/\u00e9t\u00e9/1/stdout", b"\xff\xfe"))
    got = _read(_tar_bytes(fmt, members))
    assert got == [(name, data is not None, data or b"") for name, data in members]


def test_a_member_left_unread_is_skipped_and_the_next_one_read_whole():
    data = _tar_bytes(tarfile.GNU_FORMAT, [("a", b"x" * 1500), ("b", b"second")])
    it = batch_runner.read_archive(io.BytesIO(data))
    name, _, chunk = next(it)
    assert (name, chunk(10)) == ("a", b"x" * 10)
    name, _, chunk = next(it)
    assert (name, chunk(), chunk()) == ("b", b"second", b"")
    assert list(it) == []


def test_a_damaged_or_cut_archive_is_refused():
    data = bytearray(_tar_bytes(tarfile.GNU_FORMAT, [("runs/a/1/stdout", b"z" * 2000)]))
    data[10] ^= 1  # a bit of the name flipped: the checksum no longer holds
    with pytest.raises(batch_runner.ArchiveError, match="checksum"):
        _read(bytes(data))
    data[10] ^= 1
    with pytest.raises(batch_runner.ArchiveError, match="cut short"):
        _read(bytes(data[:512 + 1000]))  # the header, then half the member's data


def test_a_header_field_or_pax_record_that_is_not_a_number_is_refused_as_a_damaged_archive():
    data = bytearray(_tar_bytes(tarfile.GNU_FORMAT, [("runs/a/1/stdout", b"z")]))
    data[150] = ord("9")  # no octal digit in the checksum field
    with pytest.raises(batch_runner.ArchiveError, match="not a number"):
        _read(bytes(data))
    pax = bytearray(_tar_bytes(tarfile.PAX_FORMAT, [("runs/\u00e9/1/stdout", b"z")]))
    at = pax.index(b" path=")
    pax[at - 2:at] = b"x4"  # the record's length is no number; the header's checksum still holds
    with pytest.raises(batch_runner.ArchiveError, match="pax"):
        _read(bytes(pax))
    big = bytearray(_tar_bytes(tarfile.PAX_FORMAT, [("runs/\u00e9/1/stdout", b"z")]))
    big[big.index(b" path=") - 2:big.index(b" path=")] = b"00"  # a record of length 0: no progress
    with pytest.raises(batch_runner.ArchiveError, match="pax"):
        _read(bytes(big))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("runs/a/1/stdout")
        info.size, info.pax_headers = 1, {"size": "1x"}
        tar.addfile(info, io.BytesIO(b"z"))
    with pytest.raises(batch_runner.ArchiveError, match="pax header's size '1x' is not a number"):
        _read(buf.getvalue())
