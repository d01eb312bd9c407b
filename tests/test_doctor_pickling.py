"""The doctor's not-picklable rule: what workers are sent, pickled as spawn and forkserver pickle it, the failing part named by its path."""
from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from conftest import ROOT
from helpers import doctor
from helpers.doctor.pickling import culprit, pickle_probe, start_method

pytestmark = pytest.mark.usefixtures("no_process_left")  # tests/conftest.py: every worker stopped


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class Steps(Dataset):
    """Items through a list of steps kept in a dict, as transform pipelines keep them."""

    def __init__(self, steps: list) -> None:
        self.transform = {"steps": steps}
        self.x = torch.randn(64, 4)

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        item = self.x[i]
        for step in self.transform["steps"]:
            item = step(item)
        return item


def only(diagnosis: doctor.Diagnosis) -> doctor.Finding:
    found = [f for f in diagnosis.findings if f.code == "not-picklable"]
    assert len(found) == 1, str(diagnosis)
    return found[0]


def test_a_lambda_deep_in_a_dataset_is_named_by_its_path_under_fork():
    loader = DataLoader(Steps([abs, lambda x: x + 1]), batch_size=8, num_workers=2, multiprocessing_context="fork")
    found = only(doctor.diagnose(loader, budget_s=4))
    assert found.severity == "warning" and found.evidence["path"] == "loader.dataset.transform['steps'][1]"
    assert "Can't pickle" in found.evidence["error"] and "<lambda>" in found.evidence["error"]
    assert "would fail under forkserver (Linux's default from Python 3.14) and spawn" in found.message


def test_under_spawn_it_is_an_error_beside_the_loaders_own():
    loader = DataLoader(Steps([lambda x: x]), batch_size=8, num_workers=2, multiprocessing_context="spawn")
    diagnosis = doctor.diagnose(loader, budget_s=6)
    found = only(diagnosis)
    assert found.severity == "error" and found.evidence["start_method"] == "spawn" and "loader-error" in diagnosis.codes


@pytest.mark.parametrize("field", ["collate_fn", "worker_init_fn"])
def test_the_collate_and_init_functions_are_sent_too(field):
    def local(*args):  # a function defined inside another: pickled by name, which does not resolve
        return torch.utils.data.default_collate(*args) if field == "collate_fn" else None

    loader = DataLoader(Steps([double]), batch_size=8, num_workers=1, multiprocessing_context="fork", **{field: local})
    found = only(doctor.diagnose(loader, budget_s=4))
    assert found.evidence["path"] == f"loader.{field}" and "Can't pickle local object" in found.evidence["error"]


def test_module_level_functions_and_no_workers_are_silent():
    fine = doctor.diagnose(DataLoader(Steps([abs, double]), batch_size=8, num_workers=2), budget_s=4)
    assert "not-picklable" not in fine.codes and fine.measurements["pickled_per_worker_bytes"] > 0
    no_workers = doctor.diagnose(DataLoader(Steps([lambda x: x]), batch_size=8), budget_s=3)
    assert "not-picklable" not in no_workers.codes


def test_probing_leaves_tensors_where_they_are_and_does_not_count_them():
    big = Steps([double])
    big.x = torch.zeros(2_000_000)  # 8 MB
    probe = pickle_probe(big)
    assert probe.error is None and probe.nbytes < 10_000 and not big.x.is_shared()  # torch's reducer would share it


def test_a_numpy_array_counts_its_bytes_as_it_travels_by_value():
    """A worker started by spawn or forkserver is sent a numpy array's bytes (numpy has no shared-memory reducer)."""
    held = Steps([double])
    held.table = np.zeros(1_000_000)  # 8,000,000 bytes
    probe = pickle_probe(held)
    assert probe.error is None and 8_000_000 <= probe.nbytes < 8_000_000 + 10_000, probe.nbytes
    assert probe.nbytes <= len(pickle.dumps(held)) + 1_000  # about what pickle writes for it


def test_culprit_names_the_innermost_failing_part():
    holder = Steps([double])
    holder.handle = {"files": [open(__file__)]}  # noqa: SIM115 - an open file, as datasets keep them
    try:
        path, part, error = culprit("dataset", holder)
    finally:
        holder.handle["files"][0].close()
    assert path == "dataset.handle['files'][0]" and type(part).__name__ == "TextIOWrapper"
    assert "cannot pickle '_io.TextIOWrapper' object" in str(error)
    assert culprit("dataset", Steps([double])) is None


def test_start_method_reads_the_loaders_context_or_the_default_without_setting_it():
    import multiprocessing

    assert start_method(DataLoader(range(4), num_workers=1, multiprocessing_context="spawn")) == "spawn"
    before = multiprocessing.get_start_method(allow_none=True)
    assert start_method(DataLoader(range(4), num_workers=1)) == (before or multiprocessing.get_all_start_methods()[0])
    assert multiprocessing.get_start_method(allow_none=True) == before


NOTEBOOK_LIKE = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})
    import torch
    from torch.utils.data import DataLoader, Dataset
    from helpers import doctor

    class Notebook(Dataset):
        def __len__(self):
            return 32
        def __getitem__(self, i):
            return torch.tensor([float(i)])

    for method in ("fork", "spawn"):
        loader = DataLoader(Notebook(), batch_size=8, num_workers=1, multiprocessing_context=method)
        found = [f for f in doctor.diagnose(loader, budget_s=6).findings if f.code == "not-picklable"]
        print(method, found[0].severity if found else None, found[0].evidence.get("names") if found else None)
''')


def test_a_class_defined_in_a_fileless_main_is_info_under_fork_and_an_error_under_spawn():
    """`python -c` has a __main__ without a file, as a notebook's kernel does: spawn's workers cannot find its classes."""
    done = subprocess.run([sys.executable, "-c", NOTEBOOK_LIKE.format(root=str(ROOT))], capture_output=True, text=True,
                          timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("fork", "spawn"))]
    assert lines == ["fork info ['Notebook']", "spawn error ['Notebook']"], done.stdout + done.stderr
