"""verl's interaction keys and data: a run with an interaction plans; each mistake in the YAML or in the
rows' ``interaction_kwargs`` is one line and exit 2, before Ray starts."""

import pyarrow.parquet as pq
import pytest
import yaml
from launch_scripts import with_interaction_kwargs

from siirl.embedded_assets import default_data_files
from siirl.main_dag import EXIT_USER_ERROR, main

VERL_YAML = {"interaction": [
    {"name": "gsm8k", "class_name": "verl.interactions.gsm8k_interaction.Gsm8kInteraction", "config": {}},
]}


def rows(tmp_path, name="gsm8k", kwargs=True):
    table = pq.read_table(default_data_files()[0]).slice(0, 32)
    if kwargs:
        table = with_interaction_kwargs(table, name)
    path = tmp_path / f"rows_{name}_{kwargs}.parquet"
    pq.write_table(table, path)
    return str(path)


def run(tmp_path, document=VERL_YAML, data=None, *extra):
    path = tmp_path / "interaction.yaml"
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    data = data or rows(tmp_path)
    return main(["--print-config", "device=cpu", "actor_rollout_ref.rollout.multi_turn.enable=true",
                 f"actor_rollout_ref.rollout.multi_turn.interaction_config_path={path}", "data.return_raw_chat=true",
                 f"data.train_files={data}", f"data.val_files={data}", f"trainer.output_dir={tmp_path / 'out'}", *extra])


def test_verls_interaction_run_plans_without_tools(tmp_path, capsys):
    code = run(tmp_path, VERL_YAML, None, "actor_rollout_ref.rollout.multi_turn.max_user_turns=2")
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "interaction_config_path:" in out.out and "max_user_turns: 2" in out.out


@pytest.mark.parametrize(("document", "needle"), [
    ("interaction: [{class_name: x", "invalid YAML"),
    ({"interaction": []}, "non-empty list under 'interaction'"),
    ({"interaction": [{"class_name": "a.UserInteraction"}, {"name": "user", "class_name": "b.C"}]},
     "a second interaction named 'user'"),
    ({"interaction": [{"name": "gsm8k", "class_name": "my_missing_pkg.users.Gsm8kUser"}]}, "my_missing_pkg"),
])
def test_bad_interaction_yaml_is_one_line(tmp_path, capsys, document, needle):
    code = run(tmp_path, document)
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err and "Traceback" not in err, err
    assert needle in err and "interaction_config_path" in err, err


@pytest.mark.parametrize(("make_rows", "needle"), [
    (lambda tmp: rows(tmp, kwargs=False), "row 0 has no extra_info.interaction_kwargs.name"),
    (lambda tmp: rows(tmp, name="weather"), "row 0 names interaction 'weather'"),
])
def test_rows_must_name_a_configured_interaction(tmp_path, capsys, make_rows, needle):
    code = run(tmp_path, VERL_YAML, make_rows(tmp_path))
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err, err
    assert needle in err and "defines: gsm8k" in err, err


def test_interactions_need_the_raw_chat(tmp_path, capsys):
    assert run(tmp_path, VERL_YAML, None, "data.return_raw_chat=false") == EXIT_USER_ERROR
    assert "interaction_config_path needs data.return_raw_chat=true" in capsys.readouterr().err
