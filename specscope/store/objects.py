"""The object store a store may live on (``--store s3://bucket/prefix``): where it is, how
to reach it (the standard ``AWS_*`` variables) and the few calls a store makes of it, each
bounded in time and failing as one StoreError that names the URL.

Calls: get (bytes and etag), put (plain, create-only = If-None-Match: *, or replace-if =
If-Match: etag), put a local file, list a prefix, server-side copy, delete. A precondition
that fails is ``Conflict``, the one error a caller retries. Through ``obstore`` (Rust's
``object_store``): S3 and S3-compatible servers (MinIO, R2, Ceph, s3s-fs), path-style when
an endpoint is given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specscope.errors import StoreError, UsageError

SCHEMES = ("s3",)  # what --store takes besides a folder
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
# Bounded: a server that answers nothing fails a call in seconds, never hangs a writer:
# each request within the timeout (SPECSCOPE_S3_TIMEOUT_S), retries within twice that.
TIMEOUT_ENV = "SPECSCOPE_S3_TIMEOUT_S"
_TIMEOUT_S = 30.0
_RETRIES = 3


class Conflict(Exception):
    """A conditional put whose condition failed: another writer got there first."""


def is_url(where: object) -> bool:
    """Whether ``where`` names an object store (``s3://...``) rather than a folder."""
    return isinstance(where, str) and "://" in where


@dataclass(frozen=True)
class Location:
    """``s3://bucket/prefix``: the bucket, and the prefix under which the store's keys are."""

    scheme: str
    bucket: str
    prefix: str  # no leading or trailing /

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def key(self, rel: str) -> str:
        """The object key of a path relative to the store."""
        return f"{self.prefix}/{rel}" if self.prefix else rel


def parse_url(text: str) -> Location:
    """The location a ``--store`` URL names; a UsageError for a scheme or form not served."""
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UsageError(
            f"--store {text}: object stores are s3://bucket/prefix (S3 and S3-compatible "
            f"servers: set AWS_ENDPOINT_URL); {scheme}:// is not served"
        )
    if not parts.netloc or parts.query or parts.fragment:
        raise UsageError(f"--store {text}: expected s3://bucket/prefix")
    prefix = parts.path.strip("/")
    if any(p in ("", ".", "..") for p in prefix.split("/")) and prefix:
        raise UsageError(f"--store {text}: the prefix has an empty, . or .. segment")
    return Location(scheme, parts.netloc, prefix)


@dataclass(frozen=True)
class Meta:
    """An object as a listing gives it: its key relative to the store, size and time."""

    rel: str
    size: int
    modified: float  # seconds since the epoch


def _config(location: Location, env: Mapping[str, str]) -> dict[str, str]:
    """The S3 settings from the standard variables; plain http only to this machine."""
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    config: dict[str, str] = {"region": region}
    for var, key in (
        ("AWS_ACCESS_KEY_ID", "access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
        ("AWS_SESSION_TOKEN", "session_token"),
    ):
        if env.get(var):
            config[key] = env[var]
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"AWS_ENDPOINT_URL={endpoint!r}: expected http(s)://host[:port]")
        if parts.scheme == "http" and parts.hostname not in _LOCAL_HOSTS:
            raise UsageError(
                f"AWS_ENDPOINT_URL={endpoint}: plain http is allowed to this machine only "
                "(127.0.0.1, localhost); use https"
            )
        config["endpoint"] = endpoint.rstrip("/")
    return config


def _timeout(env: Mapping[str, str]) -> float:
    text = env.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else _TIMEOUT_S
    except ValueError:
        value = -1.0
    if not 0 < value < 3600:
        raise UsageError(f"{TIMEOUT_ENV}={text!r}: expected seconds, above 0 and below 3600")
    return value


class Objects:
    """The calls a store makes of its object store (see the module)."""

    def __init__(self, location: Location, env: Mapping[str, str] | None = None) -> None:
        try:
            from obstore.store import S3Store
        except ImportError as exc:
            raise UsageError(
                f"--store {location.url}: object stores need obstore, a dependency of specscope "
                "(pip install obstore)"
            ) from exc

        env = os.environ if env is None else env
        self.location = location
        self.config = _config(location, env)
        timeout = _timeout(env)
        client: Any = {
            "timeout": f"{timeout}s",
            "connect_timeout": f"{min(timeout, 5.0)}s",
        }
        if self.config.get("endpoint", "").startswith("http://"):
            client["allow_http"] = True
        retry: Any = {
            "max_retries": _RETRIES,
            "backoff": {
                "init_backoff": timedelta(milliseconds=100),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
            "retry_timeout": timedelta(seconds=2 * timeout),
        }
        settings: dict[str, Any] = {k: v for k, v in self.config.items()}
        if "endpoint" in settings:
            settings["virtual_hosted_style_request"] = False
        self.store = S3Store(
            location.bucket,
            prefix=location.prefix or None,
            client_options=client,
            retry_config=retry,
            **settings,
        )

    @property
    def url(self) -> str:
        return self.location.url

    def storage_options(self) -> dict[str, str]:
        """The same settings as polars' and DuckDB's readers take them (``aws_*``)."""
        out = {f"aws_{k}": v for k, v in self.config.items() if k != "endpoint"}
        if "endpoint" in self.config:
            out["aws_endpoint_url"] = self.config["endpoint"]
            out["aws_allow_http"] = str(self.config["endpoint"].startswith("http://")).lower()
        return out

    def _error(self, exc: Exception, rel: str, what: str) -> StoreError:
        import obstore.exceptions as oe

        where = f"{self.url}/{rel}" if rel else self.url
        text = str(exc).split("\n", 1)[0]
        if isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError):
            why = "the credentials were refused (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
        elif "NoSuchBucket" in str(exc):
            why = f"no bucket {self.location.bucket!r}"
        elif "error sending request" in text or "timed out" in text.lower():
            endpoint = self.config.get("endpoint", "the S3 endpoint")
            why = f"{endpoint} cannot be reached (refused, or no answer in time)"
        else:
            why = text[:200]
        return StoreError(f"cannot {what}: {why}", path=where)

    def _call(self, what: str, rel: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import obstore.exceptions as oe

        try:
            return fn(*args, **kwargs)
        except (oe.PreconditionError, oe.AlreadyExistsError) as exc:
            raise Conflict(rel) from exc
        except (oe.BaseError, OSError) as exc:
            if isinstance(exc, FileNotFoundError) and "NoSuchBucket" not in str(exc):
                raise
            raise self._error(exc, rel, what) from exc

    def get(self, rel: str) -> tuple[bytes, str | None] | None:
        """An object's bytes and etag; None when there is no such object."""
        import obstore

        try:
            got = self._call("read", rel, obstore.get, self.store, rel)
            return bytes(got.bytes()), got.meta.get("e_tag")
        except FileNotFoundError:
            return None

    def download(self, rel: str, dest: Path) -> None:
        """An object into a local file, whole or not at all (written beside, renamed)."""
        import obstore

        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            got = self._call("read", rel, obstore.get, self.store, rel)
            with open(tmp, "wb") as f:
                for chunk in got:
                    f.write(chunk)
            os.replace(tmp, dest)
        except FileNotFoundError as exc:
            raise StoreError("listed in the manifest, not there", path=f"{self.url}/{rel}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def put(
        self, rel: str, data: bytes | Path, *, create: bool = False, etag: str | None = None
    ) -> str | None:
        """Write an object (``create``: only if there is none; ``etag``: only if it is still
        that one); the new etag. ``Conflict`` when the condition fails."""
        import obstore

        mode: Any = "create" if create else ({"e_tag": etag} if etag else "overwrite")
        done = self._call("write", rel, obstore.put, self.store, rel, data, mode=mode)
        return done.get("e_tag") if isinstance(done, dict) else None

    def listing(self, prefix: str) -> list[Meta]:
        """Every object under ``prefix`` (relative to the store)."""
        import obstore

        def every() -> list[Meta]:  # the pages are fetched as they are iterated
            return [
                Meta(str(m["path"]), int(m["size"]), m["last_modified"].timestamp())
                for batch in obstore.list(self.store, prefix)
                for m in batch
            ]

        out: list[Meta] = self._call("list", prefix, every)
        return out

    def copy(self, source: str, dest: str) -> None:
        import obstore

        self._call("copy", source, obstore.copy, self.store, source, dest)

    def delete(self, rels: list[str]) -> None:
        import obstore

        if rels:
            try:
                self._call("delete", rels[0], obstore.delete, self.store, rels)
            except FileNotFoundError:
                pass


__all__ = ["SCHEMES", "Conflict", "Location", "Meta", "Objects", "is_url", "parse_url"]
