#!/usr/bin/python
"""Ansible module of the knob_file_layout role: lay out a data file contiguous or
fragmented, or remove it, and read its layout back with filefrag."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: knob_file_layout
short_description: Lay out a data file contiguous or fragmented and count its extents with filefrag
description:
  - C(state=probe) only reads the file's size and extent count (C(filefrag)) and classifies its layout.
  - C(state=contiguous) writes the file after reserving its space in one piece (posix_fallocate), so it
    gets as few extents as the filesystem allows.
  - C(state=fragmented) follows the method of the read-ahead and multiblock-read-count experiments: it fills
    the filesystem with small filler files, deletes half of them at random, writes the data file into the
    holes, then deletes the rest of the filler. The filler size is chosen so that the file gets about
    C(extents) extents. The filesystem must be small (a dedicated one): the module refuses to fill more
    than C(max_fill_mb).
  - C(state=absent) removes the file.
options:
  path: {description: The data file., type: path, required: true}
  state: {description: probe, contiguous, fragmented or absent., type: str, default: probe}
  size_mb: {description: Size of the data file in MiB., type: int, default: 64}
  extents: {description: Extents wanted for the fragmented layout., type: int, default: 100}
  filler_kb: {description: Size of a filler file in KiB; 0 derives it from size_mb and extents., type: int, default: 0}
  contiguous_max: {description: At most this many extents is contiguous; 0 means the larger of 4 and size_mb / 32., type: int, default: 0}
  fragmented_min: {description: At least this many extents is fragmented; 0 means half of extents., type: int, default: 0}
  max_fill_mb: {description: Refuse to fragment when more than this is free on the filesystem., type: int, default: 4096}
  seed: {description: Seed of the random choice of filler files to delete., type: int, default: 1}
author: benchmatrix
"""

RETURN = r"""
layout: {description: absent, contiguous, fragmented, or "N extents" in between (with ", M MiB" when the size differs)., type: str, returned: always}
extents: {description: Extent count from filefrag (0 when absent)., type: int, returned: always}
size_mb: {description: Size of the file in MiB., type: float, returned: always}
filler: {description: What the fragmentation did (files written, deleted, filler size)., type: dict, returned: when fragmenting}
"""

import errno
import os
import random
import re
import shutil

from ansible.module_utils.basic import AnsibleModule

MIB = 1024 * 1024
CHUNK = MIB
FILLER_DIR = ".benchmatrix-filler"


def extent_count(module, path):
    rc, out, err = module.run_command(["filefrag", path])
    match = re.search(r":\s*(\d+) extents? found\s*$", out.strip())
    if rc != 0 or not match:
        module.fail_json(msg="filefrag %s failed: %s" % (path, (err or out).strip() or "rc %d" % rc))
    return int(match.group(1))


def classify(module, p):
    path = p["path"]
    if not os.path.exists(path):
        return {"layout": "absent", "extents": 0, "size_mb": 0.0}
    if not os.path.isfile(path):
        module.fail_json(msg="%s is not a regular file" % path)
    size = os.path.getsize(path)
    extents = extent_count(module, path)
    contiguous_max = p["contiguous_max"] or max(4, p["size_mb"] // 32)
    fragmented_min = p["fragmented_min"] or max(contiguous_max + 1, p["extents"] // 2)
    if extents <= contiguous_max:
        layout = "contiguous"
    elif extents >= fragmented_min:
        layout = "fragmented"
    else:
        layout = "%d extents" % extents
    if size != p["size_mb"] * MIB:
        layout += ", %.1f MiB" % (size / MIB)
    return {"layout": layout, "extents": extents, "size_mb": round(size / MIB, 3),
            "contiguous_max": contiguous_max, "fragmented_min": fragmented_min}


def write_data(fd, size, buf):
    written = 0
    while written < size:
        written += os.write(fd, buf[:min(len(buf), size - written)])
    os.fsync(fd)


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def contiguous(p, buf):
    path, size = p["path"], p["size_mb"] * MIB
    remove(path)
    os.sync()  # ext4 reuses freed blocks only once the journal has committed their release
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        write_data(fd, size, buf)
    finally:
        os.close(fd)


def fragmented(module, p, buf):
    path, size = p["path"], p["size_mb"] * MIB
    remove(path)
    filler = os.path.join(os.path.dirname(path), FILLER_DIR)
    shutil.rmtree(filler, ignore_errors=True)
    os.sync()
    st = os.statvfs(os.path.dirname(path))
    free = st.f_bavail * st.f_frsize
    if free > p["max_fill_mb"] * MIB:
        module.fail_json(msg=(
            "fragmenting %s means filling its filesystem, which has %d MiB free, more than max_fill_mb (%d): "
            "put the file on a small filesystem of its own (e.g. an ext4 image mounted through a loop device) "
            "or raise knob_file_layout_max_fill_mb" % (path, free // MIB, p["max_fill_mb"])))
    if free < 2 * size + 4 * MIB:
        module.fail_json(msg="fragmenting %s needs twice its size free on its filesystem: %d MiB free, %d MiB wanted"
                         % (path, free // MIB, size // MIB))
    # Deleting half of the filler at random leaves holes of two filler files on average;
    # ext4 fills them with about 0.6 extents each (measured), hence size / (3.3 * extents).
    filler_kb = p["filler_kb"] or max(4, int(round(size / 1024 / (3.3 * max(p["extents"], 1)) / 4.0)) * 4)
    piece = filler_kb * 1024
    block = buf[:piece] if piece <= len(buf) else buf * (piece // len(buf) + 1)
    os.makedirs(filler)
    names = []
    while True:
        name = os.path.join(filler, "%07d" % len(names))
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_data(fd, piece, block)
        except OSError as exc:
            os.close(fd)
            os.unlink(name)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                break
            raise
        os.close(fd)
        names.append(name)
    rng = random.Random(p["seed"])
    doomed = rng.sample(names, len(names) // 2)
    for name in doomed:
        os.unlink(name)
    os.sync()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_data(fd, size, buf)
    except OSError as exc:
        os.close(fd)
        remove(path)
        shutil.rmtree(filler, ignore_errors=True)
        module.fail_json(msg="writing %s between the filler files failed: %s" % (path, exc))
    os.close(fd)
    shutil.rmtree(filler, ignore_errors=True)
    os.sync()
    return {"filler_kb": filler_kb, "files_written": len(names), "files_deleted_first": len(doomed)}


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "default": "probe", "choices": ["probe", "contiguous", "fragmented", "absent"]},
            "size_mb": {"type": "int", "default": 64},
            "extents": {"type": "int", "default": 100},
            "filler_kb": {"type": "int", "default": 0},
            "contiguous_max": {"type": "int", "default": 0},
            "fragmented_min": {"type": "int", "default": 0},
            "max_fill_mb": {"type": "int", "default": 4096},
            "seed": {"type": "int", "default": 1},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["size_mb"] < 1:
        module.fail_json(msg="size_mb must be at least 1")
    if p["state"] != "probe" and not os.path.isdir(os.path.dirname(p["path"])):
        module.fail_json(msg="the directory of %s does not exist" % p["path"])
    before = classify(module, p)
    if p["state"] == "probe" or before["layout"] == p["state"]:
        module.exit_json(changed=False, **before)
    if module.check_mode:
        module.exit_json(changed=True, **before)
    buf = os.urandom(CHUNK)
    extra = {}
    if p["state"] == "absent":
        remove(p["path"])
    elif p["state"] == "contiguous":
        contiguous(p, buf)
    else:
        extra["filler"] = fragmented(module, p, buf)
    after = classify(module, p)
    module.exit_json(changed=True, before=before["layout"], **after, **extra)


if __name__ == "__main__":
    main()
