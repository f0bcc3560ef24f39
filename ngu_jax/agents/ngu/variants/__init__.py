"""The NGU agent's variant families, composed once per config.

`compose(config)` returns the `Variants` (intrinsic reward, behaviour
policy, meta-controller, value loss) that `config.<family>.kind` names;
`register(family, kind, part)` adds a kind. The built-in kinds:

  intrinsic  "ngu", "rnd", "recode", "none"   (`variants.intrinsic`)
  policy     "epsilon_greedy", "boltzmann"    (`variants.policy`)
  meta       "none", "ucb"                    (`variants.meta`)
  loss       "retrace", "dice"                (`variants.loss`)

See `variants.parts` for what a part is, and docs/design.md ("Variants:
where they are chosen") for a new kind written end to end.
"""

from ngu_jax.agents.ngu.variants import intrinsic
from ngu_jax.agents.ngu.variants import loss
from ngu_jax.agents.ngu.variants import meta
from ngu_jax.agents.ngu.variants import policy
from ngu_jax.agents.ngu.variants.parts import BehaviourPolicy
from ngu_jax.agents.ngu.variants.parts import compose
from ngu_jax.agents.ngu.variants.parts import get
from ngu_jax.agents.ngu.variants.parts import IntrinsicReward
from ngu_jax.agents.ngu.variants.parts import MetaController
from ngu_jax.agents.ngu.variants.parts import register
from ngu_jax.agents.ngu.variants.parts import RewardStep
from ngu_jax.agents.ngu.variants.parts import ValueLoss
from ngu_jax.agents.ngu.variants.parts import Variants
