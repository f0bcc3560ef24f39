"""Tests for experiments.probes.novelty_probe (frontier vs seen-before cell).

Deterministic facts of the rewards, not learning claims: with the one-hot
(controllable) f, NGU's episodic reward cannot tell a cell seen only in
earlier episodes from a never-seen one (its memory is wiped at every
episode start), while RECODE pays the never-seen cell 1 / c.
"""

import os

import numpy as np
import pytest

from experiments.probes import novelty_probe
from ngu_jax.envs import noisy_grid


def test_scenarios_are_junctions_off_the_earlier_path():
  env = noisy_grid.NoisyGrid("none", size=9)
  scenarios = novelty_probe.find_scenarios(env, 3, 2,
                                           np.random.default_rng(0))
  assert scenarios
  dist = env.distance_to_start
  for s in scenarios:
    assert s.path[0] == tuple(env.start)
    # P is a shortest path, `old` and `new` are children of its end.
    assert [dist[c] for c in s.path] == list(range(len(s.path)))
    assert dist[s.old] == dist[s.new] == len(s.path)
    assert s.new not in s.path + [s.old] + s.tail
    assert s.old != s.new


def test_probe_rows_and_the_two_deterministic_facts(tmp_path):
  out = str(tmp_path / "probe")
  summary = novelty_probe.main(["--output", out, "--noises", "none",
                                "--mazes", "1", "--junctions", "1",
                                "--episodes", "2", "--rnd-updates", "2",
                                "--size", "9", "--tail", "1"])
  by = {(s["embedding"], s["reward"]): s for s in summary}
  assert set(by) == {(e, r) for e in novelty_probe.EMBEDDINGS
                     for r in ("episodic", "ngu", "recode")} | {
                         ("raw_frame", "rnd")}
  episodic = by[("controllable", "episodic")]
  assert episodic["mean_r_new"] == pytest.approx(episodic["mean_r_old"])
  recode = by[("controllable", "recode")]
  c = novelty_probe.probe_config().recode.pseudo_count_constant
  assert recode["mean_r_new"] == pytest.approx(1 / c, rel=1e-5)
  assert recode["mean_r_old"] < 1.  # Seen in 2 earlier episodes.
  for name in ("probe.csv", "probe.md"):
    assert os.path.getsize(os.path.join(out, name)) > 0


def test_per_actor_memories_forget_what_other_actors_saw(tmp_path):
  # 2 earlier episodes dealt to 3 actors: the final episode's actor (the
  # third) saw neither, so `old` is as new as `new` to its memory; one shared
  # memory saw both.
  out = str(tmp_path / "sharing")
  summary = novelty_probe.main(["--output", out, "--noises", "none",
                                "--mazes", "1", "--junctions", "1",
                                "--episodes", "2", "--size", "9",
                                "--tail", "1", "--recode-actors", "1", "3"])
  by = {(s["embedding"], s["reward"]): s for s in summary}
  assert set(by) == {(e, f"recode, A={a}")
                     for e in novelty_probe.EMBEDDINGS for a in (1, 3)}
  c = novelty_probe.probe_config().recode.pseudo_count_constant
  shared = by[("controllable", "recode, A=1")]
  apart = by[("controllable", "recode, A=3")]
  assert shared["mean_r_old"] < 1.
  assert apart["mean_r_old"] == pytest.approx(1 / c, rel=1e-5)
  assert apart["mean_r_new"] == pytest.approx(1 / c, rel=1e-5)


def test_recode_actors_must_be_positive(tmp_path):
  with pytest.raises(SystemExit):
    novelty_probe.main(["--output", str(tmp_path), "--recode-actors", "0"])
