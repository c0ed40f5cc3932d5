"""`invoke attach`: an interactive shell on a node in a real PTY, plus local port forwards.

The local terminal goes to raw mode so keys (Ctrl-C, arrows, tab) reach the remote shell; it is
restored in `finally` whatever happens. SIGWINCH resizes the remote PTY to the local window.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import termios
import threading
import tty
from collections.abc import Iterator

import paramiko

from ops.errors import OpsError
from ops.remote.eof import send_eof

TMUX_COMMAND = "tmux new-session -A -s ray"  # attach to the session `ray`, creating it once
SCREEN_COMMAND = "screen -D -RR -S ray"


def session_command(tmux: bool, screen: bool) -> str | None:
    if tmux and screen:
        raise OpsError("--tmux and --screen are alternatives: pick one")
    if tmux:
        return TMUX_COMMAND
    if screen:
        return SCREEN_COMMAND
    return None


def terminal_size(fd: int) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
        return size.columns, size.lines
    except OSError:
        return 80, 24


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """Raw mode for the session's lifetime; a pipe (not a TTY) is left alone."""
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)  # not TCSAFLUSH: keys typed ahead must not be lost
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def resize_on_sigwinch(channel: paramiko.Channel, fd: int) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def resize(_signum: int, _frame: object) -> None:
        channel.resize_pty(*terminal_size(fd))

    previous = signal.signal(signal.SIGWINCH, resize)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)


def interactive_shell(client: paramiko.SSHClient, command: str | None = None) -> int:
    """A login shell (or `command`, e.g. tmux) in a PTY sized like ours; returns its exit status."""
    stdin_fd, stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()
    width, height = terminal_size(stdin_fd)
    channel = client.get_transport().open_session()
    try:
        channel.get_pty(term=os.environ.get("TERM", "xterm-256color"), width=width, height=height)
        if command:
            channel.exec_command(command)
        else:
            channel.invoke_shell()
        with raw_terminal(stdin_fd), resize_on_sigwinch(channel, stdin_fd):
            _pump_terminal(channel, stdin_fd, stdout_fd)
        return channel.recv_exit_status()
    finally:
        channel.close()


def _pump_terminal(channel: paramiko.Channel, stdin_fd: int, stdout_fd: int) -> None:
    stdin_open = True
    while True:
        watched = [channel, stdin_fd] if stdin_open else [channel]
        try:
            readable, _, _ = select.select(watched, [], [])
        except InterruptedError:  # SIGWINCH during select
            continue
        if channel in readable:
            data = channel.recv(32768)
            if not data:
                return
            os.write(stdout_fd, data)
        if stdin_open and stdin_fd in readable:
            data = os.read(stdin_fd, 4096)
            if data:
                channel.sendall(data)
            else:
                stdin_open = False
                send_eof(channel)


def parse_forward(spec: str) -> tuple[int, int]:
    """`8265` or `LOCAL:REMOTE` -> (local port, port on the node's localhost)."""
    local, _, remote = spec.partition(":")
    try:
        ports = int(local), int(remote or local)
    except ValueError:
        ports = (0, 0)
    if not all(0 < port < 65536 for port in ports):
        raise OpsError(f"--port-forward {spec!r}: use PORT or LOCAL:REMOTE with ports from 1 to "
                       "65535, e.g. 8265")
    return ports


class PortForward:
    """Listen on 127.0.0.1:local and tunnel each connection to the node's localhost:remote."""

    def __init__(self, transport: paramiko.Transport, local_port: int, remote_port: int) -> None:
        self.transport = transport
        self.remote_port = remote_port
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.server.bind(("127.0.0.1", local_port))
        except OSError as exc:
            self.server.close()
            raise OpsError(f"cannot forward local port {local_port}: {exc.strerror}") from None
        self.server.listen(16)
        self.local_port = self.server.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> PortForward:
        self._thread.start()
        return self

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(conn, peer), daemon=True).start()

    def _tunnel(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            channel = self.transport.open_channel(
                "direct-tcpip", ("127.0.0.1", self.remote_port), peer
            )
        except (paramiko.SSHException, OSError) as exc:
            print(f"\r\nport forward {self.local_port}: {exc}\r", file=sys.stderr)
            conn.close()
            return
        try:
            while True:
                readable, _, _ = select.select([conn, channel], [], [])
                if conn in readable:
                    data = conn.recv(32768)
                    if not data:
                        break
                    channel.sendall(data)
                if channel in readable:
                    data = channel.recv(32768)
                    if not data:
                        break
                    conn.sendall(data)
        except OSError:
            pass
        finally:
            channel.close()
            conn.close()
