"""Estimations that differ only by their process-group names, parsed once (issue 37).

In a 2-D mesh each shard group's ranks log their own group's name in
``fx_collectives_analytical_estimation``: a 1,024-rank HSDP job has 512 shard groups, so 512
payloads that are one text but for the names, each parsed, and each giving its own final
schedule. Here a payload is split into its *template* (each ``group_name:NAME`` numbered by its
distinct name in order of first appearance, ``group_name:0``, ``group_name:1``, ...) and its
distinct names in that order. The template is
parsed once (:func:`tracekit.read.parsers.parse_estimation`; its collectives' groups are then
slot numbers) and each payload binds its names to it::

    ...all_gather_into_tensor_out.default group_size:2 group_name:3 input_bytes:148552,0.0097,...
    ...all_gather_into_tensor_out.default group_size:2 group_name:4 input_bytes:148552,0.0097,...
      -> template  "... group_size:2 group_name:0 input_bytes:148552,0.0097,..."  (parsed once)
         names     ("3",) and ("4",)

(an HSDP backward: its shard group's rows ``group_name:0``, its replicate group's ``:1``;
names ``("3", "1")``, ``("4", "1")``, ...).

:class:`tracekit.read.interning.BuildMemo` then builds a final schedule once per template too;
each payload's final holds the template's slots and collectives
(:class:`tracekit.model.GroupSlots`) and its names, its collectives bound when first read
(:meth:`tracekit.model.FinalSchedule.of_template`): a mesh's checks key by slots and names, so
a summary binds none a rank.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracekit.model import FinalSchedule, GroupSlots

#: :func:`tracekit.read.parsers.parse_estimation` (given by the parsers, which import this
#: module): ``(text, row memo) -> Estimation``, raising ``ArtifactError`` (a ValueError).
ParseEstimation = Callable[[str, dict], Any]

#: A group name in an estimation row (split out: the parts between, then each name).
_NAME = re.compile(r"group_name:([^\s,]*)(?= input_bytes:)")

#: The slots as text, made once (what the split took out, with the slot number for the name).
_SLOT_TEXT = [f"group_name:{i}" for i in range(256)]
#: What a template table gives for a text not seen (None is a text that makes no template).
_NOT_SEEN: Any = object()
#: Templates kept; past it, the table is cleared (a job has a few per graph).
TEMPLATE_LIMIT = 1024


@dataclass
class GroupTemplate:
    """An estimation with its group names numbered: ``slotted`` is the template's parse, each
    collective's group the number of its name in a payload's names (``"0"``, ``"1"``, ...)."""

    slotted: Any  # the template's tracekit.read.parsers.Estimation
    slots: list[int | None] = field(default_factory=list)  # per collective: its name's number


@dataclass(slots=True)
class TemplatedEstimation:
    """A payload read through its template: the template and the payload's distinct group
    names. :class:`tracekit.read.interning.BuildMemo` builds its final from the template;
    :meth:`estimation` is the :class:`tracekit.read.parsers.Estimation` a parse of the payload
    gives (made on demand: no reader needs it)."""

    template: GroupTemplate
    names: tuple[str, ...]

    @property
    def world_size(self) -> int | None:
        return self.template.slotted.world_size

    def estimation(self) -> Any:
        slotted = self.template.slotted
        colls = GroupSlots(tuple(self.template.slots), tuple(slotted.collectives)).bind(self.names)
        return type(slotted)(self.world_size, colls)


class EstimationTemplates:
    """``parse`` (:data:`ParseEstimation`) through templates: one parse per template, then the
    names bound. Holds the row memo of ``parse`` and the templates, each bounded."""

    def __init__(self, parse: ParseEstimation) -> None:
        self._parse = parse
        self._rows: dict = {}
        self._templates: dict[str, GroupTemplate | None] = {}

    def __getstate__(self):  # travels to worker processes empty
        return {"parse": self._parse}

    def __setstate__(self, state) -> None:
        self.__init__(state["parse"])  # type: ignore[misc]

    def parse(self, text: str) -> Any:
        """The payload's Estimation, or its :class:`TemplatedEstimation`."""
        parse_estimation = self._parse
        parts = _NAME.split(text)
        if len(parts) == 1:  # no group name: nothing to bind
            return parse_estimation(text, self._rows)
        found = parts[1::2]
        if found.count(found[0]) == len(found):  # one group (a forward: its shard group's)
            names: tuple[str, ...] = (found[0],)
            parts[1::2] = [_SLOT_TEXT[0]] * len(found)
        else:
            names = tuple(dict.fromkeys(found))  # distinct, in order of first appearance
            if len(names) > len(_SLOT_TEXT):
                return parse_estimation(text, self._rows)
            slot_text = dict(zip(names, _SLOT_TEXT, strict=False))  # _SLOT_TEXT is the longer
            parts[1::2] = [slot_text[n] for n in found]
        key = "".join(parts)
        t = self._templates.get(key, _NOT_SEEN)
        if t is _NOT_SEEN:
            t = self._template(key, len(names))
            if len(self._templates) >= TEMPLATE_LIMIT:
                self._templates.clear()
            self._templates[key] = t
        if t is None:
            return parse_estimation(text, self._rows)
        return TemplatedEstimation(t, names)

    def _template(self, key: str, n: int) -> GroupTemplate | None:
        """The template of ``key`` (a payload with its names numbered), or None when one of
        its collectives' groups is not one slot number, or it does not parse (then each payload
        is parsed as is, and says its own error)."""
        try:
            slotted = self._parse(key, self._rows)
        except ValueError:  # ArtifactError
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


def final_slots(template: FinalSchedule) -> GroupSlots:
    """The slots of a final built from a slotted estimation (each collective's group, a slot
    number; None where the estimation gave none), with its collectives: the template each
    final of it binds its names to (:meth:`tracekit.model.FinalSchedule.of_template`)."""
    return GroupSlots(
        tuple(None if c.group is None else int(c.group) for c in template.collectives),
        tuple(template.collectives),
    )
