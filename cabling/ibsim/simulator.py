"""Run ibsim (the fabric simulator), OpenSM and infiniband-diags against a netfile, privately.

Each :class:`Simulator` has its own socket name (``IBSIM_SOCKNAME``), its own directory for
OpenSM's configuration, cache, dumps and log (by default OpenSM writes under /var), and keeps the
simulator's console on an open pipe (at end of file on its console ibsim spins a core). Every
console command waits for the prompt that follows it, so a fault injected through the console is
in place when the next tool runs. Clients attach at one node (``SIM_HOST``): a host's HCA, as the
tools would run on a fabric-attached host.
"""

from __future__ import annotations

import itertools
import os
import selectors
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType

from cabling.errors import CablingError
from cabling.ibsim.netfile import BuiltFabric

PROMPT = b"sim> "
_RUNS = itertools.count(1)


class SimulatorError(CablingError):
    """ibsim, OpenSM or a diag did not do what the harness asked; the message says which and why."""


def missing_tools() -> list[str]:
    """The programs of the simulated stack that are not installed (scripts/deps/40-cabling.list)."""
    return [t for t in ("ibsim", "ibsim-run", "opensm", "ibnetdiscover", "iblinkinfo", "ibqueryerrors", "perfquery")
            if shutil.which(t) is None]


class Simulator:
    """One running simulated fabric: start it, sweep it with OpenSM, run tools, change it."""

    def __init__(self, netfile: Path, workdir: Path, *, attach: str, capacity: tuple[int, int, int],
                 timeout: float = 300.0) -> None:
        self.netfile = netfile
        self.workdir = workdir
        self.attach = attach
        self.capacity = capacity
        self.timeout = timeout
        self.sockname = f"cabling{os.getpid()}x{next(_RUNS)}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending = b""

    # -- life cycle -----------------------------------------------------------------------------

    def __enter__(self) -> Simulator:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start ibsim on the netfile and wait until it listens for clients."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        nodes, switches, ports = self.capacity
        log = (self.workdir / "ibsim.log").open("wb")
        try:
            self._proc = subprocess.Popen(
                ["ibsim", "-s", "-N", str(nodes), "-S", str(switches), "-P", str(ports), str(self.netfile)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.workdir,
                env={**os.environ, "IBSIM_SOCKNAME": self.sockname})
        finally:
            log.close()
        self._read_prompt("start")
        # ibsim prints its first prompt before it binds its sockets: a second prompt, after a
        # comment line, comes from its serving loop, with the sockets bound.
        self.command("# ready")

    def stop(self) -> None:
        """Quit the simulator (kill it if it does not quit)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None and proc.stdin is not None:
                proc.stdin.write(b"Quit\n")
                proc.stdin.flush()
                proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()

    # -- the console ----------------------------------------------------------------------------

    def command(self, line: str) -> str:
        """Run one console command; its output, or SimulatorError if ibsim refused it ("# ...")."""
        proc = self._running()
        if len(line) > 120:  # ibsim reads its console 127 bytes at a time
            raise SimulatorError(f"console command too long for ibsim: {line[:60]!r}")
        assert proc.stdin is not None
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()
        out = self._read_prompt(line)
        refused = [ln for ln in out.splitlines() if ln.startswith("# ") and ln != line]
        if refused:
            raise SimulatorError(f"ibsim refused {line!r}: {refused[0][2:]}")
        return out

    def unlink(self, node_id: str, port: int | None = None) -> None:
        """A port (or every port of a node) goes dark: the cable pulled, the node powered off."""
        self.command(f'Unlink "{node_id}"' + (f"[{port}]" if port is not None else ""))

    def relink(self, node_id: str, port: int | None = None) -> None:
        """Links unlinked before come back (Init until the next OpenSM sweep)."""
        self.command(f'ReLink "{node_id}"' + (f"[{port}]" if port is not None else ""))

    def set_counter(self, node_id: str, port: int, counter: str, value: int) -> None:
        """Set one PortCounters field of a port (SymbolErrorCounter, LinkDownedCounter, ...)."""
        self.command(f'PerformanceSet "{node_id}"[{port}] PortCounters.{counter}={value}')

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            raise SimulatorError(f"ibsim is not running; see {self.workdir / 'ibsim.log'}: {self._log_tail()}")
        return self._proc

    def _read_prompt(self, what: str) -> str:
        """Everything ibsim prints up to its next prompt; an exit or a hang is an error naming ``what``."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        buf = self._pending
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while PROMPT not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SimulatorError(f"ibsim did not answer {what!r} within {self.timeout:.0f} s")
                if not sel.select(left):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    raise SimulatorError(f"ibsim exited during {what!r}: {self._log_tail()}")
                buf += chunk
        head, _, self._pending = buf.partition(PROMPT)
        return head.decode(errors="replace")

    def _log_tail(self) -> str:
        try:
            return (self.workdir / "ibsim.log").read_text(errors="replace")[-600:].strip()
        except OSError:
            return "(no log)"

    # -- clients --------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment a client needs to reach this simulator (with ``ibsim-run`` in front)."""
        return {**os.environ, "IBSIM_SOCKNAME": self.sockname, "SIM_HOST": self.attach}

    def wrapper(self) -> list[str]:
        """A command prefix that runs a tool against this simulator, locally or over SSH."""
        return ["env", f"IBSIM_SOCKNAME={self.sockname}", f"SIM_HOST={self.attach}", "ibsim-run"]

    def run(self, *argv: str, timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a diag (``ibnetdiscover``, ``iblinkinfo -d``...) against the simulated fabric."""
        self._running()
        try:
            done = subprocess.run(["ibsim-run", *argv], env=self.env(), cwd=self.workdir, capture_output=True,
                                  text=True, errors="replace", timeout=timeout or self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SimulatorError(f"{argv[0]} did not finish within {timeout or self.timeout:.0f} s") from None
        if check and done.returncode != 0:
            raise SimulatorError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        return done

    def sweep(self) -> None:
        """One OpenSM sweep (``opensm -o``): LIDs assigned, every port trained and made Active."""
        osm = self.workdir / "opensm"
        osm.mkdir(exist_ok=True)
        conf = osm / "opensm.conf"
        # Everything OpenSM writes goes here, not under /var (its defaults).
        conf.write_text(f"log_file {osm / 'opensm.log'}\ndump_files_dir {osm}/\n"
                        f"partition_config_file {osm / 'partitions.conf'}\n")
        (osm / "partitions.conf").write_text("Default=0x7fff, ipoib : ALL=full ;\n")
        env = {**self.env(), "OSM_CACHE_DIR": str(osm), "OSM_TMP_DIR": str(osm)}
        try:
            done = subprocess.run(["ibsim-run", "opensm", "-o", "-F", str(conf)], env=env, cwd=osm,
                                  capture_output=True, text=True, errors="replace", timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SimulatorError(f"opensm did not finish one sweep within {self.timeout:.0f} s") from None
        if done.returncode != 0:
            raise SimulatorError(f"opensm -o exited {done.returncode}: {(done.stdout + done.stderr).strip()[-400:]}")


def launch(built: BuiltFabric, workdir: Path, *, attach: str | None = None, timeout: float = 300.0) -> Simulator:
    """Write ``built``'s netfile into ``workdir`` and return its (not yet started) simulator;
    clients attach at ``attach`` (a node id), by default the first planned host's first HCA."""
    workdir.mkdir(parents=True, exist_ok=True)
    netfile = workdir / "fabric.net"
    netfile.write_text(built.netfile())
    return Simulator(netfile, workdir, attach=attach or built.default_attach(), capacity=built.capacity(),
                     timeout=timeout)
