"""A PEP 517 build backend in the standard library only, for this one
package, so that `pip install ./python` needs nothing from a package index
(setuptools is not fetched into the isolated build environment: there is
nothing to fetch). It builds a pure-Python wheel (PEP 427), an sdist and an
editable wheel (PEP 660), from pyproject.toml's [project] table.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "lance_context_client"
# What goes into an sdist besides the package: enough to build it again.
SDIST_EXTRA = ("pyproject.toml", "README.md", "_build/backend.py")


def _project() -> Dict[str, str]:
    """The scalar string fields of pyproject.toml's [project] table (the
    only ones this package uses), and the version from the package."""
    out: Dict[str, str] = {}
    section = ""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"]*)"\s*$', line)
            if section == "[project]" and m:
                out[m.group(1)] = m.group(2)
    with open(os.path.join(ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError(f"no __version__ in {PACKAGE}/__init__.py")
    out["version"] = m.group(1)
    for k in ("name", "description", "requires-python"):
        if k not in out:
            raise RuntimeError(f"pyproject.toml [project] has no {k}")
    return out


def _dist_name(p: Dict[str, str]) -> str:
    return re.sub(r"[-_.]+", "_", p["name"]).lower()


def _metadata(p: Dict[str, str]) -> bytes:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
        f"Requires-Python: {p['requires-python']}",
    ]
    if "license" in p:
        lines.append(f"License: {p['license']}")
    lines.append("Description-Content-Type: text/markdown")
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def _package_files() -> List[Tuple[str, str]]:
    """(archive name, path) of the package's files, sorted."""
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".py", ".typed")):
                full = os.path.join(dirpath, fn)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _epoch() -> Tuple[int, int, int, int, int, int]:
    t = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01, the zip format's first day
    return time.gmtime(max(t, 315532800))[:6]


class _Wheel:
    def __init__(self, path: str, dist_info: str):
        self.zf = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.dist_info = dist_info
        self.record: List[str] = []
        self.when = _epoch()

    def add(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, date_time=self.when)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        self.record.append(f"{name},sha256={digest},{len(data)}")

    def close(self) -> None:
        name = f"{self.dist_info}/RECORD"
        self.record.append(f"{name},,")
        info = zipfile.ZipInfo(name, date_time=self.when)
        info.external_attr = 0o644 << 16
        self.zf.writestr(info, "\n".join(self.record) + "\n")
        self.zf.close()


def _dist_info_files(p: Dict[str, str]) -> Dict[str, bytes]:
    return {
        "METADATA": _metadata(p),
        "WHEEL": b"Wheel-Version: 1.0\nGenerator: lance-context-client _build/backend.py\n"
                 b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        "top_level.txt": (PACKAGE + "\n").encode("ascii"),
    }


def _build(wheel_directory: str, editable: bool) -> str:
    p = _project()
    dist = _dist_name(p)
    dist_info = f"{dist}-{p['version']}.dist-info"
    filename = f"{dist}-{p['version']}-py3-none-any.whl"
    w = _Wheel(os.path.join(wheel_directory, filename), dist_info)
    try:
        if editable:
            # PEP 660: a .pth file puts the source directory on sys.path.
            w.add(f"__editable__.{dist}.pth", (ROOT + "\n").encode("utf-8"))
        else:
            for name, full in _package_files():
                with open(full, "rb") as f:
                    w.add(name, f.read())
        for name, data in _dist_info_files(p).items():
            w.add(f"{dist_info}/{name}", data)
    finally:
        w.close()
    return filename


# -- PEP 517 / PEP 660 hooks ---------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    dist_info = f"{_dist_name(p)}-{p['version']}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    for name, data in _dist_info_files(p).items():
        with open(os.path.join(metadata_directory, dist_info, name), "wb") as f:
            f.write(data)
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    filename = base + ".tar.gz"
    mtime = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)

    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"{base}/{name}")
        info.size = len(data)
        info.mtime = mtime
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", _metadata(p))
        files = [(n, os.path.join(ROOT, n)) for n in SDIST_EXTRA] + _package_files()
        for name, full in sorted(files):
            with open(full, "rb") as f:
                add(tar, name, f.read())
    return filename
