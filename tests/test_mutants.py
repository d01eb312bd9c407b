"""tools/mutants.py: the listed equivalent mutants still exist in the code, and a survivor's diff is matched by its change."""
import tomllib

from conftest import ROOT

from tools import mutants


def test_every_listed_mutant_names_code_that_exists():
    listed = mutants.equivalent_changes()
    assert len(listed) >= 4
    for module, before, after in listed:
        assert module in mutants.MODULES, module
        code = "".join((ROOT / source).read_text() for source in mutants.MODULES[module].sources)
        assert before in code, f"{module}: `{before}` is no longer in the code"
        assert before != after


def test_a_survivor_is_excused_only_by_its_own_change():
    listed = [("imbalance", "replace=False", "replace=None")]
    diff = ["-    keep = rng.choice(x, replace=False)", "+    keep = rng.choice(x, replace=None)"]
    assert mutants.is_equivalent("imbalance", diff, listed)
    assert not mutants.is_equivalent("samplers", diff, listed)  # the same change in another module
    assert not mutants.is_equivalent("imbalance", ["-    keep = rng.choice(x, replace=False)", "+    keep = None"], listed)


def test_the_config_mutates_only_the_chosen_modules_with_their_tests():
    config = tomllib.loads(mutants.mutmut_config(["samplers", "imbalance"]))["tool"]["mutmut"]
    assert config["only_mutate"] == ["helpers/samplers.py", "helpers/imbalance.py"]
    assert config["pytest_add_cli_args_test_selection"] == ["tests/test_imbalance.py", "tests/test_samplers.py"]
    assert all((ROOT / test).is_file() for covered in mutants.MODULES.values() for test in covered.tests)
    assert all((ROOT / source).is_file() for covered in mutants.MODULES.values() for source in covered.sources)
    package = tomllib.loads(mutants.mutmut_config(["loading"]))["tool"]["mutmut"]
    assert package["only_mutate"] == ["helpers/loading/benchmark.py", "helpers/loading/sweeps.py"]


def test_results_of_functions_and_methods_are_read():
    listing = ("    helpers.samplers.x_draw__mutmut_1: killed\n"
               "    helpers.samplers.x\u01c1DistributedWeightedSampler\u01c1__iter____mutmut_12: survived\n"
               "    helpers.streaming.x\u01c1ShardedStream\u01c1__init____mutmut_2: no tests\n"
               "    helpers.loading.sweeps.x_sweep_loader__mutmut_7: killed\n"
               "    helpers.loading.benchmark.x\u01c1StepTimer\u01c1_now__mutmut_1: survived\n")
    assert [(module, status) for _, module, status in mutants.read_results(listing)] == [
        ("samplers", "killed"), ("samplers", "survived"), ("streaming", "no tests"), ("loading", "killed"), ("loading", "survived")]
