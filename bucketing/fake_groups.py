"""Register process group names as fake process groups (tests, replay of logged graphs).

Merging an all-gather bucket needs this process's rank in the bucket's group, so every group
name in a graph must resolve to a process group. Under torch's fake backend nothing is sent.
"""

from __future__ import annotations

from collections.abc import Iterable


def register_fake_process_groups(
    group_names: Iterable[str], group_size: int, rank: int = 0, world_size: int | None = None
) -> None:
    """Make each of ``group_names`` resolve to a fake process group of ``group_size`` ranks.

    Initializes ``torch.distributed`` with the "fake" backend (``world_size``, default
    ``group_size``; this process is ``rank``) if it is not initialized yet; pass the largest
    size first, or ``world_size``, when groups of several sizes are needed. Names that already
    resolve to a group of that size are kept; others get a new fake group (ranks
    ``0..group_size-1``). A name whose group was destroyed since it was registered (another
    fake world's, say) is registered again. Idempotent: calling it twice with the same
    arguments changes nothing. Raises ValueError when the world is smaller than ``group_size``.
    """
    import torch.distributed as dist
    from torch._C._distributed_c10d import _register_process_group, _unregister_process_group
    from torch.distributed.distributed_c10d import _resolve_process_group
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if group_size < 1:
        raise ValueError(f"group_size must be positive, got {group_size}")
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size or group_size)
    world = dist.get_world_size()
    if world < group_size:
        raise ValueError(f"torch.distributed world has {world} ranks, fewer than group_size={group_size}")

    def registered(name: str):
        """The live group under ``name``, or None. A name left behind by a group that was
        destroyed since (c10d keeps a weak reference: "has already been destroyed") is
        unregistered here, or registering the name again would fail ("A process group is
        already registered under the name")."""
        try:
            return _resolve_process_group(name)
        except Exception as e:  # noqa: BLE001 - not registered, or a stale name
            if "destroyed" in str(e):
                _unregister_process_group(name)
            return None

    for name in group_names:
        existing = registered(name)
        if existing is not None and existing.size() == group_size:
            continue
        group = dist.group.WORLD if world == group_size else new_fake_group(group_size)
        # the new group may have taken this very name (c10d names new groups by its counter)
        existing = registered(name)
        if existing is not None and existing.size() == group_size:
            continue
        if existing is not None:
            _unregister_process_group(name)
        _register_process_group(name, group)


def new_fake_group(group_size: int, attempts: int = 64):
    """A new group of ranks ``0..group_size-1`` in the fake world. c10d names a new group by
    its counter and refuses a name already registered (by us, for a logged graph); each refusal
    moves the counter on, so the next name is tried, up to ``attempts`` times."""
    import torch.distributed as dist

    for _ in range(attempts - 1):
        try:
            return dist.new_group(list(range(group_size)))
        except (RuntimeError, ValueError) as e:
            if "already registered" not in str(e):
                raise
    return dist.new_group(list(range(group_size)))
