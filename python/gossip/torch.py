"""PyTorch front end: a model's parameters (and floating-point buffers) viewed as one flat
buffer, and an optimizer wrapper that gossips after step(), as BlueFog's
DistributedNeighborAllreduceOptimizer does.

    peer = gossip.Peer.from_env()
    opt = gossip.torch.DecentralizedOptimizer(torch.optim.AdamW(model.parameters()),
                                              model, peer, period=1, rounds=R,
                                              evaluate=lambda: test_accuracy(model))
    for x, y in batches:
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        if opt.stopped: break          # gossip run --until-round, or a partition stop
    peer.finish()                      # and the launcher's average model is evaluated

Any torch.optim optimizer works (SGD, Adam, AdamW, ...); learning-rate schedulers are made on
the wrapped optimizer (`StepLR(opt.optimizer, ...)`) and stepped as usual; torch.autocast,
gradient clipping and GradScaler act on the model and the wrapped optimizer as without gossip.

The algorithm (dpsgd, local_sgd, push_sum, choco with its compressor, allreduce,
gradient_tracking) is the run config's gossip.algorithm, the same for every peer of a run;
`algorithm=` checks it.

Buffers: a model's floating-point buffers (BatchNorm's running mean and variance) sit in the
flat buffer behind the parameters and are mixed with them every `buffer_period` rounds (1, the
default: every round; 0: never, each peer keeps its own); between those rounds they are left as
they were. Integer buffers (BatchNorm's num_batches_tracked) are counters, not estimates: each
peer keeps its own, and they travel in checkpoints. The average model gossip run evaluates at
the end averages the buffers too.

Devices: a model on the CPU is mixed in place; a model on a CUDA device keeps its flat buffer
there, and the wrapper copies it to a pinned host mirror for each round and back (the transport
reads host memory). Other devices are refused with a message.

Overlap (`overlap=True`): the round no longer stalls the step. At each mixing step the wrapper
first applies the round before it, then snapshots the flat buffer on the model's device and
copies the snapshot into the host mirror (for a CUDA model a non-blocking copy to pinned memory
on a side stream), and mixes it on a thread of its own while the script's next steps run; the
thread copies the mixed values back to the device on the side stream, and at the next mixing
step the parameters take that round's change, x <- x + (mix(s) - s), s the snapshot, computed
on the device (the host memory, which eight peers on one machine share, sees only the two
copies and the round itself): the one-step-stale form gossip.overlap
gives C++ peers (x <- sum_j W_ij x_j + (x' - x)). Only dpsgd and local_sgd allow it: push_sum's
weights, choco's public copies, gradient tracking's tracker and allreduce's common model are
state that must follow the parameters each round. The round in flight is settled before any
other use of the peer (report, checkpoint, finish, ...), so its figures and checkpoints are of
a settled model; `synchronize()` settles it by hand (before evaluating the model, say).
`overlap_stats` holds, summed over the rounds, the host time the copies took to start
(`copy_s`), the time the thread waited for them (`copy_wait_s`), the mixing itself (`mix_s`)
and what the steps still waited for (`exposed_s`).

Checkpoints: every `checkpoint_every` gossip rounds (default the config's
train.checkpoint_every) the wrapper saves the model and its buffers, the gossip algorithm's
state, the torch optimizer's state dict, the integer buffers and its step count in the peer's
checkpoint; under `gossip run --resume` it restores all of them when it is made, and `steps`
says how many local steps the script has already taken (skip those batches). At
`gossip run --until-round` it saves a checkpoint and, at the next step(), leaves the network:
`stopped` turns True and step() does nothing more, so the script ends its loop (the library
never ends the process).

When the live graph splits and the config's monitor.on_partition is stop, step() evaluates the
model (with `evaluate`, when given), saves a checkpoint and finishes the peer, as gossip peer
does; from then on step() and the peer's report() and finish() do nothing (`stopped` is True).
"""
from __future__ import annotations

import io
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union, cast

import torch

from . import Evaluate, Peer, _gossip

__all__ = ["flatten_parameters", "DecentralizedOptimizer", "GossipDataParallel", "model_name",
           "device_for"]

_DEVICES = ("cpu", "cuda")


def _float_buffers(model: torch.nn.Module) -> List[Tuple[str, torch.Tensor]]:
    return [(n, b) for n, b in model.named_buffers() if b.is_floating_point()]


def flatten_parameters(model: torch.nn.Module, buffers: bool = False) -> torch.Tensor:
    """Moves `model`'s parameters (and, with `buffers`, its floating-point buffers after them)
    into one contiguous float32 tensor on the model's device and makes each a view of its slice
    (values unchanged). Returns the flat tensor: mixing it mixes the model, with no copies."""
    params = list(model.parameters())
    tensors: List[torch.Tensor] = params + [b for _, b in _float_buffers(model)] if buffers \
        else list(params)
    if not tensors:
        raise ValueError("flatten_parameters: the model has no parameters")
    device = tensors[0].device
    for t in tensors:
        if t.dtype != torch.float32:
            raise TypeError(f"flatten_parameters: a parameter or buffer is {t.dtype}; gossip "
                            "mixes float32 models (model.float(); use torch.autocast for "
                            "lower-precision compute)")
        if t.device != device:
            raise ValueError(f"flatten_parameters: the model spans {device} and {t.device}; "
                             "gossip mixes a model on one device")
    if device.type not in _DEVICES:
        raise ValueError(f"flatten_parameters: the model is on {device}; gossip mixes models "
                         "on the CPU or a CUDA device")
    total = sum(t.numel() for t in tensors)
    flat = torch.empty(total, dtype=torch.float32, device=device)
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            flat[offset:offset + n].copy_(t.data.reshape(-1))
            t.data = flat[offset:offset + n].view_as(t)
            offset += n
    return flat


def device_for(rank: int, verbose: bool = True) -> torch.device:
    """The device a rank trains on: with CUDA, GPU (LOCAL_RANK, else `rank`) modulo the visible
    GPUs (CUDA_VISIBLE_DEVICES says which are visible), so one rank a GPU when there are enough
    and several ranks a GPU when there are more ranks; else the CPU. Prints the choice on
    stderr (`verbose`)."""
    if not torch.cuda.is_available():
        choice, why = torch.device("cpu"), "no CUDA device visible"
    else:
        count = torch.cuda.device_count()
        local = os.environ.get("LOCAL_RANK")
        index = (int(local) if local is not None and local.isdigit() else int(rank)) % count
        choice = torch.device("cuda", index)
        why = f"{'LOCAL_RANK ' + local if local else 'rank ' + str(rank)} modulo {count} GPU(s)"
    if verbose:
        print(f"gossip.torch: rank {rank} trains on {choice} ({why})", file=sys.stderr,
              flush=True)
    return choice


def model_name(model: torch.nn.Module, flat: torch.Tensor) -> str:
    """The model's name in the handshake: its class, every parameter's and mixed buffer's
    shape, and the flat size."""
    shapes = ",".join("x".join(str(d) for d in p.shape) for p in model.parameters())
    mixed = ",".join("x".join(str(d) for d in b.shape) for _, b in _float_buffers(model))
    return f"torch:{type(model).__name__}:{shapes}:{mixed}:{flat.numel()}"


class _Round(NamedTuple):
    """What the overlap's thread hands back for a round (times: time.perf_counter())."""
    round: int  # the rounds done after it
    copy: Tuple[float, float]  # starting the snapshot's copy to the host (the step's thread)
    copy_wait: Tuple[float, float]  # the thread waiting for that copy
    mix_s: float  # the round itself, and starting the copy back
    uploaded: Optional[Any]  # the copy back's CUDA event (None: a CPU model, copied already)
    keep_buffers: bool  # this round leaves the buffers as they were


class DecentralizedOptimizer:
    """Wraps a torch optimizer over `model`: step() takes the optimizer's step, and every
    `period` steps one gossip round that mixes the model's parameters (and floating-point
    buffers every `buffer_period` rounds; 0: never) with the neighbours' over gossip's
    transport. `rounds` is the gossip rounds the script plans, for the launcher's progress
    line; `evaluate` (returning the test accuracy, or (loss, accuracy), of the model as it is)
    lets gossip run evaluate the network's average model when the script calls finish().
    `checkpoint_every` (rounds; None: the config's train.checkpoint_every, 0: none) saves
    checkpoints that `gossip run --resume` restores (see the module's doc). `overlap` mixes
    each round beside the next steps and applies it a step late (dpsgd, local_sgd; see the
    module's doc)."""

    def __init__(self, optimizer: torch.optim.Optimizer, model: torch.nn.Module, peer: Peer,
                 algorithm: Optional[str] = None, period: int = 1, rounds: int = 0,
                 evaluate: Optional[Evaluate] = None, checkpoint_every: Optional[int] = None,
                 buffer_period: int = 1, overlap: bool = False) -> None:
        self._check_options(period, checkpoint_every, buffer_period)
        configured = peer.config["algorithm"]
        if algorithm is not None and algorithm != configured:
            raise ValueError(f"DecentralizedOptimizer: algorithm '{algorithm}' is not the "
                             f"run's gossip.algorithm '{configured}' (every peer of a run "
                             "uses the config's)")
        self.optimizer = optimizer
        self.model = model
        self.peer = peer
        self.period = int(period)
        self.flat = flatten_parameters(model, buffers=True)
        self._n_params = sum(p.numel() for p in model.parameters())
        self.buffer_period = int(buffer_period)
        has_buffers = self.flat.numel() > self._n_params
        self._check_traits(configured, has_buffers, buffer_period, overlap)
        self._restore_buffers = has_buffers and self.buffer_period != 1
        self.overlap = bool(overlap)
        self._make_buffers()
        self.steps = 0
        self.checkpoint_every = checkpoint_every
        self.evaluate = evaluate
        self._join(rounds)

    @staticmethod
    def _check_options(period: int, checkpoint_every: Optional[int], buffer_period: int) -> None:
        if period < 1:
            raise ValueError(f"DecentralizedOptimizer: period must be at least 1, not {period}")
        if checkpoint_every is not None and checkpoint_every < 0:
            raise ValueError("DecentralizedOptimizer: checkpoint_every must be 0 or more rounds, "
                             f"not {checkpoint_every}")
        if buffer_period < 0:
            raise ValueError("DecentralizedOptimizer: buffer_period must be 0 (never mix the "
                             f"buffers) or more rounds, not {buffer_period}")

    @staticmethod
    def _check_traits(configured: str, has_buffers: bool, buffer_period: int,
                      overlap: bool) -> None:
        """buffer_period other than 1 and overlap, refused where the run's algorithm (its row
        of the algorithm table) does not allow them."""
        rows = {a["name"]: a for a in _gossip.algorithms()}  # the algorithm table's rows
        partial = [name for name, row in rows.items() if row["partial_buffers"]]
        if has_buffers and int(buffer_period) != 1 and not rows[configured]["partial_buffers"]:
            raise ValueError(f"DecentralizedOptimizer: buffer_period {buffer_period} needs "
                             f"gossip.algorithm {' or '.join(partial)}, not {configured} (its "
                             "state follows the whole buffer every round)")
        if overlap and not rows[configured]["overlaps"]:
            able = [name for name, row in rows.items() if row["overlaps"]]
            raise ValueError(f"DecentralizedOptimizer: overlap=True applies each round a step "
                             f"late, which only {' and '.join(able)} allow; {configured}'s state "
                             "(push_sum's weights, choco's public copies, gradient tracking's "
                             "tracker, allreduce's common model) must follow the parameters "
                             "every round (overlap=False)")

    def _make_buffers(self) -> None:
        """The host buffer gossip mixes and, with overlap, the snapshot, the mixed values and
        the thread (and CUDA stream) that mixes beside the steps."""
        cuda = self.flat.device.type == "cuda"
        # The host memory gossip mixes: the flat buffer itself, or a pinned mirror of a CUDA one
        # (and, to overlap, always a copy: the snapshot must not move with the model).
        self.host = self.flat
        if cuda or self.overlap:
            self.host = torch.empty(self.flat.numel(), dtype=torch.float32, pin_memory=cuda)
            self.host.copy_(self.flat)
        # Overlap: the snapshot s and the mixed values come back to the model's device, where
        # the change mix(s) - s is taken (a CPU model: plain copies through the same code).
        self._snap: Optional[torch.Tensor] = None
        self._mixed: Optional[torch.Tensor] = None
        self._side: Optional[Any] = None
        self._worker: Optional[ThreadPoolExecutor] = None
        self._pending: Optional["Future[_Round]"] = None
        self.overlap_stats: Dict[str, float] = {"rounds": 0, "copy_s": 0.0, "copy_wait_s": 0.0,
                                                "mix_s": 0.0, "exposed_s": 0.0}
        if self.overlap:
            self._snap = torch.empty_like(self.flat)
            self._mixed = torch.empty_like(self.flat)
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="gossip-mix")
            if cuda:
                self._side = torch.cuda.Stream(self.flat.device)

    def _join(self, rounds: int) -> None:
        """Joins the run with the host buffer; on resume, the optimizer's state from the
        checkpoint (join() restored the model)."""
        self.peer.join(self.host, model=model_name(self.model, self.flat), rounds=rounds,
                       evaluate=None if self.evaluate is None else self._evaluate_host)
        if self.overlap:
            self.peer._in_flight = self.synchronize
        saved = self.peer.resume_state()
        self.resumed = saved is not None
        if saved is not None:  # join() restored the model; the optimizer's state is ours
            self._to_device()
            self.load_state_dict(torch.load(io.BytesIO(saved)))
            if self.overlap:  # the checkpoint was taken where the next round starts
                self._start_round()

    def _to_device(self) -> None:
        if self.host is not self.flat:
            self.flat.copy_(self.host)

    def _evaluate_host(self) -> Union[float, Tuple[float, float]]:
        """`evaluate` on what the host buffer holds (the launcher's average model at finish());
        the model's own values come back afterwards."""
        assert self.evaluate is not None
        if self.host is self.flat:
            return self.evaluate()
        own = self.flat.clone()
        self.flat.copy_(self.host)
        try:
            return self.evaluate()
        finally:
            self.flat.copy_(own)

    @property
    def param_groups(self) -> List[Dict[str, Any]]:
        return cast(List[Dict[str, Any]], self.optimizer.param_groups)

    def zero_grad(self, set_to_none: bool = False) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """The wrapped optimizer's step, then a gossip round every `period` steps. Returns the
        closure's loss, as torch optimizers do. Once `stopped` it does nothing."""
        if self._stop_if_due():
            return closure() if closure is not None else None
        loss = self.optimizer.step(closure)
        self._after_step()
        return loss

    def _stop_if_due(self) -> bool:
        """At --until-round (its checkpoint saved) the peer leaves; whether it has left."""
        if self._pending is None and self.peer.stop_due():
            self.peer.stop()
        return self.stopped

    def _after_step(self, round_due: bool = True) -> None:
        """Counts a local step taken and, every `period` of them (unless `round_due` is False:
        GossipDataParallel.no_sync()), runs the gossip round."""
        self.steps += 1
        if not round_due or self.steps % self.period != 0:
            return
        if self.overlap:
            self._apply()  # the round before this one
            if self._after_round():
                return
            self._start_round()
        else:
            self._mix()
            self._after_round()

    def _after_round(self) -> bool:
        """What follows a settled round: a partition stop, a checkpoint, and with overlap
        --until-round (its checkpoint just written; without overlap the next step() stops).
        True when the peer has left."""
        if self.peer.partition_stop_due():
            self._stop_at_partition()
            return True
        if self.peer.checkpoint_due(self.checkpoint_every):
            self.save_checkpoint()
        if self.overlap and self.peer.rounds_done > 0 and self.peer.stop_due():
            self.peer.stop()
            return True
        return False

    def synchronize(self) -> None:
        """Waits for the round in flight (overlap=True), applies it to the model, x <- x +
        (mix(s) - s), and leaves the model in the buffer the peer holds (what its checkpoints,
        reports and final parameters read). Does nothing without overlap."""
        self._apply()
        if self.overlap:
            with torch.no_grad():
                self.host.copy_(self.flat)

    def _apply(self) -> None:
        """Waits for the round in flight and adds its change, mix(s) - s, to the model."""
        if self._pending is None:
            return
        t0 = time.perf_counter()
        pending, self._pending = self._pending, None
        done = pending.result()
        t1 = time.perf_counter()
        stats = self.overlap_stats
        stats["exposed_s"] += t1 - t0
        stats["copy_s"] += done.copy[1] - done.copy[0]
        stats["copy_wait_s"] += done.copy_wait[1] - done.copy_wait[0]
        stats["mix_s"] += done.mix_s
        stats["rounds"] += 1
        self.peer._trace_overlap(done.round, [("copy", *done.copy),
                                              ("copy_wait", *done.copy_wait),
                                              ("exposed", t0, t1)])
        assert self._mixed is not None and self._snap is not None
        with torch.no_grad():
            if done.uploaded is not None:  # the mixed values' copy to the device
                torch.cuda.current_stream(self.flat.device).wait_event(done.uploaded)
            change = self._mixed.sub_(self._snap)
            if done.keep_buffers:  # this round leaves the buffers as they were
                change[self._n_params:].zero_()
            self.flat.add_(change)

    def _start_round(self) -> None:
        """Snapshots the model on its device, starts the snapshot's copy into the host mirror
        and mixes it on the thread."""
        assert self._worker is not None and self._snap is not None
        t0 = time.perf_counter()
        done = None
        with torch.no_grad():
            # On the step's stream, so the next steps may change the model at once.
            self._snap.copy_(self.flat)
            if self._side is not None:  # after the snapshot (and the last round's copy back)
                self._side.wait_stream(torch.cuda.current_stream(self.flat.device))
            done = self._side_copy(self.host, self._snap)
        copy = (t0, time.perf_counter())
        keep = False
        if self._restore_buffers:
            next_round = self.peer.rounds_done + 1
            keep = self.buffer_period == 0 or next_round % self.buffer_period != 0
        self._pending = self._worker.submit(self._round, done, keep, copy)

    def _round(self, done: Optional[Any], keep_buffers: bool,
               copy: Tuple[float, float]) -> "_Round":
        """On the thread: waits for the snapshot's copy, mixes it in the host mirror and starts
        the mixed values' copy back to the device."""
        assert self._mixed is not None
        t0 = time.perf_counter()
        if done is not None:
            done.synchronize()
        t1 = time.perf_counter()
        rounds = self.peer.neighbor_average(self.host)
        with torch.no_grad():
            uploaded = self._side_copy(self._mixed, self.host)
        return _Round(rounds, copy, (t0, t1), time.perf_counter() - t1, uploaded, keep_buffers)

    def _side_copy(self, into: torch.Tensor, source: torch.Tensor) -> Optional[Any]:
        """into <- source: for a CUDA model a non-blocking copy on the side stream, returning
        its event; else a plain copy (None)."""
        if self._side is None:
            into.copy_(source)
            return None
        # The mixing thread's current device is GPU 0 unless set: the model's, explicitly.
        with torch.cuda.device(self.flat.device), torch.cuda.stream(self._side):
            into.copy_(source, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self._side)
        return event

    def _mix(self) -> None:
        with torch.no_grad():
            if self.host is not self.flat:
                self.host.copy_(self.flat)
            keep = None
            if self._restore_buffers:
                next_round = self.peer.rounds_done + 1
                if self.buffer_period == 0 or next_round % self.buffer_period != 0:
                    keep = self.host[self._n_params:].clone()
            self.peer.neighbor_average(self.host)
            if keep is not None:
                self.host[self._n_params:].copy_(keep)
            self._to_device()

    @property
    def stopped(self) -> bool:
        """Whether the peer has left: finished at a partition (monitor.on_partition: stop) or
        stopped at gossip run --until-round. The script's loop should end."""
        return self.peer.stopped

    def _stop_at_partition(self) -> None:
        result = self.evaluate() if self.evaluate is not None else None
        if isinstance(result, tuple):
            self.peer.report(loss=result[0], accuracy=result[1])
        elif result is not None:
            self.peer.report(accuracy=result)
        self.save_checkpoint()
        self.peer.finish()

    def save_checkpoint(self) -> None:
        """Saves the peer's checkpoint after the rounds done, with this wrapper's state."""
        state = io.BytesIO()
        torch.save(self.state_dict(), state)
        self.peer.save_checkpoint(state.getvalue())

    def state_dict(self) -> Dict[str, Any]:
        """The wrapped optimizer's state dict, the steps taken and the model's integer buffers
        (the flat buffer itself is in gossip's checkpoint)."""
        counters = {n: b.detach().cpu().clone() for n, b in self.model.named_buffers()
                    if not b.is_floating_point()}
        return {"optimizer": self.optimizer.state_dict(), "steps": self.steps,
                "int_buffers": counters}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
        buffers = dict(self.model.named_buffers())
        for name, value in state.get("int_buffers", {}).items():
            if name in buffers:
                buffers[name].copy_(value)


class _NoOptimizer:
    """GossipDataParallel's stand-in when it is given no optimizer: no state to checkpoint."""
    param_groups: List[Dict[str, Any]] = []

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        return closure() if closure is not None else None

    def zero_grad(self, set_to_none: bool = False) -> None:
        pass

    def state_dict(self) -> Dict[str, Any]:
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        pass


class GossipDataParallel(torch.nn.Module):
    """Wraps `module` where torch's DistributedDataParallel would, for a script that keeps its
    own optimizer and loop: the gossip round of each training step runs when that step is done,
    at the next forward() (or the next use of the peer: report, checkpoint, finish), so a DDP
    loop -- forward, backward, optimizer.step() -- gossips after every step with no other
    change. Each round mixes the parameters and floating-point buffers with the neighbours', as
    DecentralizedOptimizer's does (the same schedules: `period`, `buffer_period`, `overlap`;
    bit-identical to it), and steps taken inside `no_sync()` are local steps without a round.
    An eval-mode forward() (model.eval()) settles the last round first, so evaluation sees the
    mixed model; calling `.module` directly does not.

    `optimizer` (optional) is the script's own: its state then travels in the peer's
    checkpoints and is restored on resume (`gossip run --resume`, a torchrun restart), as
    DecentralizedOptimizer does; `steps` says how many local steps were already taken (skip
    those batches). Without it a resumed run restarts the optimizer's state. `rounds`,
    `evaluate` and `checkpoint_every` as DecentralizedOptimizer's. `state_dict()` holds the
    module's entries under "module." as DDP's does, and the wrapper's state under "gossip"."""

    def __init__(self, module: torch.nn.Module, peer: Peer,
                 optimizer: Optional[torch.optim.Optimizer] = None, period: int = 1,
                 rounds: int = 0, evaluate: Optional[Evaluate] = None,
                 checkpoint_every: Optional[int] = None, buffer_period: int = 1,
                 overlap: bool = False) -> None:
        super().__init__()
        self.module = module
        self.peer = peer
        self._gossip = DecentralizedOptimizer(
            cast(torch.optim.Optimizer, optimizer if optimizer is not None else _NoOptimizer()),
            module, peer, period=period, rounds=rounds, evaluate=evaluate,
            checkpoint_every=checkpoint_every, buffer_period=buffer_period, overlap=overlap)
        self._sync = True
        self._due: Optional[bool] = None  # a training step's round: due (True), local (False)
        peer._in_flight = self._settle

    @property
    def steps(self) -> int:
        """Local steps taken (after a resume, those the checkpoint had)."""
        return self._gossip.steps

    @property
    def resumed(self) -> bool:
        return self._gossip.resumed

    @property
    def stopped(self) -> bool:
        """Whether the peer has left (--until-round, a partition stop): end the loop."""
        self._step_done()
        return self._gossip.stopped

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._step_done()
        if self.training and torch.is_grad_enabled() and not self._gossip.stopped:
            self._due = self._sync
        return self.module(*args, **kwargs)

    def _step_done(self) -> None:
        """The step the last training forward() began is done: its round (or none, no_sync)."""
        due, self._due = self._due, None
        if due is not None and not self._gossip._stop_if_due():
            self._gossip._after_step(round_due=due)

    def _settle(self) -> None:
        """Before any other use of the peer: the step done, and with overlap its round too."""
        self._step_done()
        self._gossip.synchronize()

    def synchronize(self) -> None:
        """Runs the last step's round now (and with overlap waits for it): the model is mixed."""
        self._settle()

    class _NoSync:
        def __init__(self, owner: "GossipDataParallel") -> None:
            self.owner = owner

        def __enter__(self) -> None:
            self.owner._step_done()
            self.owner._sync = False

        def __exit__(self, *exc: Any) -> None:
            self.owner._step_done()
            self.owner._sync = True

    def no_sync(self) -> "GossipDataParallel._NoSync":
        """A context in which training steps are local steps: no gossip round after them (as
        DDP's no_sync() skips the gradient all-reduce); the first step after it has its round."""
        return GossipDataParallel._NoSync(self)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        self._settle()
        state = super().state_dict(*args, **kwargs)
        state["gossip"] = self._gossip.state_dict()
        return state

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> Any:
        state = dict(state_dict)
        extra = state.pop("gossip", None)
        result = super().load_state_dict(state, strict=strict)
        if extra is not None:
            self._gossip.load_state_dict(extra)
        self._gossip.synchronize()
        if self._gossip.host is not self._gossip.flat:
            with torch.no_grad():
                self._gossip.host.copy_(self._gossip.flat)
        return result
