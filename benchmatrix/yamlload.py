"""Safe YAML loading that remembers the line of every key and item.

Validation errors must name ``FILE:LINE``; plain ``yaml.safe_load`` forgets where a
value came from, so the node tree is walked here instead, with PyYAML's SafeLoader
resolving scalars (no arbitrary Python objects are ever constructed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from benchmatrix.errors import SpecError

#: A path into a loaded document: keys and list indexes from the root.
DocPath = tuple[Any, ...]


class LocatedDocument:
    """A loaded YAML document and the 1-based line of each path in it."""

    def __init__(self, path: str, data: Any, lines: dict[DocPath, int]):
        self.path = path
        self.data = data
        self.lines = lines

    def line(self, doc_path: DocPath) -> int:
        """Line of ``doc_path``, or of its nearest ancestor that has one."""
        p = tuple(doc_path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), 1)

    def error(self, doc_path: DocPath, message: str) -> SpecError:
        """A :class:`SpecError` located at ``doc_path``."""
        return SpecError(self.path, self.line(doc_path), message)


def load_located(path: str | Path) -> LocatedDocument:
    """Read a YAML file safely, keeping line numbers.

    Raises:
        SpecError: unreadable file, YAML syntax error, duplicate mapping key, or a
            document that is not a mapping.
    """
    path = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(path, 0, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(path, 0, f"cannot read: {exc}") from None
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise SpecError(path, 1, "the file is empty; an experiment spec is a YAML mapping")
        lines: dict[DocPath, int] = {(): root.start_mark.line + 1}
        data = _convert(loader, root, (), lines, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or str(exc)
        raise SpecError(path, line, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, 0, f"YAML error: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError(path, lines[()], "the document must be a mapping of keys (name, factors, workload, ...)")
    return LocatedDocument(path, data, lines)


def _convert(loader: yaml.SafeLoader, node: yaml.Node, at: DocPath,
             lines: dict[DocPath, int], path: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves '<<' merge keys
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                raise SpecError(path, key_node.start_mark.line + 1, "a mapping key must be a scalar")
            if key in out:
                raise SpecError(path, key_node.start_mark.line + 1,
                                f"duplicate key '{key}' (first defined on line {lines[at + (key,)]})")
            lines[at + (key,)] = key_node.start_mark.line + 1
            out[key] = _convert(loader, value_node, at + (key,), lines, path)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            lines[at + (i,)] = item.start_mark.line + 1
            items.append(_convert(loader, item, at + (i,), lines, path))
        return items
    return loader.construct_object(node, deep=True)
