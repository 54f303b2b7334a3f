"""Safe, bounded YAML loading that remembers the line of every key and item.

Validation errors must name ``FILE:LINE``; plain ``yaml.safe_load`` forgets where a
value came from, so the node tree is composed and walked here instead, with PyYAML's
SafeLoader resolving scalars (no arbitrary Python objects are ever constructed).

A spec is hostile input as far as the loader is concerned: every way a YAML file can
make a loader recurse, loop or allocate without end (deep nesting, self-referencing
anchors, alias bombs, huge files) is bounded by the limits below and answered with a
one-line ``FILE:LINE: message``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from benchmatrix.errors import SpecError

#: A path into a loaded document: keys and list indexes from the root.
DocPath = tuple[Any, ...]

#: Largest file read (bytes). Real specs are a few KiB.
MAX_FILE_BYTES = 1024 * 1024
#: Deepest nesting of mappings and sequences.
MAX_DEPTH = 64
#: Most YAML nodes (scalars, mappings, sequences) written in one file.
MAX_NODES = 50_000
#: Most values after aliases are expanded (an alias repeats its anchor's subtree).
MAX_VALUES = 100_000

# Characters YAML 1.1 allows in a stream (tab, newlines, printable Unicode).
_NOT_PRINTABLE = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml parses ~10x faster


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

    Mapping keys must be strings; ``<<`` merge keys are resolved (explicit keys
    override merged ones, as YAML specifies).

    Raises:
        SpecError: unreadable or oversized file, a character YAML forbids, YAML
            syntax error, nesting deeper than :data:`MAX_DEPTH`, more than
            :data:`MAX_NODES` nodes or :data:`MAX_VALUES` values after alias
            expansion, an alias that contains itself, a duplicate or non-string
            mapping key, a scalar its tag cannot construct, or a document that is
            not a mapping.
    """
    path = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)  # never more: the path may be a device or a pipe
    except FileNotFoundError:
        raise SpecError(path, 0, "no such file") from None
    except OSError as exc:
        raise SpecError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(path, 1, f"the file has more than {MAX_FILE_BYTES} bytes, the limit for a spec")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise SpecError(path, line, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded") from None
    bad = _NOT_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise SpecError(path, line, f"character U+{ord(bad.group()):04X} is not allowed in YAML "
                                    "(a control character: write it as an escape like \"\\x07\" in a quoted string)")
    loader = _Loader(text)
    try:
        _count_nodes(text, path)
        root = _compose(loader, path)
        if root is None:
            raise SpecError(path, 1, "the file is empty; an experiment spec is a YAML mapping")
        lines: dict[DocPath, int] = {(): root.start_mark.line + 1}
        data = _Converter(loader, path, lines).convert(root, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or str(exc)
        raise SpecError(path, line, f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, 0, f"YAML error: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError(path, lines[()], "the document must be a mapping of keys (name, factors, workload, ...)")
    return LocatedDocument(path, data, lines)


def _count_nodes(text: str, path: str) -> None:
    """Refuse a file of more than :data:`MAX_NODES` nodes from parser events alone.

    Composing builds a node and resolves a tag per value: for a file at the limit that
    is most of a second of CPU spent before the refusal. Counting events first costs a
    tenth of that, and nothing for a spec of real size.
    """
    counter = _Loader(text)
    try:
        count = 0
        counted = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)
        while not counter.check_event(yaml.StreamEndEvent):
            event = counter.get_event()
            if isinstance(event, counted):
                count += 1
                if count > MAX_NODES:
                    raise SpecError(path, event.start_mark.line + 1, f"the file has more than {MAX_NODES} values; "
                                    "a spec this large is refused (split the experiment)")
    finally:
        counter.dispose()


def _compose(loader: Any, path: str) -> yaml.Node | None:
    """Compose the single document of the stream into a node graph, without recursion.

    PyYAML's own composer recurses once per nesting level (deep brackets exhaust
    Python's stack) and counts nothing; this one bounds depth and merged values (the
    node count is bounded before, by :func:`_count_nodes`).
    Anchors are registered when their node is complete, so an alias inside its own
    anchor is an error here instead of a cyclic graph.
    """
    loader.get_event()  # StreamStart
    if loader.check_event(yaml.StreamEndEvent):
        loader.get_event()
        return None
    loader.get_event()  # DocumentStart
    anchors: dict[str, yaml.Node] = {}
    open_anchors: set[str] = set()
    stack: list[tuple[yaml.Node, str | None]] = []  # open collections and their anchors
    expanded = 0
    root: yaml.Node | None = None
    while root is None:
        event = loader.get_event()
        line = event.start_mark.line + 1
        node: yaml.Node | None = None
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise SpecError(path, line, f"alias *{event.anchor} refers to its own anchor &{event.anchor} "
                                            "(a value cannot contain itself)")
            if event.anchor not in anchors:
                raise SpecError(path, line, f"YAML syntax error: found undefined alias *{event.anchor}")
            node = anchors[event.anchor]
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            node, anchor = stack.pop()
            node.end_mark = event.end_mark
            if isinstance(node, yaml.MappingNode):
                expanded += _flatten_merges(node, path)
                if expanded > MAX_VALUES:
                    raise SpecError(path, line, f"merge keys expand to more than {MAX_VALUES} values; refused")
            if anchor is not None:
                open_anchors.discard(anchor)
                anchors[anchor] = node
        else:
            tag = event.tag
            if isinstance(event, yaml.ScalarEvent):
                if tag is None or tag == "!":
                    tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
                node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
                if event.anchor is not None:
                    anchors[event.anchor] = node
            else:
                is_seq = isinstance(event, yaml.SequenceStartEvent)
                kind = yaml.SequenceNode if is_seq else yaml.MappingNode
                if tag is None or tag == "!":
                    tag = loader.resolve(kind, None, event.implicit)
                if len(stack) >= MAX_DEPTH:
                    raise SpecError(path, line, f"nesting deeper than {MAX_DEPTH} levels")
                collection = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
                stack.append((collection, event.anchor))
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
                continue
        if not stack:
            root = node
            break
        parent = stack[-1][0]
        if isinstance(parent, yaml.SequenceNode):
            parent.value.append(node)
        elif parent.value and len(parent.value[-1]) == 1:
            parent.value[-1] = (parent.value[-1][0], node)  # the value of the pending key
        else:
            parent.value.append((node,))  # a key; its value comes next
    loader.get_event()  # DocumentEnd
    if not loader.check_event(yaml.StreamEndEvent):
        event = loader.get_event()
        raise SpecError(path, event.start_mark.line + 1,
                        "the file holds more than one YAML document ('---'); a spec is one mapping")
    return root


class _Converter:
    """Turns a node graph into Python values, recording lines and bounding alias expansion."""

    def __init__(self, loader: Any, path: str, lines: dict[DocPath, int]):
        self.loader = loader
        self.path = path
        self.lines = lines
        self.values = 0

    def error(self, node: yaml.Node, message: str) -> SpecError:
        return SpecError(self.path, node.start_mark.line + 1, message)

    def convert(self, node: yaml.Node, at: DocPath) -> Any:
        self.values += 1
        if len(at) > MAX_DEPTH:
            # Aliases can stack deep structures inside each other beyond what the file shows.
            raise self.error(node, f"nesting deeper than {MAX_DEPTH} levels once aliases are expanded")
        if self.values > MAX_VALUES:
            raise self.error(node, f"aliases expand to more than {MAX_VALUES} values; refused "
                                   "(an alias bomb, or a spec too large)")
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            n_merged = getattr(node, "bmx_merged", 0)
            for i, (key_node, value_node) in enumerate(node.value):
                key = self.scalar(key_node)
                if not isinstance(key, str):
                    what = "factor name" if at == ("factors",) else "key"
                    raise self.error(key_node, f"{what} {key!r} is not a string (YAML reads on/off/yes/no "
                                               "as booleans and digits as numbers: quote it)")
                if key in out:
                    if i < n_merged:
                        continue  # of several merged mappings the first listed wins
                    raise self.error(key_node, f"duplicate key '{key}' (first defined on line "
                                               f"{self.lines[at + (key,)]})")
                self.lines[at + (key,)] = key_node.start_mark.line + 1
                out[key] = self.convert(value_node, at + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.lines[at + (i,)] = item.start_mark.line + 1
                items.append(self.convert(item, at + (i,)))
            return items
        return self.scalar(node)

    def scalar(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, "a mapping key must be a scalar")
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 -- every constructor failure is a bad value
            tag = node.tag.rsplit(":", 1)[-1]
            raise self.error(node, f"value {node.value[:40]!r} is not a valid !!{tag}: "
                                   f"{type(exc).__name__}: {str(exc)[:80]}") from None
        if node.tag in (_INT_TAG, _FLOAT_TAG) and isinstance(value, (int, float)) and not isinstance(value, bool):
            # YAML 1.1 reads 017 as octal 15, 0x1F as 31, 1:30 as 90 and 1_0 as 10: almost
            # never what was meant, and a reader of the spec sees another number.
            form = _number_form(node.value)
            if form is not None:
                raise self.error(node, f"value {node.value[:40]!r} is read by YAML as the {form}number {value}; "
                                       f"numbers in a spec are plain decimals: write {value} if that is meant, "
                                       "or quote it for text")
        return value


_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_OCTAL = re.compile(r"[-+]?0[0-7]+")


def _number_form(text: str) -> str | None:
    """The YAML 1.1 form a number is written in when it is not a plain decimal
    (``"hexadecimal "``, ``""`` for digits grouped with ``_``), else None."""
    digits = text.lstrip("+-")[:2].lower()
    if digits == "0x":
        return "hexadecimal "
    if digits == "0b":
        return "binary "
    if ":" in text:
        return "base-60 "
    if _OCTAL.fullmatch(text.replace("_", "")):
        return "octal "
    if "_" in text:
        return ""
    return None


def _flatten_merges(node: yaml.MappingNode, path: str) -> int:
    """Resolve the ``<<`` keys of a complete mapping in place; returns the pairs merged in.

    YAML's merge rules: explicit keys override merged ones, and of several merged
    mappings the first listed wins. Merged pairs come first (as in PyYAML), counted
    by ``node.bmx_merged``. Merged mappings are complete, hence already flattened,
    so this never recurses; an explicit key repeated stays for the duplicate check.
    """
    explicit, subs = [], []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            for sub in value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]:
                if not isinstance(sub, yaml.MappingNode):
                    raise SpecError(path, sub.start_mark.line + 1,
                                    "a merge key '<<' takes a mapping or a list of mappings")
                subs.append(sub)
        else:
            explicit.append((key_node, value_node))
    if not subs:
        return 0
    seen = {(k.tag, k.value) for k, _ in explicit if isinstance(k, yaml.ScalarNode)}
    merged = []
    for sub in subs:
        for key_node, value_node in sub.value:
            ident = (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            if ident not in seen:
                seen.add(ident)
                merged.append((key_node, value_node))
    node.value = merged + explicit
    node.bmx_merged = len(merged)
    return len(merged)
