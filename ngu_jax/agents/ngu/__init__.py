"""ngu_jax.agents.ngu: the Never Give Up agent (Badia et al., 2020).

Acme's layout: `config` (NGUConfig), `networks` (NGUNetworks, NGUParams),
`actor` (pure acting functions and the stateful `Actor`), `learning` (pure
`sgd_step` and the stateful `Learner`), `value_loss` (transformed Retrace,
App. E) and `auxiliary` (inverse dynamics and RND, App. A), and `builder`
(the wiring).
"""


from ngu_jax.agents.ngu import actor
from ngu_jax.agents.ngu import auxiliary
from ngu_jax.agents.ngu import builder
from ngu_jax.agents.ngu import config
from ngu_jax.agents.ngu import learning
from ngu_jax.agents.ngu import networks
from ngu_jax.agents.ngu import value_loss
from ngu_jax.agents.ngu.actor import Actor
from ngu_jax.agents.ngu.actor import ActorExtras
from ngu_jax.agents.ngu.actor import ActorState
from ngu_jax.agents.ngu.auxiliary import aux_losses
from ngu_jax.agents.ngu.builder import EnvironmentSpec
from ngu_jax.agents.ngu.builder import NGUBuilder
from ngu_jax.agents.ngu.actor import NGUPolicy
from ngu_jax.agents.ngu.builder import make_environment_spec
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.agents.ngu.learning import Learner
from ngu_jax.agents.ngu.learning import LearnerState
from ngu_jax.agents.ngu.learning import Optimisers
from ngu_jax.agents.ngu.learning import init_learner
from ngu_jax.agents.ngu.learning import learner_state_from_params
from ngu_jax.agents.ngu.learning import make_optimisers
from ngu_jax.agents.ngu.learning import sgd_step
from ngu_jax.agents.ngu.networks import NGUNetworks
from ngu_jax.agents.ngu.networks import NGUParams
from ngu_jax.agents.ngu.networks import init_params
from ngu_jax.agents.ngu.networks import make_networks
from ngu_jax.agents.ngu.value_loss import LossExtras
from ngu_jax.agents.ngu.value_loss import check_batch
from ngu_jax.agents.ngu.value_loss import loss
from ngu_jax.agents.ngu.value_loss import loss_and_grad
from ngu_jax.types import SequenceBatch

__all__ = (
    "LossExtras",
    "SequenceBatch",
    "check_batch",
    "loss",
    "loss_and_grad",
    "ActorExtras",
    "ActorState",
    "LearnerState",
    "NGUConfig",
    "NGUNetworks",
    "NGUParams",
    "Optimisers",
    "actor",
    "aux_losses",
    "auxiliary",
    "config",
    "learning",
    "losses",
    "networks",
    "value_loss",
    "init_learner",
    "init_params",
    "learner_state_from_params",
    "make_networks",
    "make_optimisers",
    "sgd_step",
    "Actor",
    "EnvironmentSpec",
    "Learner",
    "NGUBuilder",
    "NGUPolicy",
    "builder",
    "make_environment_spec",
)

