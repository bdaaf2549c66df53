"""The launcher's refusal of bad input, as every CLI test checks it."""

import ray

from siirl.main_dag import EXIT_USER_ERROR, main


def one_line_refusal(capsys, *argv: str) -> str:
    """Run the launcher with ``argv``; it must refuse in ONE ``siirl: error:`` line, exit 2, before Ray."""
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and err.startswith("siirl: error:") and "\n" not in err, err
    assert not ray.is_initialized()
    return err
