"""Every row of the option table (docs/options.md), every estimator, loss mode and workflow type: 2 real
training steps on the CPU, or (where the option needs what this machine or siiRL lacks) one line and exit 2."""

from __future__ import annotations

import functools
import re

import pytest

from siirl.device import get_backend
from siirl.errors import DeviceUnavailableError
from siirl.main_dag import EXIT_USER_ERROR, main

from .conftest import REPO
from .e2e_helpers import FAST, read_metrics
from .workflow_runs import GROUP, WORKFLOWS, carrying

pytestmark = pytest.mark.slow

SEED_WORKFLOW = REPO / "tests" / "fixtures" / "seeds" / "workflow_grpo_full.yaml"
DAPO = ["algorithm.filter_groups.enable=true", "algorithm.filter_groups.max_num_gen_batches=0"]


def option_rows(path: str = "docs/options.md") -> list[str]:
    """The override cells of the option table in ``path`` (the full one, or the README's short one)."""
    text = (REPO / path).read_text(encoding="utf-8")
    table = text.split("| override | meaning |", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)]


def _embedded(kind: str) -> str:
    from siirl.embedded_assets import default_data_files, default_model_path

    return default_model_path() if kind == "model" else default_data_files()[0 if kind == "train" else 1]


#: Placeholders of the table -> the concrete value a run uses here.
CONCRETE = {
    "module:function": None,  # per row, below
    "/path/to/hf_model": lambda: _embedded("model"),
    "a.parquet": lambda: _embedded("train"),
    "[b.parquet]": lambda: f"[{_embedded('val')}]",
    "file.yaml": lambda: str(SEED_WORKFLOW),
    "N": lambda: "1",
    "M": lambda: "1",
}
#: Placeholders whose value depends on the key.
PER_KEY = {
    "algorithm.adv_estimator": "siirl.algorithms.outcome_advantage:rloo_advantage",
    "dag.custom_pipeline_fn": "examples.custom_pipeline.pipeline:build",
    "actor_rollout_ref.actor.loss_agg_horizon": "64",
}
#: Companions an alternative needs to run as documented.
COMPANIONS = {
    "algorithm.workflow_type=DAPO": DAPO,
    "algorithm.adv_estimator=optimal_token_baseline": ["actor_rollout_ref.actor.calculate_sum_pi_squared=true"],
}


def _value(key: str, alt: str) -> str:
    if key in PER_KEY and alt in ("module:function", "N"):
        return PER_KEY[key]
    return CONCRETE[alt]() if alt in CONCRETE else alt


def _device_usable(name: str) -> bool:
    try:
        get_backend(name)
        return True
    except DeviceUnavailableError:
        return False


def expand(row: str) -> list[list[str]]:
    """One override list per alternative of the row (``a\\|b`` alternatives, space-separated pairs)."""
    parts = [part.split("=", 1) for part in row.split()]
    if len(parts) == 1 and "\\|" in parts[0][1]:
        key = parts[0][0]
        return [[f"{key}={_value(key, alt)}"] for alt in parts[0][1].split("\\|")]
    return [[f"{key}={_value(key, value)}" for key, value in parts]]


def cases() -> list[tuple[str, list[str]]]:
    out = []
    for row in option_rows():
        for overrides in expand(row):
            extra = [c for o in overrides for c in COMPANIONS.get(o, [])]
            out.append((" ".join(overrides), [*overrides, *extra]))
    # Every loss mode explicitly, each with the estimator that pairs with it.
    out += [("loss_mode=gspo + gspo", ["algorithm.adv_estimator=gspo", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo"]),
            ("loss_mode=cpgd + cpgd", ["algorithm.adv_estimator=cpgd", "actor_rollout_ref.actor.policy_loss.loss_mode=cpgd"])]
    return out


def expected_refusal(overrides: list[str]) -> str | None:
    """Why this combination must be refused on this machine, or None when it must train."""
    device = next((o.split("=")[1] for o in overrides if o.startswith("device=")), "cpu")
    if device != "auto" and not _device_usable(device):
        return device
    if "dag.agent_placement=own" in overrides and not any(o.startswith("dag.custom_pipeline_fn=") for o in overrides):
        return "has none"  # placing agents on their own workers needs a multi-agent graph (tests/e2e/test_agentic_training.py)
    if "algorithm.adv_estimator=gae_marft" in overrides:
        return "chains the turns of a multi-agent team"  # teams: tests/e2e/test_agent_features.py
    engine = next((o.split("=")[1] for o in overrides if o.startswith("actor_rollout_ref.rollout.name=")), "hf")
    if engine == "hf":
        return None
    cpu = get_backend("cpu")
    if device == "cpu":
        # vLLM's CPU build where it is installed, one line before Ray where not; the CPU rolls out an engine it
        # has no build of (SGLang) with hf and says so
        return cpu.rollout_unavailable(engine)
    return None if cpu.supports_rollout(engine) else engine


CASES = cases()

#: Keys whose alternatives pick among equivalent implementations (device, engine, strategy, layout, log-prob
#: source, logging, balancing), name the embedded defaults, or choose a plain outcome estimator / loss mode:
#: they do not read each other, so one training can carry one alternative of each. The estimators and losses
#: that pair with each other (gspo, cpgd), need a critic or a companion, or change the graph train alone.
FOLDABLE_KEYS = {
    "device", "task", "data.train_files", "algorithm.workflow_type", "dag.agent_placement",
    "actor_rollout_ref.model.path", "actor_rollout_ref.rollout.name", "actor_rollout_ref.actor.strategy",
    "actor_rollout_ref.model.remove_padding_layout", "actor_rollout_ref.actor.old_log_prob_source",
    "trainer.log_level", "trainer.balance_batch", "algorithm.adv_estimator",
    "actor_rollout_ref.actor.policy_loss.loss_mode",
}
ALONE_VALUES = {"algorithm.adv_estimator": {"gae", "gspo", "cpgd", "optimal_token_baseline"},
                "actor_rollout_ref.actor.policy_loss.loss_mode": {"gspo", "cpgd"},
                "algorithm.workflow_type": {"DAPO", "EMBODIED"}}
#: Keys that set the same thing as another key (a task is its data files).
SLOT_OF = {"task": "data", "data.train_files": "data", "data.val_files": "data"}


def _pairs(overrides: list[str]) -> list[tuple[str, str]]:
    return [tuple(o.split("=", 1)) for o in overrides]


def _slots(overrides: list[str]) -> set[str]:
    """What a case sets: its keys (a task is its data files), and the loss mode too where its estimator
    trains with a loss of its own (another loss mode beside it is refused)."""
    from siirl.algorithms import estimator_needs

    slots = {SLOT_OF.get(key, key) for key, _ in _pairs(overrides)}
    for key, value in _pairs(overrides):
        if key == "algorithm.adv_estimator" and estimator_needs(value).loss_mode != "vanilla":
            slots.add("actor_rollout_ref.actor.policy_loss.loss_mode")
    return slots


def _foldable(overrides: list[str]) -> bool:
    return expected_refusal(overrides) is None and all(
        key in FOLDABLE_KEYS | {"data.val_files"} and value not in ALONE_VALUES.get(key, ()) for key, value in _pairs(overrides))


def bundles(cases: list[tuple[str, list[str]]]) -> tuple[list[list[str]], dict[str, int]]:
    """Foldable cases packed greedily into as few trainings as keep one alternative per key: the bundles'
    overrides, and each folded case's bundle."""
    packs: list[list[str]] = []
    home: dict[str, int] = {}
    for name, overrides in cases:
        if not _foldable(overrides) or carrying(overrides):
            continue
        slots = _slots(overrides)
        for index, pack in enumerate(packs):
            taken = _slots(pack)
            if not slots & taken and expected_refusal([*pack, *overrides]) is None:
                pack += overrides
                home[name] = index
                break
        else:
            packs.append(list(overrides))
            home[name] = len(packs) - 1
    return packs, home


BUNDLES, BUNDLE_OF = bundles(CASES)


def _case_param(name: str, overrides: list[str]):
    if carrying(overrides):
        marks = [pytest.mark.xdist_group(GROUP)]
    elif name in BUNDLE_OF:
        marks = [pytest.mark.xdist_group(f"option_bundle_{BUNDLE_OF[name]}")]
    else:
        marks = []
    return pytest.param(name, overrides, id=name, marks=marks)


def test_every_documented_row_is_covered():
    assert len(option_rows()) >= 14 and all(expand(row) for row in option_rows())


def test_readme_overrides_are_rows_of_the_full_table():
    """The README keeps the most used overrides; each is a row of docs/options.md, so it is run above."""
    short = option_rows("README.md")
    assert len(short) >= 8 and set(short) <= set(option_rows())


def _launch(run_dir, overrides: list[str]) -> int:
    """The e2e launch (FAST settings, 2 steps), with the row's own device when it names one."""
    names_device = any(o.startswith("device=") for o in overrides)
    base = [f for f in FAST if not (names_device and f.startswith("device="))]
    return main([*base, f"trainer.output_dir={run_dir}", "trainer.total_training_steps=2",
                 "data.val_batch_size=8", *overrides])


@functools.cache
def _config_leaves(overrides: tuple[str, ...]) -> dict[str, object]:
    """The run's resolved config (the e2e base with ``overrides``) as flat ``dotted.key -> value``; composed
    once per process for the default and each bundle, which many rows compare against."""
    from omegaconf import OmegaConf

    from siirl.config_checks import load_config

    names_device = any(o.startswith("device=") for o in overrides)
    base = [f for f in FAST if not (names_device and f.startswith("device="))]
    tree = OmegaConf.to_container(OmegaConf.structured(load_config([*base, *overrides])))
    flat: dict[str, object] = {}

    def walk(node, prefix):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                flat[f"{prefix}{key}"] = value

    walk(tree, "")
    return flat


@pytest.fixture(scope="module")
def bundle_run(tmp_path_factory, ray_session):
    """Each bundle trains once, for every case folded into it (the exit code and the run folder)."""
    done: dict[int, tuple[int, object]] = {}

    def run(index: int):
        if index not in done:
            run_dir = tmp_path_factory.mktemp(f"option_bundle_{index}") / "run"
            done[index] = (_launch(run_dir, BUNDLES[index]), run_dir)
        return done[index]

    return run


def test_bundles_fold_every_foldable_case_once_and_keep_each_key_once():
    folded = [name for name, _ in CASES if name in BUNDLE_OF]
    assert len(folded) >= 30 and len(BUNDLES) <= len(folded) // 4
    for pack in BUNDLES:
        keys = [SLOT_OF.get(key, key) for key, _ in _pairs(pack) if key != "data.val_files"]
        assert len(keys) == len(set(keys)), pack


@pytest.mark.parametrize(("name", "overrides"), [_case_param(name, o) for name, o in CASES])
def test_option_trains_two_steps_or_is_refused(name, overrides, tmp_path, ray_session, bundle_run, workflow_run,
                                                capsys):
    workflow = carrying(overrides)
    if workflow or name in BUNDLE_OF:
        # The option trains inside a workflow's run or its bundle: that run's resolved config carries everything
        # the option changes on its own, and it trains two steps.
        pack = WORKFLOWS[workflow] if workflow else BUNDLES[BUNDLE_OF[name]]
        default, alone, together = _config_leaves(()), _config_leaves(tuple(overrides)), _config_leaves(tuple(pack))
        changed = {key: value for key, value in alone.items() if default.get(key) != value}
        assert {key: together.get(key) for key in changed} == changed, pack
        code, run_dir = workflow_run(workflow) if workflow else bundle_run(BUNDLE_OF[name])
        assert code == 0, pack
        assert [r["step"] for r in read_metrics(run_dir) if "actor/pg_loss" in r] == [1, 2]
        return
    refusal = expected_refusal(overrides)
    code = _launch(tmp_path / "run", overrides)
    if refusal is not None:
        # Earlier runs' Ray workers may still flush logs into stderr; the launcher's line is the last.
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == EXIT_USER_ERROR and err.startswith("siirl: error:") and refusal in err, err
        return
    assert code == 0
    steps = [r for r in read_metrics(tmp_path / "run") if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
