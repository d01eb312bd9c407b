"""Lesson 09's exercises as learners answer them, written from the task text alone."""
from __future__ import annotations

import math
from collections import Counter, defaultdict

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
}

RIGHT = {
    "09.1": [orders_right_from_records, orders_right_with_loops],
    "09.2": [gaps_right_with_counts, gaps_right_with_loops, gaps_right_with_coverage],
    "09.3": [classes_right_squared, classes_right_numpy_then_ints, classes_right_z_score_guarded],
}
