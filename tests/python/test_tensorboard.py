"""TensorBoard event files (train.tensorboard / --tensorboard): every record's length and CRCs
check out, every record parses as TensorBoard's `Event` protobuf (the message types built here
from their field numbers in tensorflow's event.proto and summary.proto, parsed by the protobuf
library), and the scalars are metrics.csv's."""
import csv
import glob
import os
import struct
import subprocess

import pytest

from conftest import GOSSIP, write_config

descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
from google.protobuf import descriptor_pool, message_factory  # noqa: E402


def event_class():
    """tensorflow.Event with the fields gossip writes (and Summary, Summary.Value)."""
    f = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tb")
    F = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tb.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tb.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    desc = pool.FindMessageTypeByName("tb.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def crc32c(data):
    """CRC-32C, bit by bit (an implementation of its own, not the writer's table)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path, Event):
    with open(path, "rb") as f:
        blob = f.read()
    events, at = [], 0
    while at < len(blob):
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        assert length_crc == masked(header), f"{path}: bad length CRC at byte {at}"
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        assert data_crc == masked(data), f"{path}: bad data CRC at byte {at}"
        e = Event()
        e.ParseFromString(data)
        events.append(e)
        at += 16 + length
    assert at == len(blob)
    return events


def check_run_folder(out, peers):
    Event = event_class()
    rows = list(csv.DictReader(open(os.path.join(out, "metrics.csv"))))
    runs = sorted(os.listdir(os.path.join(out, "tensorboard")))
    assert runs == sorted(["average"] + [f"peer_{p}" for p in range(peers)])
    for run in runs:
        files = glob.glob(os.path.join(out, "tensorboard", run, "events.out.tfevents.*"))
        assert len(files) == 1
        events = read_events(files[0], Event)
        assert events[0].file_version == "brain.Event:2"
        scalars = {}
        for e in events[1:]:
            for v in e.summary.value:
                scalars[(v.tag, e.step)] = v.simple_value
        peer = -1 if run == "average" else int(run.split("_")[1])
        mine = [r for r in rows if int(r["peer"]) == peer]
        assert mine, run
        for r in mine:
            step = int(r["round"])
            for tag in ("loss", "test_accuracy", "bytes_sent", "seconds", "epoch"):
                want = float(r[tag])
                if want != want:  # NaN: a peer not evaluated, left out
                    assert (tag, step) not in scalars
                    continue
                assert scalars[(tag, step)] == pytest.approx(want, rel=1e-4, abs=1e-3), \
                    (run, tag, step)
            if peer < 0:
                assert scalars[("consensus_distance", step)] == pytest.approx(
                    float(r["consensus_distance"]), rel=1e-4, abs=1e-9)
        # The time a round took between one row of the run and the next.
        for a, b in zip(mine, mine[1:]):
            rounds = int(b["round"]) - int(a["round"])
            if rounds > 0:
                assert scalars[("seconds_per_round", int(b["round"]))] == pytest.approx(
                    (float(b["seconds"]) - float(a["seconds"])) / rounds, rel=1e-3, abs=2e-3)


def test_sim_writes_tensorboard_files_equal_to_metrics_csv(folder, base_port):
    config = write_config(folder, 4, base_port)
    out = os.path.join(folder, "sim")
    r = subprocess.run([GOSSIP, "sim", config, "--out", out, "--quiet", "--tensorboard"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    check_run_folder(out, 4)
    # Off by default: nothing written.
    plain = os.path.join(folder, "plain")
    r = subprocess.run([GOSSIP, "sim", config, "--out", plain, "--quiet"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(plain, "tensorboard"))


def test_run_writes_tensorboard_files_equal_to_metrics_csv(folder, base_port):
    config = write_config(folder, 4, base_port)
    out = os.path.join(folder, "run")
    r = subprocess.run([GOSSIP, "run", config, "--out", out, "--no-progress", "--tensorboard"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    check_run_folder(out, 4)
