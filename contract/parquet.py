"""Parquet bytes in and out: the one way the contract writes and reads its tables."""

from __future__ import annotations

import io
from typing import Any


def read_parquet(data: bytes, columns: list[str] | None = None) -> Any:
    """A Parquet table from bytes, read synchronously on this thread.

    Not ``pq.read_table(io.BytesIO(data))``: its dataset reader leaves read-ahead work on Arrow's IO
    threads holding the Python buffer, and when such a thread drops it during interpreter exit it
    aborts the process ("terminate called without an active exception", seen in CI)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(pa.BufferReader(data), pre_buffer=False) as parquet:
        return parquet.read(columns=columns, use_threads=False)


def parquet_bytes(table: Any) -> bytes:
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()
