"""Plan records: who runs what. Plain dataclasses so the driver can log, test and ship them to workers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from siirl.execution.dag.node_types import NodeRole
from siirl.execution.dag.task_graph import TaskGraph
from siirl.params.resolved import ResolvedRun, resolve
from siirl.params.root import SiirlConfig

#: Placement of nodes without ``config.placement_group``: they run on every rank.
ALL_RANKS = "all"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned plain-text table with a dashed rule under the header."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def span(ranks: Sequence[int]) -> str:
    """``0-3`` for a contiguous run, else the comma list."""
    if len(ranks) > 1 and list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))


def _bracket(ranks: Sequence[int]) -> str:
    return "[" + ",".join(map(str, ranks)) + "]"


@dataclass(frozen=True)
class RoleCoord:
    """A rank's coordinates inside one role's device mesh (tp is the fastest-varying dimension)."""

    dp_rank: int
    dp_size: int
    tp_rank: int
    tp_size: int
    #: ``tp`` or ``sp``, as ``RoleGroups.model_parallel``.
    model_parallel: str = "tp"

    def __str__(self) -> str:
        return f"dp{self.dp_rank}/{self.dp_size} {self.model_parallel}{self.tp_rank}/{self.tp_size}"


@dataclass
class RoleGroups:
    """Rank sets for one model role in one placement: process groups are created from these."""

    key: str
    role: NodeRole
    placement: str
    ranks: tuple[int, ...]
    tp_size: int
    dp_size: int
    tp_groups: list[tuple[int, ...]] = field(default_factory=list)
    dp_groups: list[tuple[int, ...]] = field(default_factory=list)
    #: What the ranks of a tp group share: ``tp`` (tensor parallel: a model split over them) or ``sp``
    #: (Ulysses sequence parallel: each micro-batch's tokens split over them). Either way they hold the same data.
    model_parallel: str = "tp"

    def to_table(self) -> str:
        rows = [(self.model_parallel, i, _bracket(g)) for i, g in enumerate(self.tp_groups)]
        rows += [("dp", i, _bracket(g)) for i, g in enumerate(self.dp_groups)]
        return format_table([f"{self.key} group", "index", "ranks"], rows)


@dataclass(frozen=True)
class Handoff:
    """``consumer`` runs on other ranks than ``producer`` and takes its output as input: the producer's
    ranks (in the dp layout of role key ``producer_role``) hand it to the consumer's ranks (in the layout of
    ``consumer_role``) through the data coordinator."""

    producer: str
    consumer: str
    producer_role: str
    consumer_role: str

    @property
    def key(self) -> str:
        return f"{self.producer}->{self.consumer}"


@dataclass
class WorkerPlan:
    """Everything one DAG worker needs to start: where it sits and its own copy of the graph."""

    rank: int
    node_index: int
    local_rank: int
    placement: str
    graph: TaskGraph
    coords: dict[str, RoleCoord]
    #: node_id -> dependencies produced on other ranks (fetched through the data coordinator).
    remote_inputs: dict[str, list[str]] = field(default_factory=dict)

    def data_coord(self) -> RoleCoord | None:
        """The coordinates its dataloader shards over: the rollout's, else its first role's."""
        return self.coords.get("rollout") or next(iter(self.coords.values()), None)


@dataclass
class ExecutionPlan:
    """The whole job: the rank layout, the process-group rank sets and one WorkerPlan per global rank."""

    graph_id: str
    nnodes: int
    devices_per_node: int
    execution_order: list[str]
    placements: dict[str, tuple[int, ...]]
    groups: dict[str, RoleGroups]
    workers: list[WorkerPlan]
    #: Edges between placement groups, in execution order of their consumers (empty: one placement).
    handoffs: list[Handoff] = field(default_factory=list)
    #: What the run derives from its config (siirl.params.resolved), resolved once on the driver by
    #: ``plan_from_config``; a plan made by ``make_plan`` alone (planner tests) carries the schema defaults'
    #: (synchronous; the ``auto`` choices that need ``load_config`` left as ``auto``).
    resolved: ResolvedRun = field(default_factory=lambda: resolve(SiirlConfig()))

    @property
    def world_size(self) -> int:
        return self.nnodes * self.devices_per_node

    def worker(self, rank: int) -> WorkerPlan:
        if not 0 <= rank < len(self.workers):
            raise ValueError(f"rank {rank} is outside the plan's world of {len(self.workers)} ranks")
        return self.workers[rank]

    def to_table(self) -> str:
        """One row per rank: machine slot, placement, node count and its coordinates in every role."""
        keys = list(self.groups)
        headers = ["rank", "node", "local", "placement", "nodes", *keys]
        rows = [
            [
                w.rank,
                w.node_index,
                w.local_rank,
                w.placement,
                len(w.graph),
                *(w.coords.get(k, "-") for k in keys),
            ]
            for w in self.workers
        ]
        return format_table(headers, rows)

    def groups_table(self) -> str:
        """One row per role: its ranks, sizes and the tp / dp rank sets."""
        rows = [
            [
                g.key,
                span(g.ranks),
                f"{g.tp_size} ({g.model_parallel})" if g.tp_size > 1 else g.tp_size,
                g.dp_size,
                " ".join(map(_bracket, g.tp_groups)),
                " ".join(map(_bracket, g.dp_groups)),
            ]
            for g in self.groups.values()
        ]
        return format_table(["role", "ranks", "tp|sp", "dp", "tp|sp groups", "dp groups"], rows)
