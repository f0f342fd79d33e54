"""A real S3 server on 127.0.0.1 for the tests: ``s3s-fs`` (crates.io, built with its
``binary`` feature; .ci/run installs it) serving a folder, and pyarrow's S3 filesystem
to put files in it.

    with S3Server(tmp_path / "s3") as s3:
        s3.upload(store_dir, "bucket", "stores/one")
        s3.filesystem()   # pyarrow.fs.S3FileSystem on it
        s3.url            # http://127.0.0.1:PORT (path-style: URL/bucket/key)
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ACCESS_KEY = "specscope-test"
SECRET_KEY = "specscope-test-secret"


def binary() -> str | None:
    """The s3s-fs command, where it is installed (PATH, then cargo's own folder)."""
    found = shutil.which("s3s-fs")
    if found:
        return found
    cargo = Path.home() / ".cargo" / "bin" / "s3s-fs"
    return str(cargo) if cargo.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """s3s-fs over ``root`` on a free port of 127.0.0.1, for the ``with`` block."""

    def __init__(self, root: Path) -> None:
        exe = binary()
        if exe is None:
            raise RuntimeError("s3s-fs is not installed: cargo install s3s-fs --features binary")
        self.exe = exe
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> S3Server:
        self.root.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.exe,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--access-key",
                ACCESS_KEY,
                "--secret-key",
                SECRET_KEY,
                str(self.root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"s3s-fs exited {self.process.returncode}: {err[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError("s3s-fs did not listen within 30 s")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stderr:
                self.process.stderr.close()
            self.process = None

    def filesystem(self) -> Any:
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=self.url,
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )

    def upload(self, folder: Path, bucket: str, prefix: str) -> None:
        """Copy ``folder`` (a store: its manifest and every file) to ``bucket/prefix``."""
        from pyarrow import fs

        s3 = self.filesystem()
        s3.create_dir(bucket)
        fs.copy_files(
            str(folder),
            f"{bucket}/{prefix}",
            source_filesystem=fs.LocalFileSystem(),
            destination_filesystem=s3,
        )


__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "binary", "free_port"]
