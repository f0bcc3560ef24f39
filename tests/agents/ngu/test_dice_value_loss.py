"""DiCE's learner inside the agent's value loss (`loss(..., dice=...)`).

Oracles: `ngu_jax.losses.dice.dice_loss` (tested against float64
references in tests/losses/test_dice.py) fed by hand with the network's
unrolled Q and V after the burn-in, the sequence's gamma_j and beta_j and
the stored tau; and which parameters each of the three losses reaches.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import value_loss
from ngu_jax.losses import dice as dice_losses
from ngu_jax.networks import uvfa
from tests.agents.ngu import test_learning as base

KW = base.KW
TAU = np.array([0.5, 3.], np.float32)
JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _batch(seed=0, padded=True):
  return base._batch(seed, padded=padded)._replace(tau=TAU)


def _unroll(params, batch, burn_in):
  net = base._network()
  t1, b = np.shape(batch.action)
  inputs = uvfa.UVFAInputs(
      observation=batch.observation, prev_action=batch.prev_action,
      prev_extrinsic_reward=batch.prev_extrinsic_reward,
      prev_intrinsic_reward=batch.prev_intrinsic_reward,
      mixture_index=np.broadcast_to(batch.mixture_index[None], (t1, b)))
  q, v, _ = net.unroll_with_value(params, inputs, batch.initial_state,
                                  batch.step_is_first)
  return q[burn_in:], v[burn_in:]


@JIT
@pytest.mark.parametrize("burn_in", [0, 2])
def test_equals_dice_loss_on_the_unrolled_values(jit, burn_in):
  settings = value_loss.DiceSettings(q_weight=2., v_weight=0.5, pi_weight=3.,
                                     c_bar=1.2, rho_bar=1.5, lambda_=0.9,
                                     entropy_weight=0.7)
  fn = functools.partial(learning.loss, base._network(), burn_in=burn_in,
                         dice=settings, **KW)
  fn = jax.jit(fn) if jit else fn
  batch = _batch()
  params, target = base._params(0), base._params(1)
  total, extras = fn(params, target, batch)
  online_q, online_v = _unroll(params, batch, burn_in)
  target_q, _ = _unroll(target, batch, burn_in)
  mix = batch.mixture_index
  steps = lambda x: np.asarray(x)[burn_in:]
  expected, ex = dice_losses.dice_loss(
      online_q, online_v, target_q, steps(batch.action),
      steps(batch.extrinsic_reward), steps(batch.discount),
      steps(batch.behaviour_prob), TAU, steps(batch.mask),
      gamma=np.asarray(KW["gammas"])[mix],
      intrinsic_rewards=steps(batch.intrinsic_reward),
      beta=np.asarray(KW["betas"])[mix],
      importance_weights=batch.importance_weights, q_weight=2., v_weight=0.5,
      pi_weight=3., lambda_=0.9, c_bar=1.2, rho_bar=1.5, entropy_weight=0.7)
  # Eager: the same operations as the oracle (agrees to ~1e-7). Under jit
  # XLA reassociates the unroll and the sums in float32 and h^-1 amplifies
  # it: the total moved by 5e-6 on jax 0.10 and by 7e-5 on jax 0.4.30 (a
  # loss of -0.037 that cancels terms of order 1).
  tol = (dict(rtol=1e-3, atol=2e-4) if jit else dict(rtol=1e-5, atol=1e-6))
  np.testing.assert_allclose(total, expected, **tol)
  np.testing.assert_allclose(extras.td_errors, ex.td_errors, **tol)
  for name in ("q_loss", "v_loss", "pi_loss", "entropy"):
    np.testing.assert_allclose(extras.metrics[f"dice_{name}"],
                               ex.metrics[name], **tol)
  assert extras.priorities.shape == (2,)
  assert extras.td_errors.shape == (base.T - burn_in, 2)


def test_each_loss_reaches_its_heads():
  """V's loss alone moves no advantage-head parameter; the policy loss alone
  moves no value-head parameter (its advantage is under stop_gradient and
  softmax(Q / tau) does not depend on V)."""
  batch = _batch()
  params, target = base._params(0), base._params(1)

  def grads(**weights):
    settings = value_loss.DiceSettings(**weights)
    g = jax.grad(lambda p: learning.loss(base._network(), p, target, batch,
                                         dice=settings, **KW)[0])(params)
    return {k: float(sum(jnp.abs(x).sum() for x in v.values()))
            for k, v in g.items()}

  v_only = grads(q_weight=0., v_weight=1., pi_weight=0.)
  assert v_only["dueling_head/advantage"] == 0.
  assert v_only["dueling_head/value"] > 0.
  pi_only = grads(q_weight=0., v_weight=0., pi_weight=1.)
  # log softmax is shift-invariant, so V's gradient is 1 - sum(pi) per step:
  # 0 up to float32 rounding.
  assert pi_only["dueling_head/advantage"] > 0.
  assert pi_only["dueling_head/value"] < 1e-5 * pi_only[
      "dueling_head/advantage"]


def test_microbatches_give_the_same_loss_and_gradients():
  batch = _batch()
  params, target = base._params(0), base._params(1)
  kwargs = dict(dice=value_loss.DiceSettings(), **KW)
  (one, _), g1 = learning.loss_and_grad(base._network(), params, target,
                                        batch, **kwargs)
  (two, _), g2 = learning.loss_and_grad(base._network(), params, target,
                                        batch, num_microbatches=2, **kwargs)
  # The scan compiles what eager runs op by op, and h^-1 amplifies the
  # float32 rounding: up to 1.1e-4 (jax 0.10) and 8e-5 (jax 0.4.30) apart.
  np.testing.assert_allclose(one, two, rtol=1e-3, atol=2e-4)
  for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=2e-4)


def test_needs_tau_and_one_value_stream():
  with pytest.raises(ValueError, match="batch.tau"):
    learning.loss(base._network(), base._params(0), base._params(1),
                  base._batch(0), dice=value_loss.DiceSettings(), **KW)
  with pytest.raises(ValueError, match="batch.tau"):
    learning.loss(base._network(), base._params(0), base._params(1),
                  _batch()._replace(tau=np.array([1., 0.], np.float32)),
                  dice=value_loss.DiceSettings(), **KW)
  split = base._network()._replace(unroll_with_value=None)
  with pytest.raises(ValueError, match="one value stream"):
    learning.loss(split, base._params(0), base._params(1), _batch(),
                  dice=value_loss.DiceSettings(), **KW)
