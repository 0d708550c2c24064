"""A streamed ``multipart/form-data`` request body, for uploads of files too big to hold in memory."""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

__all__ = ["CHUNK", "MultipartBody"]

#: Bytes read (or written) at a time when a file is streamed.
CHUNK = 1 << 20


class MultipartBody:
    """A ``multipart/form-data`` body of text fields and one file, read from disk in blocks.

    ``requests`` builds a ``files=`` upload in memory; a dataset can be gigabytes, so
    the body is streamed instead, with its length known up front (no chunked encoding).
    """

    def __init__(self, fields: Mapping[str, str], file_field: str, path: Path, file_type: str) -> None:
        self.boundary = secrets.token_hex(16)
        head = io.BytesIO()
        for name, value in fields.items():
            head.write(self._part_header(name, None, None))
            head.write(value.encode("utf-8") + b"\r\n")
        head.write(self._part_header(file_field, path.name, file_type))
        tail = f"\r\n--{self.boundary}--\r\n".encode()
        self._file = open(path, "rb")  # closed by close(), once requests has sent it
        self._length = head.tell() + os.fstat(self._file.fileno()).st_size + len(tail)
        head.seek(0)
        self._parts: list[IO[bytes]] = [head, self._file, io.BytesIO(tail)]

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def _part_header(self, name: str, filename: str | None, file_type: str | None) -> bytes:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            # As browsers do: the characters that would end the header or the quoted string are %-escaped.
            safe = filename.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")
            disposition += f'; filename="{safe}"'
        lines = [f"--{self.boundary}", f"Content-Disposition: {disposition}"]
        if file_type is not None:
            lines.append(f"Content-Type: {file_type}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")

    def __len__(self) -> int:
        return self._length

    def read(self, size: int = -1) -> bytes:
        out = bytearray()
        while self._parts and (size < 0 or len(out) < size):
            block = self._parts[0].read(-1 if size < 0 else size - len(out))
            if block:
                out += block
            else:
                self._parts.pop(0)
        return bytes(out)

    def __iter__(self) -> Iterator[bytes]:
        return iter(lambda: self.read(CHUNK), b"")

    def close(self) -> None:
        self._file.close()
