"""What a worker keeps across trials: local files of artifacts, and imported template classes.

Datasets and templates are artifacts that never change under their checksum, so a
worker fetches each one at most once: on a local artifact store it uses the store's
own file (nothing is copied); otherwise it downloads it into ``<cache>/<checksum>/``,
checking the SHA-256 on the way, and every later trial (of any job) reads that file.
Keeping the path stable matters beyond the download: the dataset readers of
:mod:`baobab.store` decode a file once per process, keyed by its path.

A template class is imported once per process per (checksum, class name), with its
knob config read and checked once.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from baobab.exceptions import ArtifactError, TemplateError
from baobab.model import BaseModel, KnobConfig, check_template, load_template
from baobab.store import ArtifactStore
from baobab.worker._gateway import TrialArtifacts
from baobab.worker._trial_process import TrialFailed

__all__ = ["ArtifactCache", "LoadedTemplate", "TemplateCache"]

_CHUNK = 1 << 20
_CHECKSUM = re.compile(r"[0-9A-Za-z]{8,128}")


class ArtifactCache:
    """Local files of artifacts, by checksum.

    Args:
        cache_dir: where copies of remote artifacts go (``settings.home / "cache"``).
    """

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        #: How many artifacts this cache downloaded (stays 0 on a local store).
        self.downloads = 0
        self._paths: dict[tuple[str, str], Path] = {}

    def path(self, store: ArtifactStore | TrialArtifacts, key: str, checksum: str, *, suffix: str = "") -> Path:
        """A local file with the content of artifact ``key`` of ``store``, whose SHA-256 is ``checksum``.

        Args:
            suffix: what the file name must end with (".py": Python imports only such files).

        Raises:
            ArtifactNotFoundError: nothing is stored under ``key``.
            ArtifactError: the stored artifact's SHA-256 is not ``checksum`` (it was
                replaced since it was registered), or ``checksum`` is malformed.
        """
        hit = self._paths.get((key, checksum))
        if hit is not None:
            return hit
        if store.is_local:
            path = store.local_path(key)  # type: ignore[union-attr]
        else:
            path = self._download(store, key, checksum, suffix)
        self._paths[(key, checksum)] = path
        return path

    def _download(self, store: ArtifactStore | TrialArtifacts, key: str, checksum: str, suffix: str) -> Path:
        if not _CHECKSUM.fullmatch(checksum):
            raise ArtifactError(f"the metadata store gives it the malformed checksum {checksum!r}", key=key)
        name = key.rsplit("/", 1)[-1]
        if not name.endswith(suffix):
            name += suffix
        target = self.cache_dir / checksum / name
        if target.is_file():  # downloaded by an earlier worker; checked before it was moved there
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".tmp-{uuid.uuid4().hex}-{name}")
        digest = hashlib.sha256()
        try:
            with store.open(key) as source, open(temp, "wb") as f:
                for chunk in iter(lambda: source.read(_CHUNK), b""):
                    digest.update(chunk)
                    f.write(chunk)
            if digest.hexdigest() != checksum:
                raise ArtifactError(
                    f"its SHA-256 is {digest.hexdigest()}, but the metadata store says {checksum}: it was "
                    "replaced after it was registered; upload it again",
                    key=key,
                )
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        self.downloads += 1
        return target


@dataclass(frozen=True)
class LoadedTemplate:
    """A template class ready for trials; ``path`` is the file it was imported from."""

    cls: type[BaseModel]
    config: KnobConfig
    path: Path


class TemplateCache:
    """Template classes by (checksum, class name), imported once per process."""

    def __init__(self, files: ArtifactCache) -> None:
        self._files = files
        self._loaded: dict[tuple[str, str], LoadedTemplate] = {}
        #: How many templates this cache imported.
        self.imports = 0

    def get(self, store: ArtifactStore | TrialArtifacts, key: str, checksum: str, class_name: str) -> LoadedTemplate:
        """The class ``class_name`` of the template stored under ``key``.

        Raises:
            TrialFailed: the file is missing, or the template does not import or breaks
                the BaseModel contract (with the template's traceback). Failures are not
                cached: the next trial tries again.
        """
        hit = self._loaded.get((checksum, class_name))
        if hit is not None:
            return hit
        try:
            path = self._files.path(store, key, checksum, suffix=".py").resolve()
        except ArtifactError as e:
            raise TrialFailed(f"cannot fetch the template: {e}") from None
        try:
            cls = load_template(path, class_name)
            config = check_template(cls)
        except TemplateError as e:
            raise TrialFailed.from_text(f"cannot load the template: {e}") from None
        # The file the class really comes from: a module imported earlier from another
        # path with the same bytes is reused, and tracebacks name that file.
        source = getattr(sys.modules.get(cls.__module__), "__file__", None)
        loaded = LoadedTemplate(cls, config, Path(source).resolve() if source else path)
        self._loaded[(checksum, class_name)] = loaded
        self.imports += 1
        return loaded
