"""PyTorch front end: a model's parameters viewed as one flat buffer, and an optimizer wrapper
that gossips after step(), as BlueFog's DistributedNeighborAllreduceOptimizer does.

    peer = gossip.Peer.from_env()
    opt = gossip.torch.DecentralizedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                              model, peer, period=1, rounds=R,
                                              evaluate=lambda: test_accuracy(model))
    for x, y in batches:
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()

The algorithm (dpsgd, local_sgd, push_sum, choco with its compressor, allreduce) is the run
config's gossip.algorithm, the same for every peer of a run; `algorithm=` checks it.

Checkpoints: every `checkpoint_every` gossip rounds (default the config's
train.checkpoint_every) the wrapper saves the model, the gossip algorithm's state, the torch
optimizer's state dict and its step count in the peer's checkpoint; under `gossip run --resume`
it restores all of them when it is made, and `steps` says how many local steps the script has
already taken (skip those batches). At `gossip run --until-round` it saves a checkpoint and ends
the process at the next step() (after the script's report of that round), as gossip peer does.

When the live graph splits and the config's monitor.on_partition is stop, step() evaluates the
model (with `evaluate`, when given), saves a checkpoint and finishes the peer, as gossip peer
does; from then on step() and the peer's report() and finish() do nothing (`stopped` is True),
so the script's loop runs out without changing the model.
"""
import io
import sys

import torch

__all__ = ["flatten_parameters", "DecentralizedOptimizer"]


def flatten_parameters(model):
    """Moves `model`'s parameters into one contiguous float32 CPU tensor and makes each
    parameter a view of its slice (values unchanged). Returns the flat tensor: mixing it mixes
    the model, with no copies."""
    params = [p for p in model.parameters()]
    for p in params:
        if p.dtype != torch.float32:
            raise TypeError(f"flatten_parameters: a parameter is {p.dtype}; gossip mixes "
                            "float32 models (model.float())")
        if p.device.type != "cpu":
            raise ValueError(f"flatten_parameters: a parameter is on {p.device}; the flat "
                             "buffer gossip mixes lives on the CPU")
    total = sum(p.numel() for p in params)
    flat = torch.empty(total, dtype=torch.float32)
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            flat[offset:offset + n].copy_(p.data.reshape(-1))
            p.data = flat[offset:offset + n].view_as(p)
            offset += n
    return flat


def model_name(model, flat):
    """The model's name in the handshake: its class and every parameter's shape."""
    shapes = ",".join("x".join(str(d) for d in p.shape) for p in model.parameters())
    return f"torch:{type(model).__name__}:{shapes}:{flat.numel()}"


class DecentralizedOptimizer:
    """Wraps a torch optimizer over `model`: step() takes the optimizer's step, and every
    `period` steps one gossip round that mixes the model's parameters with the neighbours'
    (in place, over gossip's transport). `rounds` is the gossip rounds the script plans, for
    the launcher's progress line; `evaluate` (returning the test accuracy, or (loss,
    accuracy), of the model as it is) lets gossip run evaluate the network's average model.
    `checkpoint_every` (rounds; None: the config's train.checkpoint_every, 0: none) saves
    checkpoints that `gossip run --resume` restores (see the module's doc)."""

    def __init__(self, optimizer, model, peer, algorithm=None, period=1, rounds=0,
                 evaluate=None, checkpoint_every=None):
        if period < 1:
            raise ValueError(f"DecentralizedOptimizer: period must be at least 1, not {period}")
        if checkpoint_every is not None and checkpoint_every < 0:
            raise ValueError("DecentralizedOptimizer: checkpoint_every must be 0 or more rounds, "
                             f"not {checkpoint_every}")
        if algorithm is not None and not peer.evaluating:
            configured = peer.config["algorithm"]
            if algorithm != configured:
                raise ValueError(f"DecentralizedOptimizer: algorithm '{algorithm}' is not the "
                                 f"run's gossip.algorithm '{configured}' (every peer of a run "
                                 "uses the config's)")
        self.optimizer = optimizer
        self.model = model
        self.peer = peer
        self.period = int(period)
        self.flat = flatten_parameters(model)
        self.steps = 0
        self.checkpoint_every = checkpoint_every
        self.evaluate = evaluate
        peer.join(self.flat, model=model_name(model, self.flat), rounds=rounds,
                  evaluate=evaluate)
        saved = peer.resume_state()
        self.resumed = saved is not None
        if self.resumed:  # join() restored the model; the optimizer's state is ours
            self.load_state_dict(torch.load(io.BytesIO(saved)))

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        """The wrapped optimizer's step, then a gossip round every `period` steps. Returns the
        closure's loss, as torch optimizers do."""
        if self.peer.stop_due():  # --until-round: its checkpoint is saved, its report made
            self.peer.stop()
            sys.exit(0)
        if self.stopped:  # stopped at a partition: the model stays as it was
            return closure() if closure is not None else None
        loss = self.optimizer.step(closure)
        self.steps += 1
        if self.steps % self.period == 0:
            with torch.no_grad():
                self.peer.neighbor_average(self.flat)
            if self.peer.partition_stop_due():
                self._stop_at_partition()
            elif self.peer.checkpoint_due(self.checkpoint_every):
                self.save_checkpoint()
        return loss

    @property
    def stopped(self):
        """Whether the peer has finished (at a partition, with monitor.on_partition: stop)."""
        return self.peer.stopped

    def _stop_at_partition(self):
        result = self.evaluate() if self.evaluate is not None else None
        if isinstance(result, tuple):
            self.peer.report(loss=result[0], accuracy=result[1])
        elif result is not None:
            self.peer.report(accuracy=result)
        self.save_checkpoint()
        self.peer.finish()

    def save_checkpoint(self):
        """Saves the peer's checkpoint after the rounds done, with this wrapper's state."""
        state = io.BytesIO()
        torch.save(self.state_dict(), state)
        self.peer.save_checkpoint(state.getvalue())

    def state_dict(self):
        return {"optimizer": self.optimizer.state_dict(), "steps": self.steps}

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
