r"""MiniGrid's hard-exploration tasks at the peers' budgets (issue 38).

One command runs (or resumes) the study and writes its tables and curves:

  python -m experiments.minigrid [--tasks doorkey8 fourrooms doorkey16
      keycorridor multiroom] [--variants ngu beta0 rnd recode ppo ppo_ngu
      ppo_rnd] [--seeds 0 1 2 3 4] [--output-root runs/minigrid_study]
      [--jobs 2] [--threads 1] [--aggregate-only] [--fresh]

Tasks (`TASKS`; the budget is the peers', the stages where a run may stop
early because it is solved: every seed's last two greedy evaluations at or
above the task's bar):

* `doorkey8`: MiniGrid-DoorKey-8x8, 1M env steps, 5 seeds (PPO-based
  exploration bonuses -- RND, NovelD, DEIR -- solve it within a few hundred
  thousand frames);
* `fourrooms`: MiniGrid-FourRooms, up to 10M (DI-engine's NGU passes a
  return of 0.6 after about 10M), 3 seeds, stages 3M (the issue's target:
  a third of DI-engine's budget), 10M;
* `doorkey16`: MiniGrid-DoorKey-16x16, up to 30M (DI-engine: about 30M),
  3 seeds, stages 10M, 30M;
* `keycorridor` (KeyCorridorS3R3) and `multiroom` (MultiRoom-N6): up to
  10M, 3 seeds, stages 3M, 10M. xland-minigrid has neither; they run on our
  JAX ports of MiniGrid's generators (`ngu_jax.envs.xminigrid_levels`,
  tested against Farama MiniGrid) with xland-minigrid's dynamics.

Every task runs in the compiled loop on xland-minigrid
(`ngu_jax.envs.xminigrid_env`), with every seed of a variant vmapped in
one process (`experiments.compare.run_grid`).

Variants (`VARIANTS`; one config each, no tuning for this study):

* `ngu`, `beta0`, `rnd`, `recode`: the library's agent (`minigrid` preset,
  the laptop scale of `experiments.minigrid_exploration`: 16 lanes, batch
  32, LSTM and heads 128, N = 8, beta = 0.3): NGU's reward, beta = 0 (R2D2
  with transformed Retrace and App. A's epsilons), the RND-only reward,
  RECODE's memory; `ngu_cmr` (not run by default): NGU with the cross
  mixture ratio 0.5 (NGU App. C: half of each batch trains another
  mixture, so j = 0 also learns from what the exploratory lanes find);
  `ngu_split` (not run by default): NGU with Agent57's split values
  (separate extrinsic and intrinsic Q-networks, Agent57 Sec. 4.1), so the
  exploit head's value is not learnt beside values of the intrinsic
  reward's scale; `ngu_split_cmr` (not run by default): split values and
  the cross mixture ratio 0.5 together; `ngu_n2` (not run by default): NGU
  with N = 2 mixtures, so that j = 0 acts in 8 of the 16 lanes and trains
  on half of each batch (N = 8: 2 lanes and an eighth; the paper has 8
  actors per mixture); `r2d2` (not run by default): R2D2 proper, one
  mixture (N = 1, beta = 0, gamma 0.997) trained on every lane, where
  `beta0` keeps N = 8 heads that differ only in gamma, each trained on its
  own 2 lanes; `ngu_spi16` (not run by default): NGU with 16 sampled
  sequences per inserted one instead of 4 (four times the learner updates);
  `ngu_zs` (not run by default): NGU with r^i standardised over the lanes
  (`intrinsic.normalization` "standardize": running mean 0, std 1, as the
  PPO example's bonus), so the exploratory mixtures are paid for novelty,
  not for staying in an episode; `ngu_zs_cmr` (not run by default): that and
  the cross mixture ratio 0.5; `ngu_zs_cmr_tu50` (not run by default):
  that and the target network refreshed every 50 updates instead of 250;
  `ngu_zs_cmr_g97`, `ngu_zs_cmr_spi16`, `ngu_zs_cmr_unc` (not run by
  default): `ngu_zs_cmr` with every head's gamma 0.97, with 16 samples per
  insert, with uncorrected traces (`retrace_traces`, Peng's Q(lambda));
  `ngu_zs_uniform` (not run by default): `ngu_zs` with uniform replay
  (priority exponent 0), so that j = 0 is replayed as often as it acts;
  `ngu_zs_sep` (not run by default): `ngu_zs` with j = 0 on a network of
  its own (`separate_exploit_network`: no weight shared between the exploit
  value and the intrinsic ones; not in the paper, a diagnostic);
  `ngu_zs_sep_cmr` (not run by default): that and the cross mixture ratio
  0.5, so that theta^0 also trains on the explorers' sequences;
* `ppo`, `ppo_ngu`, `ppo_rnd`: the recurrent PPO of `examples.ppo_ngu`
  (16 envs x 128 steps per update, CleanRL's other defaults) without a
  bonus, with NGU's reward, with RND's, built from the library's
  components; the bonus weighs beta = 0.01 (DEIR's coefficient on MiniGrid
  for a bonus divided by its running std, as ours); `ppo_ngu_b0.1`,
  `ppo_rnd_b0.1` (not run by default): the example's default beta = 0.1;
  `ppo_ngu_b0.003`, `ppo_ngu_b0.03` (not run by default): beta on either
  side of 0.01;
  `ppo_ngu_ne`, `ppo_rnd_ne` (not run by default): beta 0.01 with the RND
  paper's non-episodic intrinsic return (two value heads).
  `ppo_lr1e-3`, `ppo_ngu_lr1e-3`, `ppo_rnd_lr1e-3` (not run by default):
  PPO, PPO + NGU and PPO + RND (beta 0.01) at learning rate 1e-3
  (torch-ac's and xland-minigrid's PPO default) instead of 2.5e-4;
  `ppo_ngu_lr2e-3`: PPO + NGU at 2e-3; `ppo_ngu_lr1e-3_ent0.003`,
  `ppo_ngu_lr1e-3_ent0.03`: at 1e-3 with the entropy coefficient 0.003 or
  0.03 instead of 0.01 (`ppo_lr1e-3_ent0.03`, `ppo_rnd_lr1e-3_ent0.03`:
  0.03 without a bonus and with RND's); `ppo_lr1e-3_nonorm`: PPO at 1e-3
  with its advantages not normalised per minibatch (torch-ac's habit);
  `ppo_rnd_lr1e-3_std`, `ppo_ngu_lr1e-3_std`: the bonus standardised
  (running mean subtracted, `lifelong.standardize`) instead of divided by
  its running std;
  `ppo_ngu_lr1e-3_std_ent0.03`: both changes together;
  `ppo_rnd_lr1e-3_std_ent0.03`: the same with RND's bonus alone.

Metrics: greedy success (`eval_success`: the fraction of 16 evaluation
episodes that reach the goal; the NGU family plays j = 0 with epsilon 0.01,
Table 6, PPO its argmax action) and return, the training episodes'
success, every 1/20 of the budget; a uniform random policy's success as
the chance row (`experiments.chance`, xland-minigrid tasks); curves
against env steps and against wall time (`elapsed_s`, one CPU thread per
run). Every run's metrics.csv and config stay under
`OUTPUT_ROOT/TASK/VARIANT/seeds/`; `--aggregate-only` rewrites
`OUTPUT_ROOT/results.md` and each task's `TASK/results.md` and plots. The
page keeps the sections of the tasks not named by `--tasks`, so each task's
section is regenerated by its own command (its own `--variants`).
"""

import argparse
import dataclasses
import math
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from experiments import chance as chance_lib
from experiments import compare
from experiments import stats
from ngu_jax import plotting


@dataclasses.dataclass(frozen=True)
class Task:
  """One MiniGrid task of the study."""
  name: str
  env: str  # experiments.train's --env
  loop: str  # "compiled" (xland-minigrid) or "python" (envpool; none now)
  stages: Sequence[int]  # env-step budgets; the last one is the budget
  seeds: int  # default number of seeds
  bar_column: str  # a run is solved when every seed's last two ...
  bar: float  # ... evaluations of this column reach this value
  peers: str  # the published budgets this task is compared with


TASKS = {
    "doorkey8": Task("doorkey8", "minigrid/MiniGrid-DoorKey-8x8-v0",
                     "compiled", (1_000_000,), 5, "eval_success", 0.9,
                     "PPO + RND / NovelD / DEIR: solved within a few "
                     "hundred thousand frames"),
    "fourrooms": Task("fourrooms", "minigrid/MiniGrid-FourRooms-v0",
                      "compiled", (3_000_000, 10_000_000), 3, "eval_return",
                      0.6, "DI-engine's NGU: return 0.6 after about 10M"),
    "doorkey16": Task("doorkey16", "minigrid/MiniGrid-DoorKey-16x16-v0",
                      "compiled", (10_000_000, 30_000_000), 3,
                      "eval_success", 0.9,
                      "DI-engine's NGU: solved after about 30M"),
    "keycorridor": Task("keycorridor", "minigrid/MiniGrid-KeyCorridorS3R3-v0",
                        "compiled", (3_000_000, 10_000_000), 3, "eval_success",
                        0.9, "PPO + NovelD / DEIR: solved within a few "
                        "million frames"),
    "multiroom": Task("multiroom", "minigrid/MiniGrid-MultiRoom-N6-v0",
                      "compiled", (3_000_000, 10_000_000), 3, "eval_success",
                      0.9, "PPO + NovelD / DEIR: solved within a few "
                      "million frames"),
}

NGU_FAMILY = (
    compare.Variant("ngu", "NGU (N=8, beta=0.3)", ["--set", "beta=0.3"]),
    compare.Variant("beta0", "beta = 0 (R2D2)", ["--set", "beta=0.0"]),
    compare.Variant("rnd", "RND only (N=8, beta=0.3)",
                    ["--set", "beta=0.3", "--set", "intrinsic_reward='rnd'",
                     "--set", "learn_embedding=False"]),
    compare.Variant("recode", "RECODE (N=8, beta=0.3)",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic_reward='recode'"]),
    compare.Variant("ngu_cmr", "NGU, cross mixture ratio 0.5",
                    ["--set", "beta=0.3", "--set", "cross_mixture_ratio=0.5"]),
    compare.Variant("ngu_split", "NGU + split values (Agent57)",
                    ["--set", "beta=0.3", "--set", "split_values=True"]),
    # Both cures at once: separate extrinsic values (no overestimate from the
    # intrinsic scale) trained on the other mixtures' sequences too (more
    # rewarded data for j = 0).
    compare.Variant("ngu_split_cmr", "NGU + split values, cross mixture "
                    "ratio 0.5",
                    ["--set", "beta=0.3", "--set", "split_values=True",
                     "--set", "cross_mixture_ratio=0.5"]),
    # The exploit head's share of the data. With 16 lanes and N = 8 each
    # mixture acts in 2 lanes (epsilons 0.4 and 0.0007), so j = 0 trains on
    # an eighth of the env steps and of the learner's batches (the paper:
    # 256 actors, 8 per mixture; the cross mixture ratio relabels sequences
    # but still gives j = 0 an eighth of each batch). N = 2 gives j = 0 half
    # of both; N = 1 with beta = 0 and Table 6's gamma 0.997 is R2D2 proper
    # (one head trained on every lane), the baseline `beta0` is not.
    compare.Variant("ngu_n2", "NGU (N=2, beta=0.3)",
                    ["--set", "beta=0.3", "--set", "num_mixtures=2"]),
    compare.Variant("r2d2", "R2D2 (N=1, beta=0, gamma 0.997)",
                    ["--set", "num_mixtures=1", "--set", "beta=0.0",
                     "--set", "gamma_min=0.997"]),
    # The learner's update budget: 4 sampled sequences per inserted one
    # make 6,341 updates in 1M env steps; 16 make four times as many (the
    # `deep_sea` preset's ratio), at about 2-3 times the run time.
    compare.Variant("ngu_spi16", "NGU (N=8, beta=0.3), 16 samples per insert",
                    ["--set", "beta=0.3", "--set", "samples_per_insert=16.0"]),
    # The bonus's scale. NGU's r^i is >= 0 and grows as f learns (0.3 to
    # 1.2 per step in `ngu_n2`'s lanes), so with gamma_j near 1 the
    # exploratory heads value staying in an episode (Q near 8 transformed,
    # a return near 100) far above the goal (< 1). Standardised r^i (running
    # mean 0, std 1 over the lanes: the PPO example's normalisation, with
    # which PPO + NGU solves this task) pays for novelty only; `_cmr` also
    # lets j = 0 learn from the other mixtures' sequences (App. C).
    compare.Variant("ngu_zs", "NGU, r^i standardised",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'"]),
    compare.Variant("ngu_zs_cmr", "NGU, r^i standardised, cross mixture "
                    "ratio 0.5",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "cross_mixture_ratio=0.5"]),
    # How far the goal's value propagates. Retrace's traces are cut where
    # the behaviour's action is not j = 0's argmax, so along the other
    # mixtures' sequences the goal's value can move back as little as one
    # step per target-network refresh: with the preset's 250, 1M env steps
    # (6,341 updates) refresh it 25 times, fewer than the key-door-goal
    # chain's steps. 50 refreshes it 127 times.
    compare.Variant("ngu_zs_cmr_tu50", "NGU, r^i standardised, cross "
                    "mixture ratio 0.5, target update period 50",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "cross_mixture_ratio=0.5",
                     "--set", "target_update_period=50"]),
    # The action gap. With gamma_0 = 0.997 and a goal reachable from every
    # state within about 50 steps, Q*(s, .) is nearly flat: one step's
    # detour costs (1 - gamma) V* ~ 0.0015 of value, which the exploit
    # head's function approximation must resolve for its argmax to head for
    # the key, the door and the goal (`experiments.probes.exploit_values`
    # found j = 0's values as high off the goal's sequences as on them).
    # PPO, which solves the task, discounts by 0.99. This sets every head's
    # gamma to 0.97 (eq. 4's ladder collapses to one value): one step's
    # detour then costs about 0.015 of the goal's value near it.
    compare.Variant("ngu_zs_cmr_g97", "NGU, r^i standardised, cross mixture "
                    "ratio 0.5, gamma 0.97",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "cross_mixture_ratio=0.5",
                     "--set", "gamma_max=0.97", "--set", "gamma_min=0.97"]),
    # The goal's transition is rare in the batches (the rewarded sequences
    # are 1-2% of the sampling mass in `ngu_zs_cmr`), and the probe finds
    # Q_0(x, forward) facing the goal under its reward while the no-op
    # actions, trained on every sequence, sit at the return: 4x the updates
    # per env step replay the goal 4x as often.
    compare.Variant("ngu_zs_cmr_spi16", "NGU, r^i standardised, cross "
                    "mixture ratio 0.5, 16 samples per insert",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "cross_mixture_ratio=0.5",
                     "--set", "samples_per_insert=16.0"]),
    # How far the goal's return reaches per update. Retrace's trace
    # lambda min(1, pi / mu) is 0 wherever an exploratory lane's action is
    # not j = 0's argmax, so on the other mixtures' sequences j = 0 learns
    # from one-step targets that bootstrap on its own (inflating) max.
    # Uncorrected traces (Peng's Q(lambda), as R2D2's uncorrected n-step
    # returns) carry the actual return back along the whole sequence.
    # Measured: they diverge here (docs/results.md), as off-policy
    # lambda-returns do at gamma near 1 (Harutyunyan et al., 2016).
    compare.Variant("ngu_zs_cmr_unc", "NGU, r^i standardised, cross mixture "
                    "ratio 0.5, uncorrected traces",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "cross_mixture_ratio=0.5",
                     "--set", "retrace_traces='uncorrected'"]),
    # j = 0's share of the replay. Priorities are the sequences' TD errors
    # (App. A), and with beta > 0 the exploratory mixtures' (on r^i's scale)
    # outweigh j = 0's (r^e alone): in `ngu_zs`'s final replays j = 0 holds
    # 12% of the sequences but 5-7% of the sampling mass sum p^alpha
    # (`experiments.probes.exploit_values`' "sampling_share_by_mixture"),
    # against 12-14% in `beta0`. Uniform sampling (priority exponent 0;
    # the importance weights are then 1) gives every mixture its share.
    compare.Variant("ngu_zs_uniform", "NGU, r^i standardised, uniform "
                    "replay",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "priority_exponent=0.0"]),
    # Not in the paper: j = 0 on theta^0, j >= 1 on theta^x
    # (`ngu_jax.networks.separate_exploit`), so the exploit value shares no
    # weight, clipping or Adam state with the intrinsic values.
    compare.Variant("ngu_zs_sep", "NGU, r^i standardised, j = 0 on its own "
                    "network",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "separate_exploit_network=True"]),
    # And the cross mixture ratio 0.5, so that theta^0 also learns from the
    # explorers' sequences (relabelled j = 0), as the shared network's j = 0
    # does through its weights.
    compare.Variant("ngu_zs_sep_cmr", "NGU, r^i standardised, j = 0 on its "
                    "own network, cross mixture ratio 0.5",
                    ["--set", "beta=0.3",
                     "--set", "intrinsic.normalization='standardize'",
                     "--set", "separate_exploit_network=True",
                     "--set", "cross_mixture_ratio=0.5"]),
)


def _ppo(name: str, label: str, intrinsic: str, **sets) -> compare.Variant:
  """A PPO-example variant: `--intrinsic` and a `--set FIELD=VALUE` per
  keyword (a `PPOConfig` field), in the order given."""
  args = ["--intrinsic", intrinsic]
  for field, value in sets.items():
    args += ["--set", f"{field}={value}"]
  return compare.Variant(name, label, args)


# The bonus's weight: DEIR's intrinsic-reward coefficient on MiniGrid,
# 0.01 on a bonus divided by its running std, as ours (Wan et al. 2023;
# its authors' code, `int_rew_coef`), not tuned here. The `_b0.1` variants
# keep the example's default 0.1 (chosen on DeepSea).
PPO_FAMILY = (
    _ppo("ppo", "PPO",
         "none"),
    _ppo("ppo_ngu", "PPO + NGU's reward (beta 0.01)",
         "ngu", beta=0.01),
    _ppo("ppo_rnd", "PPO + RND (beta 0.01)",
         "rnd", beta=0.01),
    _ppo("ppo_ngu_b0.1", "PPO + NGU's reward (beta 0.1)",
         "ngu"),
    _ppo("ppo_rnd_b0.1", "PPO + RND (beta 0.1)",
         "rnd"),
    # Beta on either side of 0.01 (the tuning issue 38 asks for; PPO + NGU
    # gets four betas, the NGU family one: say so beside any comparison).
    _ppo("ppo_ngu_b0.003", "PPO + NGU's reward (beta 0.003)",
         "ngu", beta=0.003),
    _ppo("ppo_ngu_b0.03", "PPO + NGU's reward (beta 0.03)",
         "ngu", beta=0.03),
    # The RND paper's non-episodic intrinsic return (Burda et al. 2019,
    # Sec. 2.3: two value heads, V^I not cut at episode ends), which keeps
    # an always-positive bonus from paying the agent to avoid the goal.
    _ppo("ppo_ngu_ne",
         "PPO + NGU's reward (beta 0.01), non-episodic intrinsic return",
         "ngu", beta=0.01, intrinsic_return="non_episodic"),
    _ppo("ppo_rnd_ne", "PPO + RND (beta 0.01), non-episodic intrinsic return",
         "rnd", beta=0.01, intrinsic_return="non_episodic"),
    # PPO's own step size: 1e-3 is torch-ac's (rl-starter-files) MiniGrid
    # default and xland-minigrid's PPO baseline's, against CleanRL's 2.5e-4.
    _ppo("ppo_lr1e-3", "PPO, learning rate 1e-3",
         "none", learning_rate=0.001),
    _ppo("ppo_ngu_lr1e-3", "PPO + NGU's reward (beta 0.01), learning rate 1e-3",
         "ngu", beta=0.01, learning_rate=0.001),
    _ppo("ppo_rnd_lr1e-3", "PPO + RND (beta 0.01), learning rate 1e-3",
         "rnd", beta=0.01, learning_rate=0.001),
    _ppo("ppo_ngu_lr1e-3_ent0.003",
         "PPO + NGU's reward (beta 0.01), learning rate 1e-3, entropy 0.003",
         "ngu", beta=0.01, learning_rate=0.001, ent_coef=0.003),
    _ppo("ppo_ngu_lr2e-3", "PPO + NGU's reward (beta 0.01), learning rate 2e-3",
         "ngu", beta=0.01, learning_rate=0.002),
    # The other side of 0.01 from `_ent0.003` (worse): more entropy against
    # the entropy collapse measured below.
    _ppo("ppo_ngu_lr1e-3_ent0.03",
         "PPO + NGU's reward (beta 0.01), learning rate 1e-3, entropy 0.03",
         "ngu", beta=0.01, learning_rate=0.001, ent_coef=0.03),
    # The same entropy for the agents without NGU's bonus.
    _ppo("ppo_lr1e-3_ent0.03", "PPO, learning rate 1e-3, entropy 0.03",
         "none", learning_rate=0.001, ent_coef=0.03),
    _ppo("ppo_rnd_lr1e-3_ent0.03",
         "PPO + RND (beta 0.01), learning rate 1e-3, entropy 0.03",
         "rnd", beta=0.01, learning_rate=0.001, ent_coef=0.03),
    # Two measured failure modes at 1e-3. PPO's entropy falls (1.9 -> 1.0-1.5)
    # and its training success drops below the random policy's while it
    # sees almost no reward: per-minibatch advantage normalisation scales
    # noise to unit size (torch-ac, the MiniGrid reference, does not
    # normalise). And the RND bonus divided by its std has a running mean of
    # 2.4-3.4 per step, worth about beta * 3 / (1 - gamma) = 3 of return
    # for staying in the episode, more than DoorKey's goal (< 1) pays: the
    # standardised bonus (mean 0) removes that incentive.
    _ppo("ppo_lr1e-3_nonorm",
         "PPO, learning rate 1e-3, advantages not normalised",
         "none", learning_rate=0.001, normalize_advantages=False),
    _ppo("ppo_rnd_lr1e-3_std",
         "PPO + RND (beta 0.01), learning rate 1e-3, standardised bonus",
         "rnd", beta=0.01, learning_rate=0.001,
         intrinsic_normalization="standardize"),
    _ppo("ppo_ngu_lr1e-3_std",
         "PPO + NGU's reward (beta 0.01), learning rate 1e-3, standardised "
         "bonus",
         "ngu", beta=0.01, learning_rate=0.001,
         intrinsic_normalization="standardize"),
    _ppo("ppo_ngu_lr1e-3_std_ent0.03",
         "PPO + NGU's reward (beta 0.01), learning rate 1e-3, standardised "
         "bonus, entropy 0.03",
         "ngu", beta=0.01, learning_rate=0.001,
         intrinsic_normalization="standardize", ent_coef=0.03),
    # Its ablation: the same settings with RND's bonus alone (DoorKey-16x16).
    _ppo("ppo_rnd_lr1e-3_std_ent0.03",
         "PPO + RND (beta 0.01), learning rate 1e-3, standardised bonus, "
         "entropy 0.03",
         "rnd", beta=0.01, learning_rate=0.001,
         intrinsic_normalization="standardize", ent_coef=0.03),
)
DEFAULT_VARIANTS = ("ngu", "beta0", "rnd", "recode", "ppo", "ppo_ngu",
                    "ppo_rnd")
VARIANTS = NGU_FAMILY + PPO_FAMILY
PPO_MODULE = "examples.ppo_ngu"
LAPTOP = ["--preset", "minigrid", "--num-lanes", "16",
          "--set", "batch_size=32", "--set", "lstm_size=128",
          "--set", "head_hidden=128"]
PPO_SETTINGS = ["--set", "num_steps=128"]
METRICS = {"eval_success": "greedy success rate",
           "eval_return": "greedy return",
           "episode_success_rate": "success rate (training episodes)",
           "mean_intrinsic_reward": "intrinsic reward (as trained on)"}
EVALUATIONS = 20  # per budget
LOGS = 40


def is_ppo(variant: compare.Variant) -> bool:
  return variant in PPO_FAMILY


def runs_on(task: Task, variant: compare.Variant) -> bool:
  """The PPO example takes pure-JAX environments only."""
  return task.loop == "compiled" or not is_ppo(variant)


def _intervals(task: Task) -> List[str]:
  budget = task.stages[-1]
  return ["--log-every", str(budget // LOGS),
          "--eval-every", str(budget // EVALUATIONS),
          "--checkpoint-every", str(budget // EVALUATIONS)]


def jobs_for(root: str, task: Task, variant: compare.Variant,
             seeds: Sequence[int], env_steps: int) -> List[compare.Job]:
  """The processes that train `variant`'s seeds on `task` up to
  `env_steps`: one with the seeds vmapped (the compiled loop, PPO), or one
  per seed (the Python loop)."""
  task_root = os.path.join(root, task.name)
  out = compare.vmapped_run_dir(task_root, variant.name)
  seed_flags = ["--seeds", *map(str, seeds)]
  common = ["--env", task.env, "--total-env-steps", str(env_steps),
            *_intervals(task)]
  name = f"{task.name} {variant.name}"
  if is_ppo(variant):
    return [compare.Job(name, out, [*common, *PPO_SETTINGS, *variant.args,
                                    *seed_flags], module=PPO_MODULE)]
  flags = [*LAPTOP, "--loop", task.loop, *common, *variant.args]
  if task.loop == "compiled":
    return [compare.Job(name, out, [*flags, *seed_flags])]
  return [compare.Job(f"{name} seed {s}",
                      compare.run_dir(task_root, variant.name, s),
                      [*flags, "--seed", str(s)]) for s in seeds]


def _rows(root: str, task: Task, variant: compare.Variant,
          seeds: Sequence[int]) -> Dict[int, Dict[str, np.ndarray]]:
  out = {}
  for seed in seeds:
    directory, _ = compare.locate_run(os.path.join(root, task.name),
                                      variant.name, seed)
    path = os.path.join(directory, "metrics.csv")
    if plotting.find_metrics(path) is not None:  # Or metrics.csv.gz.
      out[seed] = compare.read_metrics(path)
  return out


def reached(root: str, task: Task, variant: compare.Variant,
            seeds: Sequence[int]) -> int:
  """Env steps every seed's metrics.csv has reached (0: none)."""
  runs = _rows(root, task, variant, seeds)
  if len(runs) < len(seeds):
    return 0
  return int(min(cols["env_steps"][-1] for cols in runs.values()))


def solved(root: str, task: Task, variant: compare.Variant,
           seeds: Sequence[int]) -> bool:
  """Every seed's last two evaluations reach the task's bar."""
  runs = _rows(root, task, variant, seeds)
  if len(runs) < len(seeds):
    return False
  for cols in runs.values():
    values = cols.get(task.bar_column, np.array([]))
    values = values[np.isfinite(values)]
    if values.size < 2 or not np.all(values[-2:] >= task.bar):
      return False
  return True


def run_study(root: str, tasks: Sequence[Task],
              variants: Sequence[compare.Variant],
              seeds: Optional[Sequence[int]], jobs: int, threads: int,
              fresh: bool) -> None:
  """Runs every (task, variant) stage by stage, skipping what is done or
  solved; an interrupted study resumes from the runs' checkpoints."""
  for stage in range(max(len(t.stages) for t in tasks)):
    queue = []
    for task in tasks:
      if stage >= len(task.stages):
        continue
      task_seeds = seeds or list(range(task.seeds))
      for variant in variants:
        if not runs_on(task, variant):
          continue
        budget = task.stages[stage]
        if not fresh and (reached(root, task, variant, task_seeds) >= budget
                          or (stage and solved(root, task, variant,
                                               task_seeds))):
          continue
        for entry in jobs_for(root, task, variant, task_seeds, budget):
          done = os.path.join(entry.out, compare.DONE_FILE)
          if os.path.exists(done):  # A previous stage's: this extends it.
            os.remove(done)
          queue.append(entry)
    if queue:
      compare.run_jobs(queue, jobs=jobs, threads=threads,
                       fresh=fresh and stage == 0)


def _chance(task: Task) -> Optional[Dict[str, float]]:
  if task.loop != "compiled":
    return None
  return chance_lib.for_flags(["--env", task.env])


def first_solved(cols: Dict[str, np.ndarray], task: Task) -> float:
  """Env steps at the first of two consecutive evaluations at the bar."""
  values = cols.get(task.bar_column)
  if values is None:
    return math.nan
  ok = np.isfinite(values)
  steps, values = cols["env_steps"][ok], values[ok]
  hit = values >= task.bar
  for i in range(len(hit) - 1):
    if hit[i] and hit[i + 1]:
      return float(steps[i])
  return math.nan


def _plot_wallclock(root: str, task: Task,
                    variants: Sequence[compare.Variant],
                    seeds: Sequence[int], reps: int = 1000) -> Optional[str]:
  """The task's bar column (greedy success; FourRooms: greedy return) and
  the training episodes' success against wall-clock minutes: IQM over
  seeds with a pointwise 95% CI band, on each variant's own clock."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  columns = (task.bar_column, "episode_success_rate")
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
  drawn = False
  for variant in variants:
    runs = list(_rows(root, task, variant, seeds).values())
    for ax, column in zip(axes, columns):
      curves = []
      for cols in runs:
        ok = np.isfinite(cols.get(column, np.array([])))
        if ok.sum() >= 2:
          curves.append((cols["elapsed_s"][ok] / 60, cols[column][ok]))
      if not curves:
        continue
      grid = np.linspace(0, min(c[0][-1] for c in curves), 50)
      values = np.stack([np.interp(grid, t, v) for t, v in curves])
      iqm, low, high = stats.iqm_curve(values, reps=reps)
      line, = ax.plot(grid, iqm,
                      linestyle=compare.line_style(len(ax.get_lines())),
                      label=f"{variant.label} ({len(curves)} seeds)")
      ax.fill_between(grid, low, high, alpha=0.2, color=line.get_color())
      drawn = True
  if not drawn:
    plt.close(fig)
    return None
  for ax, column in zip(axes, columns):
    ax.set_xlabel("wall-clock minutes per run (one CPU thread, its seeds "
                  "vmapped)", fontsize=8)
    ax.set_ylabel(f"{METRICS.get(column, column)} (IQM, 95% CI)")
    ax.grid(alpha=0.3)
  compare.place_legend(fig, axes[0], fontsize=7)
  path = os.path.join(root, task.name, f"{task.bar_column}_wallclock.png")
  fig.savefig(path, dpi=100, bbox_inches="tight")
  plt.close(fig)
  return path


def task_summary(root: str, task: Task, variants: Sequence[compare.Variant],
                 seeds: Sequence[int], reps: int = 2000) -> List[str]:
  """The headline lines of one task: per variant the env steps reached,
  the final greedy success and return (IQM [95% CI] over seeds, the mean
  of the last 20% of the evaluations), the env steps and minutes to the
  first solve per seed, and the recommendation."""
  chance = _chance(task)
  lines = [f"## {task.env.split('/')[-1]} ({task.name})", "",
           f"Budget {task.stages[-1]:,} env steps (stages "
           f"{', '.join(f'{s:,}' for s in task.stages)}); peers: {task.peers}. "
           f"Solved: every seed's last two greedy evaluations reach "
           f"`{task.bar_column}` >= {task.bar}.", "",
           "| variant | seeds | env steps | greedy success | greedy return | "
           "training success | solved at (env steps, per seed) | "
           "minutes per run |", "|---" * 8 + "|"]
  best = best_training = None
  for variant in variants:
    if not runs_on(task, variant):
      lines.append(f"| {variant.label} | not run: the PPO example takes "
                   "pure-JAX environments | | | | | | |")
      continue
    runs = _rows(root, task, variant, seeds)
    if not runs:
      lines.append(f"| {variant.label} | no runs yet | | | | | | |")
      continue
    data = {(variant.name, s): c for s, c in runs.items()}
    cells = []
    for column in ("eval_success", "eval_return", "episode_success_rate"):
      finals = compare.final_values(data, variant.name, sorted(runs), column,
                                    0.2)
      iqm = stats.iqm_ci(finals, reps=reps)
      cells.append(compare.format_ci(*iqm))
      if column == task.bar_column:
        score = iqm[0]
      if column == "episode_success_rate" and math.isfinite(iqm[0]) and (
          best_training is None or iqm[0] > best_training[0]):
        best_training = (iqm[0], variant)
    at = [first_solved(c, task) for c in runs.values()]
    at_text = ", ".join("—" if math.isnan(a) else f"{a / 1e6:.2f}M"
                        for a in at)
    minutes = np.mean([c["elapsed_s"][-1] / 60 for c in runs.values()])
    steps = int(min(c["env_steps"][-1] for c in runs.values()))
    lines.append(f"| {variant.label} | {len(runs)} | {steps:,} | "
                 + " | ".join(cells) + f" | {at_text} | {minutes:.0f} |")
    key = (score, -np.nanmean(at) if not all(map(math.isnan, at)) else
           -math.inf)
    if math.isfinite(score) and (best is None or key > best[0]):
      best = (key, variant)
  if chance:
    lines.append(f"| {chance_lib.LABEL} | | | "
                 f"{chance.get('eval_success', math.nan):.3f} | "
                 f"{chance.get('eval_return', math.nan):.3f} | "
                 f"{chance.get('episode_success_rate', math.nan):.3f} | | |")
  lines.append("")
  floor = (chance or {}).get(task.bar_column, 0.)
  if best is not None and best[0][0] > floor:
    lines += [f"Start from: **{best[1].label}** (the highest final greedy "
              f"`{task.bar_column}` IQM, ties broken by the env steps to "
              "the first solve).", ""]
  elif best is not None:
    lines += [f"No variant's greedy policy beats chance ({floor:.3f}) at "
              "these budgets, so none is recommended yet"
              + ("" if best_training is None else
                 f"; the training episodes succeed most often with "
                 f"{best_training[1].label} ({best_training[0]:.3f})")
              + ".", ""]
  return lines


def page_sections(text: str) -> Dict[str, List[str]]:
  """The task sections of a results.md `aggregate` wrote: task name -> its
  lines, from its "## ENV (name)" heading to the next "## " heading."""
  sections, name = {}, None
  for line in text.splitlines():
    if line.startswith("## "):
      name = line.rstrip()[:-1].rpartition("(")[2] if line.rstrip(
      ).endswith(")") else None
      if name is not None:
        sections[name] = []
    if name is not None:
      sections[name].append(line)
  return sections


def aggregate(root: str, tasks: Sequence[Task],
              variants: Sequence[compare.Variant],
              seeds: Optional[Sequence[int]], reps: int = 2000) -> str:
  """Writes OUTPUT_ROOT/results.md (the headline per task) and each task's
  `experiments.compare` report and plots; returns the headline text.

  The sections of tasks not in `tasks` that OUTPUT_ROOT/results.md already
  has are kept as they are (in `TASKS` order), so that each task's section
  comes from its own command (its own variants and seeds)."""
  lines = ["# MiniGrid's hard-exploration tasks at the peers' budgets", "",
           "Greedy evaluation every 1/20 of the budget (16 episodes); final: "
           "the mean of the evaluations in the last 20% of the steps run; "
           "IQM [95% stratified bootstrap CI] over seeds (rliable). Minutes: "
           "wall clock per run, one CPU thread, its seeds vmapped in it.", ""]
  page = os.path.join(root, "results.md")
  kept = {}
  if os.path.exists(page):
    with open(page) as f:
      kept = page_sections(f.read())
  chosen_tasks = {t.name: t for t in tasks}
  for name in [*TASKS, *(n for n in chosen_tasks if n not in TASKS)]:
    if name not in chosen_tasks:
      section = kept.get(name, [])
      while section and not section[-1].strip():
        section = section[:-1]
      lines += section + ([""] if section else [])
      continue
    task = chosen_tasks[name]
    task_seeds = list(seeds or range(task.seeds))
    task_root = os.path.join(root, task.name)
    chosen = [v for v in variants if runs_on(task, v)]
    if any(_rows(root, task, v, task_seeds) for v in chosen):
      compare.aggregate(task_root, chosen, task_seeds, METRICS,
                        title=f"{task.env}, up to {task.stages[-1]:,} env "
                        "steps per run", chance=_chance(task), reps=reps,
                        curve_reps=min(reps, 1000))
      png = _plot_wallclock(root, task, chosen, task_seeds,
                            reps=min(reps, 1000))
      lines += task_summary(root, task, variants, task_seeds, reps=reps)
      lines += [f"Tables and curves: [{task.name}/results.md]"
                f"({task.name}/results.md)"
                + (f"; against wall time: [{os.path.basename(png)}]"
                   f"({task.name}/{os.path.basename(png)})" if png else ""),
                ""]
    else:
      lines += [f"## {task.env.split('/')[-1]} ({task.name})", "",
                "No runs yet.", ""]
  return compare.write_results(root, "\n".join(lines))


def main(argv: Optional[Sequence[str]] = None) -> str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output-root", default="runs/minigrid_study")
  parser.add_argument("--tasks", nargs="+", default=list(TASKS),
                      choices=list(TASKS))
  parser.add_argument("--variants", nargs="+",
                      default=list(DEFAULT_VARIANTS),
                      choices=[v.name for v in VARIANTS])
  parser.add_argument("--seeds", type=int, nargs="+", default=None,
                      help="default: each task's own number (TASKS)")
  parser.add_argument("--jobs", type=int, default=2, help="runs in parallel")
  parser.add_argument("--threads", type=int, default=1,
                      help="CPU threads per run (0: all)")
  parser.add_argument("--aggregate-only", action="store_true")
  parser.add_argument("--fresh", action="store_true",
                      help="rerun runs that are already done")
  parser.add_argument("--max-env-steps", type=int, default=None,
                      help="cap every task's budget (wiring checks)")
  args = parser.parse_args(argv)
  if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
    parser.error(f"--seeds must be distinct, got {args.seeds}")
  if args.jobs < 1 or args.threads < 0:
    parser.error("--jobs must be >= 1 and --threads >= 0")
  tasks = [TASKS[name] for name in args.tasks]
  if args.max_env_steps is not None:
    if args.max_env_steps < LOGS:
      parser.error(f"--max-env-steps must be >= {LOGS}")
    tasks = [dataclasses.replace(t, stages=tuple(
        sorted({min(s, args.max_env_steps) for s in t.stages})))
             for t in tasks]
  by_name = {v.name: v for v in VARIANTS}
  variants = [by_name[name] for name in dict.fromkeys(args.variants)]
  if not args.aggregate_only:
    run_study(args.output_root, tasks, variants, args.seeds, args.jobs,
              args.threads, args.fresh)
  text = aggregate(args.output_root, tasks, variants, args.seeds)
  print(text)
  return text


if __name__ == "__main__":
  main()
