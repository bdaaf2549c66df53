"""Code datasets, scored by running the response's code on their test cases in a SandboxFusion server.

These are verl's code sources (``codecontests``, ``apps``, ``codeforces``, ``taco``, e.g. in PRIME's
Eurus-2-RL-Data). Their ``ground_truth`` is JSON (or a dict) with ``inputs`` / ``outputs`` (stdin and the
expected stdout of each case), optionally ``fn_name`` (call that function, or ``Solution().<fn_name>``,
with one JSON argument per stdin line and print its result) or ``assert_case`` (code appended to the
solution; a case passes when it runs cleanly). The code is the response's fenced block (``extract_code``);
a response without one scores 0. The score is verl's continuous one: the share of the first 10 cases that pass.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from siirl.errors import RewardFunctionError
from siirl.reward_score.registry import SCORES

CODE_SOURCES = ("codecontests", "apps", "codeforces", "taco")
#: verl's continuous score looks at this many cases.
CASES_SCORED = 10

_CALL_FUNCTION = """
{code}

import json as _json, sys as _sys
_args = [_json.loads(_line) for _line in _sys.stdin.read().splitlines() if _line.strip()]
_target = globals()[{name!r}] if {name!r} in globals() else getattr(globals()["Solution"](), {name!r})
_result = _target(*_args)
print(_json.dumps(_result) if _result is None or isinstance(_result, (bool, dict, list, tuple)) else _result)
"""


@dataclass(frozen=True)
class CodeCase:
    code: str
    stdin: str | None
    expected: str | None


def extract_code(response: str) -> str | None:
    """The last ```python block, else the first fenced block without its language line (verl's rule); None
    when there is no fenced block."""
    if "```python" in response:
        return response.split("```python")[-1].split("```")[0]
    if "```" not in response:
        return None
    block = response.split("```")[1]
    first, _, rest = block.partition("\n")
    return rest if first.strip().isalpha() else block


def cases_to_run(code: str, ground_truth: Any) -> list[CodeCase]:
    """The first ``CASES_SCORED`` cases of a ground truth, as programs to run."""
    cases = json.loads(ground_truth) if isinstance(ground_truth, (str, bytes)) else ground_truth
    if not isinstance(cases, dict):
        raise RewardFunctionError(f"code ground_truth must be a JSON object of test cases, got {ground_truth!r:.80}")
    asserts = cases.get("assert_case")
    inputs = cases.get("inputs", [""] * len(asserts) if isinstance(asserts, list) else None)
    outputs = cases.get("outputs", [None] * len(inputs) if isinstance(inputs, list) else None)
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise RewardFunctionError("code ground_truth needs equally long 'inputs' and 'outputs' lists (or 'assert_case')")
    name = cases.get("fn_name")
    program = _CALL_FUNCTION.format(code=code, name=name) if name else code
    asserts = asserts if isinstance(asserts, list) else [""] * len(inputs)
    return [
        CodeCase(f"{program}\n\n{check}", None if stdin is None else str(stdin), None if out is None else str(out))
        for stdin, out, check in list(zip(inputs, outputs, asserts))[:CASES_SCORED]
    ]


def passes(reply: dict[str, Any], expected: str | None) -> bool:
    """A case passes when the program ran to a clean exit and printed the expected output (trailing
    newlines aside)."""
    run = reply.get("run_result") or {}
    if reply.get("status") != "Success" or run.get("status") != "Finished":
        return False
    return expected is None or str(run.get("stdout") or "").rstrip("\n") == expected.rstrip("\n")


@SCORES.register(*CODE_SOURCES, services=("sandbox",))
def code_execution_score(solution_str: str, ground_truth: Any, extra_info: Any = None, sandbox: Any = None) -> float:
    if sandbox is None:
        raise RewardFunctionError(
            "code datasets are scored by running the code in a SandboxFusion server: set "
            "reward_model.sandbox_fusion.url"
        )
    code = extract_code(solution_str)
    if code is None:
        return 0.0
    cases = cases_to_run(code, ground_truth)
    if not cases:
        return 0.0
    with ThreadPoolExecutor(max_workers=min(len(cases), sandbox.max_concurrent)) as pool:
        replies = list(pool.map(lambda case: sandbox.run(case.code, case.stdin), cases))
    return sum(passes(reply, case.expected) for reply, case in zip(replies, cases)) / len(cases)
