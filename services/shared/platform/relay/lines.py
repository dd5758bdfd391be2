"""A batch fact's lines -> its messages, and the relay's bytes of each without the message.

A fact of many lines (a transaction's answers, a coup's 10,000 settled bets) publishes one
message per line: :func:`publish_lines` returns them as :class:`Lines`, each line's message made
when read (unvalidated: the values were validated when recorded; a builder compiled once per
:class:`LineShape`). The relay reads a line without making its message: :meth:`Lines.encoded`
writes its bytes from a template of the fact (its constant JSON, cut from ``encode`` of one
line, with each line's values between), byte for byte what ``encode`` writes, and
:meth:`Lines.view` reads its fields. A line holding a value without a writer (:data:`WRITERS`;
text with a lone surrogate) is encoded from its message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import TypeAdapter

from contracts import Message, encode
from contracts.envelope import uuid_of_int
from contracts.trusted import trusted
from services.shared.platform.relay.publishing import M, envelope


class LineIds(Sequence[UUID]):
    """``event_id`` of each of ``count`` messages of one stored event: the first message's id
    XOR the message's index (deterministic), each made when read. :meth:`text` writes one
    without making it: an index changes only the last hex digits."""

    __slots__ = ("_base", "_count", "_head", "_low")

    def __init__(self, base: int, count: int) -> None:
        self._base, self._count = base, count
        self._head = str(uuid_of_int(base))[:-8]  # all but the last 8 hex digits (32 bits)
        self._low = base & 0xFFFFFFFF

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:  # a UUID (a list of them for a slice)
        if isinstance(index, slice):
            return [self[i] for i in range(self._count)[index]]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        return uuid_of_int(self._base ^ index)

    def text(self, index: int) -> str:
        """``str(self[index])``, written from the id's constant head."""
        if 0 <= index < self._count and index <= 0xFFFFFFFF:
            return self._head + (self._low ^ index).to_bytes(4, "big").hex()  # half f"{:08x}"
        return str(self[index])


def line_ids(event: Any, count: int) -> LineIds:
    """``event_id`` of each of ``count`` messages of one stored event (deterministic, cheap)."""
    return LineIds(envelope(event, 0)["event_id"].int, count)


_PLAIN = re.compile(r"[ !#-\[\]-~]*")
"""Text written between quotes as it is: printable ASCII but ``"`` and ``\\``."""
_DATETIME = TypeAdapter(datetime)


def _datetime(value: datetime) -> str:
    """``value`` as ``encode`` writes it (7,000 instructions in pydantic), once per time and
    offset: a batch's lines share their placing time. The offset is part of the key, as an
    equal time in another zone is written otherwise."""
    return _datetime_text(value, value.utcoffset())


@lru_cache(maxsize=1024)
def _datetime_text(value: datetime, offset: timedelta | None) -> str:
    return _DATETIME.dump_json(value).decode()


def _text(value: str) -> str:
    """Text that is not plain, as ``encode`` writes it (its escapes; other characters as they
    are, so a lone surrogate fails to encode, as it does there)."""
    return json.dumps(value, ensure_ascii=False)


WRITERS: dict[type, str] = {
    str: '"{VALUE}"',  # plain text; else {_text(VALUE)}
    int: "{VALUE}",
    type(None): "null",
    UUID: '"{VALUE}"',
    datetime: "{_datetime(VALUE)}",
}
"""Per type of a value, how ``encode`` writes it in a template's f-string. A fact holding a
value of another type has no template."""


class LineShape:
    """How to make ``contract`` from a line record: each field's source, worked out once."""

    def __init__(
        self,
        contract: type[Message],
        record: type[tuple[Any, ...]],
        common: Sequence[str],
        extra: Sequence[str],
    ) -> None:
        self.contract = contract
        line_names: tuple[str, ...] = record._fields  # type: ignore[attr-defined]
        self.sources: dict[str, tuple[str, Any]] = {}
        """Each field's source: ``(event_id|occurred_at, None)``, ``(common|line|extra,
        position)`` or ``(default, value)``."""
        self.code: dict[str, str] = {}  # each field's source as ``make``'s code reads it
        names: dict[str, Any] = {"_trusted": trusted, "_contract": contract}
        for name, info in contract.model_fields.items():
            if name in ("event_id", "occurred_at"):
                self.sources[name], self.code[name] = (name, None), name
            elif name in common:
                self.sources[name] = ("common", common.index(name))
            elif name in line_names:
                self.sources[name] = ("line", line_names.index(name))
            elif name in extra:
                self.sources[name] = ("extra", extra.index(name))
            elif info.is_required():
                raise TypeError(f"{contract.__name__}.{name} has no source in a line")
            else:
                self.sources[name] = ("default", info.get_default(call_default_factory=True))
                self.code[name] = f"_default_{len(names)}"
                names[self.code[name]] = self.sources[name][1]
            kind, where = self.sources[name]
            self.code.setdefault(name, f"{kind}[{where}]")
        self.varying = tuple(
            name
            for name, (kind, _) in self.sources.items()
            if kind in ("event_id", "line", "extra")
        )
        """The fields that differ from line to line, in the contract's order."""
        if {"table_id", "operator"} & set(self.varying):  # the relay keys and routes by a sample
            raise TypeError(f"{contract.__name__}: a fact's lines share one table and operator")
        defaults = ", ".join(f"{name}={name}" for name in names)
        values = ", ".join(f"{name!r}: {source}" for name, source in self.code.items())
        namespace: dict[str, Any] = {}
        exec(  # the shape's own builder, compiled once
            f"def make(event_id, occurred_at, common, line, extra=(), *, {defaults}):\n"
            f"    return _trusted(_contract, {{{values}}})\n",
            names,
            namespace,
        )
        self.make: Callable[..., Message] = namespace["make"]
        """``make(event_id, occurred_at, common, line, extra=())``: the message of one line
        (``common`` and ``extra`` in the shape's order). A line longer than the record (a
        newer writer's) publishes the record's fields; a shorter one raises IndexError."""
        self._renderers: dict[tuple[type, ...], Callable[..., bytes]] = {}
        self.view: Callable[[Lines, int], LineView] = _view_class(self)
        """``view(lines, index)``: line ``index`` of ``lines`` read by field (:class:`LineView`)."""

    def renderer(self, types: tuple[type, ...]) -> Callable[..., bytes]:
        """``render(pieces, event_id, line, extra=())`` for lines whose :attr:`varying` values
        have ``types`` (:data:`WRITERS`'): the line as ``encode`` writes it, its values between
        one fact's constant ``pieces`` (:class:`Lines`); ValueError for a line whose values
        have other types. ``event_id`` is given as its text (:meth:`LineIds.text`). Compiled
        once per ``types``."""
        made = self._renderers.get(types)
        if made is None:
            read = "".join(f"    v{n} = {self.code[name]}\n" for n, name in enumerate(self.varying))
            checks = " or ".join(
                f"type(v{n}) is not _t{n}"
                for n, name in enumerate(self.varying)
                if name != "event_id"  # its text, written as the UUID's
            )
            texts = "+".join(f"v{n}" for n, kind in enumerate(types) if kind is str) or "''"
            plain = (
                "".join(
                    f"{{p[{n}]}}" + WRITERS[kind].replace("VALUE", f"v{n}")
                    for n, kind in enumerate(types)
                )
                + f"{{p[{len(types)}]}}"
            )
            escaped = plain
            for n, kind in enumerate(types):
                if kind is str:
                    escaped = escaped.replace(f'"{{v{n}}}"', f"{{_text(v{n})}}")
            namespace: dict[str, Any] = {}
            exec(
                f"def render(p, event_id, line, extra=()):\n{read}"
                f"    if {checks or 'False'}:\n"
                f"        raise ValueError('another type')\n"
                f"    if _plain({texts}):\n"
                f"        return f'{plain}'.encode()\n"
                f"    return f'{escaped}'.encode()\n",
                {f"_t{n}": kind for n, kind in enumerate(types)}
                | {"_plain": _PLAIN.fullmatch, "_text": _text, "_datetime": _datetime},
                namespace,
            )
            made = self._renderers[types] = namespace["render"]
        return made


@cache
def line_shape(
    contract: type[Message],
    record: type[tuple[Any, ...]],
    common: tuple[str, ...],
    extra: tuple[str, ...] = (),
) -> LineShape:
    """The (cached) :class:`LineShape` of ``contract`` made from ``record`` lines."""
    return LineShape(contract, record, common, extra)


class Lines(Sequence[Message]):
    """The messages of a batch fact: one per line (made when read, in line order), except
    those ``given`` by index, then ``then``. The relay reads a line without making its message:
    :meth:`encoded` writes it from a template of the fact (``encode``'s bytes exactly) and
    :meth:`view` reads its fields."""

    def __init__(
        self,
        shape: LineShape,
        ids: Sequence[UUID],
        occurred_at: datetime,
        common: tuple[Any, ...],
        lines: Sequence[tuple[Any, ...]],
        extras: Sequence[tuple[Any, ...]] = (),
        given: Mapping[int, Message] | None = None,
        then: Sequence[Message] = (),
    ) -> None:
        self.shape, self.ids, self.occurred_at, self.common = shape, ids, occurred_at, common
        self.lines, self.extras, self.given, self.then = lines, extras, given or {}, then
        if not isinstance(ids, LineIds) and not all(isinstance(i, UUID) for i in ids):
            raise TypeError("a fact's line ids are UUIDs (each written as its text)")
        self._template: tuple[Callable[..., bytes], list[str]] | None = None
        self._sample: Message | None = None
        self._first = 0  # the sample's line

    def __len__(self) -> int:
        return len(self.lines) + len(self.then)

    def __getitem__(self, index: Any) -> Any:  # a Message (a list of them for a slice)
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        count = len(self.lines)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index >= count:
            return self.then[index - count]
        if index in self.given:
            return self.given[index]
        extra = self.extras[index] if self.extras else ()
        return self.shape.make(
            self.ids[index], self.occurred_at, self.common, self.lines[index], extra
        )

    def is_line(self, index: int) -> bool:
        """Whether message ``index`` is a line's (not given, not one of ``then``)."""
        return 0 <= index < len(self.lines) and index not in self.given

    def sample(self) -> Message:
        """A line's message: every line's has its type, table and operator."""
        if self._sample is None:
            self._first = next(i for i in range(len(self.lines)) if i not in self.given)
            self._sample = self[self._first]
        return self._sample

    def encoded(self, index: int) -> bytes:
        """Line ``index``'s message as ``encode`` writes it, without making the message."""
        if self._template is None:
            self._template = self._cut()
        render, pieces = self._template
        if pieces:
            line, extra = self.lines[index], self.extras[index] if self.extras else ()
            ids = self.ids
            event_id = ids.text(index) if type(ids) is LineIds else str(ids[index])
            try:
                return render(pieces, event_id, line, extra)
            except (ValueError, IndexError):  # values of other types than the sample's
                with suppress(ValueError, IndexError, KeyError):
                    view = self.view(index)
                    kinds = tuple(type(getattr(view, name)) for name in self.shape.varying)
                    return self.shape.renderer(kinds)(pieces, event_id, line, extra)
        return encode(self[index])

    def _cut(self) -> tuple[Callable[..., bytes], list[str]]:
        """The renderer of lines like a sample line, and the fact's constant JSON between
        their values, cut from ``encode`` of the sample (no pieces: a value of the fact has a
        type without a writer, and each line is encoded from its message)."""
        sample, names = self.sample(), self.shape.varying
        kinds = {name: type(getattr(sample, name)) for name in self.shape.sources}
        if not all(kind in WRITERS for kind in kinds.values()):
            return encode, []  # not a scalar: its JSON could hold a field's name
        render = self.shape.renderer(tuple(kinds[name] for name in names))
        line, extra = self.lines[self._first], self.extras[self._first] if self.extras else ()
        try:  # the sample's values as the renderer writes them, between NULs
            written = render(["\0"] * (len(names) + 1), str(sample.event_id), line, extra)
            texts = written.decode()
        except ValueError:  # a lone surrogate
            return encode, []
        data = encode(sample).decode()
        pieces: list[str] = []
        position = 0
        for name, value in zip(names, texts.split("\0")[1:-1], strict=True):
            at = data.find(f',"{name}":{value}', position)
            if at < 0:
                return encode, []
            pieces.append(data[position : at + len(name) + 4])
            position = at + len(name) + 4 + len(value)
        pieces.append(data[position:])
        return render, pieces

    def view(self, index: int) -> Any:
        """Message ``index`` to read fields of: a line's unmade (:class:`LineView`)."""
        return self.shape.view(self, index) if self.is_line(index) else self[index]


def wire(messages: Sequence[Message], index: int) -> bytes:
    """Message ``index`` of a mapping as the relay sends it (a line's from its template)."""
    if isinstance(messages, Lines) and messages.is_line(index):
        return messages.encoded(index)
    return encode(messages[index])


class LineView:
    """A line's message read field by field (the relay's hooks), without making it: each
    shape's view class (:meth:`LineShape.view`) has a property per field."""

    __slots__ = ("_index", "_lines")

    def __init__(self, lines: Lines, index: int) -> None:
        self._lines, self._index = lines, index

    if TYPE_CHECKING:  # the fields, as properties of each shape's class

        def __getattr__(self, name: str) -> Any: ...


def _reader(kind: str, at: Any) -> Callable[[LineView], Any]:
    """How a view reads a field of source ``(kind, at)`` (:attr:`LineShape.sources`)."""
    if kind == "event_id":
        return lambda view: view._lines.ids[view._index]
    if kind == "occurred_at":
        return lambda view: view._lines.occurred_at
    if kind == "common":
        return lambda view: view._lines.common[at]
    if kind == "line":
        return lambda view: view._lines.lines[view._index][at]
    return lambda view: view._lines.extras[view._index][at]


def _view_class(shape: LineShape) -> type[LineView]:
    fields: dict[str, Any] = {
        name: where if kind == "default" else property(_reader(kind, where))
        for name, (kind, where) in shape.sources.items()
    }
    return type(f"{shape.contract.__name__}View", (LineView,), {"__slots__": (), **fields})


def publish_lines(
    contract: type[M],
    event: Any,
    lines: Sequence[tuple[Any, ...]],
    record: type[tuple[Any, ...]],
    *,
    common: Mapping[str, Any],
    ids: Sequence[UUID] | None = None,
    then: Sequence[Message] = (),
) -> Lines:
    """One ``contract`` per line, in line order, unvalidated (``contracts.trusted``), then
    ``then``."""
    shape = line_shape(contract, record, tuple(common))
    made = ids if ids is not None else line_ids(event, len(lines))
    occurred_at = envelope(event)["occurred_at"]
    return Lines(shape, made, occurred_at, tuple(common.values()), lines, then=then)
