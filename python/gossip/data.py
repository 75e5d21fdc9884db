"""Data sets a training script reads beside gossip.load_idx: CIFAR-10 in its standard binary
format (the "CIFAR-10 binary version": data_batch_1.bin ... data_batch_5.bin and test_batch.bin,
each record one label byte and 3,072 pixel bytes, the red, green and blue 32x32 planes)."""
from __future__ import annotations

import os
from typing import Any, Sequence, Tuple, Union

__all__ = ["load_cifar10", "CIFAR10_RECORD"]

PathLike = Union[str, "os.PathLike[str]"]

#: Bytes of one CIFAR-10 record: a label byte, then 3 x 32 x 32 pixel bytes.
CIFAR10_RECORD = 1 + 3 * 32 * 32


def _files(where: Union[PathLike, Sequence[PathLike]], train: bool) -> Sequence[str]:
    if isinstance(where, (str, os.PathLike)):
        folder = os.fspath(where)
        if os.path.isfile(folder):
            return [folder]
        names = [f"data_batch_{i}.bin" for i in range(1, 6)] if train else ["test_batch.bin"]
        files = [os.path.join(folder, n) for n in names]
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            raise ValueError(f"load_cifar10: {missing[0]}: no such file (a folder of the "
                             "CIFAR-10 binary version holds data_batch_1.bin ... "
                             "data_batch_5.bin and test_batch.bin)")
        return files
    return [os.fspath(f) for f in where]


def load_cifar10(where: Union[PathLike, Sequence[PathLike]],
                 train: bool = True) -> Tuple[Any, Any]:
    """Reads CIFAR-10 binary files: a folder (its five training batches, or with
    train=False its test batch), one file, or a list of files. Returns (uint8 pixels of shape
    (n, 3, 32, 32), int64 labels of shape (n,)) as numpy arrays. A file whose size is not a
    whole number of records, or a label outside 0-9, raises ValueError naming the file."""
    import numpy
    pixels, labels = [], []
    for path in _files(where, train):
        raw = numpy.fromfile(path, dtype=numpy.uint8)
        if raw.size == 0 or raw.size % CIFAR10_RECORD != 0:
            raise ValueError(f"load_cifar10: {path}: {raw.size} bytes is not a whole number "
                             f"of {CIFAR10_RECORD}-byte records (truncated, or not CIFAR-10's "
                             "binary version)")
        records = raw.reshape(-1, CIFAR10_RECORD)
        y = records[:, 0].astype(numpy.int64)
        bad = numpy.flatnonzero(y > 9)
        if bad.size:
            raise ValueError(f"load_cifar10: {path}: record {int(bad[0])} has label "
                             f"{int(y[bad[0]])}; CIFAR-10's labels are 0-9")
        pixels.append(records[:, 1:].reshape(-1, 3, 32, 32))
        labels.append(y)
    return numpy.concatenate(pixels), numpy.concatenate(labels)
