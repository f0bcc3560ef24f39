"""Tests of the PPO example with NGU's reward (examples/ppo_ngu.py).

GAE and the PPO loss against formulas written out here in numpy; the bonus
against the library's components called by hand; the whole training jitted
and vmapped over seeds, each seed as it runs alone.
"""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import ppo_ngu
from ngu_jax import envs
from ngu_jax import npz_io
from ngu_jax.intrinsic import episodic
from ngu_jax.intrinsic import lifelong

ENV, KWARGS = "gymnax/DeepSea-bsuite", {"size": 5}
TINY = dict(num_envs=4, num_steps=8, total_env_steps=4 * 8 * 3,
            num_minibatches=2, update_epochs=2, hidden=16, gru_size=16,
            embedding_dim=8, rnd_output_dim=8, memory_capacity=32)


def _gae_numpy(rewards, values, discounts, valid, last_value, gamma, lam):
  t_max, b = rewards.shape
  adv = np.zeros((t_max, b))
  for lane in range(b):
    next_adv, next_value = 0., last_value[lane]
    for t in reversed(range(t_max)):
      if not valid[t, lane]:
        adv[t, lane] = next_adv = 0.
      else:
        d = discounts[t, lane]
        delta = rewards[t, lane] + gamma * d * next_value - values[t, lane]
        adv[t, lane] = next_adv = delta + gamma * lam * d * next_adv
      next_value = values[t, lane]
  return adv, adv + values


@pytest.mark.parametrize("jit", [False, True])
def test_gae_against_a_loop(jit):
  rng = np.random.default_rng(0)
  shape = (7, 3)
  rewards, values = rng.normal(size=shape), rng.normal(size=shape)
  discounts = (rng.random(shape) > 0.2).astype(np.float64)
  valid = rng.random(shape) > 0.2
  last = rng.normal(size=3)
  fn = jax.jit(ppo_ngu.gae, static_argnums=(5, 6)) if jit else ppo_ngu.gae
  adv, ret = fn(*(jnp.asarray(x, jnp.float32) for x in
                  (rewards, values, discounts)), jnp.asarray(valid),
                jnp.asarray(last, jnp.float32), 0.9, 0.8)
  want_adv, want_ret = _gae_numpy(rewards, values, discounts, valid, last,
                                  0.9, 0.8)
  np.testing.assert_allclose(adv, want_adv, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ret, want_ret, rtol=1e-5, atol=1e-5)


def _gae_non_episodic_numpy(rewards, values, valid, last_value, gamma, lam):
  """The RND paper's intrinsic return, written out: per lane, the valid
  steps alone form one unbroken sequence (no discount at episode ends),
  bootstrapped with `last_value`; plain GAE over it."""
  t_max, b = rewards.shape
  adv = np.zeros((t_max, b))
  for lane in range(b):
    steps = [t for t in range(t_max) if valid[t, lane]]
    next_values = [values[t, lane] for t in steps[1:]] + [last_value[lane]]
    running = 0.
    for t, next_value in reversed(list(zip(steps, next_values))):
      delta = rewards[t, lane] + gamma * next_value - values[t, lane]
      adv[t, lane] = running = delta + gamma * lam * running
  return adv, adv + values


@pytest.mark.parametrize("jit", [False, True])
def test_gae_non_episodic_against_a_loop(jit):
  rng = np.random.default_rng(2)
  shape = (9, 4)
  rewards, values = rng.normal(size=shape), rng.normal(size=shape)
  discounts = (rng.random(shape) > 0.3).astype(np.float64)  # ignored
  valid = rng.random(shape) > 0.25
  last = rng.normal(size=4)
  fn = functools.partial(ppo_ngu.gae, episodic=False)
  if jit:
    fn = jax.jit(fn, static_argnums=(5, 6))
  adv, ret = fn(*(jnp.asarray(x, jnp.float32) for x in
                  (rewards, values, discounts)), jnp.asarray(valid),
                jnp.asarray(last, jnp.float32), 0.9, 0.8)
  want_adv, want_ret = _gae_non_episodic_numpy(rewards, values, valid, last,
                                               0.9, 0.8)
  np.testing.assert_allclose(adv, want_adv, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ret, want_ret, rtol=1e-5, atol=1e-5)


def test_gae_non_episodic_runs_into_the_next_episode():
  """One lane, lambda = 1: step 0 ends its episode by termination (d = 0),
  step 1 is the auto-reset step, step 2 starts the next episode. Episodic:
  A_0 = r_0 - V_0. Non-episodic: A_0 = r_0 + g r_2 + g^2 V_last - V_0."""
  g = 0.5
  rewards = jnp.array([[1.], [7.], [2.]])
  values = jnp.array([[0.25], [9.], [3.]])
  discounts = jnp.array([[0.], [1.], [1.]])
  valid = jnp.array([[True], [False], [True]])
  last = jnp.array([4.])
  episodic, _ = ppo_ngu.gae(rewards, values, discounts, valid, last, g, 1.)
  np.testing.assert_allclose(episodic[:, 0], [1. - 0.25, 0., 2. + g * 4 - 3.])
  running, _ = ppo_ngu.gae(rewards, values, discounts, valid, last, g, 1.,
                           episodic=False)
  np.testing.assert_allclose(
      running[:, 0], [1. + g * 2. + g * g * 4. - 0.25, 0., 2. + g * 4 - 3.])


def test_ppo_loss_sums_the_value_heads():
  """Two value heads: the loss is the one-head loss plus the second head's
  clipped value loss (the RND paper's V^E + V^I)."""
  rng = np.random.default_rng(3)
  t, b, a = 5, 3, 4
  f32 = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32)
  logits, actions = f32(t, b, a), jnp.asarray(rng.integers(0, a, (t, b)))
  old_log_probs, advantages = f32(t, b) - 1.4, f32(t, b)
  values, old_values, returns = f32(t, b, 2), f32(t, b, 2), f32(t, b, 2)
  valid = jnp.asarray(rng.random((t, b)) > 0.2)
  args = (0.2, 0.5, 0.01)
  both, m = ppo_ngu.ppo_loss(logits, values, actions, old_log_probs,
                             old_values, advantages, returns, valid, *args)
  heads = [ppo_ngu.ppo_loss(logits, values[..., k], actions, old_log_probs,
                            old_values[..., k], advantages, returns[..., k],
                            valid, *args) for k in (0, 1)]
  np.testing.assert_allclose(m["value_loss"], heads[0][1]["value_loss"]
                             + heads[1][1]["value_loss"], rtol=1e-6)
  np.testing.assert_allclose(both, heads[0][0] + 0.5 * heads[1][1][
      "value_loss"], rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("normalize", [True, False])
def test_ppo_loss_written_out(jit, normalize):
  rng = np.random.default_rng(1)
  n, a = 12, 3
  logits = rng.normal(size=(n, a))
  values, old_values = rng.normal(size=n), rng.normal(size=n)
  actions = rng.integers(0, a, size=n)
  old_log_probs = np.log(rng.uniform(0.1, 0.9, size=n))
  advantages, returns = rng.normal(size=n), rng.normal(size=n)
  valid = rng.random(n) > 0.25
  eps, vf, ent = 0.2, 0.5, 0.01
  fn = jax.jit(ppo_ngu.ppo_loss, static_argnums=(8, 9, 10, 11)) if jit else (
      ppo_ngu.ppo_loss)
  loss, metrics = fn(*(jnp.asarray(x, jnp.float32) for x in (logits, values)),
                     jnp.asarray(actions, jnp.int32),
                     *(jnp.asarray(x, jnp.float32) for x in (
                         old_log_probs, old_values, advantages, returns)),
                     jnp.asarray(valid), eps, vf, ent, normalize)
  # Written out over the valid examples only.
  m = valid
  adv = advantages[m]
  if normalize:  # CleanRL's norm_adv; torch-ac uses them as they are.
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
  log_p = logits[m] - np.log(np.exp(logits[m]).sum(-1, keepdims=True))
  ratio = np.exp(log_p[np.arange(m.sum()), actions[m]] - old_log_probs[m])
  policy = np.mean(np.maximum(-adv * ratio,
                              -adv * np.clip(ratio, 1 - eps, 1 + eps)))
  v, v_old, r = values[m], old_values[m], returns[m]
  value = 0.5 * np.mean(np.maximum((v - r) ** 2, (
      v_old + np.clip(v - v_old, -eps, eps) - r) ** 2))
  entropy = np.mean(-(np.exp(log_p) * log_p).sum(-1))
  np.testing.assert_allclose(metrics["policy_loss"], policy, rtol=1e-5)
  np.testing.assert_allclose(metrics["value_loss"], value, rtol=1e-5)
  np.testing.assert_allclose(metrics["entropy"], entropy, rtol=1e-5)
  np.testing.assert_allclose(loss, policy + vf * value - ent * entropy,
                             rtol=1e-5)


def test_ngu_bonus_is_the_library_components():
  """`intrinsic_reward` ("ngu") = episodic.step after episodic.reset at
  FIRST, times clip(alpha, 1, L) of lifelong.modulator; 0 at FIRST."""
  config = ppo_ngu.PPOConfig(**TINY)
  env = envs.make_functional(ENV, **KWARGS)
  bonus = ppo_ngu.make_bonus(env, config)
  key = jax.random.PRNGKey(3)
  params = {"embedding": bonus.embedding.init(key),
            "rnd": bonus.rnd.init(jax.random.PRNGKey(4))}
  b = 3
  from ngu_jax import networks  # pylint: disable=g-import-not-at-top
  stats = networks.observation_normalizer_init(env.observation_spec().shape)
  _, ts = jax.vmap(env.reset)(jax.random.split(key, b))
  stats = networks.observation_normalizer_update(stats, ts.observation)
  state = ppo_ngu.BonusState(
      params=params, opt_state=None,
      memory=episodic.init(bonus.memory_config, b, config.embedding_dim),
      obs_stats=stats, error_stats=lifelong.init(),
      reward_stats=lifelong.init())
  rng = np.random.default_rng(0)
  memory, errors = state.memory, lifelong.init()
  for step in range(4):
    obs = jnp.asarray(rng.random((b,) + env.observation_spec().shape),
                      jnp.float32)
    first = jnp.asarray([step == 0, step == 2, False])
    raw, alpha, state = ppo_ngu.intrinsic_reward(bonus, config, state, obs,
                                                 first)
    # By hand.
    from ngu_jax.losses import rnd as rnd_losses  # pylint: disable=g-import-not-at-top
    whitened = networks.normalize_observation(stats, obs)
    err = rnd_losses.rnd_error(
        bonus.rnd.predictor(params["rnd"].predictor, whitened),
        bonus.rnd.target(params["rnd"].target, whitened))
    want_alpha, errors = lifelong.modulator(errors, err,
                                            horizon=config.horizon,
                                            valid=stats.count > 0)
    memory = episodic.reset(memory, first)
    r_ep, memory = episodic.step(bonus.memory_config, memory,
                                 bonus.embedding.embed(params["embedding"],
                                                       obs))
    want = np.where(first, 0., lifelong.ngu_intrinsic_reward(
        r_ep, want_alpha, config.rnd_clip))
    np.testing.assert_allclose(alpha, want_alpha, rtol=1e-6)
    np.testing.assert_allclose(raw, want, rtol=1e-6)
  np.testing.assert_array_equal(state.memory.size, [4, 2, 4])


@pytest.mark.parametrize("intrinsic,returns", [
    # NGU's bonus with the RND paper's two value heads; one value head
    # runs in test_run_logs_evaluates_and_resumes.
    ("ngu", "non_episodic"),
    # The other bonuses' wiring (a compile each): `make test-slow`.
    pytest.param("ngu", "episodic", marks=pytest.mark.slow),
    pytest.param("none", "episodic", marks=pytest.mark.slow),
    pytest.param("rnd", "non_episodic", marks=pytest.mark.slow),
    pytest.param("recode", "episodic", marks=pytest.mark.slow),
    # The standardised bonus, and advantages used as they are (torch-ac).
    pytest.param("rnd", "standardize", marks=pytest.mark.slow)])
def test_train_jits_and_vmaps_over_seeds(intrinsic, returns):
  """Two seeds vmapped: finite metrics, and the seeds differ."""
  standardized = returns == "standardize"
  config = ppo_ngu.PPOConfig(
      **TINY, intrinsic=intrinsic,
      intrinsic_return="episodic" if standardized else returns,
      intrinsic_normalization="standardize" if standardized else "std",
      normalize_advantages=not standardized)
  train = ppo_ngu.make_train(config, ENV, KWARGS)
  keys = jnp.stack([jax.random.PRNGKey(0), jax.random.PRNGKey(1)])
  _, metrics = jax.jit(jax.vmap(train))(keys)
  for name, value in metrics.items():
    assert value.shape == (2, config.num_updates), name
    assert np.all(np.isfinite(value)), name
  assert np.all(metrics["episodes"] > 0)
  if intrinsic == "none":
    np.testing.assert_array_equal(metrics["intrinsic_reward"], 0.)
  elif standardized:  # mean 0 over the run, positive and negative steps
    assert np.all(np.abs(metrics["intrinsic_reward"].mean(1)) < 0.3)
    assert np.any(metrics["intrinsic_reward"] < 0)
  else:  # RND's errors count once its observation statistics exist.
    assert np.all(metrics["intrinsic_reward"][:, 1:] > 0)
  assert not np.allclose(metrics["loss"][0], metrics["loss"][1])


@pytest.mark.slow  # A second compile of the program (20 s on one core).
def test_a_vmapped_seed_is_that_seed_run_alone():
  """Seed 1 of the vmapped program is seed 1 run alone (NGU's bonus, the
  one with the most state)."""
  config = ppo_ngu.PPOConfig(**TINY, intrinsic="ngu")
  train = ppo_ngu.make_train(config, ENV, KWARGS)
  keys = jnp.stack([jax.random.PRNGKey(0), jax.random.PRNGKey(1)])
  metrics = jax.jit(jax.vmap(train))(keys)[1]
  alone = jax.jit(train)(keys[1])[1]
  for name, value in metrics.items():
    np.testing.assert_allclose(value[1], alone[name], rtol=2e-3, atol=2e-3,
                               err_msg=name)


def test_config_errors():
  with pytest.raises(ValueError, match="intrinsic"):
    ppo_ngu.PPOConfig(intrinsic="count")
  with pytest.raises(ValueError, match="multiple of"):
    ppo_ngu.PPOConfig(num_envs=6, num_minibatches=4)
  with pytest.raises(ValueError, match="update_epochs"):
    ppo_ngu.PPOConfig(update_epochs=0)
  with pytest.raises(ValueError, match="intrinsic_return"):
    ppo_ngu.PPOConfig(intrinsic_return="lifelong")
  with pytest.raises(ValueError, match="intrinsic_normalization"):
    ppo_ngu.PPOConfig(intrinsic_normalization="rank")
  with pytest.raises(ValueError, match="normalize_advantages"):
    ppo_ngu.PPOConfig(normalize_advantages="false")  # a string is truthy


def _csv(path):
  import csv  # pylint: disable=g-import-not-at-top
  with open(path) as f:
    return list(csv.DictReader(f))


def test_run_logs_evaluates_and_resumes(tmp_path):
  """`run` on disk: one metrics.csv per seed with an evaluation every other
  row; a run stopped after 2 updates and resumed to 4 (from a checkpoint
  older than `intrinsic_return`) logs what the run that never stopped
  logs; a resume with other settings is refused."""
  config = ppo_ngu.PPOConfig(**dict(TINY, total_env_steps=4 * 8 * 4),
                             intrinsic="none")
  per_update = config.num_envs * config.num_steps
  whole, part = str(tmp_path / "whole"), str(tmp_path / "part")
  kwargs = dict(log_every=per_update, eval_every=2 * per_update,
                checkpoint_every=per_update, progress=False)
  ppo_ngu.run(config, ENV, KWARGS, [3, 4], whole, **kwargs)
  half = ppo_ngu.PPOConfig(**dict(TINY, total_env_steps=4 * 8 * 2),
                           intrinsic="none")
  ppo_ngu.run(half, ENV, KWARGS, [3, 4], part, **kwargs)
  assert len(_csv(f"{part}/seed_4/metrics.csv")) == 2
  # Written before `intrinsic_return` existed: resumes as "episodic".
  ckpt = os.path.join(part, "checkpoint")
  state = npz_io.read_json(os.path.join(ckpt, "state.json"))
  del state["config"]["ppo"]["intrinsic_return"]
  npz_io.write_json(os.path.join(ckpt, "state.json"), state)
  npz_io.write_checksums(ckpt)
  ppo_ngu.run(config, ENV, KWARGS, [3, 4], part, resume=True, **kwargs)
  for seed in (3, 4):
    rows = _csv(f"{whole}/seed_{seed}/metrics.csv")
    assert [int(r["env_steps"]) for r in rows] == [
        per_update * i for i in (1, 2, 3, 4)]
    assert [r["eval_success"] == "nan" for r in rows] == [
        True, False, True, False]
    for row in rows[1::2]:
      assert 0 <= float(row["eval_success"]) <= 1
      # DeepSea pays 1 at the treasure and -0.01 / N per right move.
      assert (float(row["eval_success"]) > 0) == (
          float(row["eval_return"]) > 0.5 / 16)
    resumed = _csv(f"{part}/seed_{seed}/metrics.csv")
    for a, b in zip(rows, resumed):
      for column in ppo_ngu.METRICS_COLUMNS:
        if column not in ("elapsed_s", "env_steps_per_s"):
          np.testing.assert_allclose(float(a[column]), float(b[column]),
                                     rtol=1e-5, err_msg=column)
  other = ppo_ngu.PPOConfig(**dict(TINY, total_env_steps=4 * 8 * 4),
                            intrinsic="none", ent_coef=0.02)
  with pytest.raises(ValueError, match="differs"):
    ppo_ngu.run(other, ENV, KWARGS, [3, 4], part, resume=True, **kwargs)
  with pytest.raises(ValueError, match="distinct"):
    ppo_ngu.run(config, ENV, KWARGS, [3, 3], str(tmp_path / "x"), **kwargs)


def test_main_set_errors():
  with pytest.raises(SystemExit):
    ppo_ngu.main(["--set", "num_stepz=3", "--total-env-steps", "64"])
  with pytest.raises(SystemExit):
    ppo_ngu.main(["--set", "num_envs=6", "--total-env-steps", "64"])
