"""A private network of hosts, each a network namespace this test run made, to cut apart.

`Network()` makes a hub namespace holding a bridge, then one namespace per
`host(name)`, joined to the bridge by a veth pair, with an address of
10.77.0.0/24 that exists only inside these namespaces (the hub has one too,
10.77.0.254, for the test's own helpers). Processes run inside a host with
`spawn` (`ip netns exec`, so the process is the one started: it is stopped by
its PID). `in_hub(fn)` runs `fn` in a thread that entered the hub's namespace,
so a test talks to the hosts with ordinary clients, and its sockets exist only
there.

Faults: `cut(group)` lets the hosts of `group` reach each other and nobody else
(packets dropped both ways at the receivers' INPUT, so no side is told: a
silent partition, as a cable pulled or a switch failed); `heal()` lifts every
cut. `close()` stops every process it started and deletes every namespace it
made (and, at the start of a run, `sweep()` deletes those left by a run whose
process is gone). Needs root, iproute2 and iptables.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

PREFIX = "emqp"
SUBNET = "10.77.0"
HUB_ADDRESS = f"{SUBNET}.254"
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def available() -> str | None:
    """Why this machine cannot make the network (None: it can)."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def sweep() -> None:
    """Delete the namespaces of earlier runs whose process is gone (a run killed before
    its teardown), with every process still running inside them."""
    for line in _run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        parts = name.split("-")
        if len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit():
            try:
                os.kill(int(parts[1]), 0)
            except ProcessLookupError:
                for pid in _run("ip", "netns", "pids", name).split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


class Host:
    def __init__(self, name: str, namespace: str, address: str) -> None:
        self.name = name
        self.namespace = namespace
        self.address = address

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.address})"


class Network:
    def __init__(self) -> None:
        self.run_id = f"{os.getpid()}"
        self.hub = f"{PREFIX}-{self.run_id}-hub"
        self.hosts: dict[str, Host] = {}
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []
        self._hub_thread: concurrent.futures.ThreadPoolExecutor | None = None
        try:
            self._make_hub()
        except BaseException:
            self.close()
            raise

    def _namespace(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self.namespaces.append(name)
        _run("ip", "-n", name, "link", "set", "lo", "up")

    def _make_hub(self) -> None:
        self._namespace(self.hub)
        _run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.hub, "addr", "add", f"{HUB_ADDRESS}/24", "dev", "br0")
        _run("ip", "-n", self.hub, "link", "set", "br0", "up")

    def host(self, name: str) -> Host:
        """A new host on the bridge, with its own namespace and address."""
        index = len(self.hosts) + 1
        namespace = f"{PREFIX}-{self.run_id}-{name}"
        address = f"{SUBNET}.{index}"
        self._namespace(namespace)
        outside, inside = f"e{self.run_id[-6:]}h{index}", f"e{self.run_id[-6:]}n{index}"
        _run("ip", "-n", self.hub, "link", "add", outside, "type", "veth", "peer", "name", inside,
             "netns", namespace)
        _run("ip", "-n", self.hub, "link", "set", outside, "master", "br0")
        _run("ip", "-n", self.hub, "link", "set", outside, "up")
        _run("ip", "-n", namespace, "link", "set", inside, "name", "eth0")
        _run("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        _run("ip", "-n", namespace, "link", "set", "eth0", "up")
        for command in (["-N", "EMQCUT"], ["-I", "INPUT", "-j", "EMQCUT"]):
            _run("ip", "netns", "exec", namespace, "iptables", *command)
        host = self.hosts[name] = Host(name, namespace, address)
        return host

    # --- processes --------------------------------------------------------------------
    def spawn(self, host: Host, argv: list[str], log: Path, env: dict[str, str] | None = None,
              ) -> subprocess.Popen[bytes]:
        """Run `argv` inside `host`; its output to the file `log`."""
        out = open(log, "wb")  # noqa: SIM115 (closed in `close`, after the process)
        self.logs.append(out)
        process = subprocess.Popen(["ip", "netns", "exec", host.namespace, *argv], stdout=out,
                                   stderr=subprocess.STDOUT, env=env)
        self.processes.append(process)
        return process

    def in_hub(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)`, run in a thread inside the hub's namespace (reaches every host)."""
        if self._hub_thread is None:
            self._hub_thread = concurrent.futures.ThreadPoolExecutor(1, initializer=self._enter_hub)
        return self._hub_thread.submit(fn, *args).result()

    def _enter_hub(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.hub}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the hub failed")
        finally:
            os.close(fd)

    # --- faults -----------------------------------------------------------------------
    def cut(self, group: list[Host]) -> None:
        """The hosts of `group` reach each other only; every other host, and the hub,
        neither reaches them nor hears from them."""
        inside = {host.address for host in group}
        for host in self.hosts.values():
            rules: list[list[str]] = []
            if host in group:
                rules.append(["-i", "lo", "-j", "RETURN"])
                rules += [["-s", address, "-j", "RETURN"] for address in sorted(inside)]
                rules.append(["-j", "DROP"])
            else:
                rules += [["-s", address, "-j", "DROP"] for address in sorted(inside)]
            for rule in rules:
                _run("ip", "netns", "exec", host.namespace, "iptables", "-A", "EMQCUT", *rule)

    def heal(self) -> None:
        for host in self.hosts.values():
            _run("ip", "netns", "exec", host.namespace, "iptables", "-F", "EMQCUT")

    # --- the end ----------------------------------------------------------------------
    def stop(self, process: subprocess.Popen[bytes], timeout: float = 10) -> None:
        """Stop one process by its PID: SIGTERM (SIGCONT first, if it was stopped), then
        SIGKILL."""
        if process.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(process.pid, sig)
                except ProcessLookupError:
                    break
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)

    def close(self) -> None:
        for process in self.processes:
            try:
                self.stop(process)
            except Exception:  # noqa: BLE001 (every one is stopped, whatever one does)
                process.kill()
        for out in self.logs:
            out.close()
        if self._hub_thread is not None:
            self._hub_thread.shutdown(wait=True)
        for namespace in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        self.namespaces.clear()
