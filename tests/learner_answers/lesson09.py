"""Lesson 09's exercises as learners answer them, written from the task text alone."""
from __future__ import annotations

import bisect
import heapq
import io
import itertools
import math
import pickle
import sys
from collections import Counter, defaultdict
from multiprocessing import reduction
from multiprocessing.reduction import ForkingPickler

import numpy as np

from helpers.checks.core import Wrong


# ---------------------------------------------------------------- 09.1: repeated_orders(ledger)


def orders_naming_the_earlier_epoch(ledger):
    """Names the earlier epoch of each pair, (rank, epoch - 1), not the later one."""
    return sorted((rank, epoch - 1) for rank in ledger.ranks() for epoch in ledger.epochs()
                  if epoch - 1 in ledger.epochs() and ledger.received(epoch, rank) == ledger.received(epoch - 1, rank))


def orders_compared_as_sets(ledger):
    """Compares the sets of samples, not their order: any reshuffle of the same samples counts as a repeat."""
    return sorted((rank, epoch) for rank in ledger.ranks() for epoch in ledger.epochs()
                  if epoch - 1 in ledger.epochs()
                  and set(ledger.received(epoch, rank)) == set(ledger.received(epoch - 1, rank)))


def orders_against_the_first_epoch(ledger):
    """Compares each epoch with the first epoch recorded, not with the one just before it."""
    first = ledger.epochs()[0]
    return sorted((rank, epoch) for rank in ledger.ranks() for epoch in ledger.epochs()[1:]
                  if ledger.received(epoch, rank) == ledger.received(first, rank))


def orders_against_any_earlier_epoch(ledger):
    """Flags an epoch that repeats any earlier epoch, not only the one before it."""
    return sorted((rank, epoch) for rank in ledger.ranks() for epoch in ledger.epochs()
                  if any(ledger.received(epoch, rank) == ledger.received(earlier, rank)
                         for earlier in ledger.epochs() if earlier < epoch))


def orders_rank_zero_only(ledger):
    """Looks at rank 0 only, as if every rank did the same."""
    return sorted((0, epoch) for epoch in ledger.epochs()
                  if epoch - 1 in ledger.epochs() and ledger.received(epoch, 0) == ledger.received(epoch - 1, 0))


def orders_as_a_set(ledger):
    """Returns a set of pairs, not a sorted list."""
    return {(rank, epoch) for rank in ledger.ranks() for epoch in ledger.epochs()
            if epoch - 1 in ledger.epochs() and ledger.received(epoch, rank) == ledger.received(epoch - 1, rank)}


def orders_right_from_records(ledger):
    """Right: group the records by (rank, epoch) in step order, then compare each epoch with epoch - 1."""
    seen = defaultdict(list)
    for r in sorted(ledger.records, key=lambda r: (r.rank, r.epoch, r.step)):
        seen[(r.rank, r.epoch)].append(r.sample)
    epochs = set(ledger.epochs())
    return sorted((rank, epoch) for rank in ledger.ranks() for epoch in epochs
                  if epoch - 1 in epochs and seen.get((rank, epoch), []) == seen.get((rank, epoch - 1), []))


def orders_right_with_loops(ledger):
    """Right: plain loops over ranks and consecutive epochs, appending in sorted order."""
    recorded = ledger.epochs()
    pairs = []
    for rank in ledger.ranks():
        for epoch in recorded:
            if (epoch - 1) not in recorded:
                continue
            if list(ledger.received(epoch, rank)) == list(ledger.received(epoch - 1, rank)):
                pairs.append((int(rank), int(epoch)))
    return pairs


# ---------------------------------------------------------------- 09.2: coverage_gaps(ledger, epoch, num_samples)


def _right_gaps(records, num_samples):
    """The right answer over the given records: never delivered in range(num_samples), and delivered more than once."""
    counts = Counter(r.sample for r in records)
    return [s for s in range(num_samples) if s not in counts], {s: n for s, n in counts.items() if n > 1}


def gaps_every_epoch(ledger, epoch, num_samples):
    """Counts the records of every epoch, not only `epoch`'s."""
    return _right_gaps(ledger.records, num_samples)


def gaps_rank_zero_only(ledger, epoch, num_samples):
    """Looks at rank 0's records only, not all ranks'."""
    return _right_gaps([r for r in ledger.records if r.epoch == epoch and r.rank == 0], num_samples)


def gaps_from_one(ledger, epoch, num_samples):
    """Off by one: samples 1 .. num_samples, not 0 .. num_samples - 1."""
    counts = Counter(r.sample for r in ledger.records if r.epoch == epoch)
    return [s for s in range(1, num_samples + 1) if s not in counts], {s: n for s, n in counts.items() if n > 1}


def gaps_all_delivered(ledger, epoch, num_samples):
    """Puts every delivered sample in the dict (n >= 1), not only those delivered more than once."""
    counts = Counter(r.sample for r in ledger.records if r.epoch == epoch)
    return [s for s in range(num_samples) if s not in counts], dict(counts)


def gaps_swapped(ledger, epoch, num_samples):
    """Returns (repeated, missing): the tuple's two parts swapped."""
    missing, repeated = _right_gaps([r for r in ledger.records if r.epoch == epoch], num_samples)
    return repeated, missing


def gaps_as_list(ledger, epoch, num_samples):
    """Returns a list [missing, repeated], not a tuple."""
    return list(_right_gaps([r for r in ledger.records if r.epoch == epoch], num_samples))


def gaps_repeats_within_a_rank(ledger, epoch, num_samples):
    """Counts repeats within each rank only: a sample delivered once on each of two ranks is not a repeat."""
    per_rank = Counter((r.rank, r.sample) for r in ledger.records if r.epoch == epoch)
    repeated = {}
    for (rank, s), n in per_rank.items():
        if n > 1:
            repeated[s] = repeated.get(s, 0) + n
    seen = {r.sample for r in ledger.records if r.epoch == epoch}
    return [s for s in range(num_samples) if s not in seen], repeated


def gaps_right_with_counts(ledger, epoch, num_samples):
    """Right: ledger.counts(epoch), then missing from range(num_samples) and repeats with n > 1."""
    counts = ledger.counts(epoch)
    missing = sorted(set(range(num_samples)) - set(counts))
    return missing, {sample: times for sample, times in counts.items() if times >= 2}


def gaps_right_with_loops(ledger, epoch, num_samples):
    """Right: a plain dict tally over the records, no Counter."""
    tally = {}
    for record in ledger.records:
        if record.epoch != epoch:
            continue
        tally[record.sample] = tally.get(record.sample, 0) + 1
    missing = []
    for sample in range(num_samples):
        if tally.get(sample, 0) == 0:
            missing.append(sample)
    doubled = {}
    for sample, times in tally.items():
        if times > 1:
            doubled[sample] = times
    return (missing, doubled)


def gaps_right_with_coverage(ledger, epoch, num_samples):
    """Right: the ledger's own verdict, ledger.coverage(epoch, num_samples)."""
    cov = ledger.coverage(epoch, num_samples)
    return list(cov.missing), dict(cov.repeated)


# ------------------------------------------------------------- 09.3: surprising_classes(counts, shares, draws, z=4.0)


def classes_only_below(counts, shares, draws, z=4.0):
    """One-sided: flags only counts below the mean, not those above."""
    return sorted(c for c, p in shares.items()
                  if draws * p - counts.get(c, 0) > z * math.sqrt(draws * p * (1 - p)))


def classes_poisson_sd(counts, shares, draws, z=4.0):
    """Wrong noise: sqrt(draws * share), leaving out (1 - share)."""
    return sorted(c for c, p in shares.items() if abs(counts.get(c, 0) - draws * p) > z * math.sqrt(draws * p))


def classes_variance_not_sd(counts, shares, draws, z=4.0):
    """Wrong noise: the variance draws * p * (1 - p), not its square root."""
    return sorted(c for c, p in shares.items() if abs(counts.get(c, 0) - draws * p) > z * draws * p * (1 - p))


def classes_ignoring_z(counts, shares, draws, z=4.0):
    """Ignores the z argument: always 4 standard deviations."""
    return sorted(c for c, p in shares.items()
                  if abs(counts.get(c, 0) - draws * p) > 4.0 * math.sqrt(draws * p * (1 - p)))


def classes_only_those_counted(counts, shares, draws, z=4.0):
    """Loops over counts only, so a class that never came is never flagged."""
    return sorted(c for c, n in counts.items()
                  if abs(n - draws * shares[c]) > z * math.sqrt(draws * shares[c] * (1 - shares[c])))


def classes_key_error(counts, shares, draws, z=4.0):
    """Reads counts[c] directly: a class that never came raises KeyError."""
    return sorted(c for c, p in shares.items() if abs(counts[c] - draws * p) > z * math.sqrt(draws * p * (1 - p)))


def classes_numpy_array(counts, shares, draws, z=4.0):
    """Returns a numpy array of classes, not a list."""
    cls = np.array(sorted(shares))
    p = np.array([shares[c] for c in cls])
    n = np.array([counts.get(c, 0) for c in cls])
    return cls[np.abs(n - draws * p) > z * np.sqrt(draws * p * (1 - p))]


def classes_right_squared(counts, shares, draws, z=4.0):
    """Right: compares squared distance with z**2 times the variance (no square root, no division)."""
    out = []
    for c in sorted(shares):
        mean = draws * shares[c]
        variance = draws * shares[c] * (1 - shares[c])
        if (counts.get(c, 0) - mean) ** 2 > z * z * variance:
            out.append(c)
    return out


def classes_right_numpy_then_ints(counts, shares, draws, z=4.0):
    """Right: numpy arrays for the sums, plain ints at the end."""
    cls = sorted(shares)
    p = np.array([shares[c] for c in cls], dtype=float)
    n = np.array([counts.get(c, 0) for c in cls], dtype=float)
    far = np.abs(n - draws * p) > z * np.sqrt(draws * p * (1 - p))
    return [int(c) for c, f in zip(cls, far) if f]


def classes_right_z_score_guarded(counts, shares, draws, z=4.0):
    """Right: a z-score where the sd is not 0, else any difference at all is surprising."""
    found = []
    for c, share in shares.items():
        got = counts[c] if c in counts else 0
        mean = draws * share
        sd = math.sqrt(draws * share * (1 - share))
        if (sd > 0 and abs(got - mean) / sd > z) or (sd == 0 and got != mean):
            found.append(c)
    found.sort()
    return found




# ---------------------------------------------------------------- answers the first checks let pass or misnamed
# (written in the same probe; added once the checks named each)


def orders_first_sample_only(ledger):
    """Compares only the first sample each epoch received, not the whole order."""
    out = []
    for rank in ledger.ranks():
        for epoch in ledger.epochs():
            if epoch - 1 not in ledger.epochs():
                continue
            now, before = ledger.received(epoch, rank), ledger.received(epoch - 1, rank)
            if now and before and now[0] == before[0]:
                out.append((rank, epoch))
    return sorted(out)


def orders_previous_recorded_epoch(ledger):
    """Compares with the previous epoch in epochs(), which is not epoch - 1 where an epoch is missing."""
    epochs = ledger.epochs()
    return sorted((rank, b) for rank in ledger.ranks() for a, b in zip(epochs, epochs[1:])
                  if ledger.received(b, rank) == ledger.received(a, rank))


def orders_sorted_by_epoch(ledger):
    """Lists pairs epoch by epoch (sorted by epoch, then rank), not sorted as (rank, epoch) pairs."""
    out = []
    for epoch in ledger.epochs():
        for rank in ledger.ranks():
            if epoch - 1 in ledger.epochs() and ledger.received(epoch, rank) == ledger.received(epoch - 1, rank):
                out.append((rank, epoch))
    return out


def orders_skipping_last_epoch(ledger):
    """Off by one: range(1, len(epochs) - 1) never looks at the last epoch."""
    epochs = ledger.epochs()
    out = []
    for rank in ledger.ranks():
        for i in range(1, len(epochs) - 1):
            if epochs[i] - 1 == epochs[i - 1] and ledger.received(epochs[i], rank) == ledger.received(epochs[i - 1], rank):
                out.append((rank, epochs[i]))
    return sorted(out)


def orders_against_rank_zero(ledger):
    """Compares each rank's epoch with rank 0's epoch before, not the same rank's."""
    return sorted((rank, epoch) for rank in ledger.ranks() for epoch in ledger.epochs()
                  if epoch - 1 in ledger.epochs() and ledger.received(epoch, rank) == ledger.received(epoch - 1, 0))


def orders_as_epoch_rank(ledger):
    """Returns (epoch, rank) pairs, the pair's two numbers swapped."""
    return sorted((epoch, rank) for rank in ledger.ranks() for epoch in ledger.epochs()
                  if epoch - 1 in ledger.epochs() and ledger.received(epoch, rank) == ledger.received(epoch - 1, rank))


def orders_all_ranks_together(ledger):
    """Compares all ranks' samples together (received(epoch) with no rank) and names every rank when they repeat."""
    return sorted((rank, epoch) for epoch in ledger.epochs() if epoch - 1 in ledger.epochs()
                  and ledger.received(epoch) == ledger.received(epoch - 1) for rank in ledger.ranks())


def gaps_missing_as_set(ledger, epoch, num_samples):
    """Returns the missing samples as a set, not a sorted list."""
    counts = Counter(r.sample for r in ledger.records if r.epoch == epoch)
    return set(range(num_samples)) - set(counts), {s: n for s, n in counts.items() if n > 1}


def gaps_missing_count(ledger, epoch, num_samples):
    """Returns how many samples are missing (an int), not which."""
    missing, repeated = _right_gaps([r for r in ledger.records if r.epoch == epoch], num_samples)
    return len(missing), repeated


def gaps_sorting_the_ledger(ledger, epoch, num_samples):
    """Sorts ledger.records in place by sample to count runs, changing the ledger's order of delivery."""
    ledger.records.sort(key=lambda r: (r.epoch, str(r.sample)))
    return _right_gaps([r for r in ledger.records if r.epoch == epoch], num_samples)


def gaps_extra_copies(ledger, epoch, num_samples):
    """Maps each repeated sample to its extra copies (n - 1), not how many times it was delivered."""
    counts = Counter(r.sample for r in ledger.records if r.epoch == epoch)
    return [s for s in range(num_samples) if s not in counts], {s: n - 1 for s, n in counts.items() if n > 1}


def gaps_more_than_twice(ledger, epoch, num_samples):
    """Wrong comparison: n > 2, so a sample delivered twice is not listed."""
    counts = Counter(r.sample for r in ledger.records if r.epoch == epoch)
    return [s for s in range(num_samples) if s not in counts], {s: n for s, n in counts.items() if n > 2}


def gaps_missing_on_any_rank(ledger, epoch, num_samples):
    """Lists a sample as missing when some rank did not receive it, not when no rank did."""
    recs = [r for r in ledger.records if r.epoch == epoch]
    ranks = {r.rank for r in recs}
    per_rank = {k: {r.sample for r in recs if r.rank == k} for k in ranks}
    missing = sorted(s for s in range(num_samples) if any(s not in got for got in per_rank.values()))
    return missing, _right_gaps(recs, num_samples)[1]


def gaps_distinct_per_step(ledger, epoch, num_samples):
    """Counts a sample at most once per step number, so the same step on two ranks collapses to one."""
    seen = {(r.step, r.sample) for r in ledger.records if r.epoch == epoch}
    counts = Counter(s for _, s in seen)
    return [s for s in range(num_samples) if s not in counts], {s: n for s, n in counts.items() if n > 1}


def classes_at_least_z(counts, shares, draws, z=4.0):
    """Wrong comparison: >= z standard deviations, so a count exactly z away is flagged."""
    return sorted(c for c, p in shares.items()
                  if abs(counts.get(c, 0) - draws * p) >= z * math.sqrt(draws * p * (1 - p)))


def classes_unsorted(counts, shares, draws, z=4.0):
    """Returns classes in the shares dict's order, not sorted."""
    return [c for c, p in shares.items() if abs(counts.get(c, 0) - draws * p) > z * math.sqrt(draws * p * (1 - p))]


def classes_filling_counts(counts, shares, draws, z=4.0):
    """Mutates the caller's counts: setdefault(c, 0) writes a 0 for each class that never came."""
    out = []
    for c, p in shares.items():
        counts.setdefault(c, 0)
        if abs(counts[c] - draws * p) > z * math.sqrt(draws * p * (1 - p)):
            out.append(c)
    return sorted(out)


def classes_z_score_unguarded(counts, shares, draws, z=4.0):
    """Divides by the standard deviation: a share of 0 or 1 has sd 0 and raises ZeroDivisionError."""
    return sorted(c for c, p in shares.items()
                  if abs((counts.get(c, 0) - draws * p) / math.sqrt(draws * p * (1 - p))) > z)


def classes_only_above(counts, shares, draws, z=4.0):
    """One-sided: flags only counts above the mean, not those below."""
    return sorted(c for c, p in shares.items()
                  if counts.get(c, 0) - draws * p > z * math.sqrt(draws * p * (1 - p)))


def classes_share_noise_without_draws(counts, shares, draws, z=4.0):
    """Compares the received share with sqrt(p (1 - p)), not sqrt(p (1 - p) / draws): far too lenient."""
    return sorted(c for c, p in shares.items() if abs(counts.get(c, 0) / draws - p) > z * math.sqrt(p * (1 - p)))


def classes_uniform_mean(counts, shares, draws, z=4.0):
    """Uses the uniform mean draws / number of classes, ignoring the shares."""
    k = len(shares)
    return sorted(c for c, p in shares.items()
                  if abs(counts.get(c, 0) - draws / k) > z * math.sqrt(draws * p * (1 - p)))


# ---------------------------------------------------------------- 09.4: first_unpicklable(obj, path)


def _parts(obj, path):
    if isinstance(obj, dict):
        return [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    if hasattr(obj, "__dict__"):
        return [(f"{path}.{k}", v) for k, v in vars(obj).items()]
    return []


def _fails(obj):
    try:
        pickle.dumps(obj)
    except Exception:
        return True
    return False


def blame_the_whole_object(obj, path):
    """Never looks inside: blames `path` itself whenever pickling fails."""
    try:
        pickle.dumps(obj)
    except Exception:
        return path
    return None


def blame_one_level_only(obj, path):
    """Names the first failing part but does not look inside it."""
    if not _fails(obj):
        return None
    for p, v in _parts(obj, path):
        if _fails(v):
            return p
    return path


def blame_the_last_failing_part(obj, path):
    """Blames the last failing part, not the first."""
    if not _fails(obj):
        return None
    for p, v in reversed(_parts(obj, path)):
        if _fails(v):
            return blame_the_last_failing_part(v, p)
    return path


def blame_as_a_bool(obj, path):
    """Answers whether the object pickles (True/False) instead of a path."""
    return not _fails(obj)


def blame_empty_string_when_fine(obj, path):
    """Returns '' instead of None when the object pickles."""
    if not _fails(obj):
        return ""
    for p, v in _parts(obj, path):
        if _fails(v):
            return blame_empty_string_when_fine(v, p)
    return path


def blame_dict_key_without_repr(obj, path):
    """Writes a dict value's path as path[key], without repr (loader[bad])."""
    if not _fails(obj):
        return None
    if isinstance(obj, dict):
        parts = [(f"{path}[{k}]", v) for k, v in obj.items()]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_dict_key_without_repr(v, p)
    return path


def blame_dict_key_as_attribute(obj, path):
    """Writes a dict value's path as path.key, like an attribute."""
    if not _fails(obj):
        return None
    if isinstance(obj, dict):
        parts = [(f"{path}.{k}", v) for k, v in obj.items()]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_dict_key_as_attribute(v, p)
    return path


def blame_item_counting_from_one(obj, path):
    """Numbers a list's items from 1, not 0."""
    if not _fails(obj):
        return None
    if isinstance(obj, (list, tuple)):
        parts = [(f"{path}[{i + 1}]", v) for i, v in enumerate(obj)]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_item_counting_from_one(v, p)
    return path


def blame_items_as_attributes(obj, path):
    """Writes a list item's path as path.i, like an attribute, not path[i]."""
    if not _fails(obj):
        return None
    if isinstance(obj, (list, tuple)):
        parts = [(f"{path}.{i}", v) for i, v in enumerate(obj)]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_items_as_attributes(v, p)
    return path


def blame_lists_not_tuples(obj, path):
    """Looks inside lists but not tuples."""
    if not _fails(obj):
        return None
    if isinstance(obj, tuple):
        return path
    for p, v in _parts(obj, path):
        if _fails(v):
            return blame_lists_not_tuples(v, p)
    return path


def blame_containers_only(obj, path):
    """Looks inside lists, tuples and dicts but never at an object's attributes."""
    if not _fails(obj):
        return None
    if isinstance(obj, (list, tuple, dict)):
        for p, v in _parts(obj, path):
            if _fails(v):
                return blame_containers_only(v, p)
    return path


def blame_attributes_only(obj, path):
    """Looks at an object's attributes but never inside lists, tuples or dicts."""
    if not _fails(obj):
        return None
    if not isinstance(obj, (list, tuple, dict)) and hasattr(obj, "__dict__"):
        for k, v in vars(obj).items():
            if _fails(v):
                return blame_attributes_only(v, f"{path}.{k}")
    return path


def blame_dict_keys_not_values(obj, path):
    """Looks at a dict's keys instead of its values."""
    if not _fails(obj):
        return None
    if isinstance(obj, dict):
        parts = [(f"{path}[{k!r}]", k) for k in obj]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_dict_keys_not_values(v, p)
    return path


def blame_attributes_in_dir_order(obj, path):
    """Walks attributes in dir() order (sorted by name) instead of vars() order."""
    if not _fails(obj):
        return None
    if not isinstance(obj, (list, tuple, dict)) and hasattr(obj, "__dict__"):
        parts = [(f"{path}.{k}", vars(obj)[k]) for k in sorted(vars(obj))]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_attributes_in_dir_order(v, p)
    return path


def blame_none_when_no_part_fails(obj, path):
    """Returns None instead of the object's own path when none of its parts fails."""
    if not _fails(obj):
        return None
    for p, v in _parts(obj, path):
        if _fails(v):
            return blame_none_when_no_part_fails(v, p)
    return None


def blame_parts_before_trying_the_whole(obj, path):
    """Looks at the parts first, without asking whether the object itself pickles."""
    for p, v in _parts(obj, path):
        found = blame_parts_before_trying_the_whole(v, p)
        if found is not None:
            return found
    return path if _fails(obj) else None


def blame_catching_only_pickling_error(obj, path):
    """Catches only pickle.PicklingError, so a TypeError or AttributeError escapes."""
    try:
        pickle.dumps(obj)
        return None
    except pickle.PicklingError:
        pass
    for p, v in _parts(obj, path):
        found = blame_catching_only_pickling_error(v, p)
        if found is not None:
            return found
    return path


def blame_all_failing_parts(obj, path):
    """Returns a list of every failing leaf path instead of the first one."""
    if not _fails(obj):
        return None
    found = []
    for p, v in _parts(obj, path):
        if _fails(v):
            found.extend(blame_all_failing_parts(v, p))
    return found or [path]


def blame_the_value_not_its_path(obj, path):
    """Returns the unpicklable object itself rather than its path."""
    if not _fails(obj):
        return None
    for p, v in _parts(obj, path):
        if _fails(v):
            return blame_the_value_not_its_path(v, p)
    return obj


def blame_with_double_quoted_keys(obj, path):
    """Writes dict keys as path["key"] with double quotes instead of repr's single quotes."""
    if not _fails(obj):
        return None
    if isinstance(obj, dict):
        parts = [(f'{path}["{k}"]', v) for k, v in obj.items()]
    else:
        parts = _parts(obj, path)
    for p, v in parts:
        if _fails(v):
            return blame_with_double_quoted_keys(v, p)
    return path


def blame_with_forking_pickler(obj, path):
    """Tries ForkingPickler.dumps instead of pickle.dumps."""
    try:
        ForkingPickler.dumps(obj)
        return None
    except Exception:
        pass
    for p, v in _parts(obj, path):
        found = blame_with_forking_pickler(v, p)
        if found is not None:
            return found
    return path


# ---------------------------------------------------------------- 09.5: sent_mib(dataset, workers, epochs, persistent)


def sent_with_plain_pickle(dataset, workers, epochs, persistent):
    """Measures with pickle.dumps, not ForkingPickler.dumps (a tensor is sent as a handle)."""
    if workers == 0:
        return 0.0
    starts = workers if persistent else workers * epochs
    return starts * len(pickle.dumps(dataset)) / 2**20


def sent_in_megabytes(dataset, workers, epochs, persistent):
    """Divides by 10**6 (MB), not 2**20 (MiB)."""
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 10**6


def sent_in_kib(dataset, workers, epochs, persistent):
    """Divides by 1024 only (KiB)."""
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 1024


def sent_in_bytes(dataset, workers, epochs, persistent):
    """Returns bytes instead of MiB."""
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset))


def sent_ignoring_persistent(dataset, workers, epochs, persistent):
    """Ignores persistent: always once per worker per epoch."""
    return workers * epochs * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_persistent_swapped(dataset, workers, epochs, persistent):
    """Swaps the two cases: per epoch with persistent workers, once without."""
    starts = workers * epochs if persistent else workers
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_persistent_once_in_all(dataset, workers, epochs, persistent):
    """With persistent workers counts a single send in all, not one per worker."""
    if workers == 0:
        return 0.0
    starts = 1 if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_main_process_counts(dataset, workers, epochs, persistent):
    """Counts the main process as a worker (workers + 1)."""
    starts = (workers + 1) if persistent else (workers + 1) * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_zero_workers_as_one(dataset, workers, epochs, persistent):
    """With workers == 0 counts the main process as one start instead of nothing."""
    w = max(workers, 1)
    starts = w if persistent else w * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_getsizeof(dataset, workers, epochs, persistent):
    """Measures sys.getsizeof(dataset) instead of the pickled bytes."""
    starts = workers if persistent else workers * epochs
    return starts * sys.getsizeof(dataset) / 2**20


def sent_floor_division(dataset, workers, epochs, persistent):
    """Uses // so the MiB come back as a whole number."""
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) // 2**20


def sent_rounded(dataset, workers, epochs, persistent):
    """Rounds the MiB to two decimals."""
    starts = workers if persistent else workers * epochs
    return round(starts * len(ForkingPickler.dumps(dataset)) / 2**20, 2)


def sent_workers_plus_epochs(dataset, workers, epochs, persistent):
    """Adds workers and epochs instead of multiplying them."""
    if workers == 0:
        return 0.0
    starts = workers if persistent else workers + epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_skipping_first_epoch(dataset, workers, epochs, persistent):
    """Counts the restarts only (epochs - 1) without persistent workers."""
    starts = workers if persistent else workers * (epochs - 1)
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_persistent_plus_first(dataset, workers, epochs, persistent):
    """Persistent workers: one send per worker plus one more per epoch."""
    starts = workers + epochs if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_as_string(dataset, workers, epochs, persistent):
    """Returns a formatted string like '1.23 MiB'."""
    starts = workers if persistent else workers * epochs
    return f"{starts * len(ForkingPickler.dumps(dataset)) / 2**20:.2f} MiB"


def sent_one_worker_only(dataset, workers, epochs, persistent):
    """Returns the MiB one worker receives, not all workers together."""
    if workers == 0:
        return 0.0
    starts = 1 if persistent else epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_bytes_object_size(dataset, workers, epochs, persistent):
    """Measures sys.getsizeof of the pickled bytes (adds the bytes object's header)."""
    starts = workers if persistent else workers * epochs
    return starts * sys.getsizeof(ForkingPickler.dumps(dataset)) / 2**20


def sent_protocol_zero(dataset, workers, epochs, persistent):
    """Measures ForkingPickler.dumps with protocol 0."""
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset, protocol=0)) / 2**20


# ---------------------------------------------------------------- right answers


def first_unpicklable_recursive(obj, path):
    """Right: try the whole, then recurse into the parts in order."""
    try:
        pickle.dumps(obj)
        return None
    except Exception:
        pass
    if isinstance(obj, dict):
        parts = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple)):
        parts = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__"):
        parts = [(f"{path}.{k}", v) for k, v in vars(obj).items()]
    else:
        parts = []
    for p, v in parts:
        found = first_unpicklable_recursive(v, p)
        if found is not None:
            return found
    return path


def first_unpicklable_loop(obj, path):
    """Right: walk down in a loop, stepping into the first part that fails."""
    def pickles(x):
        try:
            pickle.dumps(x)
        except BaseException:
            return False
        return True

    if pickles(obj):
        return None
    while True:
        if type(obj) is dict or isinstance(obj, dict):
            named = ((f"{path}[{key!r}]", value) for key, value in obj.items())
        elif isinstance(obj, (list, tuple)):
            named = ((f"{path}[{i}]", item) for i, item in enumerate(obj))
        else:
            try:
                named = ((f"{path}.{name}", value) for name, value in vars(obj).items())
            except TypeError:
                named = iter(())
        step = next(((p, v) for p, v in named if not pickles(v)), None)
        if step is None:
            return path
        path, obj = step


def sent_mib_plain(dataset, workers, epochs, persistent):
    """Right: starts times the pickled size, over 2**20."""
    if workers == 0:
        return 0.0
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / 2**20


def sent_mib_buffer(dataset, workers, epochs, persistent):
    """Right: pickles into a buffer with a ForkingPickler, summing each start's bytes."""
    buf = io.BytesIO()
    reduction.ForkingPickler(buf).dump(dataset)
    one = buf.getbuffer().nbytes
    total = 0
    for epoch in range(epochs):
        for worker in range(workers):
            if persistent and epoch > 0:
                continue
            total += one
    return float(total) / (1 << 20)

# ---------------------------------------------------------------- 09.6: held_back_s(waits, ready), 09.7: slowest_share(fetch_s, share)
# Written from the task text alone by a wrong-answer probe (a reviewer who had not read the check).


def _check_lengths(waits, ready):
    if len(waits) != len(ready):
        raise ValueError(f"ready has {len(ready)} times but waits has {len(waits)} batches")


def right6_suffix_min(waits, ready):
    """right: one pass from the end, keeping the earliest ready time of the batches after each."""
    _check_lengths(waits, ready)
    total, earliest = 0.0, math.inf
    for (asked, got), r in zip(reversed(waits), reversed(ready)):
        total += max(0.0, got - max(asked, earliest))
        earliest = min(earliest, r)
    return total


def right6_quadratic(waits, ready):
    """right: min over the slice of later ready times for each batch (slow, O(n^2), but right)."""
    if len(ready) != len(waits):
        raise ValueError("ready must have one time per batch in waits")
    total = 0.0
    for i, (asked, got) in enumerate(waits):
        later = ready[i + 1:]
        if later and min(later) < got:
            total += got - max(asked, min(later))
    return float(total)


def right6_accumulate(waits, ready):
    """right: suffix minima with itertools.accumulate; max(0, ...) with int 0 (sum may be the int 0)."""
    if len(waits) != len(ready):
        raise ValueError(f"len(ready)={len(ready)} != len(waits)={len(waits)}")
    suffix = list(itertools.accumulate(reversed(ready), min))[::-1] + [math.inf]
    return sum(max(0, got - max(asked, suffix[i + 1])) for i, (asked, got) in enumerate(waits))


def w6_from_ready_not_asked(waits, ready):
    """counts from the later batch's ready time even when that is before the batch was asked for (no clamp to asked)."""
    _check_lengths(waits, ready)
    return sum(max(0.0, got - min(ready[i + 1:], default=math.inf)) for i, (asked, got) in enumerate(waits))


def w6_next_only(waits, ready):
    """compares with the next batch's ready time only, not the earliest of all later ones."""
    _check_lengths(waits, ready)
    total = 0.0
    for i in range(len(waits) - 1):
        asked, got = waits[i]
        total += max(0.0, got - max(asked, ready[i + 1]))
    return total


def w6_includes_itself(waits, ready):
    """'after it' read as 'from it on': includes the batch's own ready time."""
    _check_lengths(waits, ready)
    return sum(max(0.0, got - max(asked, min(ready[i:]))) for i, (asked, got) in enumerate(waits))


def w6_all_other_batches(waits, ready):
    """'later' ignored: earliest ready time of every other batch, earlier ones included."""
    _check_lengths(waits, ready)
    total = 0.0
    for i, (asked, got) in enumerate(waits):
        others = ready[:i] + ready[i + 1:]
        total += max(0.0, got - max(asked, min(others, default=math.inf)))
    return total


def w6_earlier_batches(waits, ready):
    """'later' misread as 'earlier': earliest ready time of the batches received before it."""
    _check_lengths(waits, ready)
    return sum(max(0.0, got - max(asked, min(ready[:i], default=math.inf))) for i, (asked, got) in enumerate(waits))


def w6_latest(waits, ready):
    """'earliest' misread: the latest ready time of the later batches."""
    _check_lengths(waits, ready)
    return sum(max(0.0, got - max(asked, max(ready[i + 1:], default=math.inf))) for i, (asked, got) in enumerate(waits))


def w6_negative_parts(waits, ready):
    """forgets 'nothing when none was ready before its wait ended': adds negative parts."""
    _check_lengths(waits, ready)
    total = 0.0
    for i in range(len(waits) - 1):
        asked, got = waits[i]
        total += got - max(asked, min(ready[i + 1:]))
    return total


def w6_no_length_check(waits, ready):
    """forgets the error case: zip silently drops the extra entries."""
    total, earliest = 0.0, math.inf
    pairs = list(zip(waits, ready))
    for (asked, got), r in reversed(pairs):
        total += max(0.0, got - max(asked, earliest))
        earliest = min(earliest, r)
    return total


def w6_error_not_naming_ready(waits, ready):
    """raises ValueError but its message does not name `ready`."""
    if len(waits) != len(ready):
        raise ValueError("the two lists differ in length")
    return right6_suffix_min(waits, ready)


def w6_type_error(waits, ready):
    """raises TypeError (naming ready) instead of ValueError."""
    if len(waits) != len(ready):
        raise TypeError(f"ready has {len(ready)} entries, waits {len(waits)}")
    return right6_suffix_min(waits, ready)


def w6_count(waits, ready):
    """returns how many batches were held back, not the seconds."""
    _check_lengths(waits, ready)
    return sum(1 for i, (asked, got) in enumerate(waits) if min(ready[i + 1:], default=math.inf) < got)


def w6_per_batch(waits, ready):
    """returns the held-back seconds per batch (a list) instead of their sum."""
    _check_lengths(waits, ready)
    return [max(0.0, got - max(asked, min(ready[i + 1:], default=math.inf))) for i, (asked, got) in enumerate(waits)]


def w6_milliseconds(waits, ready):
    """right value in milliseconds."""
    return 1000 * right6_suffix_min(waits, ready)


def w6_whole_wait(waits, ready):
    """counts the whole wait, not only the part after a later batch was ready."""
    _check_lengths(waits, ready)
    return sum(got - asked for i, (asked, got) in enumerate(waits) if min(ready[i + 1:], default=math.inf) < got)


def w6_before_ready(waits, ready):
    """'after' misread: the part of the wait before the later batch was ready."""
    _check_lengths(waits, ready)
    total = 0.0
    for i, (asked, got) in enumerate(waits):
        r = min(ready[i + 1:], default=math.inf)
        if r < got:
            total += max(0.0, r - asked)
    return total


def w6_skips_last(waits, ready):
    """off-by-one: the later batches stop one short (ready[i+1:-1]), the last batch is never a candidate."""
    _check_lengths(waits, ready)
    return sum(max(0.0, got - max(asked, min(ready[i + 1:-1], default=math.inf))) for i, (asked, got) in enumerate(waits))


def w6_skips_first_batch(waits, ready):
    """off-by-one: loops from batch 1, so the first batch's held-back time is never counted."""
    _check_lengths(waits, ready)
    return sum(max(0.0, got - max(asked, min(ready[i + 1:], default=math.inf)))
               for i, (asked, got) in enumerate(waits) if i >= 1)


def w6_sorted_ready(waits, ready):
    """sorts the ready times, losing which batch each belongs to."""
    return right6_suffix_min(waits, sorted(ready))


def w6_rounded(waits, ready):
    """rounds to whole seconds (int)."""
    return round(right6_suffix_min(waits, ready))


def w6_max_not_sum(waits, ready):
    """returns the longest held-back part, not the total."""
    return max(w6_per_batch(waits, ready), default=0.0)


def w6_empty_raises(waits, ready):
    """raises on empty input (no batches is not an error; the answer is 0)."""
    if not waits or len(waits) != len(ready):
        raise ValueError(f"ready has {len(ready)} times for {len(waits)} batches")
    return right6_suffix_min(waits, ready)


def w6_mutates_ready(waits, ready):
    """right total, but pops from the caller's `ready` list to get the later batches."""
    _check_lengths(waits, ready)
    total = 0.0
    for asked, got in waits:
        ready.pop(0)
        if ready:
            total += max(0.0, got - max(asked, min(ready)))
    return total


def w6_abs_parts(waits, ready):
    """uses abs(...) instead of max(0, ...): a later batch ready after the wait ended adds time."""
    _check_lengths(waits, ready)
    return sum(abs(got - max(asked, min(ready[i + 1:], default=got))) for i, (asked, got) in enumerate(waits))


def w6_ready_before_asked_only(waits, ready):
    """partial: counts a wait (whole) only when a later batch was ready before the loop asked, else nothing."""
    _check_lengths(waits, ready)
    return sum(got - asked for i, (asked, got) in enumerate(waits) if min(ready[i + 1:], default=math.inf) <= asked)


def w6_only_shorter_ready(waits, ready):
    """error case half done: raises only when ready is shorter than waits, not when it is longer."""
    if len(ready) < len(waits):
        raise ValueError(f"ready has {len(ready)} times for {len(waits)} batches")
    return right6_suffix_min(waits, ready[:len(waits)])


def w6_later_received(waits, ready):
    """uses when later batches were received (their got) instead of when they were collated."""
    _check_lengths(waits, ready)
    gots = [got for _, got in waits]
    return sum(max(0.0, got - max(asked, min(gots[i + 1:], default=math.inf))) for i, (asked, got) in enumerate(waits))


def _check_share(share):
    if not 0 <= share <= 1:
        raise ValueError(f"share must be between 0 and 1, got share={share}")


def right7_loop(fetch_s, share):
    """right: sort by (-seconds, id), add until the running sum reaches share of the total."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running >= target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def right7_bisect(fetch_s, share):
    """right: cumulative sums with itertools.accumulate, bisect_left for the first prefix that reaches the target."""
    if not (0.0 <= share <= 1.0):
        raise ValueError(f"share={share!r} is not between 0 and 1")
    order = sorted(sorted(fetch_s), key=lambda k: fetch_s[k], reverse=True)
    sums = list(itertools.accumulate(fetch_s[k] for k in order))
    target = share * math.fsum(fetch_s.values())
    if target <= 0:
        return []
    n = bisect.bisect_left(sums, target * (1 - 1e-12))
    return order[:n + 1]


def right7_heap(fetch_s, share):
    """right: pop the slowest from a heap of (-seconds, id) while the running sum is short of the target."""
    if math.isnan(share) or share < 0 or share > 1:
        raise ValueError(f"share must be in [0, 1]; got share={share}")
    heap = [(-t, k) for k, t in fetch_s.items()]
    heapq.heapify(heap)
    target, got, out = share * math.fsum(fetch_s.values()), 0.0, []
    while heap and got < target:
        neg, k = heapq.heappop(heap)
        out.append(k)
        got += -neg
    return out


def right7_slow(fetch_s, share):
    """right but slow (O(n^2)): repeatedly take the slowest remaining, smallest id on ties."""
    _check_share(share)
    left, out = dict(fetch_s), []
    target, got = share * sum(fetch_s.values()), 0.0
    while left and got < target:
        k = min(left, key=lambda s: (-left[s], s))
        out.append(k)
        got += left.pop(k)
    return out


def w7_strict(fetch_s, share):
    """'at least' read as 'more than': stops only when the sum exceeds the target."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running > target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_up_to(fetch_s, share):
    """'at least' read as 'at most': keeps only the samples that do not overshoot the target (one short)."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running + seconds > target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_append_then_check(fetch_s, share):
    """do-while: always takes the slowest sample, even for share 0."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        chosen.append(sample)
        running += seconds
        if running >= target:
            break
    return chosen


def w7_fastest_first(fetch_s, share):
    """sorts ascending: the fastest samples first."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (kv[1], kv[0])):
        if running >= target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_ties_larger_id_first(fetch_s, share):
    """ties: sorted by (seconds, id) reversed, so the larger id comes first."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (kv[1], kv[0]), reverse=True):
        if running >= target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_ties_dict_order(fetch_s, share):
    """ties: sorted by time only, so tied samples stay in the dict's order, not id order."""
    _check_share(share)
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample in sorted(fetch_s, key=fetch_s.get, reverse=True):
        if running >= target:
            break
        chosen.append(sample)
        running += fetch_s[sample]
    return chosen


def w7_ids_sorted(fetch_s, share):
    """right samples, but returned in id order, not slowest first."""
    return sorted(right7_loop(fetch_s, share))


def w7_absolute_seconds(fetch_s, share):
    """compares the running sum with `share` itself (seconds), not share of the total."""
    _check_share(share)
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running >= share:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_percent(fetch_s, share):
    """reads share as a percentage: target share/100 of the total, accepts up to 100."""
    if not 0 <= share <= 100:
        raise ValueError(f"share must be a percentage, got share={share}")
    target = share / 100 * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running >= target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_share_of_samples(fetch_s, share):
    """share of the samples (count), not of the fetch time."""
    _check_share(share)
    order = sorted(fetch_s, key=lambda k: (-fetch_s[k], k))
    return order[:math.ceil(share * len(order))]


def w7_returns_times(fetch_s, share):
    """returns the seconds of the samples instead of their ids."""
    return [fetch_s[k] for k in right7_loop(fetch_s, share)]


def w7_returns_pairs(fetch_s, share):
    """returns (id, seconds) pairs instead of ids."""
    return [(k, fetch_s[k]) for k in right7_loop(fetch_s, share)]


def w7_returns_set(fetch_s, share):
    """returns a set (no order)."""
    return set(right7_loop(fetch_s, share))


def w7_returns_tuple(fetch_s, share):
    """right ids as a tuple, not a list."""
    return tuple(right7_loop(fetch_s, share))


def w7_no_check(fetch_s, share):
    """forgets the error case."""
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running >= target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_exclusive(fetch_s, share):
    """'between 0 and 1' read as exclusive: rejects 0 and 1."""
    if not 0 < share < 1:
        raise ValueError(f"share must be between 0 and 1, got share={share}")
    return right7_loop(fetch_s, share)


def w7_unnamed_error(fetch_s, share):
    """raises ValueError without naming `share` in the message."""
    if not 0 <= share <= 1:
        raise ValueError("must be between 0 and 1")
    return right7_loop(fetch_s, share)


def w7_nan_passes(fetch_s, share):
    """checks with `share < 0 or share > 1`, so NaN is let through (and returns every sample)."""
    if share < 0 or share > 1:
        raise ValueError(f"share must be between 0 and 1, got share={share}")
    target = share * sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running >= target:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_divides(fetch_s, share):
    """compares running/total with share: ZeroDivisionError when all times are 0 or there are no samples."""
    _check_share(share)
    total = sum(fetch_s.values())
    chosen, running = [], 0.0
    for sample, seconds in sorted(fetch_s.items(), key=lambda kv: (-kv[1], kv[0])):
        if running / total >= share:
            break
        chosen.append(sample)
        running += seconds
    return chosen


def w7_all_when_one(fetch_s, share):
    """special-cases share 1 as 'every sample', zero-time ones included (not the fewest)."""
    if share == 1:
        return sorted(fetch_s, key=lambda k: (-fetch_s[k], k))
    return right7_loop(fetch_s, share)


def w7_pops_input(fetch_s, share):
    """right ids, but empties the caller's dict by popping the slowest each time."""
    _check_share(share)
    target, got, out = share * sum(fetch_s.values()), 0.0, []
    while fetch_s and got < target:
        k = min(fetch_s, key=lambda s: (-fetch_s[s], s))
        out.append(k)
        got += fetch_s.pop(k)
    return out


def w7_only_upper_bound(fetch_s, share):
    """error case half done: rejects share above 1 but not a negative share."""
    if share > 1:
        raise ValueError(f"share must be between 0 and 1, got share={share}")
    return right7_loop(fetch_s, max(share, 0.0))


def w7_float_only(fetch_s, share):
    """rejects an int share (0 or 1) as not 'between 0 and 1'."""
    if not isinstance(share, float) or not 0 <= share <= 1:
        raise ValueError(f"share must be a float between 0 and 1, got share={share!r}")
    return right7_loop(fetch_s, share)


def w7_id_order_prefix(fetch_s, share):
    """adds samples in id order until the share is reached, then sorts those slowest first (not the fewest)."""
    _check_share(share)
    target, running, chosen = share * sum(fetch_s.values()), 0.0, []
    for sample in sorted(fetch_s):
        if running >= target:
            break
        chosen.append(sample)
        running += fetch_s[sample]
    return sorted(chosen, key=lambda k: (-fetch_s[k], k))


def w7_ties_desc_heap(fetch_s, share):
    """heap of (-seconds, -id): tied samples come out larger id first."""
    _check_share(share)
    heap = [(-t, -k) for k, t in fetch_s.items()]
    heapq.heapify(heap)
    target, got, out = share * sum(fetch_s.values()), 0.0, []
    while heap and got < target:
        neg, negk = heapq.heappop(heap)
        out.append(-negk)
        got += -neg
    return out


WRONG = {
    "09.1": [
        Wrong(orders_naming_the_earlier_epoch, 'name the later epoch'),
        Wrong(orders_compared_as_sets, 'compare the order received (the lists)'),
        Wrong(orders_against_the_first_epoch, 'compare each epoch with the epoch just before it (epoch - 1)'),
        Wrong(orders_against_any_earlier_epoch, 'compare each epoch with the epoch just before it (epoch - 1)'),
        Wrong(orders_rank_zero_only, 'look at every rank (ledger.ranks()), not only rank 0'),
        Wrong(orders_as_a_set, 'expected a list of (rank, epoch) pairs'),
        Wrong(orders_first_sample_only, 'not only its first sample'),
        Wrong(orders_previous_recorded_epoch, 'compare with epoch - 1 itself'),
        Wrong(orders_sorted_by_epoch, 'return the pairs sorted'),
        Wrong(orders_skipping_last_epoch, 'go up to the last recorded epoch'),
        Wrong(orders_against_rank_zero, 'compare each rank with its own epoch before'),
        Wrong(orders_as_epoch_rank, 'each pair is (rank, epoch)'),
        Wrong(orders_all_ranks_together, "compare each rank's own order"),
    ],
    "09.2": [
        Wrong(gaps_every_epoch, 'count only the records of that epoch'),
        Wrong(gaps_rank_zero_only, 'count the samples of every rank'),
        Wrong(gaps_from_one, 'the samples are range(num_samples), from 0 to num_samples - 1'),
        Wrong(gaps_all_delivered, 'only the samples delivered more than once'),
        Wrong(gaps_swapped, 'expected a tuple (never delivered: a list, more than once: a dict)'),
        Wrong(gaps_as_list, 'expected a tuple (never delivered: a list, more than once: a dict)'),
        Wrong(gaps_repeats_within_a_rank, "was delivered twice: count over all ranks together"),
        Wrong(gaps_missing_as_set, 'expected a sorted list of them'),
        Wrong(gaps_missing_count, 'expected a sorted list of them'),
        Wrong(gaps_sorting_the_ledger, "changed the ledger's records"),
        Wrong(gaps_extra_copies, 'not to its extra copies'),
        Wrong(gaps_more_than_twice, 'keep counts > 1'),
        Wrong(gaps_missing_on_any_rank, 'no rank delivered it'),
        Wrong(gaps_distinct_per_step, 'the same sample at the same step on two ranks is two deliveries'),
    ],
    "09.3": [
        Wrong(classes_only_below, 'above as well as below'),
        Wrong(classes_poisson_sd, 'sqrt(draws x share x (1 - share))'),
        Wrong(classes_variance_not_sd, 'take the square root of the variance'),
        Wrong(classes_ignoring_z, 'use the z it is given, not always 4'),
        Wrong(classes_only_those_counted, 'a class never drawn is missing from counts'),
        Wrong(classes_key_error, 'raised KeyError: 2'),
        Wrong(classes_numpy_array, 'expected a list of classes'),
        Wrong(classes_at_least_z, '(>, not >=)'),
        Wrong(classes_unsorted, 'return the classes sorted'),
        Wrong(classes_filling_counts, 'changed counts'),
        Wrong(classes_z_score_unguarded, 'a share of 0 or 1 has standard deviation 0'),
        Wrong(classes_only_above, 'below as well as above'),
        Wrong(classes_share_noise_without_draws, 'sqrt(share x (1 - share) / draws)'),
        Wrong(classes_uniform_mean, 'not draws / the number of classes'),
    ],
    "09.4": [
        Wrong(blame_the_whole_object, 'look inside the object that fails'),
        Wrong(blame_one_level_only, 'look inside the failing part the same way'),
        Wrong(blame_the_last_failing_part, 'blame the first part that fails'),
        Wrong(blame_empty_string_when_fine, 'return None when the object pickles, not an empty path'),
        Wrong(blame_dict_key_without_repr, "name a dict value with the key's repr"),
        Wrong(blame_dict_key_as_attribute, "a dict's value, named by its key's repr"),
        Wrong(blame_with_double_quoted_keys, "named by its key's repr"),
        Wrong(blame_dict_keys_not_values, "a dict's value"),
        Wrong(blame_items_as_attributes, 'name a list or tuple item path[i]'),
        Wrong(blame_item_counting_from_one, 'the third item of a list'),
        Wrong(blame_lists_not_tuples, 'the second item of a tuple'),
        Wrong(blame_attributes_only, 'look inside lists, tuples and dicts too'),
        Wrong(blame_containers_only, 'blame the first of its parts that fails on its own'),
        Wrong(blame_attributes_in_dir_order, 'not sorted by name'),
        Wrong(blame_parts_before_trying_the_whole, 'try pickle.dumps(obj) first'),
        Wrong(blame_none_when_no_part_fails, 'blame the object itself: return path'),
        Wrong(blame_catching_only_pickling_error, 'catch any exception pickle.dumps raises'),
        Wrong(blame_as_a_bool, "return the part's path as a str"),
        Wrong(blame_all_failing_parts, "return the part's path as a str"),
        Wrong(blame_the_value_not_its_path, "return the part's path as a str"),
    ],
    "09.5": [
        Wrong(sent_with_plain_pickle, 'measure with multiprocessing.reduction.ForkingPickler.dumps'),
        Wrong(sent_in_megabytes, 'a MiB is 2**20 bytes, not 10**6'),
        Wrong(sent_in_kib, 'that is a KiB'),
        Wrong(sent_in_bytes, 'divide the bytes by 2**20'),
        Wrong(sent_floor_division, 'divide with /, not //'),
        Wrong(sent_rounded, 'return the MiB unrounded'),
        Wrong(sent_getsizeof, 'not sys.getsizeof'),
        Wrong(sent_bytes_object_size, 'take len() of the pickled bytes'),
        Wrong(sent_ignoring_persistent, 'do not multiply by epochs then'),
        Wrong(sent_persistent_swapped, 'each epoch starts new ones, each sent the dataset again: multiply by epochs'),
        Wrong(sent_persistent_once_in_all, 'each worker is sent its own copy: multiply by workers'),
        Wrong(sent_one_worker_only, 'each worker is sent its own copy: multiply by workers'),
        Wrong(sent_zero_workers_as_one, 'with 0 workers the main process loads the batches itself: nothing is sent'),
        Wrong(sent_main_process_counts, '2 workers started anew in each of 3 epochs: 6 starts'),
        Wrong(sent_workers_plus_epochs, '2 workers started anew in each of 3 epochs: 6 starts'),
        Wrong(sent_skipping_first_epoch, '2 workers started anew in each of 3 epochs: 6 starts'),
        Wrong(sent_persistent_plus_first, 'persistent: 2 workers started once'),
        Wrong(sent_as_string, 'expected a float'),
    ],
    "09.6": [
        Wrong(w6_from_ready_not_asked, 'count from when the loop asked'),
        Wrong(w6_next_only, 'any later batch holds it back, not only the next one'),
        Wrong(w6_all_other_batches, 'only batches received after it hold it back'),
        Wrong(w6_negative_parts, 'a later batch ready only after the wait ended held nothing back'),
        Wrong(w6_no_length_check, 'one ready time per batch in waits'),
        Wrong(w6_error_not_naming_ready, 'name the argument and its value in the message'),
        Wrong(w6_type_error, 'expected ValueError'),
        Wrong(w6_per_batch, 'of type list; expected a float'),
        Wrong(w6_milliseconds, 'return seconds, as the times are given, not milliseconds'),
        Wrong(w6_whole_wait, 'not the whole wait'),
        Wrong(w6_includes_itself, 'a batch does not hold itself back'),
        Wrong(w6_earlier_batches, 'only batches received after it hold it back'),
        Wrong(w6_latest, 'not the latest'),
        Wrong(w6_count, 'return the seconds held back, added up, not how many batches were held'),
        Wrong(w6_before_ready, 'not the part before it'),
        Wrong(w6_skips_last, 'the last batch can hold the others back too'),
        Wrong(w6_skips_first_batch, 'every batch counts, the first one too'),
        Wrong(w6_sorted_ready, 'keep ready in batch order'),
        Wrong(w6_rounded, 'return the seconds unrounded'),
        Wrong(w6_max_not_sum, 'add up the seconds over all the batches, not the largest'),
        Wrong(w6_abs_parts, 'batch 2 waited until 2.1 while batch 3 was ready'),  # verdict gives the case's worked numbers, not the abs(...) mistake by name
        Wrong(w6_ready_before_asked_only, 'a later batch is ready when it was collated'),  # verdict gives names two other mistakes beside it
        Wrong(w6_later_received, 'a later batch is ready when it was collated (ready), not when the loop'),
        Wrong(w6_empty_raises, 'no batches: nothing was held back'),
        Wrong(w6_only_shorter_ready, 'more ready times than batches'),
        Wrong(w6_mutates_ready, 'changed waits or ready'),
    ],
    "09.7": [
        Wrong(w7_strict, 'stop as soon as the sum reaches the share'),
        Wrong(w7_up_to, 'at least half'),
        Wrong(w7_append_then_check, 'stop as soon as the sum reaches the share'),
        Wrong(w7_ties_larger_id_first, 'samples that tie on time'),
        Wrong(w7_ties_dict_order, 'samples that tie on time'),
        Wrong(w7_ties_desc_heap, 'samples that tie on time'),
        Wrong(w7_ids_sorted, 'return the samples slowest first'),
        Wrong(w7_absolute_seconds, '2.5 alone is 68 %, under 90 %'),  # verdict gives the case's worked numbers
        Wrong(w7_percent, '2.5 alone is 68 %, under 90 %'),  # verdict gives the case's worked numbers
        Wrong(w7_share_of_samples, 'the share is of the fetch time, not of the number of samples'),
        Wrong(w7_returns_times, 'return the sample ids, not their times'),
        Wrong(w7_returns_pairs, 'expected a 1-D sequence'),
        Wrong(w7_returns_set, 'expected a 1-D sequence'),
        Wrong(w7_no_check, 'a share above 1 cannot be reached'),
        Wrong(w7_unnamed_error, 'name the argument and its value in the message'),
        Wrong(w7_id_order_prefix, 'sample 3 alone took 2.5 of 3.7 s'),  # verdict gives the case's worked numbers
        Wrong(w7_fastest_first, 'take the slowest first (sort by time, largest first)'),
        Wrong(w7_exclusive, 'a share of 1 is allowed'),
        Wrong(w7_returns_tuple, 'return a list, as the task asks'),
        Wrong(w7_nan_passes, 'NaN is not between 0 and 1'),
        Wrong(w7_divides, 'no time at all: no sample needed'),
        Wrong(w7_all_when_one, 'stop as soon as the sum reaches the share (at least, >=)'),
        Wrong(w7_only_upper_bound, 'a share below 0 means nothing'),
        Wrong(w7_float_only, 'an int share, 0 or 1, is allowed'),
        Wrong(w7_pops_input, 'changed fetch_s'),
    ],
}

RIGHT = {
    "09.1": [orders_right_from_records, orders_right_with_loops],
    "09.2": [gaps_right_with_counts, gaps_right_with_loops, gaps_right_with_coverage],
    "09.3": [classes_right_squared, classes_right_numpy_then_ints, classes_right_z_score_guarded],
    "09.4": [first_unpicklable_recursive, first_unpicklable_loop, blame_with_forking_pickler],
    "09.5": [sent_mib_plain, sent_mib_buffer],
    "09.6": [right6_suffix_min, right6_quadratic, right6_accumulate],
    "09.7": [right7_loop, right7_bisect, right7_heap, right7_slow],
}
