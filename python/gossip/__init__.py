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
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _gossip, _torchrun

__all__ = ["Peer", "topology", "sim", "load_idx", "learning_rate", "Evaluate"]

#: What `evaluate=` returns: the test accuracy, or (test loss, test accuracy).
Evaluate = Callable[[], Union[float, Tuple[float, float]]]


def learning_rate(config: Dict[str, Any], epoch: float) -> float:
    """The learning rate gossip's own trainer uses at `epoch` (fractional, from 0) for a config
    dict such as Peer.config: optimizer.lr under optimizer.schedule (constant, step or cosine to
    min_lr at train.epochs) with its linear warm-up."""
    return float(_gossip.learning_rate(config, float(epoch)))


def load_idx(images: Union[str, "os.PathLike[str]"], labels: Union[str, "os.PathLike[str]"],
             classes: int = 10) -> Tuple[Any, Any]:
    """An IDX image set (plain or .gz, e.g. Debian's dataset-fashion-mnist files) read by
    gossip's own reader: (uint8 pixels as a numpy array of shape (rows, features), int64
    labels)."""
    import numpy
    pixels, y, n, dim = _gossip.load_idx(str(images), str(labels), int(classes))
    x = numpy.frombuffer(pixels, dtype=numpy.uint8).reshape(n, dim)
    return x, numpy.frombuffer(y, dtype=numpy.int32).astype(numpy.int64)


def _as_float_buffer(tensor: Any, what: str) -> Any:
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
                             "memory (gossip.torch.DecentralizedOptimizer keeps a host mirror "
                             "of a CUDA model for you)")
        if not tensor.is_contiguous():
            raise ValueError(f"{what}: the tensor is not contiguous; gossip mixes one "
                             "contiguous buffer (use gossip.torch.flatten_parameters)")
        return tensor.detach().numpy()
    return tensor


def _identity(tensor: Any) -> Optional[Tuple[Any, ...]]:
    """What makes a torch tensor the same buffer as at join(): the object, its memory, size,
    dtype and layout (None for other buffers, which are checked in full every call)."""
    if not type(tensor).__module__.startswith("torch"):
        return None
    return (id(tensor), tensor.data_ptr(), tensor.numel(), tensor.dtype, tensor.is_contiguous())


def _option_text(value: Any) -> str:
    """An override's value as gossip peer's option would be written: 2, 0.5, choco, true."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(os.fspath(value)) if isinstance(value, os.PathLike) else str(value)


def _override_options(overrides: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """{"on_byzantine": "cut"} as gossip peer's options: {"on-byzantine": "cut"}."""
    return {str(k).replace("_", "-"): _option_text(v) for k, v in (overrides or {}).items()}


def peer_config(config: Union[str, "os.PathLike[str]"], rank: int = 0,
                overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The run config's values a training script needs (as Peer.config has them), with the
    rank and the number of peers, without starting a peer: for a script's single-process
    reference run. `overrides` as Peer's."""
    arguments = _gossip.PeerArguments()
    arguments.config = os.fspath(config)
    arguments.rank = int(rank)
    arguments.overrides = _override_options(overrides)
    return _gossip.peer_config(arguments)


def _write_whole(path: str, payload: Dict[str, Any]) -> None:
    """`payload` as JSON at `path`, whole or not at all (the launcher polls for it)."""
    with open(path + ".tmp", "w") as f:
        json.dump(payload, f)
    os.replace(path + ".tmp", path)


class Peer:
    """One peer of a gossip network, backed by the C++ peer (see the module's doc)."""

    # Set by gossip.torch.DecentralizedOptimizer(overlap=True) while a round may be in flight
    # on its thread: called before any other use of the peer, it waits for that round (the C++
    # peer takes one caller at a time).
    _in_flight: Optional[Callable[[], None]] = None

    def _settle(self) -> None:
        if self._in_flight is not None:
            self._in_flight()

    def __init__(self, config: Optional[Union[str, "os.PathLike[str]"]] = None,
                 rank: Optional[int] = None, out: Optional[str] = None,
                 tls_dir: Optional[str] = None, hosts: Optional[str] = None,
                 events: bool = False, args: Optional[Sequence[str]] = None,
                 leave_at_round: Optional[int] = None,
                 overrides: Optional[Mapping[str, Any]] = None, join: Optional[str] = None,
                 rejoin: bool = False, resume_round: Optional[int] = None,
                 until_round: Optional[int] = None, metrics_port: Optional[int] = None,
                 advertise: Optional[str] = None) -> None:
        """A peer of the network `config` (a run config YAML) describes, with gossip peer's
        options as arguments of the same names. `rank` defaults to the launcher's
        (GOSSIP_RANK, mpirun, srun, a Kubernetes index), as for gossip peer. `events` prints
        gossip's '@gossip' event lines on stdout (gossip peer --events; under gossip run the
        launcher reads them from a descriptor of their own instead). `leave_at_round`: an
        elastic run's peer announces its leave at that round (--leave-at-round); leave() does
        it at the next round. `join` ("HOST:PORT,...") joins a running elastic network through
        those members; `rejoin` takes a running network's round; `resume_round` and
        `until_round` as gossip peer's; `advertise` ("HOST:PORT") the address this peer
        announces, signed (--advertise, net.advertise). `overrides` changes the config as gossip peer's
        override options do ({"epochs": 2, "algorithm": "choco"}; names as the options',
        without dashes). `args`, when given, is gossip peer's argument list (as gossip run
        --exec passes it) and replaces everything else."""
        self._joined: Optional[Tuple[Any, ...]] = None  # the join() tensor, as _identity() sees it
        if args is not None:
            arguments = _gossip.peer_arguments([str(a) for a in args])
        else:
            if config is None:
                raise ValueError("gossip.Peer needs a config: Peer(config='run.yaml') or "
                                 "Peer.from_env() under gossip run / with GOSSIP_CONFIG set")
            arguments = _gossip.PeerArguments()
            arguments.config = os.fspath(config)
            arguments.rank = None if rank is None else int(rank)
            arguments.out = str(out or "runs/peer")
            arguments.tls_dir = str(tls_dir) if tls_dir else None
            arguments.hosts = str(hosts) if hosts else None
            arguments.events = bool(events)
            arguments.leave_at_round = None if leave_at_round is None else int(leave_at_round)
            arguments.join = join
            arguments.advertise = advertise
            arguments.rejoin = bool(rejoin)
            arguments.resume_round = None if resume_round is None else int(resume_round)
            arguments.until_round = None if until_round is None else int(until_round)
            given = _override_options(overrides)
            if metrics_port is not None:
                given["metrics-port"] = str(int(metrics_port))
            arguments.overrides = given
        self._arguments = arguments
        self._peer = _gossip.Peer(arguments)
        self._buffer: Any = None
        self._evaluate: Optional[Evaluate] = None
        self._summary: Optional[Dict[str, Any]] = None  # what finish() returned, once it has
        self._stopped_at_round = False
        # Under gossip run: the run's folder, where the launcher hands out the average model.
        self._launcher_dir: Optional[str] = None

    @classmethod
    def from_env(cls, config: Optional[Union[str, "os.PathLike[str]"]] = None) -> "Peer":
        """The peer this process is. Under `gossip run --exec`: from the arguments the launcher
        passes (GOSSIP_PEER_ARGS). Otherwise the run config is `config`, else GOSSIP_CONFIG,
        else the script's first argument naming a .yaml file; the folder GOSSIP_OUT (default
        runs/peer; under torchrun runs/torchrun-TORCHELASTIC_RUN_ID); credentials from
        GOSSIP_TLS_DIR (or the config's net.tls); the rank as gossip peer finds it (torchrun's
        RANK, GOSSIP_RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK, JOB_COMPLETION_INDEX,
        a StatefulSet pod's name). Under torchrun the world size must be the topology's, the
        addresses come from MASTER_ADDR and MASTER_PORT, and a worker torchrun started again
        resumes from the newest checkpoint every worker holds (docs/python.md)."""
        given = os.environ.get("GOSSIP_PEER_ARGS")
        if given:
            peer = cls(args=json.loads(given))
            peer._launcher_dir = os.environ.get("GOSSIP_AVERAGE_DIR") or None
            return peer
        torchrun = _torchrun.active()
        config = config or os.environ.get("GOSSIP_CONFIG") or _torchrun.config_argument(sys.argv)
        if not config:
            under = "torchrun" if torchrun else "this launcher"
            raise ValueError(f"gossip.Peer.from_env: no run config under {under}: give it as the "
                             "script's argument (torchrun ... script.py CONFIG.yaml), set "
                             "GOSSIP_CONFIG=CONFIG.yaml, or pass Peer.from_env(config=...); "
                             "under gossip run --exec the launcher passes it (GOSSIP_PEER_ARGS)")
        tls_dir = os.environ.get("GOSSIP_TLS_DIR")
        if not torchrun:
            return cls(config, out=os.environ.get("GOSSIP_OUT"), tls_dir=tls_dir)
        out = _torchrun.folder()
        start = _torchrun.Start()
        if _torchrun.restart_count() > 0:
            start = _torchrun.restart_start(out, int(os.environ["RANK"]),
                                            int(os.environ["WORLD_SIZE"]))
            print(f"gossip: rank {os.environ['RANK']}: torchrun restart "
                  f"{_torchrun.restart_count()}: {start.why}", file=sys.stderr, flush=True)
        return cls(config, out=out, tls_dir=tls_dir, resume_round=start.resume_round,
                   rejoin=start.rejoin)

    @property
    def rank(self) -> int:
        """This peer's rank."""
        return int(self._peer.rank)

    @property
    def size(self) -> int:
        """Peers in the network."""
        return int(self._peer.size)

    @property
    def joined(self) -> bool:
        return bool(self._peer.joined)

    @property
    def rounds_done(self) -> int:
        """Gossip rounds done."""
        return int(self._peer.rounds_done)

    def _trace_overlap(self, round: int, spans: Sequence[Tuple[str, float, float]]) -> None:
        """An overlapped round's spans (part: copy, copy_wait or exposed; start and end in
        time.perf_counter() seconds) on the trace's overlap track, summed in summary.json's
        overlap_s. Nothing once the peer has stopped."""
        if self.stopped:
            return
        offset = self._peer.trace_now() - time.perf_counter()
        for part, start, end in spans:
            self._peer.trace_overlap(round, part, start + offset, end + offset)

    @property
    def planned_rounds(self) -> int:
        """The rounds planned: join()'s `rounds`, or gossip's own model's plan."""
        return int(self._peer.planned_rounds)

    @property
    def config(self) -> Dict[str, Any]:
        """The run config's values a training script needs (a dict)."""
        return dict(self._peer.config_values)

    def shard(self) -> List[int]:
        """This rank's shard of the config's training set: a list of sample indices, the same
        as gossip peer and the simulator draw (data.shard, train.seed). Any time, before or
        after join()."""
        return list(self._peer.shard())

    def join(self, tensor: Any, model: Optional[str] = None, rounds: int = 0,
             evaluate: Optional[Evaluate] = None) -> None:
        """Connects to the neighbours with `tensor` (float32, contiguous, on the CPU): the
        buffer every later round mixes in place; it must stay alive until finish(). `model`
        names the model for the handshake (default: its size), `rounds` the rounds planned
        (the launcher's progress line). `evaluate` (a function returning the test accuracy, or
        (loss, accuracy), of the parameters in `tensor`) lets gossip run evaluate the average
        model: at finish() the launcher averages every peer's final buffer and one process
        evaluates that average with it (its own buffer is put back afterwards). Raises
        ValueError when a neighbour refuses a buffer of another size."""
        buf = _as_float_buffer(tensor, "join")
        size = memoryview(buf).nbytes // 4
        self._peer.join(buf, model or f"python-{size}", int(rounds))
        self._buffer = buf
        self._joined = _identity(tensor)
        self._evaluate = evaluate

    def join_model(self) -> None:
        """Joins with gossip's own model from the config (its layers, optimizer and shard);
        step_round() then trains and mixes it, as gossip peer does."""
        self._peer.join_model()

    def neighbor_average(self, tensor: Any) -> int:
        """One gossip round: sends this peer's buffer to its out-neighbours, waits for its
        in-neighbours' (a dead one is left out), and mixes with the topology's weights, in
        place. `tensor` must be the buffer given to join(). Returns the rounds done."""
        # The same tensor as at join(), unchanged in memory and shape: already checked there.
        if self._joined is None or _identity(tensor) != self._joined:
            self._peer.check_buffer(_as_float_buffer(tensor, "neighbor_average"))
        return int(self._peer.average())

    def step_round(self) -> int:
        """join_model() peers: one round, local steps and mixing. Returns the rounds done."""
        return int(self._peer.average())

    def eval_due(self) -> bool:
        return bool(self._peer.eval_due())

    def params(self) -> memoryview:
        """The mixed buffer as a float32 memoryview (no copy)."""
        return self._peer.params().cast("B").cast("f")

    def report(self, step: Optional[int] = None, loss: float = float("nan"),
               accuracy: float = 0.0, epoch: float = -1.0) -> None:
        """Records an evaluation after the rounds done so far: metrics.csv, a parameter
        snapshot (the consensus distance comes from them) and the launcher's progress.
        `step` is informational. join_model() peers evaluate gossip's model themselves.
        After finish() or stop() it records nothing."""
        self._settle()
        if self.stopped:
            return
        self._peer.report(float(loss), float(accuracy), float(epoch))

    def resume_state(self) -> Optional[bytes]:
        """The bytes given to save_checkpoint() in the checkpoint this peer resumed from
        (`gossip run --resume`), or None when it started afresh. join() has restored the
        buffer, the gossip algorithm's state and the round from that checkpoint already; the
        script restores its own (a torch optimizer's state dict) from these bytes."""
        return self._peer.resume_state()

    def checkpoint_due(self, every: Optional[int] = None) -> bool:
        """Whether the rounds done call for a checkpoint: every `every` rounds (default the
        config's train.checkpoint_every; 0: never), and at gossip run --until-round."""
        if every is not None and int(every) < 0:
            raise ValueError(f"checkpoint_due: every must be 0 or more rounds, not {every}")
        return bool(self._peer.checkpoint_due(-1 if every is None else int(every)))

    def save_checkpoint(self, state: Union[bytes, bytearray, memoryview] = b"") -> None:
        """Writes this peer's checkpoint after the rounds done (DIR/peers/R/checkpoint-ROUND.ckpt,
        the newest 3 kept): the buffer, the gossip algorithm's state and `state`, the script's
        own bytes (e.g. a torch optimizer's state dict). `gossip run --resume DIR` continues from
        the newest round every peer has a checkpoint of."""
        self._settle()
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"save_checkpoint: state must be bytes, not {type(state).__name__} "
                            "(serialize it first, e.g. with torch.save into io.BytesIO)")
        self._peer.save_checkpoint(bytes(state))

    def partition_stop_due(self) -> bool:
        """Whether this peer's live graph has split and the config's monitor.on_partition is
        stop: record an evaluation (report()), save_checkpoint() and finish(), as gossip peer
        does; summary.json then says stopped_by_partition."""
        return not self.stopped and bool(self._peer.partition_stop_due())

    @property
    def stopped(self) -> bool:
        """Whether finish() or stop() has been called: the script's loop should end (later
        report(), finish() and rounds do nothing)."""
        return self._summary is not None or self._stopped_at_round

    def stop_due(self) -> bool:
        """Whether the rounds done reach gossip run --until-round: save_checkpoint(), then
        stop() and end the training loop."""
        return not self.stopped and bool(self._peer.stop_due())

    def leave(self) -> None:
        """An elastic run: announce this peer's leave at the next round, as gossip peer does on
        SIGTERM. It takes effect a few rounds later (the membership lead), when leave_due() says
        so; the last member cannot leave (said in its log, and it trains on)."""
        self._peer.request_leave()

    def leave_on_sigterm(self) -> None:
        """SIGTERM makes this peer leave() gracefully, as gossip peer does in an elastic run; a
        second SIGTERM ends the process at once. Call it from the main thread (it installs a
        signal handler; the library installs none by itself)."""
        import signal

        def handler(signum: int, frame: Any) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            self.leave()

        signal.signal(signal.SIGTERM, handler)

    def leave_due(self) -> bool:
        """An elastic run whose member timeline takes this peer out: whether the rounds done
        reach the round it leaves (its leave() or leave_at_round, or the schedule's). The loop
        then calls finish(); summary.json says left."""
        return not self.stopped and bool(self._peer.leave_due())

    def stop(self) -> None:
        """Leaves the network at --until-round without a summary, as gossip peer does there;
        `gossip run --resume` continues the run. The process then just ends its loop (the
        library never exits it). Raises ValueError when this round has no checkpoint."""
        self._settle()
        self._peer.stop()
        self._buffer = None
        self._stopped_at_round = True

    def live_graph(self) -> Dict[str, Any]:
        """What this peer's convergence monitor believes: {'connected', 'components',
        'alive', 'dead'}."""
        self._settle()
        return dict(self._peer.live_graph())

    def dead_peers(self) -> List[int]:
        self._settle()
        return list(self._peer.dead_peers())

    def finish(self) -> Dict[str, Any]:
        """Writes params.bin, summary.json and the done event, and leaves the network.
        Under gossip run with an `evaluate` given to join(), it then waits for the launcher's
        average of every peer's final buffer; the process the launcher names evaluates it
        (summary['average_model'] holds the result there). Returns the summary's figures as a
        dict. After stop() (--until-round) it returns {'stopped_at_round': N} and does nothing."""
        self._settle()
        if self._summary is not None:
            return self._summary
        if self._stopped_at_round:
            return {"stopped_at_round": self.rounds_done}
        awaits = self._launcher_dir is not None and self._evaluate is not None and \
            self._buffer is not None
        buf = self._buffer
        self._summary = dict(self._peer.finish(awaits))
        self._buffer = None
        if awaits:
            assert self._launcher_dir is not None and self._evaluate is not None
            result = _evaluate_average(self._launcher_dir, self.rank, buf, self._evaluate)
            if result is not None:
                self._summary["average_model"] = result
        return self._summary


def _evaluate_average(folder: str, rank: int, buf: Any,
                      evaluate: Evaluate) -> Optional[Dict[str, float]]:
    """Waits for the launcher's average-request.json in `folder`; when it names `rank`, loads
    the average into `buf`, evaluates it, writes average-eval.json and puts `buf` back.
    Returns the evaluation, or None when another process evaluates (or the wait ran out)."""
    import numpy
    request_path = os.path.join(folder, "average-request.json")
    wait_s = float(os.environ.get("GOSSIP_AVERAGE_WAIT_S", "1800"))
    deadline = time.monotonic() + wait_s
    while not os.path.exists(request_path):
        if time.monotonic() > deadline:
            print(f"gossip: no average model from the launcher after {wait_s:.0f} s "
                  f"({request_path}); finishing without it", file=sys.stderr)
            return None
        time.sleep(0.05)
    with open(request_path) as f:
        request = json.load(f)
    if request.get("evaluator") != rank:
        return None
    mine = numpy.asarray(memoryview(buf)).reshape(-1)
    avg = numpy.fromfile(request["average"], dtype=numpy.float32)
    if avg.size != mine.size:
        _write_whole(request["result"], {"error": f"the average has {avg.size} values but "
                                                  f"peer {rank}'s buffer {mine.size}"})
        return None
    saved = mine.copy()
    mine[:] = avg
    payload: Dict[str, Any]
    try:
        got = evaluate()
        loss, accuracy = got if isinstance(got, tuple) else (float("nan"), got)
        payload = {"loss": float(loss), "accuracy": float(accuracy), "evaluator": rank,
                   "peers": request.get("peers")}
    except Exception as e:  # the script's own code: say what it raised, keep the run's files
        traceback.print_exc(file=sys.stderr)
        payload = {"error": f"evaluate() raised {type(e).__name__}: {e}"}
    finally:
        mine[:] = saved
    _write_whole(request["result"], payload)
    if "error" in payload:
        return None
    return {"loss": payload["loss"], "accuracy": payload["accuracy"]}


from . import topology  # noqa: E402  (it uses _gossip only)
from ._sim import run as sim  # noqa: E402
