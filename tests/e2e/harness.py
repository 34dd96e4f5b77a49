"""End-to-end test harness for the runsnack CLI (Python standard library only).

Every test gets its own temporary directory; each "installation" (provider or
consumer) is a separate RUNSNACK_HOME under it. Every process a test starts is
tracked by PID and stopped in tearDown; every process's stderr is kept and
checked for sanitizer reports.

The binary comes from $RUNSNACK_BIN (set by CTest), else build/dev/src/cli/runsnack.
"""

import base64
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("RUNSNACK_BIN") or os.path.join(REPO, "build", "dev", "src", "cli", "runsnack")

# Generous: the binary is built with ASan/UBSan and the machine may be busy.
READY_DEADLINE = 30.0
CMD_TIMEOUT = 60.0

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "AddressSanitizer:", "UndefinedBehaviorSanitizer")

BASE32_RE = re.compile(r"^[a-z2-7]+$")


def random_secret():
    """A valid 26-character lowercase base32 secret (16 random bytes)."""
    return base64.b32encode(os.urandom(16)).decode().rstrip("=").lower()


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The characters a link may hold that no common shell (bash, zsh, fish) treats specially.
SHELL_SAFE_LINK_RE = re.compile(r"^[A-Za-z0-9:/.,_-]+$")


def split_link(link):
    """A link's fields from either spelling (link/link.hpp), whitespace removed: {"rdv", "grant", "peer", "c", "k"},
    None where absent.
      runsnack://RDV/g/GRANT/p/PEER/c/HOST:PORT,.../k/SECRET          (written since issue 39)
      runsnack://RDV/g/GRANT?peer=PEER&c=HOST:PORT,...#k=SECRET       (the first spelling, still read)"""
    link = "".join(link.split())
    m = re.match(r"(?i)^runsnack://([^/?#]*)/(.*)$", link)
    if not m:
        raise ValueError("not a runsnack link: %r" % link)
    rdv, rest = m.group(1), m.group(2)
    if "?" in rest or "#" in rest:
        path, _, fragment = rest.partition("#")
        path, _, query = path.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        secret = dict(p.partition("=")[::2] for p in fragment.split("&") if p).get("k")
        segments = path.split("/")
        return {"rdv": rdv, "grant": segments[1] if len(segments) > 1 else None, "peer": params.get("peer"),
                "c": params.get("c"), "k": secret}
    segments = rest.rstrip("/").split("/")
    pairs = dict(zip(segments[0::2], segments[1::2]))
    return {"rdv": rdv, "grant": pairs.get("g"), "peer": pairs.get("p"), "c": pairs.get("c"), "k": pairs.get("k")}


def join_link(fields, legacy=False):
    """The link of split_link()'s fields; `legacy`: in the first spelling (?peer=...&c=...#k=...)."""
    if legacy:
        return "runsnack://%s/g/%s?peer=%s%s#k=%s" % (fields["rdv"] or "", fields["grant"], fields["peer"],
                                                     "&c=" + fields["c"] if fields["c"] else "", fields["k"])
    return "runsnack://%s/g/%s/p/%s%s/k/%s" % (fields["rdv"] or "", fields["grant"], fields["peer"],
                                              "/c/" + fields["c"] if fields["c"] else "", fields["k"])


def replace_query_param(link, key, value):
    """`link` with one field replaced ("peer", "c", "k", "grant"), in the spelling it came in."""
    fields = split_link(link)
    fields[key] = value
    return join_link(fields, legacy="?" in link or "#" in link)


def replace_secret(link, secret):
    return replace_query_param(link, "k", secret)


def link_secret(link):
    return split_link(link)["k"]


def read_terminal(master, proc, until=None, deadline=60.0):
    """What a terminal shows (`master`: a pty's master side): read until `until` (bytes) appears,
    else until `proc` has exited and the terminal has nothing more, at most `deadline` seconds."""
    shown = b""
    end = time.monotonic() + deadline
    while time.monotonic() < end and not (until is not None and until in shown):
        if select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's last user is gone
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    return shown


def sanitizer_report(text):
    for marker in SANITIZER_MARKERS:
        if marker in text:
            return marker
    return None


def workspace_name(folder):
    """The workspace a consumer uses for project `folder` (sandbox/workspace_names.hpp), computed here
    independently: the folder's name, made a name, and 8 hex digits of its absolute path's SHA-256."""
    path = os.path.normpath(os.path.abspath(folder))
    base = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in os.path.basename(path))[:40]
    base = base.lstrip(".-") or "project"
    return base + "-" + hashlib.sha256(path.encode()).hexdigest()[:8]


class Proc:
    """A background runsnack process: stdout lines collected by a thread, stderr to a file."""

    def __init__(self, test, args, home, env_extra=None, name="proc", wrapper=(), cwd="cli"):
        self.test = test
        self.args = args
        self.home = home
        self.name = name
        self.stderr_path = os.path.join(test.tmp, "%s-%d.stderr" % (name, len(test._procs)))
        self._stderr_file = open(self.stderr_path, "wb")
        env = test.env(home, env_extra)
        # `wrapper`: a command that runs the binary, e.g. setpriv to start it as another user.
        self.popen = subprocess.Popen(list(wrapper) + [BIN] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=self._stderr_file, env=env, start_new_session=True,
                                      cwd=test.cli_cwd if cwd == "cli" else cwd)
        self.pid = self.popen.pid
        self.lines = []
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        test._procs.append(self)

    def _read(self):
        for raw in self.popen.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def events(self):
        """stdout lines parsed as JSON (lines that are not JSON are skipped)."""
        out = []
        with self._cond:
            lines = list(self.lines)
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_for(self, predicate, deadline, what):
        """Waits until predicate(event) holds for some JSON stdout line; returns that event."""
        end = time.monotonic() + deadline
        while True:
            for ev in self.events():
                if predicate(ev):
                    return ev
            with self._cond:
                if self._eof and all(not predicate(ev) for ev in self.events()):
                    self.test.fail("%s exited (rc=%s) before %s; stdout=%r stderr=%r" %
                                   (self.name, self.popen.poll(), what, self.lines, self.stderr()))
                remaining = end - time.monotonic()
                if remaining <= 0:
                    self.test.fail("timed out after %.0fs waiting for %s from %s; stdout=%r stderr=%r" %
                                   (deadline, what, self.name, self.lines, self.stderr()))
                self._cond.wait(min(remaining, 0.2))

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self):
        return self.popen.poll() is None

    def signal(self, sig):
        if self.popen.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout):
        """Waits for exit; returns the exit code or None on timeout."""
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=5)
        return rc

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL if it does not exit in time. Returns the exit code."""
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            rc = self.wait(timeout)
            if rc is None:
                os.kill(self.pid, signal.SIGKILL)
                rc = self.wait(timeout)
        else:
            rc = self.wait(timeout)
        self._stderr_file.close()
        if self.popen.stdout:
            self._reader.join(timeout=5)
            self.popen.stdout.close()
        return rc


class Provider(Proc):
    """`runsnack share --json --listen ...`, waiting for its ready line."""

    def __init__(self, test, home, extra_args=(), listen="127.0.0.1:0", name="provider", env_extra=None, wrapper=()):
        super().__init__(test, ["share", "--json", "--listen", listen] + list(extra_args), home, env_extra=env_extra,
                         name=name, wrapper=wrapper, cwd=None)
        self.ready = self.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "the ready event")
        self.link = self.ready.get("link")
        self.grant = self.ready.get("grant")
        self.listen = self.ready["listen"]
        self.port = int(self.listen.rsplit(":", 1)[1])
        self.peer = self.ready["peer"]

    def events_named(self, name):
        return [e for e in self.events() if e.get("event") == name]


class E2ETestCase(unittest.TestCase):
    """Base class: a temp dir per test, homes under it, processes stopped in tearDown."""

    def setUp(self):
        if not os.access(BIN, os.X_OK):
            self.fail("runsnack binary not found at %s (build it, or set RUNSNACK_BIN)" % BIN)
        self.tmp = tempfile.mkdtemp(prefix="runsnack-e2e-")
        self._procs = []
        self._stderrs = []  # (description, text) of finished foreground commands
        self._homes = 0

    def tearDown(self):
        reports = []
        # A failed test shows what its background processes said last: on CI that is all there is to go on.
        result = getattr(getattr(self, "_outcome", None), "result", None)
        failed = any(t is self for t, _ in getattr(result, "failures", []) + getattr(result, "errors", []))
        for p in reversed(self._procs):
            try:
                rc = p.stop()
            except Exception as e:  # keep cleaning up the others
                reports.append("%s (pid %d): could not stop: %s" % (p.name, p.pid, e))
                continue
            if rc is None:
                reports.append("%s (pid %d) did not exit" % (p.name, p.pid))
            text = p.stderr()
            if failed:
                last = [json.dumps(e) for e in p.events()[-8:]]
                sys.stderr.write("\n--- %s (pid %d, exit %s): last events, then stderr's end ---\n%s\n%s\n" %
                                 (p.name, p.pid, rc, "\n".join(last), text[-2000:]))
            marker = sanitizer_report(text)
            if marker:
                reports.append("%s %s: %s\n%s" % (p.name, p.args, marker, text[-4000:]))
        for desc, text in self._stderrs:
            marker = sanitizer_report(text)
            if marker:
                reports.append("%s: %s\n%s" % (desc, marker, text[-4000:]))
        shutil.rmtree(self.tmp, ignore_errors=True)
        if reports:
            self.fail("sanitizer report or stuck process:\n" + "\n\n".join(reports))

    # --- installations and commands -----------------------------------------------------

    def new_home(self, name=None):
        self._homes += 1
        path = os.path.join(self.tmp, name or "home%d" % self._homes)
        os.makedirs(path)
        return path

    def env(self, home, extra=None):
        env = dict(os.environ)
        env.pop("RUNSNACK_LINK", None)
        env["RUNSNACK_HOME"] = home
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        if extra:
            env.update(extra)
        return env

    # The folder the CLI runs in (None: this process's): run, shell and cp use the workspace of that folder.
    cli_cwd = None

    def run_cli(self, home, *args, input=None, timeout=CMD_TIMEOUT, env_extra=None):
        """Runs runsnack to completion; returns CompletedProcess with text stdout/stderr."""
        try:
            cp = subprocess.run([BIN] + list(args), input=input if input is not None else "",
                                capture_output=True, text=True, errors="replace", env=self.env(home, env_extra),
                                timeout=timeout, cwd=self.cli_cwd)
        except subprocess.TimeoutExpired as e:
            self.fail("runsnack %s did not finish within %ss (stderr=%r)" % (args, timeout, e.stderr))
        self._stderrs.append(("runsnack %s" % " ".join(args), cp.stderr))
        self.assertIsNone(sanitizer_report(cp.stderr), "sanitizer report from runsnack %s:\n%s" % (args, cp.stderr))
        return cp

    def ok(self, home, *args, **kw):
        cp = self.run_cli(home, *args, **kw)
        self.assertEqual(cp.returncode, 0, "runsnack %s failed: rc=%d stderr=%r stdout=%r" %
                         (args, cp.returncode, cp.stderr, cp.stdout))
        return cp

    def fails(self, home, *args, contains=None, **kw):
        """Runs a command that must fail with exit 1 and one 'runsnack: ...' line; returns that line."""
        cp = self.run_cli(home, *args, **kw)
        self.assertEqual(cp.returncode, 1, "runsnack %s: expected exit 1, got %d; stdout=%r stderr=%r" %
                         (args, cp.returncode, cp.stdout, cp.stderr))
        lines = [l for l in cp.stderr.splitlines() if l.strip()]
        errors = [l for l in lines if l.startswith("runsnack: ")]
        self.assertTrue(errors, "no 'runsnack: ' error line on stderr: %r" % cp.stderr)
        line = errors[-1]
        if contains is not None:
            for needle in ([contains] if isinstance(contains, str) else contains):
                self.assertIn(needle.lower(), line.lower(), "error line %r should mention %r" % (line, needle))
        return line

    def info(self, home, link, *extra, **kw):
        cp = self.ok(home, "info", "--json", link, *extra, **kw)
        return json.loads(cp.stdout.strip().splitlines()[-1])

    def peer_id(self, home):
        return self.ok(home, "id").stdout.strip()

    def workspace_dir(self, phome, chome, folder, quota_link=None):
        """Where the provider in `phome` keeps the workspace of `chome`'s project `folder` (or a workspace name):
        in the consumer's folder, or under a link with a disk quota (`quota_link`) in the link's folder."""
        name = folder if "/" not in folder else workspace_name(folder)
        return os.path.join(self.consumer_folder(phome, chome, quota_link), name)

    def consumer_folder(self, phome, chome, quota_link=None):
        """The folder of `chome`'s workspaces on the provider in `phome` (see workspace_dir)."""
        return os.path.join(self.link_folder(phome, quota_link) if quota_link else os.path.join(phome, "workspaces"),
                            self.peer_id(chome))

    @staticmethod
    def link_folder(phome, link):
        """Where a link with a disk quota keeps the workspaces of all its consumers: its image's mount point."""
        grant_id = re.search(r"/g/([a-z2-7]+)", link).group(1)
        return os.path.join(phome, "workspaces", "link-" + grant_id)

    def audit(self, home):
        cp = self.ok(home, "log", "--json")
        return [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]

    def links(self, home, all=False):
        cp = self.ok(home, "links", "--json", *(["--all"] if all else []))
        return json.loads(cp.stdout)

    def grant_row(self, home, grant_id, all=True):
        rows = [g for g in self.links(home, all=all) if g["id"] == grant_id]
        self.assertEqual(len(rows), 1, "grant %s not in links: %r" % (grant_id, self.links(home, all=True)))
        return rows[0]

    def start_provider(self, home, *extra_args, listen="127.0.0.1:0", name="provider", env_extra=None, wrapper=()):
        return Provider(self, home, extra_args, listen=listen, name=name, env_extra=env_extra, wrapper=wrapper)

    def start(self, home, *args, name="proc", env_extra=None):
        return Proc(self, list(args), home, env_extra=env_extra, name=name)

    def poll_until(self, fn, deadline, what, interval=0.25):
        """Calls fn() until it returns a truthy value; fails after `deadline` seconds."""
        end = time.monotonic() + deadline
        last = None
        while time.monotonic() < end:
            last = fn()
            if last:
                return last
            time.sleep(interval)
        self.fail("timed out after %.0fs waiting for %s (last: %r)" % (deadline, what, last))
