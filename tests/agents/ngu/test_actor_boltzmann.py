"""The actor with DiCE's Boltzmann behaviour policy (`behaviour_policy=
"boltzmann"`, 004 Sec. 3.1, App. A).

Oracles: the behaviour probability written out as softmax(Q / tau) at the
taken action; each lane's Bandits Vote ensemble replayed with
`bandits_vote.update` on the lane's episodes as written out here (the x each
episode played and its undiscounted extrinsic return); x = log(1 + 1/tau).
"""

import dataclasses
import functools
import math

import jax
import numpy as np
import pytest

from ngu_jax.agents.ngu import actor
from ngu_jax.meta import bandits_vote
from ngu_jax.agents.ngu.variants import policy as variant_policy
from tests.agents.ngu import test_actor as base
from tests.agents.ngu.test_actor_meta_controller import _episodes

B = base.B
BOLTZMANN = dataclasses.replace(base.CONFIG, behaviour_policy="boltzmann",
                                bva_num_bandits=3, bva_num_candidates=2,
                                bva_tile_size=0.5)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _run(config, steps, jit, seed=0):
  """Steps B lanes through `_episodes`; returns the per-step record."""
  first, reward = _episodes(steps, seed)
  obs = np.random.default_rng(seed + 1).normal(
      size=(steps, B) + base.OBS).astype(np.float32)
  net = base._networks(config)
  state = actor.init(config, net, jax.random.PRNGKey(seed), B)
  initial = jax.device_get(state)
  step = functools.partial(actor.select_action, config, net)
  step = jax.jit(step) if jit else step
  xs, actions, mus, qs = [], [], [], []
  for t in range(steps):
    action, state = step(base._params(), state, obs[t], reward[t], first[t])
    xs.append(np.asarray(state.temperature_x))
    actions.append(np.asarray(action))
    mus.append(np.asarray(state.extras.behaviour_prob))
    qs.append(np.asarray(state.extras.q_values))
  return dict(first=first, reward=reward, initial=initial, state=state,
              x=np.stack(xs), action=np.stack(actions), mu=np.stack(mus),
              q=np.stack(qs))


def test_default_config_has_no_temperatures():
  state = actor.init(base.CONFIG, base._networks(), jax.random.PRNGKey(0), B)
  assert state.temperature_x is None and state.bva is None
  assert state.episode_return is None


@JIT
def test_behaviour_probability_is_the_softmax_over_q_by_tau(jit):
  run = _run(BOLTZMANN, 12, jit)
  tau = 1. / np.expm1(np.maximum(run["x"].astype(np.float64), 1e-6))
  logits = run["q"].astype(np.float64) / tau[..., None]
  probs = np.exp(logits - logits.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  expected = np.take_along_axis(probs, run["action"][..., None], -1)[..., 0]
  np.testing.assert_allclose(run["mu"], expected, rtol=1e-5, atol=1e-6)
  assert (run["x"] >= 0).all() and (run["x"] <= math.log(51.) + 1e-6).all()


@JIT
def test_lanes_follow_their_bandits_vote_ensembles(jit):
  """x changes only at episode starts; each lane's ensemble equals its
  initial ensemble updated (eq. 10) with the lane's finished episodes'
  (x, undiscounted r^e), in order."""
  steps = 30
  run = _run(BOLTZMANN, steps, jit)
  first, reward, x = run["first"], run["reward"], run["x"]
  bva_config = variant_policy.bva_config(BOLTZMANN)
  for b in range(B):
    expected = jax.tree_util.tree_map(lambda leaf: leaf[b],
                                      run["initial"].bva)
    episode_x, episode_return = run["initial"].temperature_x[b], 0.
    for t in range(steps):
      if first[t, b] and t > 0:
        expected = bandits_vote.update(expected, np.float32(episode_x),
                                       np.float32(episode_return),
                                       bva_config)
        episode_x, episode_return = x[t, b], 0.
      elif not first[t, b]:
        episode_return += reward[t, b]
        assert x[t, b] == episode_x  # Fixed within the episode.
    got = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[b],
                                 run["state"].bva)
    for name, a, e in zip(expected._fields, got, expected):
      np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, err_msg=name)
    # Every finished episode reached every bandit once.
    assert int(np.asarray(got.counts).sum()) == (
        bva_config.num_bandits * int(first[1:, b].sum()))


def test_fixed_and_random_temperatures():
  fixed = _run(dataclasses.replace(BOLTZMANN, temperature_source="fixed",
                                   boltzmann_tau=0.5), 10, jit=True)
  np.testing.assert_allclose(fixed["x"], math.log(3.), rtol=1e-6)
  assert fixed["state"].bva is None
  random = _run(dataclasses.replace(BOLTZMANN, temperature_source="random"),
                30, jit=True)
  x, first = random["x"], random["first"]
  assert random["state"].bva is None
  assert (x >= 0).all() and (x <= math.log(51.)).all()
  changed = np.concatenate([np.zeros((1, B), bool), x[1:] != x[:-1]])
  # New draws exactly at episode starts after the first episode.
  later_firsts = first.copy()
  later_firsts[0] = False
  np.testing.assert_array_equal(changed, later_firsts)


def test_bad_temperature_config():
  with pytest.raises(ValueError, match="temperature_source"):
    dataclasses.replace(BOLTZMANN, temperature_source="adaptive")
  with pytest.raises(ValueError, match="policy.kind"):
    dataclasses.replace(BOLTZMANN, behaviour_policy="softmax")
  with pytest.raises(ValueError, match="boltzmann_tau"):
    dataclasses.replace(BOLTZMANN, boltzmann_tau=0.)
  with pytest.raises(ValueError, match="bva_widths"):
    dataclasses.replace(BOLTZMANN, bva_widths=(1, -1))
