"""--dump-dir: each live (forwarded) completion as one JSON file, for training pipelines.

Scripted turns are never dumped: they are replayed input, not model output. File names start with
a zero-padded sequence, so they sort chronologically. Each file is written to a temporary name and
renamed, and the proxy holds back the end of the response until it is, so a consumer that has seen
the whole answer finds the whole file.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from proxy.names import file_in
from proxy.recording.recorder import redact

_SEQUENCE = re.compile(r"^(\d{10})-")


class Dumper:
    """`sequence` is the store's shared counter, so that workers never pick the same name."""

    def __init__(
        self,
        folder: Path,
        sequence: Callable[..., Awaitable[int]],
        secrets: tuple[str, ...] = (),
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.secrets = tuple(s for s in secrets if s)
        self._sequence = sequence
        # after a restart, names keep sorting after the files already there
        numbers = (int(m.group(1)) for p in folder.iterdir() if (m := _SEQUENCE.match(p.name)))
        self._floor = max(numbers, default=0)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dumper")

    async def write(self, session: str, record: dict[str, Any]) -> Path:
        number = await self._sequence("dumps", at_least=self._floor)
        path = file_in(self.folder, f"{number:010d}-{session}", ".json")
        await asyncio.get_running_loop().run_in_executor(
            self._writer, _write_atomically, path, record, self.secrets
        )
        return path

    def close(self) -> None:
        self._writer.shutdown(wait=True)


def _write_atomically(path: Path, record: dict[str, Any], secrets: tuple[str, ...]) -> None:
    data = redact(orjson.dumps(record, option=orjson.OPT_INDENT_2), secrets)
    temp = path.with_name(f".{path.name}.tmp")
    with temp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
