"""How the clients of the distributed program ride out a node's death
(ngu_jax.loops.distributed.clients), without a Ray cluster: `ray.get` and
the nodes' `.remote` calls are replaced by fakes that fail while a node is
"down"; the end-to-end kills are in test_faults.py.
"""

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from ngu_jax.loops.distributed import clients  # pylint: disable=g-import-not-at-top,wrong-import-position


class _Call:
  """What a fake `.remote(...)` returns: the call, made at `ray.get`."""

  def __init__(self, fn, args, kwargs):
    self.fn, self.args, self.kwargs = fn, args, kwargs


class _Method:

  def __init__(self, fn):
    self.fn = fn

  def remote(self, *args, **kwargs):
    return _Call(self.fn, args, kwargs)


@pytest.fixture(name="fake_ray")
def _fake_ray(monkeypatch):
  """`ray.get` of `_Call`s and of stored objects (a dict of refs)."""
  objects = {}

  def get(ref, timeout=None):
    del timeout
    if isinstance(ref, _Call):
      return ref.fn(*ref.args, **ref.kwargs)
    value = objects[ref]
    if isinstance(value, Exception):
      raise value
    return value

  monkeypatch.setattr(ray, "get", get)
  monkeypatch.setattr(clients, "RETRY_S", 0.)
  return objects


def _down():
  return ray.exceptions.ActorUnavailableError("restarting", None)


def test_call_is_sent_again_until_the_node_answers(fake_ray):
  del fake_ray
  answers = [_down(), _down(), 7]

  def node():
    answer = answers.pop(0)
    if isinstance(answer, Exception):
      raise answer
    return answer

  assert clients.call(_Method(node)) == 7
  assert not answers


def test_call_gives_up_when_stopping_or_after_its_timeout(fake_ray):
  del fake_ray

  def dead():
    raise _down()

  with pytest.raises(clients.Stopped):
    clients.call(_Method(dead), should_stop=lambda: True)
  with pytest.raises(ray.exceptions.RayActorError):
    clients.call(_Method(dead), timeout=0.)


def test_a_node_error_is_not_sent_again(fake_ray):
  del fake_ray
  calls = []

  def buggy():
    calls.append(1)
    raise ValueError("a bug, not a death")

  with pytest.raises(ValueError):
    clients.call(_Method(buggy))
  assert len(calls) == 1


def test_variable_client_acts_on_while_the_learner_is_down(fake_ray,
                                                          monkeypatch):
  learner_state = {"version": 3, "up": True}

  def get_params_ref():
    if not learner_state["up"]:
      raise _down()
    ref = f"params-{learner_state['version']}"
    fake_ray[ref] = {"w": np.full(2, learner_state["version"])}
    return learner_state["version"], [ref]

  class Learner:
    pass

  learner = Learner()
  learner.get_params_ref = _Method(get_params_ref)
  client = clients.VariableClient(learner)
  assert client.get_variables()["w"][0] == 3 and client.version == 3
  learner_state.update(up=False)
  clock = [100.]
  monkeypatch.setattr(clients.time, "monotonic", lambda: clock[0])
  assert client.get_variables()["w"][0] == 3  # Held; the learner is down.
  assert client.failed_pulls == 1
  learner_state.update(up=True, version=1)  # Restarted from a checkpoint.
  assert client.get_variables()["w"][0] == 3  # Not asked again yet ...
  assert client.failed_pulls == 2
  clock[0] += clients.PULL_BACKOFF_S
  assert client.get_variables()["w"][0] == 1  # ... then the older version.
  assert client.version == 1 and client.staleness == 0


def test_variable_client_waits_for_its_first_parameters(fake_ray):
  answers = [_down(), (0, ["p"])]
  fake_ray["p"] = {"w": np.zeros(1)}

  def get_params_ref():
    answer = answers.pop(0)
    if isinstance(answer, Exception):
      raise answer
    return answer

  class Learner:
    pass

  learner = Learner()
  learner.get_params_ref = _Method(get_params_ref)
  assert clients.VariableClient(learner).get_variables()["w"].shape == (1,)


def test_replay_client_drops_an_update_its_replay_lost(fake_ray):
  fake_ray["update"] = _down()

  class Replay:
    pass

  replay = Replay()
  replay.update_priorities = type(
      "M", (), {"remote": staticmethod(lambda *a: "update")})()
  client = clients.ReplayClient(replay)
  client.update_priorities([1, 2], [0.5, 0.5])
  client.wait_for_updates()  # The replay died with it: dropped, no error.
  fake_ray["update"] = ValueError("keys never issued")
  client.update_priorities([1, 2], [0.5, 0.5])
  with pytest.raises(ValueError):  # Any other error is the replay's.
    client.wait_for_updates()
