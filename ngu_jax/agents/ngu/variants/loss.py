"""The value losses: NGU's transformed Retrace and DiCE's (`config.loss`).

* "retrace": the transformed Retrace loss of NGU App. E (`value_loss.loss`);
  with `config.loss.split_values`, Agent57's split values (Sec. 3.1).
* "dice": DiCE's learner (004 Alg. 3): Retrace towards pi_tau, V-trace for
  V and eq. 8's policy gradient, weighted as `config.loss` says (Table 5).

Each is a `ValueLoss` part (`variants.parts`).
"""

from ngu_jax.agents.ngu import value_loss
from ngu_jax.agents.ngu.config import NGUConfig
from ngu_jax.agents.ngu.variants import parts


def dice_settings(config: NGUConfig) -> value_loss.DiceSettings:
  """DiCE's loss settings of `config.loss` (Table 5)."""
  loss = config.loss
  return value_loss.DiceSettings(
      q_weight=loss.dice_q_weight, v_weight=loss.dice_v_weight,
      pi_weight=loss.dice_pi_weight, c_bar=loss.dice_c_bar,
      rho_bar=loss.dice_rho_bar, lambda_=loss.dice_lambda,
      entropy_weight=loss.dice_entropy_weight)


RETRACE = parts.ValueLoss(loss_arguments=lambda config: {})
DICE = parts.ValueLoss(
    loss_arguments=lambda config: {"dice": dice_settings(config)})

parts.register("loss", "retrace", RETRACE)
parts.register("loss", "dice", DICE)
