r"""Where an NGU learner update spends its time, at the comparisons' settings.

`sgd_step` (NGU App. A: the transformed-Retrace loss of the online and
target UVFA networks, action prediction f / h, the RND predictor, three
Adams) on a real prioritised batch of each comparison's laptop config:

  * disco_maze: experiments/disco_maze_coverage.py (Disco Maze 11x11, N = 1,
    batch 16 sequences of 10 steps, LSTM / head / torso dense 64, conv
    filters (8, 16));
  * minigrid: experiments/minigrid_exploration.py (DoorKey-8x8, N = 8,
    batch 32 sequences of 40 steps, LSTM / head 128, torso dense 256).

The batch comes from the compiled loop's own replay after acting, so masks,
episode starts and observations are the real ones. Printed, measured in one
run:

  (a) ms per `sgd_step` (jitted, median of `--repeats`) for the library's
      fast path; per step of 10 steps inside one `lax.scan` (as the
      compiled loop runs the learner); the same with the plain LSTM unroll
      (`lstm_unroll="reference"`); and with every run-time value check off
      (`set_runtime_checks(False)`: what the one remaining host callback
      costs);
  (b) the model FLOPs of one update and the GFLOP/s and share of the
      machine's matmul peak they reach: XLA's cost analysis of each network
      applied to all its frames without a time loop (so the LSTM's FLOPs
      count once per step), times 3 for the online Q-network (forward +
      backward), 1 for the target, plus the auxiliary updates (no loop
      inside) -- the matmul/conv FLOPs and XLA's elementwise ones;
      XLA's own count of the jitted `sgd_step` is printed beside it (it
      counts the body of the LSTM scan once);
  (c) the peak: a jitted float32 1024 x 1024 matmul, best of 20;
  (d) the profile: each part timed on its own, jitted, on the same batch
      and parameters -- per network (Q online forward + backward, Q target
      forward, f and h, RND predictor and target, the three Adams) and per
      op kind inside the Q-network (conv layers, the torso's dense layer,
      LSTM scan, dueling head, Retrace and the loss); parts overlap in
      nothing and their sum is compared with the whole step.

Usage:
  python -m experiments.benchmarks.learner_profile
      [--settings disco_maze,minigrid] [--repeats 20] [--quick]
"""

import argparse
import functools
import os
from typing import Dict, List

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

import ngu_jax
from experiments.benchmarks import loops
from experiments.benchmarks import timing
from ngu_jax import envs
from ngu_jax.agents.ngu import config as config_lib
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks as networks_lib
from ngu_jax.agents.ngu import value_loss
from ngu_jax.loops.compiled import loop as compiled
from ngu_jax.networks import lstm as lstm_lib
from ngu_jax.networks import torsos
from ngu_jax.networks import uvfa

SCAN_STEPS = 10

SETTINGS = {
    "disco_maze": dict(
        env="disco_maze", env_kwargs={"size": 11},
        config=lambda: config_lib.disco_maze(
            batch_size=16, grid_filters=(8, 16), lstm_size=64,
            head_hidden=64, grid_output_size=64, trace_length=10,
            replay_period=5)),
    "minigrid": dict(
        env="minigrid/MiniGrid-DoorKey-8x8-v0", env_kwargs={},
        config=lambda: config_lib.minigrid(batch_size=32, lstm_size=128,
                                           head_hidden=128)),
}


xla_flops = loops._flops  # pylint: disable=protected-access


def real_batch(name: str, lanes: int = 16, chunks: int = 8):
  """(config, networks, learner state, batch) after acting in the loop."""
  setting = SETTINGS[name]
  env = envs.make_functional(setting["env"], **setting["env_kwargs"])
  config = setting["config"]()
  acting = config.__class__(**{**config.to_dict(),
                               "min_replay_size": config.replay_capacity})
  loop = compiled.make_compiled_loop(acting, env, lanes, 50)
  state = jax.jit(loop.init)(jax.random.PRNGKey(0))
  run = jax.jit(loop.run_chunk)
  for _ in range(chunks):
    state = run(state)
  batch = jax.jit(loop.sample_batch)(state, jax.random.PRNGKey(1))
  config = compiled.fit_memory_to_episodes(config, env.max_episode_steps)
  return config, loop.networks, state.learner, jax.block_until_ready(batch)


def reference_networks(config, networks) -> networks_lib.NGUNetworks:
  """The same networks with the plain LSTM unroll (hk.dynamic_unroll)."""
  q = networks.uvfa
  return networks._replace(uvfa=uvfa.make_uvfa_network(
      q.observation_shape, q.num_actions, q.num_mixtures, config.torso,
      config.lstm_size, config.head_hidden,
      grid_output_size=config.grid_output_size,
      grid_filters=config.grid_filters,
      mlp_hidden_sizes=config.mlp_hidden_sizes, encoding=q.encoding,
      lstm_unroll="reference"))


def _subtree(params, prefix):
  return {k: v for k, v in params.items() if k.startswith(prefix)}


def _loss_kwargs(config) -> Dict:
  return dict(
      betas=config.mixture_betas(), gammas=config.mixture_gammas(),
      burn_in=config.burn_in, retrace_lambda=config.retrace_lambda,
      target_epsilon=config.target_epsilon,
      retrace_eps=config.value_transform_eps,
      value_transform=config.value_transform)


def model_flops(config, networks, state, batch) -> float:
  """Model FLOPs of one update (module docstring, (b))."""
  q_net = networks.uvfa
  t1, b = batch.mask.shape
  frames = jax.tree_util.tree_map(
      lambda x: jnp.reshape(x, (t1 * b,) + jnp.shape(x)[2:]),
      uvfa.UVFAInputs(
          observation=batch.observation, prev_action=batch.prev_action,
          prev_extrinsic_reward=batch.prev_extrinsic_reward,
          prev_intrinsic_reward=batch.prev_intrinsic_reward,
          mixture_index=jnp.broadcast_to(batch.mixture_index[None], (t1, b))))
  lstm_state = q_net.initial_state(t1 * b)
  q_forward = xla_flops(lambda p, x, s: q_net.apply(p, x, s)[0],
                        state.params.q, frames, lstm_state)
  aux = xla_flops(
      lambda s, bt, k: learning._aux_updates(  # pylint: disable=protected-access
          config, networks, learning.make_optimisers(config), s, bt, k),
      state, batch, jax.random.PRNGKey(0))
  return 4. * q_forward + aux


def profile_parts(config, networks, state, batch, repeats: int
                  ) -> Dict[str, float]:
  """ms of each part of the update, timed alone (module docstring, (d)):
  the median of `repeats` calls after one warm-up call."""
  q_net = networks.uvfa
  params = state.params.q
  t1, b = batch.mask.shape
  obs = jnp.reshape(batch.observation, (t1 * b,) + batch.observation.shape[2:])
  torso_kw = dict(encoding=q_net.encoding,
                  grid_output_size=config.grid_output_size,
                  grid_filters=config.grid_filters,
                  mlp_hidden_sizes=config.mlp_hidden_sizes)

  def torso_fn(x, dense: bool):
    kw = dict(torso_kw)
    if not dense and q_net.torso == "grid":
      kw["grid_output_size"] = None
    return torsos.make_torso(q_net.observation_shape, q_net.torso, **kw)(x)

  parts = {}
  torso_name = {"grid": "grid_torso", "mlp": "mlp_torso",
                "atari": "atari_torso"}[q_net.torso]
  torso_params = _subtree(params, torso_name)
  conv_params = {k: v for k, v in torso_params.items() if "conv" in k}
  for label, dense, p in (("torso conv layers", False, conv_params),
                          ("torso (conv layers + dense layer)", True,
                           torso_params)):
    if not p:
      continue
    net = hk.without_apply_rng(hk.transform(
        functools.partial(torso_fn, dense=dense)))
    fwd = jax.jit(net.apply)
    bwd = jax.jit(jax.grad(lambda p, x, net=net: jnp.sum(
        jnp.sin(net.apply(p, x)))))
    parts[f"{label}: fwd + bwd"] = timing.median(bwd, p, obs,
                                                 repeats=repeats)
    parts[f"{label}: fwd"] = timing.median(fwd, p, obs, repeats=repeats)
  # The LSTM scan on its real input width.
  lstm_p = params["lstm/linear"]
  width = lstm_p["w"].shape[0] - config.lstm_size
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(t1, b, width)), jnp.float32)
  first = jnp.asarray(batch.step_is_first)
  init = q_net.initial_state(b)
  scan = jax.jit(lambda p, x: lstm_lib.unroll(p["w"], p["b"], x, first,
                                              init)[0])
  scan_grad = jax.jit(jax.grad(lambda p, x: jnp.sum(jnp.sin(scan(p, x))),
                               argnums=(0, 1)))
  parts["LSTM scan: fwd + bwd"] = timing.median(scan_grad, lstm_p, x,
                                                repeats=repeats)
  parts["LSTM scan: fwd"] = timing.median(scan, lstm_p, x, repeats=repeats)
  head = hk.without_apply_rng(hk.transform(
      lambda h: uvfa.DuelingHead(q_net.num_actions, config.head_hidden)(h)[0]))
  head_p = _subtree(params, "dueling_head")
  h = jnp.asarray(rng.normal(size=(t1 * b, config.lstm_size)), jnp.float32)
  parts["dueling head: fwd + bwd"] = timing.median(
      jax.jit(jax.grad(lambda p, h: jnp.sum(jnp.sin(head.apply(p, h))))),
      head_p, h, repeats=repeats)
  parts["dueling head: fwd"] = timing.median(jax.jit(head.apply), head_p, h,
                                             repeats=repeats)
  kw = _loss_kwargs(config)
  q = jnp.asarray(rng.normal(size=(t1 - config.burn_in, b,
                                   q_net.num_actions)), jnp.float32)

  def retrace_loss(q, target_q):
    td, valid, _ = value_loss._retrace_td(  # pylint: disable=protected-access
        q, target_q, batch, **kw)
    return jnp.sum(0.5 * jnp.square(td) * valid)

  parts["Retrace + loss: fwd + bwd"] = timing.median(
      jax.jit(jax.grad(retrace_loss)), q, q, repeats=repeats)
  # Whole networks.
  loss_kw = dict(kw, priority_eta=config.priority_eta)
  q_grad = jax.jit(lambda p, tp: value_loss.loss_and_grad(q_net, p, tp,
                                                          batch, **loss_kw))
  parts["Q online + target (loss_and_grad)"] = timing.median(
      q_grad, params, state.target_q_params, repeats=repeats)
  optimisers = learning.make_optimisers(config)
  aux = jax.jit(lambda s, k: learning._aux_updates(  # pylint: disable=protected-access
      config, networks, optimisers, s, batch, k))
  parts["f, h and RND (losses, gradients, Adams)"] = timing.median(
      aux, state, jax.random.PRNGKey(0), repeats=repeats)

  def adam(s, g):
    u, o = optimisers.q.update(g, s.q_opt_state, s.params.q)
    return optax.apply_updates(s.params.q, u), o

  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  parts["Q-network Adam (clip + update)"] = timing.median(
      jax.jit(adam), state, grads, repeats=repeats)
  return {label: 1e3 * seconds for label, seconds in parts.items()}


def bench_setting(name: str, args, peak: float) -> List[str]:
  config, networks, state, batch = real_batch(name)
  t1, b = batch.mask.shape
  step = jax.jit(functools.partial(learning.sgd_step, config, networks))
  ref_step = jax.jit(functools.partial(
      learning.sgd_step, config, reference_networks(config, networks)))
  fast_ms = 1e3 * timing.median(step, state, batch, repeats=args.repeats)
  ref_ms = 1e3 * timing.median(ref_step, state, batch, repeats=args.repeats)
  # As the compiled loop runs it: steps inside a loop body, where XLA:CPU
  # compiles (and runs) some ops differently (`ngu_jax.networks.conv`).
  in_scan = jax.jit(lambda s, bt: jax.lax.scan(
      lambda s, _: (learning.sgd_step(config, networks, s, bt)[0], None), s,
      None, length=SCAN_STEPS)[0])
  scan_ms = 1e3 * timing.median(in_scan, state, batch,
                                repeats=max(2, args.repeats // 4)) / SCAN_STEPS
  ngu_jax.set_runtime_checks(False)
  try:
    unchecked = jax.jit(functools.partial(learning.sgd_step, config,
                                          networks))
    unchecked_ms = 1e3 * timing.median(unchecked, state, batch,
                                       repeats=args.repeats)
  finally:
    ngu_jax.set_runtime_checks(True)
  flops = model_flops(config, networks, state, batch)
  xla = xla_flops(functools.partial(learning.sgd_step, config, networks),
                  state, batch)
  mask = float(np.mean(batch.mask))
  lines = [f"{name}: B={b} sequences x {t1} stored steps ({100 * mask:.0f}% "
           f"valid), N={config.num_mixtures}, LSTM {config.lstm_size}, "
           f"torso {networks.uvfa.torso}; model FLOPs per update "
           f"{flops / 1e9:.3f} GFLOP (XLA's count of sgd_step: "
           f"{xla / 1e9:.3f})",
           f"  {'sgd_step':<44} {'ms':>8} {'GFLOP/s':>8} {'% peak':>7}"]
  for label, ms in (("fast path (library default)", fast_ms),
                    (f"fast path, {SCAN_STEPS} steps in a lax.scan, per step",
                     scan_ms),
                    ("plain LSTM unroll (hk.dynamic_unroll)", ref_ms),
                    ("fast path, run-time value checks off", unchecked_ms)):
    rate = flops / ms / 1e6
    lines.append(f"  {label:<44} {ms:>8.2f} {rate:>8.1f} "
                 f"{100 * rate / (peak / 1e9):>6.1f}%")
  if args.profile:
    parts = profile_parts(config, networks, state, batch, args.repeats)
    lines.append(f"  profile (each part alone, ms; whole step {fast_ms:.2f})")
    for label, ms in parts.items():
      lines.append(f"    {label:<52} {ms:>7.2f} "
                   f"({100 * ms / fast_ms:>3.0f}%)")
  return lines


def main(argv=None) -> List[str]:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--settings", default="disco_maze,minigrid")
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument("--no-profile", dest="profile", action="store_false")
  parser.add_argument("--quick", action="store_true",
                      help="few repeats, to check that the script runs")
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats = 2
  peak = timing.matmul_peak()
  header = (f"{timing.peak_line(peak)}; load average "
            f"{os.getloadavg()[0]:.2f}; target >= 25% of peak")
  return timing.report(header, (bench_setting(name, args, peak)
                                for name in args.settings.split(",")))


if __name__ == "__main__":
  main()
