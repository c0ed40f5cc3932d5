"""Our side's EOF on an SSH channel, sent so that it cannot reach sshd after the channel's
CLOSE.

paramiko's `Channel.shutdown_write` makes the EOF message under the channel's lock but sends it
after letting go of it: when the command has already ended (`true`, `exit 3`, a short `ray
status`), the transport's thread can meanwhile answer the node's CLOSE with ours, and the EOF then
arrives for a channel sshd has freed. OpenSSH drops the whole connection for that ("ieof packet
referred to nonexistent channel"; paramiko/paramiko#1115 and #1705, open): every other node a
fan-out reaches through the same head connection then fails with it. Here the EOF is sent while
the lock is held, so the transport's thread (which takes the lock to close the channel) sends
its CLOSE after it; a channel already closed gets no EOF (its CLOSE said it).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko

    from ops.remote.warm import RelayChannel


def send_eof(channel: paramiko.Channel | RelayChannel) -> None:
    """`channel.shutdown_write()`, without paramiko's race with the channel's close (a warm
    connection's channel, a socket to the daemon holding the SSH one, shuts its socket)."""
    paramiko = sys.modules.get("paramiko")  # not loaded: the channel cannot be paramiko's
    if paramiko is None or not isinstance(channel, paramiko.Channel):
        channel.shutdown_write()
        return
    with channel.lock:
        if channel.closed:
            return
        message = channel._send_eof()  # noqa: SLF001 - the message, made under the lock
        if message is not None:
            channel.transport._send_user_message(message)  # noqa: SLF001 - sent under it too
