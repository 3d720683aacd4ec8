"""Every `python` block of python/README.md runs as written, twice (the
second run is a user running it again), each in a fresh interpreter, in a
temporary directory, against a `lance-context dev` (LC_URL set to it): sync
and asyncio blocks alike. A block that fails only because the server has
no route it calls yet (404 "no route") is skipped, naming the route.

The README's statements that can drift from the server are checked too:
the error codes it names exist, `list`'s default source is the server's,
and no example compares a code with a lower-case spelling.
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from _support import MISSING_ROUTES, PYDIR, Dev

import lance_context_client
from lance_context_client import Client
from lance_context_client.errors import ERROR_CLASSES

README = os.path.join(PYDIR, "README.md")
ROUTE_MISSING = re.compile(r"NotFoundError: 404 NOT_FOUND: no route (\S+ \S+)")


def blocks():
    """(first line number, code) of each ```python block."""
    out, cur, start = [], None, 0
    with open(README, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if cur is None and line.strip() == "```python":
                cur, start = [], n + 1
            elif cur is not None and line.strip() == "```":
                out.append((start, "".join(cur)))
                cur = None
            elif cur is not None:
                cur.append(line)
    if cur is not None:
        raise AssertionError(f"README.md: the block at line {start} is not closed")
    return out


class ReadmeExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = Dev.url()
        # The package the examples import: the one the tests import (an
        # installed copy under run_tests.sh), never one from the cwd.
        cls.pypath = os.path.dirname(os.path.dirname(os.path.abspath(lance_context_client.__file__)))

    def run_block(self, line, code, cwd):
        env = dict(os.environ, LC_URL=self.url, PYTHONPATH=self.pypath, PYTHONDONTWRITEBYTECODE="1")
        env.pop("LC_API_TOKEN", None)
        return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=120)

    def test_every_block_runs_twice(self):
        found = blocks()
        self.assertGreaterEqual(len(found), 8)
        asyncio_blocks = [line for line, code in found if "asyncio.run(" in code]
        self.assertGreaterEqual(len(asyncio_blocks), 2, "the README shows the asyncio client")
        with tempfile.TemporaryDirectory() as cwd:
            for line, code in found:
                with self.subTest(block=f"README.md:{line}"):
                    for attempt in (1, 2):
                        p = self.run_block(line, code, cwd)
                        if p.returncode == 0:
                            continue
                        m = ROUTE_MISSING.search(p.stderr)
                        if m:
                            route = re.sub(r"^(\S+ /api/v1/rollouts/)[^/]+", r"\1{name}", m.group(1))
                            MISSING_ROUTES.add(route)
                            self.skipTest(f"README.md:{line}: the server has no route {route} (404 route not found)")
                        self.fail(f"README.md:{line} (run {attempt}) exited {p.returncode}:\n{p.stderr}\n{p.stdout}")

    def test_codes_named_exist(self):
        # Regression (issue 28): the README listed codes that do not exist
        # and compared with lower-case spellings ("already_exists").
        with open(README, encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("\n## Errors"):]
        section = section[:section.index("\n## ", 1)]
        named = set(re.findall(r"`([A-Z][A-Z_]{3,})`", section))
        self.assertTrue(named, "the README names the codes")
        self.assertEqual(named - set(ERROR_CLASSES) - {"CONNECTION_ERROR"}, set(), "codes the server does not send")
        self.assertEqual(set(ERROR_CLASSES) - named, set(), "codes the README leaves out")
        self.assertIsNone(re.search(r"""\.code\s*[!=]=\s*["'][a-z_]+["']""", text), "a lower-case code comparison")
        for cls in ERROR_CLASSES.values():
            self.assertIn(f"`{cls.__name__}`", text)

    def test_names_the_reference_and_a_distinct_package(self):
        # Regression (issue 28): the reference system was never named, and
        # this package had its distribution and import names.
        with open(README, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("beinan/lance-context", text)
        with open(os.path.join(PYDIR, "pyproject.toml"), encoding="utf-8") as f:
            name = re.search(r'^name\s*=\s*"([^"]+)"', f.read(), re.M).group(1)
        self.assertNotEqual(name.replace("_", "-").lower(), "lance-context")
        self.assertEqual(name, "lance-context-client")
        self.assertEqual(lance_context_client.__name__, "lance_context_client")
        self.assertFalse(os.path.exists(os.path.join(PYDIR, "lance_context")), "no package named as the reference's")

    def test_list_default_source_as_documented(self):
        # Regression (issue 28): the README said list defaults to fragments.
        with open(README, encoding="utf-8") as f:
            m = re.search(r"`source` defaults to `(\w+)` \(the worker's default", f.read())
        self.assertIsNotNone(m, "the README states list's default source")
        with Client(self.url) as lc:
            store = lc.connect_or_create("readme-default-source")
            self.assertEqual(store.list(limit=1)["source"], m.group(1))


if __name__ == "__main__":
    unittest.main()
