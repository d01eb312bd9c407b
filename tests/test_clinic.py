"""helpers.clinic: the faults switch what they say, the template equals the fixed script, runs measure what they claim, bad input is named."""
from __future__ import annotations

import dataclasses
import json
import math
import time

import matplotlib
import numpy as np
import pytest
import torch
from conftest import ROOT
from torch.utils.data import DataLoader, RandomSampler, WeightedRandomSampler

from helpers import clinic, ddp, doctor, env
from helpers.clinic import runs as clinic_runs
from helpers.clinic import views as clinic_views
from helpers.samplers import DistributedWeightedSampler

matplotlib.use("Agg")  # no window: the plot tests only read the drawn artists
N = sum(clinic.CLASS_COUNTS)


pytestmark = pytest.mark.usefixtures("no_process_left")  # tests/conftest.py: every worker and program stopped


@pytest.fixture
def one_thread():
    """The clinic's steps on one intra-op thread, as the lesson runs them (more only fight the workers for 2 cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def headings(stem: str) -> set[str]:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    return {line[3:].strip() for cell in cells if cell["cell_type"] == "markdown"
            for line in "".join(cell["source"]).splitlines() if line.startswith("## ")}


# --- the faults

@pytest.mark.parametrize("name", list(clinic.FAULTS))
def test_each_fault_names_a_section_its_lesson_has_and_doctor_codes_that_exist(name):
    fault = clinic.FAULTS[name]
    assert fault.name == name and fault.section in headings(fault.lesson), f"{name}: {fault.lesson} has no '## {fault.section}'"
    assert set(fault.doctor) <= set(doctor.CODES)


def test_faults_cover_the_lessons_and_split_into_one_process_and_ranks():
    assert {fault.lesson[:2] for fault in clinic.FAULTS.values()} == {"02", "03", "04", "05", "06"}
    assert len(clinic.FAULTS) >= 6 and set(clinic.ONE_PROCESS) | set(clinic.RANKS_ONLY) == set(clinic.FAULTS)
    assert clinic.RANKS_ONLY == ("uneven-shards", "no-set-epoch")


def test_the_script_as_given_and_fixed():
    planted, fixed = clinic.make_loader(), clinic.make_loader(clinic.ALL_FIXED)
    assert type(planted.sampler) is RandomSampler and planted.num_workers == 0 and isinstance(planted.dataset.raw, list)
    assert type(fixed.sampler) is WeightedRandomSampler and len(fixed.sampler.weights) == N
    assert fixed.num_workers == clinic.workers_per_rank(1) and fixed.persistent_workers and isinstance(fixed.dataset.raw, np.ndarray)
    assert fixed.pin_memory == torch.accelerator.is_available() and not planted.pin_memory


def test_the_class_weight_trap_hides_behind_the_missing_sampler():
    trap = clinic.make_loader({"no-rebalancing"})
    assert type(trap.sampler) is WeightedRandomSampler and len(trap.sampler.weights) == clinic.NUM_CLASSES
    assert set(trap.sampler) <= set(range(clinic.NUM_CLASSES))  # only the first indices are ever drawn
    right = clinic.make_loader({"no-rebalancing", "class-weights-as-sample-weights"})
    counts = np.bincount(right.dataset.targets[list(right.sampler)], minlength=clinic.NUM_CLASSES)
    assert counts.min() > 0.2 * counts.sum()  # every class drawn about a third of the time


def test_template_loader_is_the_fixed_script():
    template, fixed = clinic.template_loader(), clinic.make_loader(clinic.ALL_FIXED)
    for name in ("batch_size", "num_workers", "persistent_workers", "pin_memory"):
        assert getattr(template, name) == getattr(fixed, name), name
    assert type(template.sampler) is type(fixed.sampler) and torch.equal(template.sampler.weights, fixed.sampler.weights)
    assert list(template.sampler) == list(fixed.sampler)  # the same draws from the same seed
    assert type(template.dataset.raw) is type(fixed.dataset.raw) and np.array_equal(template.dataset.raw, fixed.dataset.raw)


def test_items_decode_to_the_features_and_lists_hold_the_same_values():
    raw, labels = clinic.training_data()
    as_lists, as_array = (clinic.ClinicDataset(raw, labels, list_backed=flag, decode_ms=0) for flag in (True, False))
    item = as_array[5]
    assert torch.equal(item["input"], as_lists[5]["input"]) and item["input"].shape == (clinic.NUM_FEATURES,)
    assert item["label"] == labels[5] and item["index"] == 5
    assert np.allclose(item["input"].numpy(), raw[5].reshape(clinic.NUM_FEATURES, -1).mean(axis=1))


def test_data_is_made_once_read_only_and_matches_the_counts():
    raw, labels = clinic.training_data()
    assert clinic.training_data()[0] is raw and not raw.flags.writeable
    assert np.bincount(labels).tolist() == list(clinic.CLASS_COUNTS) and raw.shape == (N, clinic.NUM_FEATURES * clinic.RAW_PER_FEATURE)
    held_raw, held_labels = clinic.held_out_data()
    assert np.bincount(held_labels).tolist() == [clinic.EVAL_PER_CLASS] * clinic.NUM_CLASSES and len(held_raw) == len(held_labels)


def keys(loader: DataLoader) -> list[int]:
    return [int(key) for batch in loader for key in batch["key"]]


@pytest.mark.parametrize("workers", [0, 2])
def test_eval_stream_duplicates_per_worker_unless_sharded(workers):
    raw, labels = clinic.held_out_data()
    unsharded = keys(DataLoader(clinic.EvalStream(raw, labels, sharded=False, decode_ms=0), batch_size=64, num_workers=workers))
    sharded = keys(DataLoader(clinic.EvalStream(raw, labels, sharded=True, decode_ms=0), batch_size=64, num_workers=workers))
    assert sorted(sharded) == list(range(len(labels)))
    assert len(unsharded) == len(labels) * max(1, workers) and len(set(unsharded)) == len(labels)


def test_eval_stream_splits_by_rank_then_worker():
    raw, labels = clinic.held_out_data()
    read = []
    for rank in range(2):
        stream = clinic.EvalStream(raw, labels, sharded=True, decode_ms=0)
        stream.rank, stream.world_size = rank, 2  # as a rank of 2 would have read them from its process group
        read.append(keys(DataLoader(stream, batch_size=64, num_workers=2)))
    assert not set(read[0]) & set(read[1]) and sorted(read[0] + read[1]) == list(range(len(labels)))


def test_uneven_shards_plan():
    assert sum(clinic.shard_plan(2)) == N and len(set(clinic.shard_plan(2))) == 2 and clinic.shard_plan(1) == [N]


@pytest.mark.parametrize("cores, ranks, workers", [(2, 1, 2), (2, 2, 0), (8, 1, 8), (8, 2, 3), (1, 1, 1), (4, 8, 0)])
def test_workers_per_rank_keeps_processes_at_most_one_over_the_cores(monkeypatch, cores, ranks, workers):
    monkeypatch.setattr(env, "usable_cpus", lambda: cores)  # the course's one rule lives in helpers.env
    assert clinic.workers_per_rank(ranks, cap=None) == workers
    assert ranks * (1 + workers) <= cores + 1 or workers == 0
    assert clinic.workers_per_rank(ranks) == min(workers, clinic.MAX_WORKERS)


# --- runs: what they measure

def test_train_measures_scores_draws_and_the_evaluation_reads(one_thread):
    run = clinic.train(clinic.ALL_FIXED, epochs=2)
    assert run.world_size == 1 and len(run.epoch_draws) == 2 and run.steps_per_epoch == (math.ceil(N / clinic.BATCH_SIZE),) * 2
    assert run.repeated_epochs == 0 and run.eval_samples == run.eval_distinct == clinic.EVAL_PER_CLASS * clinic.NUM_CLASSES
    assert 0 <= run.data_wait_share <= 1 and run.samples_per_s > 0 and len(run.worker_uss_growth_mib) == clinic.workers_per_rank(1)
    # each worker's USS at the end holds its growth over the run, on top of what it started with
    assert len(run.worker_uss_mib) == len(run.worker_uss_growth_mib) and all(
        end > max(growth, 0) for end, growth in zip(run.worker_uss_mib, run.worker_uss_growth_mib))
    assert run.balanced_accuracy == pytest.approx(np.mean(run.recall_per_class)) and run.minority_recall == run.recall_per_class[clinic.MINORITY]
    assert torch.get_num_threads() == 1  # the fixture's; train put back what it found


def test_train_as_given_ignores_the_rare_class_and_reads_the_stream_per_worker(one_thread):
    run = clinic.train(epochs=1)
    assert run.minority_recall < 0.1 and run.accuracy_at_training_mix > run.balanced_accuracy + 0.2
    assert run.eval_samples == run.eval_distinct * max(1, clinic.workers_per_rank(1)) and run.worker_uss_growth_mib == run.worker_uss_mib == ()


def test_run_properties():
    run = clinic.Run(frozenset(), 0, 1, 1.0, 0.5, 0.9, 0.5, 0.0, 10, 10, (1.0, 0.5, 0.0), ((1, 2, 3), (1, 2, 3), (3, 4)))
    assert run.repeated_epochs == 1 and run.distinct_drawn == 4 and run.steps_per_epoch == (1, 1, 1)
    shares = np.array(clinic.CLASS_COUNTS) / N
    assert run.accuracy_at_training_mix == pytest.approx(shares[0] + 0.5 * shares[1])
    assert "balanced accuracy 0.500" in str(run) and "worker USS" not in str(run)  # no workers, nothing to say
    with_workers = dataclasses.replace(run, worker_uss_growth_mib=(16.0, 12.0), worker_uss_mib=(30.0, 20.0))
    assert str(with_workers).endswith(", worker USS 25 MiB (+14 over the run)")  # medians


def test_measure_speed_times_a_window_after_the_warmup(one_thread):
    speed = clinic.measure_speed(clinic.ALL_FIXED, steps=4)
    assert speed.steps == 4 and speed.samples_per_s > 0 and 0 <= speed.data_wait_share <= 1
    longer = clinic.measure_speed(clinic.ALL_FIXED, steps=40)  # past an epoch's batches, with the warm-up: into the next epoch
    assert longer.steps == 40
    both = clinic.speed_rounds([(), clinic.ALL_FIXED], rounds=2, steps=3)
    assert [len(rounds) for rounds in both] == [2, 2] and clinic.median_speed(both[0]).steps == 3
    as_given = clinic.measure_speed((), steps=4)  # the loop decodes every item itself: its CPU time per step holds the decoding
    decoding_ms = clinic.DECODE_MS * clinic.BATCH_SIZE  # CPU time of one batch's decoding (spin calibrated in CPU time)
    # At least half of it more than the loop with workers (measured here: 6.2-8.1 ms more for 6.4 ms; a ratio of the two
    # loops' CPU times ranged 2.6-4.1x on a quiet machine, so a fixed ratio is no test).
    assert as_given.loop_cpu_ms - speed.loop_cpu_ms > 0.5 * decoding_ms and speed.loop_cpu_ms > 0, (as_given, speed)


def test_measure_speed_leaves_out_a_planted_slow_start(monkeypatch):
    """The first batch (the warm-up without workers) takes 0.5 s; the 4 timed steps take 10 ms each and wait for nothing."""
    class SlowStart:
        num_workers = 0

        def __init__(self):
            self.started = False

        def __len__(self):
            return 8

        def __iter__(self):
            for index in range(8):
                if not self.started:
                    self.started = True
                    time.sleep(0.5)
                yield index

    monkeypatch.setattr(clinic_runs, "make_loader", lambda fixed, seed: SlowStart())
    monkeypatch.setattr(clinic_runs, "make_step", lambda fixed, device, seed: lambda batch: time.sleep(0.01))
    speed = clinic.measure_speed(steps=4)
    assert speed.steps == 4 and speed.data_wait_share < 0.2, speed  # counted, the 0.5 s start would be over 90 % of it
    assert speed.samples_per_s > 4 * clinic.BATCH_SIZE / 0.5, speed  # faster than the 4 steps plus the start allow


def test_ladder_rounds_time_the_ends_back_to_back_between_two_ceilings(monkeypatch):
    calls = []
    ladder = [(), {"no-workers"}, {"no-workers", "list-backed"}]

    def fake_speed(fixed, steps, seed):
        calls.append(len(fixed))
        return clinic.Speed(100.0 * (len(fixed) + 1), 0.5, steps)

    def fake_ceiling(processes):
        calls.append("ceiling")
        return 1.2 if len(calls) == 14 else 2.0  # the third round's second ceiling: load arrived during its pair

    monkeypatch.setattr(clinic_runs, "measure_speed", fake_speed)  # where ladder_rounds looks it up
    monkeypatch.setattr("helpers.timing.parallel_speedup", fake_ceiling)
    monkeypatch.setattr("helpers.timing.others_during", lambda measure: (measure(), 0.0))  # no other program: the ceilings decide
    speeds, headroom = clinic.ladder_rounds(ladder, rounds=3, steps=4)
    assert calls == ["ceiling", 0, 2, "ceiling", 1, "ceiling", 2, 0, "ceiling", 1, "ceiling", 0, 2, "ceiling", 1]
    assert [[s.samples_per_s for s in rung] for rung in speeds] == [[100.0] * 3, [200.0] * 3, [300.0] * 3]
    assert headroom.speedups == (3.0, 3.0, 3.0) and headroom.ceilings == (2.0, 2.0, 1.2) and headroom.rooms == (0, 1)


def test_doctor_finds_what_the_script_as_given_shows(one_thread):
    """The doctor's findings on the faulty loader: its class mix, and the data wait of a loop that decodes between steps."""
    diagnosis = doctor.diagnose(clinic.make_loader(), step=clinic.make_step(), budget_s=4)
    assert {"unbalanced-batches", "input-bound"} <= set(diagnosis.codes), str(diagnosis)
    assert diagnosis.measurements["data_wait_share"] > 0.5


def test_make_step_trains(one_thread):
    step = clinic.make_step(clinic.ALL_FIXED)
    batch = next(iter(DataLoader(clinic.ClinicDataset(*clinic.training_data(), list_backed=False, decode_ms=0), batch_size=64)))
    losses = [float(step(batch)) for _ in range(20)]
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]


def test_two_ranks_train_equal_steps_on_disjoint_draws():
    ranks = ddp.run(clinic.train, kwargs={"fixed": clinic.ALL_FIXED, "epochs": 1}, world_size=2, backend="gloo", timeout_s=120)
    assert [r.rank for r in ranks] == [0, 1] and ranks[0].steps_per_epoch == ranks[1].steps_per_epoch
    assert ranks[0].eval_samples == ranks[0].eval_distinct == clinic.EVAL_PER_CLASS * clinic.NUM_CLASSES  # gathered over ranks
    weights = clinic.make_loader(clinic.ALL_FIXED).sampler.weights
    expected = [list(DistributedWeightedSampler(weights, num_replicas=2, rank=r, num_samples=N, seed=0)) for r in range(2)]
    assert [list(r.epoch_draws[0]) for r in ranks] == expected


# --- the table, plot and widget

def rungs() -> list[clinic.Rung]:
    run = clinic.Run(frozenset(), 0, 1, 1.0, 0.5, 0.9, 0.5, 0.0, 10, 10, (1.0, 0.5, 0.0), ((1, 2),))
    return [clinic.Rung("as given", clinic.Speed(1000.0, 0.8, 16), run, "note"), clinic.Rung("2 ranks", evidence="timed out")]


def test_ladder_table_and_plot():
    table = clinic.ladder_table(rungs())
    assert table.splitlines()[1].split()[:5] == ["as", "given", "1,000", "80%", "0.500"] and "timed out" in table
    long = clinic.Rung("+ class-weights-as-sample-weights", clinic.Speed(7494.0, 0.94, 16), rungs()[0].run,
                       "worker USS 25 MiB (+14 in 3 epochs), evaluation read 600 (was 1200)")
    lines = clinic.ladder_table([*rungs(), long]).splitlines()
    column = lines[0].index("evidence")  # the evidence wraps under its own column, every line within 100 characters
    row = next(i for i, line in enumerate(lines) if line.startswith("+ class"))
    assert max(map(len, lines)) <= 100 and len(lines) - row == 3 and all(not line[:column].strip() for line in lines[row + 1:])
    assert " ".join(word for line in lines[row:] for word in line[column:].split()) == long.evidence
    # a label longer than the column (the course's are at most 34 characters): on its own line, the numbers below it
    own = clinic.Rung("+ " + "a-fault-name-of-a-learner's-own-" * 2, rungs()[0].speed, rungs()[0].run, long.evidence)
    lines = clinic.ladder_table([*rungs(), own]).splitlines()
    at = lines.index(own.label)
    assert max(map(len, lines)) <= 100 and lines[at + 1].split()[:2] == ["1,000", "80%"], lines
    assert not lines[at + 1][:40].strip() and lines[0].index("samples/s") == 42  # the column: 40 characters, then 2 spaces
    short = clinic.ladder_table([clinic.Rung("x", rungs()[0].speed, rungs()[0].run)]).splitlines()
    assert short[0].index("samples/s") + 9 == short[1].index("1,000") + 5  # labels under 5 characters: still aligned
    fig = clinic.plot_ladder(rungs(), title="t")
    assert len(fig.axes) == 3 and fig.axes[0].patches[0].get_height() == 1000.0
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_fault_widget_has_a_slider_per_fault_and_reuses_given_runs(monkeypatch):
    given = rungs()[0].run
    monkeypatch.setattr(clinic_views, "train", lambda fixed: pytest.fail(f"train({sorted(fixed)}) should have come from the given runs"))
    box = clinic.fault_widget(given, given, {"uneven-shards": "a", "no-set-epoch": "b", "none": "c"})
    sliders = box.children[:-1]
    assert [s.description.split(" (")[0] for s in sliders] == list(clinic.FAULTS) and all(s.options == ("planted", "fixed") for s in sliders)
    pin = sliders[list(clinic.FAULTS).index("pin-on-the-fly")].description  # without a GPU the slider says it changes nothing
    assert (pin == "pin-on-the-fly") == torch.accelerator.is_available() and pin.startswith("pin-on-the-fly")
    import matplotlib.pyplot as plt

    plt.close("all")


def test_fault_widget_shows_worker_memory_and_keeps_its_title_short(monkeypatch, capsys):
    """A newcomer's browser run: the widget's 190-character title shrank the figure to 6-pixel text, and its prose
    suggested planting list-backed, whose cost (each worker's memory) no panel showed."""
    import dataclasses

    import matplotlib.pyplot as plt

    given = rungs()[0].run  # no workers: no worker memory
    fixed = dataclasses.replace(given, fixed=clinic.ALL_FIXED, worker_uss_mib=(30.0, 50.0, 90.0))  # median 50, by hand
    monkeypatch.setattr(clinic_views, "train", lambda fixed: pytest.fail("no live run expected"))
    plt.close("all")
    clinic.fault_widget(given, fixed, {"uneven-shards": "timed out", "no-set-epoch": "b", "none": "c"})
    fig = plt.gcf()
    memory = fig.axes[4]
    assert len(fig.axes) == 5 and [bar.get_height() for bar in memory.patches] == [0.0, 50.0, 0.0]
    assert memory.get_title() == "worker memory, USS MiB\nyour choice: no workers"
    assert [text.get_text() for text in memory.texts] == ["no workers", "no workers"]  # as given, your choice: empty bars
    assert len(fig._suptitle.get_text()) <= 100
    out = capsys.readouterr().out
    assert "2 ranks (measured earlier in this lesson, not rerun here):\n    timed out" in out and max(map(len, out.splitlines())) <= 100
    plt.close("all")


# --- bad input is named

@pytest.mark.parametrize("call, error, match", [
    (lambda: clinic.as_fixed("no-workers"), TypeError, "fixed must be a collection of fault names"),
    (lambda: clinic.as_fixed(5), TypeError, "fixed must be a collection"),
    (lambda: clinic.as_fixed({"no-wrokers"}), ValueError, r"fixed holds \['no-wrokers'\], which are not faults"),
    (lambda: clinic.make_loader(seed=-1), ValueError, "seed must be at least 0"),
    (lambda: clinic.make_loader({"bogus"}), ValueError, "fixed holds"),
    (lambda: clinic.workers_per_rank(0), ValueError, "ranks must be at least 1"),
    (lambda: clinic.workers_per_rank(1.5), TypeError, "ranks must be an int"),
    (lambda: clinic.workers_per_rank(1, cap=-1), ValueError, "cap must be at least 0"),
    (lambda: clinic.shard_plan(0), ValueError, "world_size must be at least 1"),
    (lambda: clinic.train(epochs=0), ValueError, "epochs must be at least 1"),
    (lambda: clinic.train(device="gpu"), ValueError, "device must be a torch device"),
    (lambda: clinic.measure_speed(steps=1), ValueError, "steps must be at least 2"),
    (lambda: clinic.speed_rounds([]), ValueError, "configs must hold at least one"),
    (lambda: clinic.speed_rounds([()], rounds=0), ValueError, "rounds must be at least 1"),
    (lambda: clinic.ladder_rounds([()]), ValueError, "ladder must hold at least two"),
    (lambda: clinic.ladder_rounds([(), ()], rounds=0), ValueError, "rounds must be at least 1"),
    (lambda: clinic.train_in_turn([]), ValueError, "configs must hold at least one"),
    (lambda: clinic.median_speed([]), ValueError, "runs must hold at least one Speed"),
    (lambda: clinic.ladder_table([]), TypeError, "rungs must be a non-empty sequence of Rung"),
    (lambda: clinic.Rung(None), TypeError, "label must be a str, got None"),
    (lambda: clinic.Rung("a", evidence=5), TypeError, "evidence must be a str, got 5"),
    (lambda: clinic.plot_ladder(["x"]), TypeError, "rungs must be a non-empty sequence of Rung"),
    (lambda: clinic.ClinicDataset(np.zeros((3, 4)), np.zeros(3), list_backed="yes"), TypeError, "list_backed must be True or False"),
    (lambda: clinic.ClinicDataset(np.zeros(3), np.zeros(3), list_backed=False), ValueError, "raw must be a 2-D array"),
    (lambda: clinic.EvalStream(np.zeros((3, 4)), np.zeros(3), sharded=1), TypeError, "sharded must be True or False"),
    (lambda: clinic.fault_widget("run", rungs()[0].run, {}), TypeError, "planted must be a Run"),
    (lambda: clinic.fault_widget(rungs()[0].run, rungs()[0].run, {"none": "c"}), ValueError,
     r"rank_outcomes must map .* got the keys \['none'\]"),
    (lambda: clinic.fault_widget(rungs()[0].run, rungs()[0].run, ["none"]), TypeError,
     r"rank_outcomes must be a dict of what 2 ranks showed, got \['none'\]"),
    (lambda: clinic.fault_widget(rungs()[0].run, rungs()[0].run, {"none": "c", "no-set-epoch": "b", "uneven-shards": 1}),
     TypeError, r"rank_outcomes\['uneven-shards'\] must be a str \(what 2 ranks showed\), got 1"),
])
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_faults_declare_what_they_need_to_show():
    """Ranks, the fault each hides behind (fixed earlier in the lesson's order) and a device: fields, not words to search."""
    order = list(clinic.FAULTS)
    for name, fault in clinic.FAULTS.items():
        assert fault.ranks >= 1 and fault.device in ("", "cuda"), name
        assert not fault.behind or order.index(fault.behind) < order.index(name), f"{name} hides behind {fault.behind!r}"
    assert set(clinic.RANKS_ONLY) == {"uneven-shards", "no-set-epoch"}
    assert clinic.FAULTS["no-set-epoch"].shows == "with 2+ ranks, once uneven-shards is fixed"
