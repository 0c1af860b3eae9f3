"""Case files as pytest items: `pytest regression/` fails on a failing case;
`pytest challenge/` reports failing cases as expected failures and never fails the run."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_collect_file(parent, file_path):
    if file_path.suffix != ".yaml":
        return None
    from garden.formats.cases import suite_of

    if suite_of(file_path) in ("regression", "challenge"):
        return CaseFile.from_parent(parent, path=file_path)
    return None


class CaseFailed(Exception):
    pass


class CaseFile(pytest.File):
    def collect(self):
        yield CaseItem.from_parent(self, name=self.path.stem)


class CaseItem(pytest.Item):
    def runtest(self):
        from garden.formats.cases import load_case
        from garden.evaluation.runner import run_case

        loaded = load_case(self.path)
        result = run_case(loaded, "default", trace=False)
        if result.passed:
            return
        lines = list(result.main.failures)
        lines += [f"[{c.name}] {f}" for c in result.controls for f in c.failures]
        if loaded.suite == "challenge":
            origin = loaded.case.origin or "unknown origin"
            pytest.xfail(f"known miss ({origin}): " + "; ".join(lines))
        raise CaseFailed("\n".join(lines))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseFailed):
            return f"case {self.path.name} failed under default:\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"case: {self.name}"
