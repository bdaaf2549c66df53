"""The launcher's refusal of bad input, as every CLI test checks it."""

from siirl.main_dag import EXIT_USER_ERROR, main
from tests.ray_testutils import ray_start_attempts


def one_line_refusal(capsys, *argv: str) -> str:
    """Run the launcher with ``argv``; it must refuse in ONE ``siirl: error:`` line, exit 2, before Ray."""
    with ray_start_attempts() as ray_starts:
        code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and err.startswith("siirl: error:") and "\n" not in err, err
    assert not ray_starts
    return err
