"""Configuration of the NGU agent: one frozen dataclass and three presets.

Every hyperparameter of NGU App. F Table 6 (Badia et al., 2020) is a field
of `NGUConfig` with Table 6's value as its default, apart from these rows,
which need no field:

* "Number of seeds 3": an experiment setting (`--seed`), not an agent one.
* "Cross mixture ratio 0.0": no cross-mixture training, which is what the
  learner does (each sequence is trained on its own mixture j only).
* "Discount r^i 0.99" / "Discount r^e 0.997": the two ends of the discount
  schedule, `gamma_min` / `gamma_max` (App. A, eq. 4).
* "Embeddings memory mode: ring buffer": `ngu_jax.intrinsic.episodic` is a
  ring buffer.
* "Embeddings target update period: once/episode": `embedding_params_per_lane`
  (see `ngu_jax.agents.ngu.actor`).
* "Optimizer: Adam (for all losses)": the three losses each have an Adam.

Table 8 (Atari pre-processing) is the environment's: the defaults of
`ngu_jax.envs.atari` are Table 8's, so `atari()` only picks the Atari torso.

Presets: `atari()` (Tables 6 and 8), `agent57()` (Agent57 on Atari: split
values, bandits, its discount ladder), `disco_maze()` (Table 7),
`minigrid()` and `deep_sea(size)` (our choices for small MiniGrid and bsuite
DeepSea runs, documented there). Any
field can be overridden: `disco_maze(num_mixtures=8)`.

Serialisation: `config.to_dict()` gives plain Python values (JSON-safe);
`NGUConfig.from_dict(d)` validates and rejects unknown keys.
"""

import dataclasses
import difflib
import math
from typing import Any, Dict, Tuple

import numpy as np

from ngu_jax import mixtures

VALUE_TRANSFORMS = ("signed_hyperbolic", "identity")
# The kinds each variant family accepts: the names registered with
# `ngu_jax.agents.ngu.variants.register` (a registration adds its name here).
KINDS = {"intrinsic": ["ngu", "rnd", "recode", "none"],
         "meta": ["none", "ucb"],
         "policy": ["epsilon_greedy", "boltzmann"],
         "loss": ["retrace", "dice"]}
TEMPERATURE_SOURCES = ("bva", "fixed", "random")
INTRINSIC_NORMALIZATIONS = ("none", "std", "standardize")
DISCOUNT_SCHEDULES = ("ngu", "agent57")
RETRACE_TRACES = ("retrace", "uncorrected")
TORSOS = ("auto", "atari", "grid", "mlp")
AUX_STEP_SELECTIONS = ("uniform", "last")
EMBEDDING_LOSSES = ("inverse_dynamics", "casm")


# --- Variant families ------------------------------------------------------
# Each family of variants is a small config of its own, held by `NGUConfig`
# as one field; its `kind` names the implementation the builder composes
# (`ngu_jax.agents.ngu.variants`). `--set family.field=value` sets a field;
# the flat names of `FLAT_NAMES` (e.g. `recode_capacity`) are short
# spellings of the same fields, read by the constructor, the presets,
# `from_dict` (so a config.json written before the families existed still
# loads) and `--set`.


@dataclasses.dataclass(frozen=True)
class IntrinsicRewardConfig:
  """Which intrinsic reward r^i_t the actors compute (NGU Sec. 2, eq. 1).

  kind: "ngu": eq. 1, the episodic reward modulated by RND's alpha.
    "rnd": the RND-only baseline of Sec. 4.1 / Fig. 2 (no episodic memory):
    r^i_t = err(x_t) / sigma_e, the RND error over the running std of all
    errors seen (ours: the paper gives no formula; Burda et al. (2019) scale
    by a running std too). "recode": RECODE (Saade et al., 003 Sec. 3)
    replaces episodic x RND: one never-reset clustering memory with
    discounted counts shared by all the actor's lanes
    (`ngu_jax.intrinsic.recode`, settings in `NGUConfig.recode`), its reward
    divided by a running std over lanes; no alpha, no per-episode wipe, f the
    latest embedding (`embedding_params_per_lane` and `memory_*` unused).
    "none": no intrinsic reward at all (r^i = 0; needs beta = 0 and use_rnd
    False): no episodic memory, no embedding or RND predictor computed or
    trained -- R2D2 or DiCE (Table 5) without paying for NGU's reward.
  normalization: how r^i_t of any kind is scaled before it is stored and
    fed to the network (ours; the paper has none beyond eq. 1's own).
    "none": as the kind computes it (NGU's r^i >= 0). "std": divided by the
    running std of r^i over the actor's lanes (`lifelong.
    divide_by_running_std`, RECODE's and RND's habit). "standardize":
    (r^i - running mean) / running std (`lifelong.standardize`): mean 0,
    so the exploratory mixtures are no longer paid for every step they stay
    in an episode (with r^i >= 0 and gamma_j near 1 a long episode is worth
    more than the goal); the bonus normalisation of the PPO example
    (`examples/ppo_ngu.py`). FIRST steps (r^i 0) do not enter the
    statistics; an evaluator reads the training lanes'
    (`actor.with_training_statistics`).
  normalization_horizon: H of those running statistics, in values (0: all
    values ever seen; `lifelong.update_stats`).
  """
  kind: str = "ngu"
  normalization: str = "none"
  normalization_horizon: int = 1000


@dataclasses.dataclass(frozen=True)
class RecodeConfig:
  """RECODE's memory and reward scale (003 Alg. 1; docs/design.md#beyond-ngu).

  Only read with intrinsic kind "recode". App. A's hyperparameter tables are
  missing from every copy of the paper: these defaults are ours, for grid
  worlds (`ngu_jax.intrinsic.recode.RecodeConfig` says each one).
  """
  capacity: int = 4096  # M atoms (003 Sec. 3: 5e4 / 2e5 for Atari /
  # DM-HARD-8; grid worlds have a few hundred cells).
  discount: float = 0.999  # gamma of the counts.
  num_neighbors: int = 10  # k of the d_m^2 estimate.
  insert_threshold: float = 0.25  # kappa: insert beyond kappa d_m^2.
  distance_decay: float = 1e-3  # tau, the EMA rate of d_m^2.
  insert_probability: float = 1.0  # eta.
  kernel_epsilon: float = 1e-2  # eps of the kernel.
  pseudo_count_constant: float = 1e-3  # c in 1 / (sqrt(N) + c).
  reward_horizon: int = 1000  # Ours: horizon (in rewards, over all lanes)
  # of the running std the reward is divided by (003 Sec. 3, "as in Burda
  # et al. (2019)"; `lifelong.update_stats`); 0 = all rewards.


@dataclasses.dataclass(frozen=True)
class MetaControllerConfig:
  """How each lane's mixture j is chosen (Agent57 Sec. 3.2; `ngu_jax.meta`).

  kind: "none": lane l plays mixture l mod N (NGU App. A); "ucb": each
    lane's sliding-window UCB bandit picks j at every episode start,
    rewarded with the episode's undiscounted r^e.
  """
  kind: str = "none"
  window: int = 160  # Agent57 App. G: actors' window tau (episodes).
  epsilon: float = 0.5  # Agent57 App. G: actors' epsilon_UCB.
  beta: float = 1.0  # Agent57 App. G: beta_UCB, the bonus weight.
  normalise_returns: bool = False  # Ours (optional): the windowed means
  # rescaled to [0, 1] by the window's return range before the bonus
  # (`sliding_window_ucb.scores`); Agent57 uses raw returns.
  eval_window: int = 3600  # Agent57 App. G: the evaluator's window.
  eval_epsilon: float = 0.01  # Agent57 App. G: the evaluator's epsilon.
  eval_beta: float = 0.0  # Ours: the evaluator is greedy on the windowed
  # mean (docs/design.md#agent57-as-built). With "ucb" every evaluation also
  # plays the evaluator's own bandit's arm, rewarded with the evaluation
  # returns (`ngu_jax.loops.evaluation.EvaluatorBandit`).


@dataclasses.dataclass(frozen=True)
class BehaviourPolicyConfig:
  """How actors pick a_t from Q (NGU App. A; DiCE 004 Sec. 3.1, App. A).

  kind: "epsilon_greedy": eps_l-greedy on Q (NGU App. A); "boltzmann":
    a ~ softmax(Q(x, ., j) / tau) (= softmax of the dueling advantage), one
    tau per lane per episode (DiCE).
  """
  kind: str = "epsilon_greedy"
  temperature_source: str = "bva"  # With "boltzmann", where each episode's
  # tau comes from: "bva" each lane's Bandits Vote ensemble over x = log(1 +
  # 1/tau), rewarded with the episode's undiscounted r^e (DiCE App. A);
  # "fixed" `boltzmann_tau` always; "random" x uniform in [0, ln(1 +
  # bva_max_inverse_tau)], never learned (DiCE Table 4's ablations).
  boltzmann_tau: float = 1.0  # DiCE Table 4: the fixed tau of the ablation.
  bva_num_bandits: int = 7  # DiCE Table 5: M bandits per lane.
  bva_num_candidates: int = 7  # DiCE Table 5: d candidate tiles per bandit.
  bva_learning_rates: Tuple[float, ...] = (0.05, 0.1, 0.2)  # DiCE Table 5.
  bva_widths: Tuple[int, ...] = (1, 2, 3)  # DiCE Table 5: tile widths b.
  bva_c: float = 1.0  # DiCE Table 5: the UCB bonus scale c of eq. 11.
  bva_tile_size: float = 0.1  # Ours (App. A's acc is not given): 39 tiles.
  bva_max_inverse_tau: float = 50.0  # DiCE App. A: 1/tau in [0, 50].

  def __post_init__(self):
    for name in ("bva_learning_rates", "bva_widths"):
      if isinstance(getattr(self, name), list):
        object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclasses.dataclass(frozen=True)
class ValueLossConfig:
  """The learner's value loss (NGU App. E; Agent57 Sec. 3.1; DiCE Alg. 3).

  kind: "retrace": NGU's transformed Retrace (App. E); "dice": DiCE's
    learner (004 Alg. 3: Retrace towards pi_tau, V-trace for V, eq. 8's
    policy gradient, no entropy term), which needs the behaviour policy
    "boltzmann" (the sequences' tau).
  """
  kind: str = "retrace"
  split_values: bool = False  # Agent57 Sec. 3.1: two Q-networks, theta^e
  # on r^e and theta^i on r^i, each with its own target and Adam, acting on
  # h(h^-1(Q_e) + beta_j h^-1(Q_i)) (`ngu_jax.networks.split_uvfa`).
  # False: NGU's single network on r^e + beta_j r^i.
  dice_q_weight: float = 10.0  # DiCE Table 5: alpha, the Q loss weight.
  dice_v_weight: float = 1.0  # DiCE Table 5: xi, the V loss weight.
  dice_pi_weight: float = 10.0  # DiCE Table 5: beta, the policy loss weight.
  dice_c_bar: float = 1.05  # DiCE Table 5: the trace clip c-bar.
  dice_rho_bar: float = 1.05  # DiCE Table 5: V-trace's rho-bar.
  dice_lambda: float = 1.0  # DiCE eq. 2-4: no lambda (1).
  dice_entropy_weight: float = 0.0  # DiCE Table 5: no entropy term; 1.0 is
  # Sec. 4.3's "entropy" ablation (Table 4): -1 x H[pi_tau] in the loss.


# The families: NGUConfig field -> its config class.
FAMILIES = {"intrinsic": IntrinsicRewardConfig, "recode": RecodeConfig,
            "meta": MetaControllerConfig, "policy": BehaviourPolicyConfig,
            "loss": ValueLossConfig}

# Flat names -> "family.field": the short spellings (and the names of the
# config.json files written before the families existed).
FLAT_NAMES = {
    "intrinsic_reward": "intrinsic.kind",
    **{f"recode_{f.name}": f"recode.{f.name}"
       for f in dataclasses.fields(RecodeConfig)},
    "meta_controller": "meta.kind", "ucb_window": "meta.window",
    "ucb_epsilon": "meta.epsilon", "ucb_beta": "meta.beta",
    "ucb_normalise_returns": "meta.normalise_returns",
    "eval_ucb_window": "meta.eval_window",
    "eval_ucb_epsilon": "meta.eval_epsilon",
    "eval_ucb_beta": "meta.eval_beta",
    "behaviour_policy": "policy.kind",
    **{f.name: f"policy.{f.name}"
       for f in dataclasses.fields(BehaviourPolicyConfig)
       if f.name != "kind"},
    "learner_loss": "loss.kind",
    **{f.name: f"loss.{f.name}" for f in dataclasses.fields(ValueLossConfig)
       if f.name != "kind"},
}


@dataclasses.dataclass(frozen=True, init=False)
class NGUConfig:
  """Hyperparameters of the NGU agent (NGU App. F, Table 6 defaults).

  "T6" = Table 6, "T7" = Table 7 (Disco Maze), "App. A" = the agent
  description. Fields marked "ours" are not in the paper.
  """
  # --- Mixtures (App. A) -------------------------------------------------
  num_mixtures: int = 32  # T6 "Number of mixtures N" 32 (T7: 1).
  beta: float = 0.3  # T6 "Intrinsic reward scale beta" 0.3 (T7: 0.5).
  gamma_max: float = 0.997  # T6 "Discount r^e": gamma_0 (eq. 4).
  gamma_min: float = 0.99  # T6 "Discount r^i": gamma_{N-1} (eq. 4).
  discount_schedule: str = "ngu"  # "ngu": eq. 4 from gamma_max (j = 0) to
  # gamma_min (j = N - 1); "agent57": App. G.1's ladder
  # (`mixtures.agent57_gammas`) with gamma_0 = agent57_gamma_0, gamma_1 =
  # gamma_max, gamma_2 = gamma_min (needs N >= 10).
  agent57_gamma_0: float = 0.9999  # Agent57 App. G.1: gamma of j = 0.
  # --- Q-network optimiser (T6) -------------------------------------------
  learning_rate: float = 1e-4  # T6 "Learning rate (R2D2)" (T7: 1e-3).
  adam_eps: float = 1e-4  # T6 "Adam epsilon", all three optimisers.
  adam_b1: float = 0.9  # T6 "Adam beta1", all three optimisers.
  adam_b2: float = 0.999  # T6 "Adam beta2", all three optimisers.
  max_gradient_norm: float = 40.0  # T6 "Adam clip norm", all optimisers.
  # --- Auxiliary losses (App. A learner; T6) -------------------------------
  rnd_learning_rate: float = 5e-4  # T6 "Learning rate (RND and Action
  # prediction)"; T7 changes only the action-prediction one.
  action_prediction_learning_rate: float = 5e-4  # T6 (T7: 1e-3).
  action_prediction_l2: float = 1e-5  # T6 "Action prediction network L2".
  aux_loss_steps: int = 5  # App. A: 5 steps of each sequence.
  aux_loss_step_selection: str = "uniform"  # Which 5 (`auxiliary.aux_steps`):
  # "last", App. A's literal "last 5 frames", or "uniform" (ours, default):
  # drawn at random among the sequence's valid steps. App. A's 80-step
  # windows of long Atari episodes put their last 5 frames anywhere in the
  # episode; our sequences start at the episode's start and end in padding,
  # so in short episodes "last" trains f and RND on the episode's final
  # steps only (measured on DeepSea: README, "Deep exploration").
  # --- Replayed sequences and Retrace (T6, App. E) -------------------------
  batch_size: int = 64  # T6 "Batch size" (sequences per sgd step).
  learner_microbatches: int = 1  # Ours: the Q loss's gradient is accumulated
  # over this many equal chunks of the batch (same result, smaller working
  # set; faster on CPU, see learning.loss_and_grad). Must divide batch_size.
  trace_length: int = 80  # T6 "Trace length" (T7: 50).
  replay_period: int = 40  # T6 "Replay period" (T7: 50).
  burn_in: int = 0  # docs/design.md#sequences (R2D2 uses up to 40).
  retrace_lambda: float = 0.95  # T6 "Retrace lambda" (T7: 0.97).
  retrace_traces: str = "retrace"  # App. E's traces lambda min(1, pi / mu);
  # "uncorrected": lambda on every step (Peng's Q(lambda); ours, not the
  # paper's: `value_loss.loss`'s `traces`).
  advantage_learning: float = 0.0  # Ours, not the paper's: alpha of the
  # advantage-learning operator on each Retrace target (Baird, 1999;
  # Bellemare et al., 2016), which widens the action gap by about
  # 1 / (1 - alpha) (`value_loss.loss`); 0: eq. 14-15 unchanged.
  value_transform: str = "signed_hyperbolic"  # T6 "R2D2 reward
  # transformation" (T7 "Retrace loss transformation": "identity").
  value_transform_eps: float = 1e-3  # T6: h's epsilon (App. E prints 1e-2).
  target_epsilon: float = 0.01  # T6 "Target epsilon" of pi.
  cross_mixture_ratio: float = 0.0  # Sec. 4.2 / App. C "CMR": the share of
  # each batch trained on a mixture other than the one that collected it
  # (`mixtures.cross_mixture_indices`); 0 is NGU's base agent, the paper
  # ablates 0.5. Needs num_mixtures >= 2 when > 0.
  target_update_period: int = 1500  # T6 "Target Q-network update period"
  # in learner steps (T7: 100).
  # --- Replay (T6; R2D2) ----------------------------------------------------
  priority_exponent: float = 0.9  # T6 "Replay priority exponent".
  importance_sampling_exponent: float = 0.6  # R2D2; docs/design.md#priorities.
  priority_eta: float = 0.9  # R2D2's priority eta; docs/design.md#priorities.
  replay_capacity: int = 125_000  # T6 "Replay capacity 5e6" observations,
  # stored as 5e6 / replay_period = 125,000 sequences (items).
  min_replay_size: int = 6250  # T6 "Minimum sequences to start replay".
  samples_per_insert: float = 4.0  # Ours: sampled / inserted sequences
  # (the paper's learner runs as fast as it can; Acme's R2D2 uses a ratio).
  # --- Actors (T6; Ape-X / R2D2) -------------------------------------------
  actor_update_period: int = 100  # T6 "Actor update period" (actor steps).
  actor_base_epsilon: float = 0.4  # App. A / Ape-X: eps_l = 0.4^(1+7l/(L-1)).
  actor_epsilon_alpha: float = 7.0  # App. A / Ape-X: the exponent 7.
  actor_epsilons_per_mixture: bool = True  # Ours: True spreads App. A's
  # epsilons over each mixture's lanes (`mixtures.actor_epsilons_per_mixture`)
  # instead of over all lanes, which with few lanes per mixture gives the
  # most exploratory mixture only the smallest epsilons. Not read with
  # meta_controller "ucb" (a lane has no fixed mixture then).
  eval_epsilon: float = 0.01  # T6 "Evaluation epsilon" (T7: 0).
  embedding_params_per_lane: bool = True  # T6 "Embeddings target update
  # period: once/episode": each lane keeps the embedding parameters it had
  # at its episode start (memory wipe); False uses the latest ones.
  # --- Episodic memory and kernel (T6, Alg. 1) -----------------------------
  memory_capacity: int = 30000  # T6 "Episodic memory capacity" (T7: 5000).
  num_neighbors: int = 10  # T6 "Kernel num. neighbors used" k.
  kernel_epsilon: float = 1e-4  # T6 "Kernel epsilon" (T7: 1e-2).
  cluster_distance: float = 0.008  # T6 "Kernel cluster distance" xi.
  pseudo_count_constant: float = 1e-3  # T6 "Kernel pseudo-counts constant".
  max_similarity: float = 8.0  # T6 "Kernel maximum similarity" s_m.
  memory_wipe_period: int = 1  # T9 "# episodes w/o wiping" (1 = every one).
  episodic_distance_horizon: int = 1000  # Alg. 1 line 6's "moving average"
  # d_m^2: horizon in k-NN distances of the lane
  # (`EpisodicMemoryConfig.distance_horizon`); 0 = the mean of every
  # distance of the lane's life. Ours: 1000 measured closer to the current
  # k-NN scale while f trains (README, Semantics;
  # experiments/probes/intrinsic_statistics.py), and ahead of the lifetime
  # mean in the Disco Maze comparison (5 seeds x 400,000 env steps;
  # README, Results; experiments/disco_maze_coverage.py).
  episodic_rescale_short_memory: bool = False  # Ours, off = Alg. 1: with
  # n < k entries scale the kernel sum by k / n
  # (`EpisodicMemoryConfig.rescale_short_memory`; README, Semantics).
  learn_embedding: bool = True  # Sec. 4.1 / Fig. 2 ablation: False keeps f
  # at its random initialisation (a fixed random projection; the
  # inverse-dynamics loss is not trained).
  # --- Life-long novelty (Sec. 2, T6) --------------------------------------
  use_rnd: bool = True  # Sec. 2: modulate by RND; False gives alpha = 1.
  rnd_clip: float = 5.0  # T6 "RND clipping factor L".
  rnd_error_horizon: int = 1000  # Sec. 2's "running mean / std" of the
  # RND errors: horizon in errors of the moving average
  # (`lifelong.update_stats`; counted over all lanes of an actor); 0 = all
  # errors ever seen, which left alpha > 1 on ~1% of steps once the
  # predictor learned (README, Semantics). Errors computed before the RND
  # observation normaliser holds statistics never count
  # (`actor.select_action`).
  rnd_output_dim: int = 128  # App. H.2: RND outputs k = 128.
  rnd_observation_normalization: bool = True  # Ours (RND paper, Sec. 2.4):
  # whiten RND inputs with running statistics kept by the learner.
  # --- Networks (Sec. 3, App. H) -------------------------------------------
  torso: str = "auto"  # "atari" (App. H) | "grid" (T7) | "mlp" | "auto".
  lstm_size: int = 512  # App. H.3 / R2D2: LSTM 512.
  head_hidden: int = 512  # App. H.3 / R2D2: dueling streams of 512.
  separate_exploit_network: bool = False  # Not in the paper (a diagnostic):
  # True gives j = 0 a network of its own (theta^0) and j >= 1 another
  # (theta^x), so no weight is shared between the exploit value and the
  # intrinsic ones (`ngu_jax.networks.separate_exploit`). False: NGU Sec.
  # 3's one network for all N mixtures.
  zero_q_output_init: bool = False  # Ours, not the paper's: True starts
  # the dueling head's output layers at zero weights, so Q = 0 everywhere
  # at initialisation (`networks.make_uvfa_network`'s `zero_output_init`).
  # False: haiku's default initialisation.
  embedding_dim: int = 32  # App. H.1: controllable state p = 32.
  inverse_dynamics_hidden: int = 128  # App. H.1: h's hidden layer 128.
  # (Also the width of CASM's classifier g.)
  embedding_loss: str = "inverse_dynamics"  # How f is trained:
  # "inverse_dynamics": NGU Sec. 2's 1-step action prediction h on
  # `aux_loss_steps` steps per sequence; "casm": RECODE's Coupled
  # Action-State Masking (003 Sec. 4, Fig. 2; `ngu_jax.networks.casm`): a
  # causal transformer over the whole replayed window, trained on
  # `casm_num_masks` random masks per sequence. Either way actors and the
  # intrinsic rewards read f alone.
  # --- CASM (003 Sec. 4; only read with embedding_loss="casm") -------------
  # The paper's CASM hyperparameter table is missing from our copy: sizes
  # are ours, for grid worlds.
  casm_num_layers: int = 2  # Transformer blocks.
  casm_width: int = 64  # Token / model width (a multiple of casm_num_heads).
  casm_num_heads: int = 4  # Attention heads.
  casm_mlp_hidden: int = 128  # Hidden width of each block's MLP.
  casm_num_masks: int = 4  # 003 Sec. 4: N = 4 masks per trajectory.
  casm_action_shown_probability: float = 0.5  # Ours: P(a_t shown, o_t
  # hidden) per step and mask; the hidden actions are the targets.
  grid_output_size: int = 256  # Ours: dense width of the grid torso.
  grid_filters: Tuple[int, ...] = (16, 32)  # T7 "Conv filters" (16, 32) of
  # the grid torso (Q-network, f, RND); laptop runs may shrink them.
  mlp_hidden_sizes: Tuple[int, ...] = (256, 256)  # Ours: MLP torso widths.
  # --- Variant families (see `FAMILIES`) ------------------------------------
  intrinsic: IntrinsicRewardConfig = IntrinsicRewardConfig()  # NGU Sec. 2.
  recode: RecodeConfig = RecodeConfig()  # RECODE (003 Alg. 1).
  meta: MetaControllerConfig = MetaControllerConfig()  # Agent57 Sec. 3.2.
  policy: BehaviourPolicyConfig = BehaviourPolicyConfig()  # DiCE App. A.
  loss: ValueLossConfig = ValueLossConfig()  # App. E; Agent57; DiCE.

  def __init__(self, **fields):
    """Builds and validates a config from keyword fields.

    Besides the fields, a keyword may be a family field spelled
    "family.field" (`recode.capacity`, as `--set` writes it) or a flat name of
    `FLAT_NAMES` (`recode_capacity`), set on top of the family's value;
    a family may be given as its config or as a dict of its fields.

    Raises:
      TypeError: on an unknown name, or a field given twice.
      ValueError: on an out-of-range value (the message names the field).
    """
    values = _resolve(fields)
    for name, value in values.items():
      object.__setattr__(self, name, value)
    self.__post_init__()

  def __post_init__(self):
    # Normalise sequences (e.g. lists from JSON) to tuples of ints.
    for name in ("mlp_hidden_sizes", "grid_filters"):
      if isinstance(getattr(self, name), (list, tuple)):
        object.__setattr__(self, name, tuple(getattr(self, name)))
    _validate(self)

  @property
  def has_meta_controller(self) -> bool:
    """Whether the lanes' mixtures j are chosen by Agent57's sliding-window
    UCB bandits (Sec. 3.2), and evaluations also play the evaluator's own
    bandit (`ngu_jax.loops.evaluation.EvaluatorBandit`)."""
    return self.meta.kind == "ucb"

  @property
  def keeps_lane_controllers(self) -> bool:
    """Whether the actors' lanes carry learned controllers that a checkpoint
    must keep: Agent57's UCB bandits, or DiCE's Bandits Vote ensembles."""
    return self.has_meta_controller or (
        self.policy.kind == "boltzmann"
        and self.policy.temperature_source == "bva")

  @property
  def samples_per_env_step(self) -> float:
    """Sequences the learner samples per fresh env step (every loop's pacing).

    samples_per_insert / replay_period: inserts count as fresh env steps /
    replay_period (`ngu_jax.loops.pacing`, where the rule is applied).
    """
    return self.samples_per_insert / self.replay_period

  def mixture_betas(self) -> np.ndarray:
    """beta_j of the N mixtures, float32 [N] (`mixtures.betas`): the one
    table the actors, the networks and the learner use."""
    return mixtures.betas(self.num_mixtures, self.beta)

  def mixture_gammas(self) -> np.ndarray:
    """gamma_j of the N mixtures, float32 [N]: NGU eq. 4
    (`mixtures.gammas`) or Agent57's ladder (`mixtures.agent57_gammas`),
    per `discount_schedule`; the one table of actors and learner."""
    if self.discount_schedule == "agent57":
      return mixtures.agent57_gammas(self.num_mixtures, self.agent57_gamma_0,
                                     self.gamma_max, self.gamma_min)
    return mixtures.gammas(self.num_mixtures, self.gamma_max, self.gamma_min)

  def to_dict(self) -> Dict[str, Any]:
    """Plain Python values, each family a nested dict (JSON-safe)."""
    return _plain(dataclasses.asdict(self))

  @classmethod
  def from_dict(cls, d: Dict[str, Any]) -> "NGUConfig":
    """Builds and validates a config from `to_dict`'s form.

    Also reads the flat names of `FLAT_NAMES`, so a config.json written
    before the variant families existed builds the same config.

    Raises:
      ValueError: on an unknown key or an out-of-range value.
    """
    if not isinstance(d, dict):
      raise ValueError(f"NGUConfig.from_dict: expected a dict, got "
                       f"{type(d).__name__}.")
    try:
      return cls(**d)
    except TypeError as e:
      raise ValueError(f"NGUConfig.from_dict: {e}") from None


def _plain(value: Any) -> Any:
  """Tuples as lists, recursively (JSON's form)."""
  if isinstance(value, dict):
    return {k: _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  return value


def nest_flat_names(d: Dict[str, Any]) -> Dict[str, Any]:
  """A config dict with its flat names (`FLAT_NAMES`) moved into families.

  `{"recode_capacity": 8, "beta": 0.1}` -> `{"recode": {"capacity": 8},
  "beta": 0.1}`; other keys are kept as they are. Used to compare a
  config.json written before the families existed with today's
  `to_dict()` (`ngu_jax.loops.checkpointing`).
  """
  out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in d.items()
         if k not in FLAT_NAMES}
  for flat, dotted in FLAT_NAMES.items():
    if flat in d:
      family, name = dotted.split(".")
      group = out.setdefault(family, {})
      if isinstance(group, dict):
        group.setdefault(name, d[flat])
  return out


def _resolve(given: Dict[str, Any]) -> Dict[str, Any]:
  """NGUConfig's field values from constructor keywords (see `__init__`)."""
  fields = {f.name: f for f in dataclasses.fields(NGUConfig)}
  values, overrides = {}, {}
  for key, value in given.items():
    if key in fields:
      values[key] = value
      continue
    dotted = FLAT_NAMES.get(key, key)
    family, _, name = dotted.partition(".")
    if family not in FAMILIES or not name:
      close = difflib.get_close_matches(
          key, list(fields) + list(FLAT_NAMES) + _dotted_names(), n=3)
      hint = f"; did you mean {', '.join(close)}?" if close else "."
      raise TypeError(f"NGUConfig: unknown field {key!r}{hint}")
    if (family, name) in overrides:
      raise TypeError(f"NGUConfig: {family}.{name} is given twice (as "
                      f"{overrides[family, name][0]!r} and {key!r}).")
    overrides[family, name] = (key, value)
  for name, field in fields.items():
    if name not in values:
      values[name] = (field.default if field.default is not dataclasses.MISSING
                      else field.default_factory())
  for family, cls in FAMILIES.items():
    group = values[family]
    if isinstance(group, dict):
      group = _family_from_dict(family, cls, group)
    elif not isinstance(group, cls):
      raise TypeError(f"NGUConfig: `{family}` must be a {cls.__name__} or "
                      f"a dict of its fields, got {group!r}.")
    changes = {name: value for (fam, name), (_, value) in overrides.items()
               if fam == family}
    if changes:
      group = _family_from_dict(family, cls,
                                {**dataclasses.asdict(group), **changes})
    values[family] = group
  return values


def _family_from_dict(family: str, cls: type, d: Dict[str, Any]) -> Any:
  names = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(d) - names)
  if unknown:
    raise TypeError(f"NGUConfig: unknown field(s) "
                    f"{', '.join(family + '.' + u for u in unknown)}; "
                    f"`{family}` has {', '.join(sorted(names))}.")
  return cls(**d)


def _dotted_names():
  return [f"{family}.{f.name}" for family, cls in FAMILIES.items()
          for f in dataclasses.fields(cls)]


def _fail(name: str, requirement: str, value) -> None:
  raise ValueError(f"NGUConfig: `{name}` must be {requirement}, got "
                   f"{value!r}.")


def _is_int(value) -> bool:
  return not isinstance(value, bool) and isinstance(value, (int, np.integer))


def _is_number(value) -> bool:
  return (not isinstance(value, bool)
          and isinstance(value, (int, float, np.integer, np.floating))
          and math.isfinite(value))


def _get(c: "NGUConfig", name: str) -> Any:
  """Field `name` of `c`; "family.field" reads a family's field."""
  for part in name.split("."):
    c = getattr(c, part)
  return c


def _check_choice(c: "NGUConfig", name: str, choices: Tuple[str, ...]
                  ) -> None:
  """Raises ValueError unless field `name` of `c` is one of `choices`."""
  if _get(c, name) not in choices:
    _fail(name, f"one of {choices}", _get(c, name))


def _validate(c: NGUConfig) -> None:
  """Raises ValueError on the first out-of-range field."""
  positive_ints = ("num_mixtures", "aux_loss_steps", "batch_size",
                   "replay_period", "target_update_period", "replay_capacity",
                   "min_replay_size", "actor_update_period", "memory_capacity",
                   "num_neighbors", "memory_wipe_period", "rnd_output_dim",
                   "lstm_size", "head_hidden", "embedding_dim",
                   "inverse_dynamics_hidden", "grid_output_size",
                   "recode.capacity", "recode.num_neighbors",
                   "casm_num_layers", "casm_width", "casm_num_heads",
                   "casm_mlp_hidden", "casm_num_masks", "meta.window",
                   "meta.eval_window", "policy.bva_num_bandits",
                   "policy.bva_num_candidates")
  for name in ("episodic_distance_horizon", "rnd_error_horizon",
               "recode.reward_horizon", "intrinsic.normalization_horizon"):
    value = _get(c, name)
    if not _is_int(value) or value < 0:
      _fail(name, "an integer >= 0", value)
  for name in positive_ints:
    value = _get(c, name)
    if not _is_int(value) or value < 1:
      _fail(name, "a positive integer", value)
  if not _is_int(c.trace_length) or c.trace_length < 2:
    _fail("trace_length", "an integer >= 2", c.trace_length)
  if (not _is_int(c.learner_microbatches) or c.learner_microbatches < 1
      or c.batch_size % c.learner_microbatches):
    _fail("learner_microbatches", "a positive divisor of batch_size",
          c.learner_microbatches)
  if not _is_int(c.burn_in) or not 0 <= c.burn_in <= c.trace_length - 2:
    _fail("burn_in", f"an integer in [0, trace_length - 2] = [0, "
          f"{c.trace_length - 2}]", c.burn_in)
  if c.replay_period > c.trace_length:
    _fail("replay_period", f"<= trace_length ({c.trace_length})",
          c.replay_period)
  if c.min_replay_size > c.replay_capacity:
    _fail("min_replay_size", f"<= replay_capacity ({c.replay_capacity})",
          c.min_replay_size)
  positive = ("learning_rate", "adam_eps", "max_gradient_norm",
              "rnd_learning_rate", "action_prediction_learning_rate",
              "value_transform_eps", "kernel_epsilon", "samples_per_insert",
              "recode.kernel_epsilon", "recode.pseudo_count_constant")
  for name in positive:
    value = _get(c, name)
    if not _is_number(value) or value <= 0:
      _fail(name, "a finite number > 0", value)
  non_negative = ("beta", "action_prediction_l2", "cluster_distance",
                  "pseudo_count_constant", "max_similarity",
                  "recode.insert_threshold")
  for name in non_negative:
    value = _get(c, name)
    if not _is_number(value) or value < 0:
      _fail(name, "a finite number >= 0", value)
  unit = ("adam_b1", "adam_b2", "retrace_lambda", "target_epsilon",
          "cross_mixture_ratio",
          "priority_eta", "actor_base_epsilon", "eval_epsilon",
          "meta.epsilon", "meta.eval_epsilon", "recode.insert_probability")
  for name in unit:
    value = _get(c, name)
    if not _is_number(value) or not 0 <= value <= 1:
      _fail(name, "a number in [0, 1]", value)
  for name in ("recode.discount", "recode.distance_decay"):
    value = _get(c, name)
    if not _is_number(value) or not 0 < value <= 1:
      _fail(name, "a number in (0, 1]", value)
  for name in ("adam_b1", "adam_b2"):
    if _get(c, name) >= 1:
      _fail(name, "< 1", _get(c, name))
  for name in ("priority_exponent", "importance_sampling_exponent",
               "actor_epsilon_alpha", "meta.beta", "meta.eval_beta"):
    value = _get(c, name)
    if not _is_number(value) or value < 0:
      _fail(name, "a finite number >= 0", value)
  if not (_is_number(c.gamma_min) and _is_number(c.gamma_max)
          and 0 <= c.gamma_min <= c.gamma_max < 1):
    raise ValueError("NGUConfig: need 0 <= gamma_min <= gamma_max < 1, got "
                     f"gamma_min={c.gamma_min!r}, gamma_max={c.gamma_max!r}.")
  if c.cross_mixture_ratio > 0 and c.num_mixtures < 2:
    _fail("cross_mixture_ratio", "0 with num_mixtures = 1 (no other mixture "
          "to train)", c.cross_mixture_ratio)
  if not _is_number(c.rnd_clip) or c.rnd_clip < 1:
    _fail("rnd_clip", "a finite number >= 1", c.rnd_clip)
  for name in ("use_rnd", "rnd_observation_normalization",
               "loss.split_values", "actor_epsilons_per_mixture",
               "separate_exploit_network", "zero_q_output_init",
               "embedding_params_per_lane", "learn_embedding",
               "meta.normalise_returns", "episodic_rescale_short_memory"):
    if not isinstance(_get(c, name), bool):
      _fail(name, "a bool", _get(c, name))
  _check_choice(c, "aux_loss_step_selection", AUX_STEP_SELECTIONS)
  _check_choice(c, "embedding_loss", EMBEDDING_LOSSES)
  if c.casm_width % c.casm_num_heads:
    _fail("casm_width", f"a multiple of casm_num_heads ({c.casm_num_heads})",
          c.casm_width)
  if (not _is_number(c.casm_action_shown_probability)
      or not 0 < c.casm_action_shown_probability < 1):
    _fail("casm_action_shown_probability", "a number in (0, 1)",
          c.casm_action_shown_probability)
  if c.separate_exploit_network and c.loss.split_values:
    _fail("separate_exploit_network", "False with loss.split_values (split "
          "by mixture or by reward, not both)", c.separate_exploit_network)
  if c.separate_exploit_network and c.num_mixtures < 2:
    _fail("separate_exploit_network", "False with num_mixtures = 1 (no "
          "explore mixture to separate)", c.separate_exploit_network)
  _check_choice(c, "value_transform", VALUE_TRANSFORMS)
  _check_choice(c, "discount_schedule", DISCOUNT_SCHEDULES)
  _check_choice(c, "retrace_traces", RETRACE_TRACES)
  if not _is_number(c.advantage_learning) or not 0 <= c.advantage_learning < 1:
    _fail("advantage_learning", "a number in [0, 1)", c.advantage_learning)
  if c.advantage_learning and (c.loss.split_values or c.loss.kind == "dice"):
    _fail("advantage_learning", "0 with split values or DiCE's learner (it "
          "is for the Retrace loss of one value stream)",
          c.advantage_learning)
  if c.retrace_traces == "uncorrected" and c.target_epsilon == 0:
    _fail("target_epsilon", "> 0 with retrace_traces 'uncorrected' (the "
          "trace is lambda only where pi > 0)", c.target_epsilon)
  if c.discount_schedule == "agent57":
    if c.num_mixtures < 10:
      _fail("num_mixtures", ">= 10 with discount_schedule 'agent57' (App. "
            "G.1's ladder)", c.num_mixtures)
    if (not _is_number(c.agent57_gamma_0)
        or not c.gamma_max <= c.agent57_gamma_0 < 1):
      _fail("agent57_gamma_0", f"in [gamma_max, 1) = [{c.gamma_max}, 1)",
            c.agent57_gamma_0)
  for family in ("intrinsic", "meta", "policy", "loss"):
    _check_choice(c, f"{family}.kind", tuple(KINDS[family]))
  _check_choice(c, "policy.temperature_source", TEMPERATURE_SOURCES)
  _check_choice(c, "intrinsic.normalization", INTRINSIC_NORMALIZATIONS)
  if c.loss.kind == "dice":
    if c.policy.kind != "boltzmann":
      _fail("policy.kind", "'boltzmann' with loss.kind 'dice' (its target "
            "policy pi_tau needs each sequence's tau)", c.policy.kind)
    if c.loss.split_values:
      _fail("loss.split_values", "False with loss.kind 'dice' (one V "
            "stream)", c.loss.split_values)
  for name in ("loss.dice_q_weight", "loss.dice_v_weight",
               "loss.dice_pi_weight", "loss.dice_entropy_weight"):
    value = _get(c, name)
    if not _is_number(value) or value < 0:
      _fail(name, "a finite number >= 0", value)
  loss = c.loss
  if not _is_number(loss.dice_c_bar) or loss.dice_c_bar < 1:
    _fail("loss.dice_c_bar", "a number >= 1", loss.dice_c_bar)
  if not _is_number(loss.dice_rho_bar) or loss.dice_rho_bar < loss.dice_c_bar:
    _fail("loss.dice_rho_bar", f">= loss.dice_c_bar ({loss.dice_c_bar})",
          loss.dice_rho_bar)
  if not _is_number(loss.dice_lambda) or not 0 <= loss.dice_lambda <= 1:
    _fail("loss.dice_lambda", "a number in [0, 1]", loss.dice_lambda)
  for name in ("policy.boltzmann_tau", "policy.bva_tile_size",
               "policy.bva_max_inverse_tau"):
    value = _get(c, name)
    if not _is_number(value) or value <= 0:
      _fail(name, "a finite number > 0", value)
  policy = c.policy
  if not _is_number(policy.bva_c) or policy.bva_c < 0:
    _fail("policy.bva_c", "a finite number >= 0", policy.bva_c)
  rates = policy.bva_learning_rates
  if (not isinstance(rates, tuple) or not rates
      or not all(_is_number(v) and v > 0 for v in rates)):
    _fail("policy.bva_learning_rates", "a non-empty tuple of numbers > 0",
          rates)
  widths = policy.bva_widths
  if (not isinstance(widths, tuple) or not widths
      or not all(_is_int(v) and v >= 0 for v in widths)):
    _fail("policy.bva_widths", "a non-empty tuple of integers >= 0", widths)
  if c.intrinsic.kind == "rnd" and not c.use_rnd:
    _fail("use_rnd", "True when intrinsic.kind is 'rnd'", c.use_rnd)
  if c.intrinsic.kind == "none":
    if c.use_rnd:
      _fail("use_rnd", "False when intrinsic.kind is 'none'", c.use_rnd)
    if c.beta != 0:
      _fail("beta", "0 when intrinsic.kind is 'none' (there is no r^i "
            "to scale)", c.beta)
  _check_choice(c, "torso", TORSOS)
  if not isinstance(c.mlp_hidden_sizes, tuple) or not c.mlp_hidden_sizes or (
      not all(_is_int(s) and s >= 1 for s in c.mlp_hidden_sizes)):
    _fail("mlp_hidden_sizes", "a non-empty sequence of positive integers",
          c.mlp_hidden_sizes)
  if not isinstance(c.grid_filters, tuple) or len(c.grid_filters) != 2 or (
      not all(_is_int(s) and s >= 1 for s in c.grid_filters)):
    _fail("grid_filters", "two positive integers (the grid torso's conv "
          "channels)", c.grid_filters)


def _preset(preset: Dict[str, Any], overrides: Dict[str, Any]) -> NGUConfig:
  """`NGUConfig` of a preset's fields with `overrides` on top; flat names
  and "family.field" names of one field count as one."""
  def canonical(d):
    return {FLAT_NAMES.get(k, k): v for k, v in d.items()}
  return NGUConfig(**{**canonical(preset), **canonical(overrides)})


def atari(**overrides) -> NGUConfig:
  """NGU(N=32) on Atari: Table 6, the Atari torso (App. H).

  Table 8's pre-processing is the default of `ngu_jax.envs.atari`.
  """
  return _preset({"torso": "atari"}, overrides)


def agent57(**overrides) -> NGUConfig:
  """Agent57 on Atari (Badia et al., 2020): NGU's Table 6 with its changes.

  Split extrinsic / intrinsic values (`loss.split_values`, Sec. 3.1), a
  sliding-window UCB meta-controller per lane (`meta.kind` "ucb",
  window 160, epsilon 0.5, beta_UCB 1; Sec. 3.2, App. G), N = 32 mixtures
  with App. G.1's discount ladder from 0.9999 (j = 0) through 0.997 (j = 7,
  8) to 0.99 (j = 31) (`discount_schedule` "agent57"), trace length 160
  and replay period 80 (App. G), the Atari torso. The rest is NGU's Table
  6 (beta 0.3, Retrace lambda 0.95, the h transform, lr 1e-4 for both
  networks). docs/design.md#agent57-as-built lists our readings.
  """
  preset = {"torso": "atari", "loss.split_values": True, "meta.kind": "ucb",
            "discount_schedule": "agent57", "trace_length": 160,
            "replay_period": 80}
  return _preset(preset, overrides)


def dice(**overrides) -> NGUConfig:
  """DiCE (004, App. B-C, Table 5) on the NGU builder.

  Boltzmann behaviour softmax(Q / tau) with each lane's tau from its Bandits
  Vote ensemble (Table 5: 7 bandits, 7 candidates), DiCE's learner (Retrace
  towards pi_tau, V-trace, eq. 8's policy gradient; weights 10 / 1 / 10,
  clips 1.05, no entropy term), no intrinsic reward (Table 5: one mixture,
  beta 0, no RND; `intrinsic.kind` "none" computes none: NGU's reward
  composes with `intrinsic.kind` "ngu", `use_rnd=True`, beta > 0),
  gamma 0.997 (Table 5; with N = 1 NGU's eq. 4 gives
  gamma_min, so gamma_min = 0.997). The rest, the
  torso included, is NGU's Table 6 (the torso from the observations);
  docs/design.md#dice-as-built lists our readings.
  """
  preset = {"policy.kind": "boltzmann", "policy.temperature_source": "bva",
            "loss.kind": "dice", "num_mixtures": 1, "beta": 0.0,
            "use_rnd": False, "intrinsic.kind": "none", "gamma_min": 0.997}
  return _preset(preset, overrides)


def disco_maze(**overrides) -> NGUConfig:
  """NGU(N=1) on Random Disco Maze (Sec. 4.1, Table 7; rest Table 6).

  Table 7 rows: memory 5000, lr (R2D2 and action prediction) 1e-3, beta 0.5,
  trace 50, replay period 50, lambda 0.97, identity Retrace transformation,
  target update 100, conv filters (16, 32) 3x3 stride 1 (the grid torso),
  kernel epsilon 1e-2, evaluation epsilon 0. N = 1 is NGU(N=1) of Sec. 4.1,
  "a single exploratory policy": its one mixture has beta_0 = beta and the
  exploratory discount gamma_0 = gamma_min = 0.99 (Table 6 "Discount r^i";
  `ngu_jax.mixtures.betas` / `gammas` with N = 1), not gamma_max.

  beta: Table 7 says 0.5, Sec. 4.1's text 0.3; we follow Table 7.

  Laptop scaling (ours): Table 7's replay capacity 1e6 observations
  (20,000 sequences of 50) would hold 1.3 GB of 21x21x3 uint8 frames; we
  keep 5,000 sequences (250,000 observations, ~330 MB) and start learning
  after 250 sequences instead of 6,250. The LSTM and head keep R2D2's 512.
  """
  preset = dict(
      num_mixtures=1, beta=0.5, torso="grid", memory_capacity=5000,
      trace_length=50, replay_period=50, retrace_lambda=0.97,
      value_transform="identity", learning_rate=1e-3,
      action_prediction_learning_rate=1e-3, target_update_period=100,
      kernel_epsilon=1e-2, eval_epsilon=0.0, replay_capacity=5000,
      min_replay_size=250)
  return _preset(preset, overrides)


def minigrid(**overrides) -> NGUConfig:
  """Small MiniGrid runs (7x7x3 egocentric views); our choices.

  Not in the paper. Starting from Table 6: N = 8 mixtures (Table 9's sweep
  includes 8; 32 policies are too many for a laptop budget), the grid torso
  (Table 7's filters), LSTM and heads of 256, episodic memory 5000 (episodes
  last at most a few hundred steps), trace 40 with period 20 (short
  episodes), lr 5e-4 for the Q-network and the action prediction (between
  Table 6 and Table 7), target update 250, replay 10,000 sequences starting
  after 500, kernel epsilon 1e-3 (Table 6's 1e-4 was tuned on Atari's
  intrinsic-reward range; 1e-2 on Disco Maze).
  """
  preset = dict(
      num_mixtures=8, torso="grid", lstm_size=256, head_hidden=256,
      memory_capacity=5000, trace_length=40, replay_period=20,
      learning_rate=5e-4, action_prediction_learning_rate=5e-4,
      target_update_period=250, replay_capacity=10_000, min_replay_size=500,
      kernel_epsilon=1e-3)
  return _preset(preset, overrides)


def deep_sea(size: int = 10, **overrides) -> NGUConfig:
  """bsuite DeepSea of side `size` (Osband et al., 2020); our choices.

  Not in the paper. Episodes last exactly `size` steps, so sequences hold one
  whole episode: trace length and replay period `size + 1` (the episode's
  observations x_0 .. x_size; with a longer trace most of every sequence
  would be padding). Small networks for one-hot [size, size] inputs: an MLP
  torso (64, 64), LSTM and heads of 64, inverse-dynamics hidden layer 64.
  N = 8 mixtures as `minigrid()`. Batch 32 sequences replayed 16 times each
  (`samples_per_insert` 16): value propagation over `size` steps needs
  many updates per env step (bsuite's DQN baselines replay 32 transitions
  per step). Replay 5,000 sequences from 100, target update 100, lr 5e-4,
  kernel epsilon 1e-3, episodic memory of one episode.
  """
  if isinstance(size, bool) or not isinstance(size, int) or size < 2:
    raise ValueError(f"deep_sea: `size` must be an integer >= 2, got "
                     f"{size!r}.")
  preset = dict(
      num_mixtures=8, torso="mlp", mlp_hidden_sizes=(64, 64), lstm_size=64,
      head_hidden=64, inverse_dynamics_hidden=64, trace_length=size + 1,
      replay_period=size + 1, batch_size=32, samples_per_insert=16.0,
      replay_capacity=5000, min_replay_size=100, target_update_period=100,
      learning_rate=5e-4, action_prediction_learning_rate=5e-4,
      memory_capacity=size + 1, kernel_epsilon=1e-3)
  return _preset(preset, overrides)


PRESETS = {"atari": atari, "agent57": agent57, "disco_maze": disco_maze,
           "minigrid": minigrid, "deep_sea": deep_sea, "dice": dice}
