"""gossip: decentralized gossip SGD for PyTorch training loops.

The engine is C++ (the `_gossip` extension): every network operation -- TCP and shared memory
between peers, mutual TLS, the membership view and partition alerts, the run record -- runs
there, exactly as in a `gossip peer` process. Python holds the training loop.

    peer = gossip.Peer.from_env()          # rank, config, credentials, folder: as gossip peer
    flat = torch.zeros(n)                  # one flat float32 buffer (the model's parameters)
    peer.join(flat)                        # connect to the neighbours
    ...train on flat...; peer.neighbor_average(flat)   # one gossip round, mixed in place
    if peer.checkpoint_due(): peer.save_checkpoint(my_state_bytes)   # gossip run --resume
    peer.report(loss=..., accuracy=...)    # metrics.csv, the launcher's progress and summary
    peer.finish()

`gossip.torch.DecentralizedOptimizer` wraps a torch optimizer and does all of this after
`step()`. C++ errors arrive as ValueError (bad input or use) or RuntimeError, with the message
the C++ side wrote.
"""
import json
import os
import sys

from . import _gossip

__all__ = ["Peer", "topology", "sim", "load_idx", "learning_rate"]


def learning_rate(config, epoch):
    """The learning rate gossip's own trainer uses at `epoch` (fractional, from 0) for a config
    dict such as Peer.config: optimizer.lr under optimizer.schedule (constant, step or cosine to
    min_lr at train.epochs) with its linear warm-up."""
    return _gossip.learning_rate(config, float(epoch))


def load_idx(images, labels, classes=10):
    """An IDX image set (plain or .gz, e.g. Debian's dataset-fashion-mnist files) read by
    gossip's own reader: (uint8 pixels as a numpy array of shape (rows, features), int64
    labels)."""
    import numpy
    pixels, y, n, dim = _gossip.load_idx(str(images), str(labels), int(classes))
    x = numpy.frombuffer(pixels, dtype=numpy.uint8).reshape(n, dim)
    return x, numpy.frombuffer(y, dtype=numpy.int32).astype(numpy.int64)


def _as_float_buffer(tensor, what):
    """A writable float32 buffer over `tensor`'s memory (a torch tensor or anything with the
    buffer protocol), refusing what cannot be mixed in place, with a clear message."""
    mod = type(tensor).__module__
    if mod.startswith("torch"):
        import torch
        if tensor.dtype != torch.float32:
            raise TypeError(f"{what}: the tensor's dtype is {tensor.dtype}; gossip mixes "
                            "torch.float32 buffers (convert with .float())")
        if tensor.device.type != "cpu":
            raise ValueError(f"{what}: the tensor is on {tensor.device}; gossip mixes host "
                             "memory (keep the flat buffer on the CPU)")
        if not tensor.is_contiguous():
            raise ValueError(f"{what}: the tensor is not contiguous; gossip mixes one "
                             "contiguous buffer (use gossip.torch.flatten_parameters)")
        return tensor.detach().numpy()
    return tensor


def _identity(tensor):
    """What makes a torch tensor the same buffer as at join(): the object, its memory, size,
    dtype and layout (None for other buffers, which are checked in full every call)."""
    if not type(tensor).__module__.startswith("torch"):
        return None
    return (id(tensor), tensor.data_ptr(), tensor.numel(), tensor.dtype, tensor.is_contiguous())


class Peer:
    """One peer of a gossip network, backed by the C++ peer (see the module's doc)."""

    def __init__(self, config=None, rank=None, out=None, tls_dir=None, hosts=None,
                 events=False, args=None):
        """A peer of the network `config` (a run config YAML) describes. `rank` defaults to
        the launcher's (GOSSIP_RANK, mpirun, srun, a Kubernetes index), as for gossip peer.
        `args`, when given, is gossip peer's argument list and replaces everything else."""
        self._evaluate_path = None
        self._joined = None  # the tensor given to join(), as _identity() sees it
        if args is None:
            if config is None:
                raise ValueError("gossip.Peer needs a config: Peer(config='run.yaml') or "
                                 "Peer.from_env() under gossip run / with GOSSIP_CONFIG set")
            args = [str(config)]
            if rank is not None:
                args += ["--rank", str(int(rank))]
            args += ["--out", str(out or "runs/peer")]
            if tls_dir:
                args += ["--tls-dir", str(tls_dir)]
            if hosts:
                args += ["--hosts", str(hosts)]
            if events:
                args.append("--events")
        self._args = list(args)
        if "--events" in self._args:
            # stdout carries the launcher's event lines: the script's prints go to the log.
            sys.stdout = sys.stderr
        self._peer = _gossip.Peer(self._args)
        self._buffer = None
        self._summary = None  # what finish() returned, once it has

    @classmethod
    def from_env(cls):
        """The peer this process is: under `gossip run --exec` from the arguments the launcher
        passes (GOSSIP_PEER_ARGS); otherwise the config from GOSSIP_CONFIG, the folder from
        GOSSIP_OUT (default runs/peer), credentials from GOSSIP_TLS_DIR, and the rank as
        gossip peer finds it (GOSSIP_RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK,
        JOB_COMPLETION_INDEX, a StatefulSet pod's name)."""
        if os.environ.get("GOSSIP_EVALUATE"):
            return _EvaluatingPeer(os.environ["GOSSIP_EVALUATE"],
                                   os.environ["GOSSIP_EVALUATE_OUT"])
        given = os.environ.get("GOSSIP_PEER_ARGS")
        if given:
            return cls(args=json.loads(given))
        config = os.environ.get("GOSSIP_CONFIG")
        if not config:
            raise ValueError("gossip.Peer.from_env: no GOSSIP_PEER_ARGS (set by gossip run "
                             "--exec) and no GOSSIP_CONFIG naming the run config")
        return cls(config, out=os.environ.get("GOSSIP_OUT"),
                   tls_dir=os.environ.get("GOSSIP_TLS_DIR"))

    rank = property(lambda self: self._peer.rank, doc="this peer's rank")
    size = property(lambda self: self._peer.size, doc="peers in the network")
    joined = property(lambda self: self._peer.joined)
    rounds_done = property(lambda self: self._peer.rounds_done, doc="gossip rounds done")
    config = property(lambda self: self._peer.config_values,
                      doc="the run config's values a training script needs (a dict)")
    evaluating = False

    def shard(self):
        """This rank's shard of the config's training set: a list of sample indices, the same
        as gossip peer and the simulator draw (data.shard, train.seed)."""
        return self._peer.shard()

    def join(self, tensor, model=None, rounds=0, evaluate=None):
        """Connects to the neighbours with `tensor` (float32, contiguous, on the CPU): the
        buffer every later round mixes in place; it must stay alive until finish(). `model`
        names the model for the handshake (default: its size), `rounds` the rounds planned
        (the launcher's progress line). `evaluate` (a function returning the test accuracy, or
        (loss, accuracy), of the parameters in `tensor`) lets gossip run evaluate the average
        model at the end. Raises ValueError when a neighbour refuses a buffer of another size."""
        buf = _as_float_buffer(tensor, "join")
        size = memoryview(buf).nbytes // 4
        self._peer.join(buf, model or f"python-{size}", int(rounds))
        self._buffer = buf
        self._joined = _identity(tensor)

    def join_model(self):
        """Joins with gossip's own model from the config (its layers, optimizer and shard);
        step_round() then trains and mixes it, as gossip peer does."""
        self._peer.join_model()

    def neighbor_average(self, tensor):
        """One gossip round: sends this peer's buffer to its out-neighbours, waits for its
        in-neighbours' (a dead one is left out), and mixes with the topology's weights, in
        place. `tensor` must be the buffer given to join(). Returns the rounds done."""
        # The same tensor as at join(), unchanged in memory and shape: already checked there.
        if self._joined is None or _identity(tensor) != self._joined:
            self._peer.check_buffer(_as_float_buffer(tensor, "neighbor_average"))
        return self._peer.average()

    def step_round(self):
        """join_model() peers: one round, local steps and mixing. Returns the rounds done."""
        return self._peer.average()

    def eval_due(self):
        return self._peer.eval_due()

    def params(self):
        """The mixed buffer as a float32 memoryview (no copy)."""
        return self._peer.params().cast("B").cast("f")

    def report(self, step=None, loss=float("nan"), accuracy=0.0, epoch=-1.0):
        """Records an evaluation after the rounds done so far: metrics.csv, a parameter
        snapshot (the consensus distance comes from them) and the launcher's progress.
        `step` is informational. join_model() peers evaluate gossip's model themselves.
        After finish() (a stop at a partition) it records nothing."""
        if self._summary is not None:
            return
        self._peer.report(float(loss), float(accuracy), float(epoch))

    def resume_state(self):
        """The bytes given to save_checkpoint() in the checkpoint this peer resumed from
        (`gossip run --resume`), or None when it started afresh. join() has restored the
        buffer, the gossip algorithm's state and the round from that checkpoint already; the
        script restores its own (a torch optimizer's state dict) from these bytes."""
        return self._peer.resume_state()

    def checkpoint_due(self, every=None):
        """Whether the rounds done call for a checkpoint: every `every` rounds (default the
        config's train.checkpoint_every; 0: never), and at gossip run --until-round."""
        if every is not None and int(every) < 0:
            raise ValueError(f"checkpoint_due: every must be 0 or more rounds, not {every}")
        return self._peer.checkpoint_due(-1 if every is None else int(every))

    def save_checkpoint(self, state=b""):
        """Writes this peer's checkpoint after the rounds done (DIR/peers/R/checkpoint-ROUND.ckpt,
        the newest 3 kept): the buffer, the gossip algorithm's state and `state`, the script's
        own bytes (e.g. a torch optimizer's state dict). `gossip run --resume DIR` continues from
        the newest round every peer has a checkpoint of."""
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"save_checkpoint: state must be bytes, not {type(state).__name__} "
                            "(serialize it first, e.g. with torch.save into io.BytesIO)")
        self._peer.save_checkpoint(bytes(state))

    def partition_stop_due(self):
        """Whether this peer's live graph has split and the config's monitor.on_partition is
        stop: record an evaluation (report()), save_checkpoint() and finish(), as gossip peer
        does; summary.json then says stopped_by_partition."""
        return self._summary is None and self._peer.partition_stop_due()

    @property
    def stopped(self):
        """Whether finish() has been called (after the last round, or at a partition)."""
        return self._summary is not None

    def stop_due(self):
        """Whether the rounds done reach gossip run --until-round: save_checkpoint(), then
        stop() and end the process."""
        return self._peer.stop_due()

    def stop(self):
        """Leaves the network at --until-round without a summary, as gossip peer does there;
        `gossip run --resume` continues the run. Raises ValueError when this round has no
        checkpoint."""
        self._peer.stop()
        self._buffer = None

    def live_graph(self):
        """What this peer's convergence monitor believes: {'connected', 'components',
        'alive', 'dead'}."""
        return self._peer.live_graph()

    def dead_peers(self):
        return self._peer.dead_peers()

    def finish(self):
        """Writes params.bin, summary.json and the done event, and leaves the network.
        Returns the summary's figures as a dict."""
        if self._summary is None:
            self._summary = self._peer.finish()
            self._buffer = None
        return self._summary


class _EvaluatingPeer:
    """What Peer.from_env() gives when gossip run starts the script once more to evaluate the
    network's average model: join() loads the average into the buffer, calls `evaluate`,
    writes the result for the launcher and ends the process."""

    evaluating = True

    def __init__(self, params_path, out_path):
        self._params_path = params_path
        self._out_path = out_path
        self.config = _gossip.peer_config(json.loads(os.environ.get("GOSSIP_PEER_ARGS", "[]")))
        self.rank = self.config["rank"]
        self.size = self.config["size"]

    def join(self, tensor, model=None, rounds=0, evaluate=None):
        import numpy
        buf = numpy.asarray(_as_float_buffer(tensor, "join")).reshape(-1)
        avg = numpy.fromfile(self._params_path, dtype=numpy.float32)
        if avg.size != buf.size:
            raise ValueError(f"{self._params_path}: {avg.size} parameters, but the script's "
                             f"buffer has {buf.size}")
        if evaluate is None:
            with open(self._out_path, "w") as f:
                json.dump({"error": "the script passes no evaluate= to join (or to "
                                    "DecentralizedOptimizer)"}, f)
            sys.exit(3)
        buf[:] = avg
        result = evaluate()
        loss, accuracy = result if isinstance(result, tuple) else (float("nan"), result)
        with open(self._out_path, "w") as f:
            json.dump({"loss": float(loss), "accuracy": float(accuracy)}, f)
        sys.exit(0)

    def __getattr__(self, name):
        raise RuntimeError(f"gossip.Peer.{name}: this process was started only to evaluate "
                           "the average model (GOSSIP_EVALUATE); join() does that and exits")


from . import topology  # noqa: E402  (it uses _gossip only)
from ._sim import run as sim  # noqa: E402
