"""A warm worker forgets the last job's user code: modules and the registry entries they made."""

import sys

from siirl.algorithms.advantage import ADV_ESTIMATORS
from siirl.dag_worker.warm_reset import forget_modules, user_modules

MODULE = """from siirl.algorithms.advantage import ADV_ESTIMATORS
@ADV_ESTIMATORS.register('my_warm_estimator')
def est(inputs):
    return {value!r}
"""


def test_user_modules_and_their_entries_are_forgotten(tmp_path, monkeypatch):
    (tmp_path / "my_estimator_mod.py").write_text(MODULE.format(value="first"))
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("my_estimator_mod")
    ADV_ESTIMATORS.get("my_estimator_mod:est")  # imported by module:function, cached in the registry
    assert "my_warm_estimator" in ADV_ESTIMATORS

    found = user_modules()
    assert "my_estimator_mod" in found
    assert not [name for name in found if name.split(".")[0] in ("siirl", "torch", "transformers", "ray")]
    forget_modules(["my_estimator_mod"])

    assert "my_estimator_mod" not in sys.modules
    assert "my_warm_estimator" not in ADV_ESTIMATORS and "my_estimator_mod:est" not in ADV_ESTIMATORS
    assert "grpo" in ADV_ESTIMATORS  # the library's own entries stay
    # The next job's import reads the module afresh and registers again without a clash.
    (tmp_path / "my_estimator_mod.py").write_text(MODULE.format(value="second"))
    __import__("my_estimator_mod")
    assert ADV_ESTIMATORS.get("my_warm_estimator")(None) == "second"
    forget_modules(["my_estimator_mod"])
