"""Estimations that differ only by their process-group names, parsed once (issue 37).

In a 2-D mesh each shard group's ranks log their own group's name in
``fx_collectives_analytical_estimation``: a 1,024-rank HSDP job has 512 shard groups, so 512
payloads that are one text but for the names, each parsed, and each giving its own final
schedule. Here a payload is split into its *template* (each ``group_name:NAME`` numbered by its
place, ``group_name:0``, ``group_name:1``, ...) and its names in that order. The template is
parsed once (:func:`tracekit.read.parsers.parse_estimation`; its collectives' groups are then
slot numbers) and each payload binds its names to it::

    ...all_gather_into_tensor_out.default group_size:2 group_name:3 input_bytes:148552,0.0097,...
    ...all_gather_into_tensor_out.default group_size:2 group_name:4 input_bytes:148552,0.0097,...
      -> template  "... group_size:2 group_name:0 input_bytes:148552,0.0097,..."  (parsed once)
         names     ("3",) and ("4",)

:class:`tracekit.read.pairing.BuildMemo` then builds a final schedule once per template too,
and binds each payload's names to its collectives (:func:`bind_final`).

Why binding gives what a parse of the payload gives: a name is taken only where it is
``[^\\s,]*`` between ``group_name:`` and `` input_bytes:``, so it holds no space and no comma.
The estimation row's key (``\\S+ group_size:\\S* group_name:(.*?) input_bytes:\\S*``) then
reads the same name there, whichever it is, and every other cell is cut and read the same: a
cell that holds a name also holds ``group_name:``, which no number or header name is. A
template is used only when each of its collectives' groups is one slot number; any other
payload is parsed as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tracekit.model import FinalSchedule, ScheduledCollective
from tracekit.read.parsers import ArtifactError, Estimation, intern_name, parse_estimation

#: A group name in an estimation row, with the text around it kept by the split.
_NAME = re.compile(r"(group_name:)([^\s,]*)(?= input_bytes:)")

#: The slot numbers as text, made once.
_SLOT_TEXT = [str(i) for i in range(256)]
#: Templates kept; past it, the table is cleared (a job has a few per graph).
TEMPLATE_LIMIT = 1024
#: Bound collectives kept (shared between the estimations that bind one name to one slot).
BOUND_LIMIT = 8192


@dataclass(eq=False)
class GroupTemplate:
    """An estimation with its group names numbered: ``slotted`` is the template's parse, each
    collective's group the number of its name in a payload's names (``"0"``, ``"1"``, ...)."""

    slotted: Estimation
    slots: list[int | None] = field(default_factory=list)  # per collective: its name's number


class EstimationTemplates:
    """``parse_estimation`` through templates: one parse per template, then names bound.
    Holds the row memo of :func:`parse_estimation`, the templates and the bound collectives,
    each bounded."""

    def __init__(self) -> None:
        self._rows: dict = {}
        self._templates: dict[str, GroupTemplate | None] = {}
        self.bound = BoundCollectives()

    def __getstate__(self):  # travels to worker processes empty
        return {}

    def __setstate__(self, state) -> None:
        self.__init__()  # type: ignore[misc]

    def parse(self, text: str) -> Estimation:
        parts = _NAME.split(text)
        if len(parts) == 1:  # no group name: nothing to bind
            return parse_estimation(text, self._rows)
        names = tuple(parts[2::3])
        parts[2::3] = (
            _SLOT_TEXT[: len(names)] if len(names) <= len(_SLOT_TEXT) else map(str, range(len(names)))
        )
        key = "".join(parts)
        if key in self._templates:
            t = self._templates[key]
        else:
            t = self._template(key, len(names))
            if len(self._templates) >= TEMPLATE_LIMIT:
                self._templates.clear()
            self._templates[key] = t
        if t is None:
            return parse_estimation(text, self._rows)
        bind = self.bound.collective
        out = [
            c if s is None else bind(c, names[s]) for c, s in zip(t.slotted.collectives, t.slots, strict=True)
        ]
        return Estimation(t.slotted.world_size, out, t, names)

    def _template(self, key: str, n: int) -> GroupTemplate | None:
        """The template of ``key`` (a payload with its names numbered), or None when one of
        its collectives' groups is not one slot number, or it does not parse (then each payload
        is parsed as is, and says its own error)."""
        try:
            slotted = parse_estimation(key, self._rows)
        except ArtifactError:
            return None
        slots: list[int | None] = []
        for c in slotted.collectives:
            if c.group is None:
                slots.append(None)
            elif c.group.isascii() and c.group.isdigit() and int(c.group) < n:
                slots.append(int(c.group))
            else:
                return None
        return GroupTemplate(slotted, slots)


class BoundCollectives:
    """A template's collective with a name bound, made once per (collective, name) and shared
    (read-only, as the parsers' values are): a mesh's shard groups bind a new name to the
    shard group's collectives, and the same replicate group names to the others."""

    __slots__ = ("_bound",)

    def __init__(self) -> None:
        # (id of a template's collective, name) -> (that collective, held so the id stays its
        # own; the collective with the name)
        self._bound: dict[tuple[int, str], tuple[ScheduledCollective, ScheduledCollective]] = {}

    def collective(self, c: ScheduledCollective, name: str) -> ScheduledCollective:
        """``c`` (a group a slot number) with the group ``name``."""
        hit = self._bound.get((id(c), name))
        if hit is None or hit[0] is not c:
            if len(self._bound) >= BOUND_LIMIT:
                self._bound.clear()
            hit = self._bound[(id(c), name)] = (
                c,
                ScheduledCollective(c.kind, c.op, bind_name(name), c.group_size, c.bytes, c.est_ms, c.dtype),
            )
        return hit[1]


def bind_name(name: str) -> str | None:
    """A group name as an estimation row gives it (``None``: no group)."""
    return None if name == "None" else intern_name(name)


def bind_final(
    template: FinalSchedule, names: tuple[str, ...], compile_id: str, position: int, bound: BoundCollectives
) -> FinalSchedule:
    """The final schedule of a payload from its template's (built from the template's slotted
    estimation): each collective's group, a slot number there, bound to the payload's name."""
    bind = bound.collective
    colls = [c if c.group is None else bind(c, names[int(c.group)]) for c in template.collectives]
    return FinalSchedule(compile_id, position, template.counts, colls, template.world_size, template.sizes)
