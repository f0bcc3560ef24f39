"""Tests for ngu_jax.losses.casm (RECODE Sec. 4: masked action likelihood)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ngu_jax.losses import casm

JIT = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


def _reference(logits, actions, shown, valid, params, l2_weight):
  """float64 loops: mean NLL over (n, t, b) with a_t hidden and valid."""
  logits = np.asarray(logits, np.float64)
  n_masks, t1, b, _ = logits.shape
  total, correct, count = 0., 0., 0
  for n in range(n_masks):
    for t in range(t1):
      for i in range(b):
        if shown[n, t, i] or not valid[t, i]:
          continue
        z = logits[n, t, i]
        log_p = z - np.log(np.sum(np.exp(z - z.max()))) - z.max()
        total -= log_p[actions[t, i]]
        correct += float(np.argmax(z) == actions[t, i])
        count += 1
  l2 = sum(float(np.sum(np.asarray(p, np.float64) ** 2)) for p in params)
  nll = total / max(count, 1)
  return nll + l2_weight * l2, nll, correct / max(count, 1), count


def _case(seed=0, n=2, t=5, b=3, a=4):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(n, t - 1, b, a)).astype(np.float32) * 2
  actions = rng.integers(0, a, size=(t, b)).astype(np.int32)
  shown = rng.random((n, t, b)) < 0.5
  mask = np.ones((t, b), bool)
  mask[3:, 0] = False  # Lane 0 padded from step 3.
  first = np.zeros((t, b), bool)
  first[0] = True
  first[2, 1] = True  # Lane 1: a new episode at step 2.
  return logits, actions, shown, mask, first


def test_valid_transitions_by_hand():
  _, _, _, mask, first = _case()
  valid = np.asarray(casm.valid_transitions(mask, first))
  expected = np.ones((4, 3), bool)
  expected[2:, 0] = False  # 2 -> 3 and 3 -> 4 touch padding.
  expected[1, 1] = False  # 1 -> 2 crosses the episode start.
  np.testing.assert_array_equal(valid, expected)
  np.testing.assert_array_equal(casm.valid_transitions(mask),
                                mask[:-1] & mask[1:])


@JIT
def test_matches_reference(jit):
  logits, actions, shown, mask, first = _case()
  valid = np.asarray(casm.valid_transitions(mask, first))
  params = {"w": np.full((2, 2), 0.5, np.float32)}
  fn = jax.jit(casm.casm_loss) if jit else casm.casm_loss
  loss, metrics = fn(logits, actions, shown, valid, params, 0.1)
  ref_loss, ref_nll, ref_acc, count = _reference(
      logits, actions, shown, valid, [params["w"]], 0.1)
  assert count > 3  # The case has targets (and excluded entries).
  np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
  np.testing.assert_allclose(float(metrics["nll"]), ref_nll, rtol=1e-5)
  np.testing.assert_allclose(float(metrics["accuracy"]), ref_acc, rtol=1e-6)
  assert float(metrics["num_targets"]) == count
  # [T - 1, B] actions and [N, T - 1, B] masks give the same.
  loss2, _ = fn(logits, actions[:-1], shown[:, :-1], valid, params, 0.1)
  np.testing.assert_allclose(float(loss2), float(loss), rtol=1e-6)


def test_only_hidden_valid_actions_count():
  logits, actions, shown, mask, first = _case(1)
  valid = np.asarray(casm.valid_transitions(mask, first))
  base, _ = casm.casm_loss(logits, actions, shown, valid)
  # Logits of shown actions or invalid transitions do not matter.
  excluded = shown[:, :-1] | ~valid[None]
  other = np.where(excluded[..., None], 100. * logits, logits)
  same, _ = casm.casm_loss(other, actions, shown, valid)
  np.testing.assert_allclose(float(same), float(base), rtol=1e-6)
  # ... and those of a hidden, valid one do.
  n, t, b = np.argwhere(~excluded)[0]
  other = logits.copy()
  other[n, t, b, actions[t, b]] += 1.
  changed, _ = casm.casm_loss(other, actions, shown, valid)
  assert float(changed) < float(base)
  # No targets at all: loss 0, accuracy 0 (no division by zero).
  empty, metrics = casm.casm_loss(logits, actions, np.ones_like(shown), valid)
  assert float(empty) == 0. and float(metrics["num_targets"]) == 0.


def test_sample_action_masks():
  masks = casm.sample_action_masks(jax.random.PRNGKey(0), 4, (50, 20))
  assert masks.shape == (4, 50, 20) and masks.dtype == jnp.bool_
  assert abs(float(jnp.mean(masks)) - 0.5) < 0.05  # 4000 draws: std 0.008.
  assert bool(jnp.any(masks[0] != masks[1]))  # Independent masks.
  rare = casm.sample_action_masks(jax.random.PRNGKey(1), 1, (100, 10), 0.1)
  assert abs(float(jnp.mean(rare)) - 0.1) < 0.03
  with pytest.raises(ValueError, match="num_masks"):
    casm.sample_action_masks(jax.random.PRNGKey(0), 0, (5, 2))
  with pytest.raises(ValueError, match="probability"):
    casm.sample_action_masks(jax.random.PRNGKey(0), 1, (5, 2), 1.5)


@pytest.mark.parametrize("change, message", [
    (lambda l, a, s, v: (l[0], a, s, v), "logits"),
    (lambda l, a, s, v: (l, a.astype(np.float32), s, v), "integers"),
    (lambda l, a, s, v: (l, a + 10, s, v), "actions"),
    (lambda l, a, s, v: (l, a, s[:1], v), "action_shown"),
    (lambda l, a, s, v: (l, a, s, v[:2]), "valid"),
])
def test_rejects_bad_inputs(change, message):
  logits, actions, shown, mask, first = _case()
  valid = np.asarray(casm.valid_transitions(mask, first))
  with pytest.raises(ValueError, match=message):
    casm.casm_loss(*change(logits, actions, shown, valid))
  with pytest.raises(ValueError, match="l2_weight"):
    casm.casm_loss(logits, actions, shown, valid, None, -1.)
