"""Lesson 09's self-checks: epochs received in the same order, an epoch's coverage gaps, class counts against their noise."""
from __future__ import annotations

import math
import operator
from collections import Counter
from typing import Any

from helpers.checks.core import Answer, Failed, Wrong, consistent_hints, exercise, unchanged
from helpers.ledger import Ledger


def _ledger(epochs: dict[int, list[list[list[int]] | None]]) -> Ledger:
    """A ledger written by hand: epochs[rank] is that rank's epochs, each a list of batches of sample ids (None: an
    epoch not recorded)."""
    ledger = Ledger()
    for rank, rank_epochs in epochs.items():
        for epoch, batches in enumerate(rank_epochs):
            for step, batch in enumerate(batches or []):
                ledger.add(epoch, rank, step, batch)
    return ledger


# ------------------------------------------------------------------ 09.1


def repeated_orders_right(ledger: Ledger) -> list[tuple[int, int]]:
    """Exercise 09.1's reference answer (the tests pass it to the check)."""
    return sorted((rank, epoch) for rank in ledger.ranks() for epoch in ledger.epochs()
                  if epoch - 1 in ledger.epochs() and ledger.received(epoch, rank) == ledger.received(epoch - 1, rank))


# (ledger by hand, the (rank, epoch) pairs worked out by hand, why)
ORDER_CASES = (
    ({0: [[[0, 1], [2]], [[0, 1], [2]], [[2, 1], [0]]], 1: [[[3, 4], [5]], [[5, 4], [3]], [[5, 4], [3]]]},
     [(0, 1), (1, 2)], "rank 0 repeats epoch 0 in epoch 1, rank 1 repeats epoch 1 in epoch 2"),
    ({0: [[[0, 1]], [[1, 0]], [[0, 1]]]}, [], "epoch 2 is epoch 0's order, but not the order of epoch 1 before it"),
    ({0: [[[0, 1], [2, 3]], [[0], [1, 2], [3]]]}, [(0, 1)], "the same samples in the same order, in other batches"),
    ({0: [[[4, 2, 0]]]}, [], "one epoch: nothing to repeat"),
    ({0: [[[0, 1, 2]], [[0, 2, 1]]]}, [], "both epochs start with sample 0, then differ"),
    ({0: [[[0, 1, 2]], None, [[0, 1, 2]]]}, [], "epoch 1 was not recorded, so nothing repeats it"),
    ({0: [[[0, 1]], [[1, 0]], [[1, 0]]], 1: [[[2, 3]], [[2, 3]], [[3, 2]]]}, [(0, 2), (1, 1)],
     "rank 0 repeats in epoch 2, rank 1 in epoch 1: sorted by rank first"),
    ({0: [[[0, 1]], [[1, 0]]], 1: [[[2, 3]], [[2, 3]]]}, [(1, 1)], "only rank 1 repeats, against its own epoch 0"),
    ({0: [[[0, 1]], [[1, 0]]], 1: [[[1, 0]], [[0, 1]]]}, [], "rank 1's epoch 1 is rank 0's epoch 0, not its own"),
)


def _pairs(name: str, got: Any) -> list[tuple[int, int]]:
    if not isinstance(got, list) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in got):
        raise Failed(f"{name} returned {got!r}; expected a list of (rank, epoch) pairs")
    return [(int(r), int(e)) for r, e in got]


def _same_samples(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((r, e) for r in ledger.ranks() for e in ledger.epochs()
                  if e > 0 and sorted(ledger.received(e, r)) == sorted(ledger.received(e - 1, r)))


def _rank_zero(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((0, e) for e in ledger.epochs() if e > 0 and ledger.received(e, 0) == ledger.received(e - 1, 0))


def _against_first(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((r, e) for r in ledger.ranks() for e in ledger.epochs()
                  if e > 0 and ledger.received(e, r) == ledger.received(0, r))


def _earlier(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((r, e - 1) for r in ledger.ranks() for e in ledger.epochs()
                  if e > 0 and ledger.received(e, r) == ledger.received(e - 1, r))


def _first_sample(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((r, e) for r in ledger.ranks() for e in ledger.epochs()
                  if e - 1 in ledger.epochs() and ledger.received(e, r)[:1] == ledger.received(e - 1, r)[:1])


def _previous_recorded(ledger: Ledger) -> list[tuple[int, int]]:
    epochs = ledger.epochs()
    return sorted((r, b) for r in ledger.ranks() for a, b in zip(epochs, epochs[1:])
                  if ledger.received(b, r) == ledger.received(a, r))


def _by_epoch(ledger: Ledger) -> list[tuple[int, int]]:
    return [(r, e) for e in ledger.epochs() for r in ledger.ranks()
            if e - 1 in ledger.epochs() and ledger.received(e, r) == ledger.received(e - 1, r)]


def _epoch_rank(ledger: Ledger) -> list[tuple[int, int]]:
    return [(e, r) for r, e in repeated_orders_right(ledger)]


def _against_rank_zero(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((r, e) for r in ledger.ranks() for e in ledger.epochs()
                  if e - 1 in ledger.epochs() and ledger.received(e, r) == ledger.received(e - 1, 0))


def _all_ranks_together(ledger: Ledger) -> list[tuple[int, int]]:
    return sorted((r, e) for e in ledger.epochs() if e - 1 in ledger.epochs()
                  and ledger.received(e) == ledger.received(e - 1) for r in ledger.ranks())


def _skip_last(ledger: Ledger) -> list[tuple[int, int]]:
    last = max(ledger.epochs())
    return [(r, e) for r, e in repeated_orders_right(ledger) if e != last]


ORDER_MISTAKES = (
    (_first_sample, "compare the whole order received, not only its first sample"),
    (_previous_recorded, "compare with epoch - 1 itself: an epoch that was not recorded has no order to repeat"),
    (_by_epoch, "return the pairs sorted (by rank, then epoch): sorted(pairs)"),
    (_epoch_rank, "each pair is (rank, epoch), the rank first"),
    (_rank_zero, "look at every rank (ledger.ranks()), not only rank 0"),
    (_against_rank_zero, "compare each rank with its own epoch before, ledger.received(epoch - 1, rank), not rank 0's"),
    (_all_ranks_together, "compare each rank's own order, ledger.received(epoch, rank), not all ranks' at once"),
    (_skip_last, "go up to the last recorded epoch: it can repeat the one before too"),
    (_same_samples, "compare the order received (the lists), not which samples came (the same samples come every epoch)"),
    (_against_first, "compare each epoch with the epoch just before it (epoch - 1), not with epoch 0"),
    (_earlier, "name the later epoch, the one that repeated (epoch), not the one it repeated (epoch - 1)"),
)


def _hint(mistakes: tuple, got: Any, expected: Any, args: tuple, learner: Any, every_args: list[tuple]) -> str:
    """The hint of the typical mistake that gives what the learner's answer gave here (and is wrong here); where
    several do, the one that also agrees with the learner's answer on every other case (core.consistent_hints)."""
    def run(function: Any) -> Any:
        try:
            return function(*args)
        except Exception:  # noqa: BLE001 - a model that cannot run here says nothing about this answer
            return None

    here = [(hint, model) for model, hint in mistakes if run(model) == got != expected]
    agreeing = consistent_hints(here, learner, every_args, same=operator.eq)
    if agreeing:
        return f": {agreeing[0]}"
    return f": {here[0][0]}" if len(here) == 1 else ""  # several fit here, none everywhere: naming one could mislead


@exercise("09.1", "repeated_orders", right=repeated_orders_right,
          wrong=[Wrong(model, hint.split(",")[0].split("(")[0].strip()) for model, hint in ORDER_MISTAKES])
def check_repeated_orders(answer: Answer) -> str:
    """Exercise 09.1: each (rank, epoch) whose order repeats the epoch before it on that rank."""
    for epochs, expected, why in ORDER_CASES:
        call = f"{answer.name}(ledger)"
        given = _ledger(epochs)
        rows = given.to_rows()
        with answer.calling(call):
            got = _pairs(answer.name, answer.value(given))
        unchanged(call, rows, given.to_rows(), "the ledger's records")
        if got == expected:
            continue
        flat = {r: [sum(e, []) if e is not None else "not recorded" for e in es] for r, es in epochs.items()}
        described = "; ".join(f"rank {r} received {flat[r]}" for r in flat)
        every = [(_ledger(e),) for e, _, _ in ORDER_CASES]
        hint = _hint(ORDER_MISTAKES, got, expected, (_ledger(epochs),), lambda l: _pairs(answer.name, answer.value(l)), every)
        raise Failed(f"with {described}: got {got}, expected {expected} ({why}){hint}")
    return f"{answer.name} names each rank's epoch that repeats the order of the epoch before it"


# ------------------------------------------------------------------ 09.2


def coverage_gaps_right(ledger: Ledger, epoch: int, num_samples: int) -> tuple[list[int], dict[int, int]]:
    """Exercise 09.2's reference answer (the tests pass it to the check)."""
    counts = Counter(r.sample for r in ledger.records if r.epoch == epoch)
    return [i for i in range(num_samples) if counts[i] == 0], {i: c for i, c in sorted(counts.items()) if c > 1}


GAP_CASES = (
    ({0: [[[0, 1], [2]], [[0, 0], [1]]], 1: [[[3, 3]], [[2, 3]]]}, 1, 4, ([], {0: 2}),
     "epoch 1: rank 0 received 0, 0, 1 and rank 1 received 2, 3"),
    ({0: [[[0, 1], [2]], [[0, 0], [1]]], 1: [[[3, 3]], [[2, 3]]]}, 0, 4, ([], {3: 2}),
     "epoch 0: rank 0 received 0, 1, 2 and rank 1 received 3 twice"),
    ({0: [[[1, 2]]], 1: [[[2, 4]]]}, 0, 5, ([0, 3], {2: 2}),
     "samples 0 and 3 of range(5) never came; sample 2 came on both ranks"),
    ({0: [[[0, 1, 2]]]}, 0, 3, ([], {}), "each of 0, 1, 2 exactly once"),
    ({0: [[[5, 1], [5]]], 1: [[[1, 7, 5]]]}, 0, 9, ([0, 2, 3, 4, 6, 8], {1: 2, 5: 3}),
     "rank 0 received 5, 1, 5 and rank 1 received 1, 7, 5: sample 5 three times"),
)


def _gaps(got: Any) -> Any:
    """A (never, more) answer as plain ints, the list's order kept; anything else as it came."""
    try:
        never, extra = got
        return [int(i) for i in never], {int(k): int(v) for k, v in sorted(extra.items())}
    except (TypeError, ValueError, AttributeError):
        return got


def _within_ranks(ledger: Ledger, epoch: int) -> dict[int, int]:
    """Repeats counted within each rank only, added up per sample."""
    repeated: dict[int, int] = {}
    for (_, sample), count in Counter((r.rank, r.sample) for r in ledger.records if r.epoch == epoch).items():
        if count > 1:
            repeated[sample] = repeated.get(sample, 0) + count
    return dict(sorted(repeated.items()))


def _gaps_models() -> tuple:
    """Typical wrong answers to 09.2 besides GAP_MISTAKES, as (answer, hint)."""
    def counted(ledger: Ledger, epoch: int) -> Counter:
        return Counter(r.sample for r in ledger.records if r.epoch == epoch)

    return (
        (lambda ledger, epoch, n: (coverage_gaps_right(ledger, epoch, n)[0],
                                   {i: c - 1 for i, c in sorted(counted(ledger, epoch).items()) if c > 1}),
         "map each sample to how many times it was delivered, not to its extra copies"),
        (lambda ledger, epoch, n: (coverage_gaps_right(ledger, epoch, n)[0],
                                   {i: c for i, c in sorted(counted(ledger, epoch).items()) if c > 2}),
         "a sample delivered twice is delivered more than once: keep counts > 1"),
        (lambda ledger, epoch, n: ([i for i in range(n) if any(
            i not in ledger.received(epoch, rank) for rank in ledger.ranks())], coverage_gaps_right(ledger, epoch, n)[1]),
         "never delivered means no rank delivered it: one rank's share holds only some of the samples"),
        (lambda ledger, epoch, n: (coverage_gaps_right(ledger, epoch, n)[0], {
            i: c for i, c in sorted(Counter(s for _, s in {(r.step, r.sample) for r in ledger.records
                                                          if r.epoch == epoch}).items()) if c > 1}),
         "count every delivery: the same sample at the same step on two ranks is two deliveries"),
        (lambda ledger, epoch, n: (coverage_gaps_right(ledger, epoch, n)[0], {
            i: c for i, c in sorted(Counter(s for _, _, s in {(r.rank, r.step, r.sample) for r in ledger.records
                                                             if r.epoch == epoch}).items()) if c > 1}),
         "count every delivery, two of one sample in one batch included"),
        (lambda ledger, epoch, n: (coverage_gaps_right(ledger, epoch, n)[0], _within_ranks(ledger, epoch)),
         "a sample delivered once on each of two ranks was delivered twice: count over all ranks together"),
    )


GAP_MISTAKES = (
    (lambda ledger, epoch, n: coverage_gaps_right(Ledger([r for r in ledger.records if r.rank == 0]), epoch, n),
     "count the samples of every rank (an epoch is over all ranks), not only rank 0"),
    (lambda ledger, epoch, n: ([i for i in range(n) if i not in {r.sample for r in ledger.records}],
                               {i: c for i, c in sorted(Counter(r.sample for r in ledger.records).items()) if c > 1}),
     "count only the records of that epoch (record.epoch == epoch), not of every epoch"),
    (lambda ledger, epoch, n: (coverage_gaps_right(ledger, epoch, n)[0],
                               dict(sorted(Counter(r.sample for r in ledger.records if r.epoch == epoch).items()))),
     "keep in the dict only the samples delivered more than once (count > 1)"),
    (lambda ledger, epoch, n: ([i for i in range(1, n + 1) if i not in {r.sample for r in ledger.records
                                                                          if r.epoch == epoch}],
                               coverage_gaps_right(ledger, epoch, n)[1]),
     "the samples are range(num_samples), from 0 to num_samples - 1"),
)


@exercise("09.2", "coverage_gaps", right=coverage_gaps_right,
          wrong=[Wrong(model, hint.split("(")[0].split(",")[0].strip()) for model, hint in GAP_MISTAKES])
def check_coverage_gaps(answer: Answer) -> str:
    """Exercise 09.2: the samples an epoch never delivered, and those it delivered more than once, over all ranks."""
    for epochs, epoch, n, expected, why in GAP_CASES:
        call = f"{answer.name}(ledger, {epoch}, {n})"
        given = _ledger(epochs)
        given_rows = given.to_rows()
        with answer.calling(call):
            got = answer.value(given, epoch, n)
        unchanged(call, given_rows, given.to_rows(), "the ledger's records")
        if not isinstance(got, tuple) or len(got) != 2 or not isinstance(got[1], dict):
            raise Failed(f"{call} returned {got!r}; expected a tuple (never delivered: a list, more than once: a dict)")
        if not isinstance(got[0], list):
            raise Failed(f"{call} returned {got[0]!r} as the samples never delivered; expected a sorted list of them")
        got = _gaps(got)
        if got[0] != sorted(got[0]):
            raise Failed(f"{call} returned the samples never delivered as {got[0]}: return them sorted")
        if got == expected:
            continue
        models = tuple((lambda *a, m=m: _gaps(m(*a)), h) for m, h in GAP_MISTAKES + _gaps_models())
        every = [(_ledger(e), k, m) for e, k, m, _, _ in GAP_CASES]
        hint = _hint(models, got, expected, (_ledger(epochs), epoch, n), lambda *a: _gaps(answer.value(*a)), every)
        raise Failed(f"{call} with {why}: got {got}, expected {expected}{hint}")
    return f"{answer.name} finds the samples an epoch never delivered and those it delivered twice, over all ranks"


# ------------------------------------------------------------------ 09.3


def surprising_classes_right(counts: dict[int, int], shares: dict[int, float], draws: int, z: float = 4.0) -> list[int]:
    """Exercise 09.3's reference answer (the tests pass it to the check)."""
    return sorted(c for c, p in shares.items()
                  if abs(counts.get(c, 0) - draws * p) > z * math.sqrt(draws * p * (1 - p)))


# (counts, shares, draws, z, the classes worked out by hand, why); bounds at z = 4 for 1000 draws:
# share 0.5: 4 x sqrt(250) = 63.2; 0.3: 4 x sqrt(210) = 58.0; 0.2: 4 x sqrt(160) = 50.6
SHARES = {0: 0.5, 1: 0.3, 2: 0.2}
COUNT_CASES = (
    ({0: 430, 1: 330, 2: 240}, SHARES, 1000, 4.0, [0], "class 0: 70 below its expected 500, over 63.2"),
    ({0: 560, 1: 280, 2: 160}, SHARES, 1000, 4.0, [], "60, 20 and 40 from 500, 300 and 200: all inside"),
    ({0: 520, 1: 365, 2: 115}, SHARES, 1000, 4.0, [1, 2], "class 1: 65 above 300; class 2: 85 below 200"),
    ({0: 620, 1: 380}, SHARES, 1000, 4.0, [0, 1, 2], "class 2 was never drawn: 0 against 200"),
    ({0: 530, 1: 300, 2: 170}, SHARES, 1000, 2.0, [2], "z = 2: class 2's 30 is over 25.3, class 0's 30 under 31.6"),
    ({0: 70, 1: 30}, {0: 0.5, 1: 0.5}, 100, 4.0, [], "both exactly 20 = 4 x 5 from 50: more than z, not at least"),
    ({2: 400, 0: 300, 1: 300}, {2: 0.2, 0: 0.5, 1: 0.3}, 1000, 4.0, [0, 2],
     "class 2: 200 above 200; class 0: 200 below 500; class 1 on its share"),
    ({0: 3, 1: 97}, {0: 0.0, 1: 1.0}, 100, 4.0, [0, 1], "a share of 0 or 1 has no noise: any difference is surprising"),
    ({0: 300, 1: 700}, {0: 0.3, 1: 0.7}, 1000, 4.0, [], "each class exactly on draws x share"),
    ({0: 7, 1: 3}, {0: 0.5, 1: 0.5}, 10, 0.5, [0, 1], "z = 0.5: both 2 from 5, over 0.5 x sqrt(2.5) = 0.79"),
)


COUNT_MISTAKES = (
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if abs(counts.get(c, 0) - draws * p) > z * math.sqrt(draws * p)),
     "a count of `draws` draws is binomial: its standard deviation is sqrt(draws x share x (1 - share))"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if abs(counts.get(c, 0) - draws * p) > z * draws * p * (1 - p)),
     "take the square root of the variance draws x share x (1 - share)"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c in counts if abs(counts[c] - draws * shares[c]) >
                                                 z * math.sqrt(draws * shares[c] * (1 - shares[c]))),
     "a class never drawn is missing from counts: go over the shares (its count is 0)"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if draws * p - counts.get(c, 0) > z * math.sqrt(draws * p * (1 - p))),
     "a class drawn far more often than its share is surprising too (above as well as below): compare the absolute "
     "difference"),
    (lambda counts, shares, draws, z=4.0: surprising_classes_right(counts, shares, draws),
     "use the z it is given, not always 4"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if counts.get(c, 0) - draws * p > z * math.sqrt(draws * p * (1 - p))),
     "a class drawn far less often than its share is surprising too (below as well as above): compare the absolute "
     "difference"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if abs(counts.get(c, 0) - draws * p) >= z * math.sqrt(draws * p * (1 - p))),
     "more than z standard deviations: a difference of exactly z x sd is not surprising (>, not >=)"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if abs(counts.get(c, 0) / draws - p) > z * math.sqrt(p * (1 - p))),
     "a share's standard deviation is sqrt(share x (1 - share) / draws): or compare counts with "
     "sqrt(draws x share x (1 - share))"),
    (lambda counts, shares, draws, z=4.0: sorted(c for c, p in shares.items()
                                                 if abs(counts.get(c, 0) - draws / len(shares)) > z * math.sqrt(draws * p * (1 - p))),
     "the mean is draws x shares[c], not draws / the number of classes"),
)


@exercise("09.3", "surprising_classes", right=surprising_classes_right,
          wrong=[Wrong(model, hint.split(":")[0].split("(")[0].strip()) for model, hint in COUNT_MISTAKES])
def check_surprising_classes(answer: Answer) -> str:
    """Exercise 09.3: the classes whose count is further from draws x share than z binomial standard deviations."""
    for counts, shares, draws, z, expected, why in COUNT_CASES:
        call = f"{answer.name}({counts}, {shares}, {draws}, z={z})"
        given_counts, given_shares = dict(counts), dict(shares)
        with answer.calling(call, hint=lambda exc: (": a share of 0 or 1 has standard deviation 0; compare the difference "
                                                    "with z x sd rather than dividing by sd" if isinstance(exc, ZeroDivisionError)
                                                    else "")):
            got = answer.value(given_counts, given_shares, draws, z)
        unchanged(call, counts, given_counts, "counts")
        unchanged(call, shares, given_shares, "shares")
        if not isinstance(got, list):
            raise Failed(f"{call} returned {got!r}; expected a list of classes")
        got = [int(c) for c in got]
        if got != sorted(got):
            raise Failed(f"{call} returned {got}: return the classes sorted")
        if got == expected:
            continue
        every = [(dict(c), dict(sh), d, zz) for c, sh, d, zz, _, _ in COUNT_CASES]
        hint = _hint(COUNT_MISTAKES, got, expected, (dict(counts), dict(shares), draws, z),
                     lambda *a: sorted(int(c) for c in answer.value(*a)), every)
        raise Failed(f"{call}: got {got}, expected {expected} ({why}){hint}")
    return f"{answer.name} flags the classes more than z binomial standard deviations from draws x share, either way"
