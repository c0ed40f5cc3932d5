"""What the tests share: fixtures (an sshd, a Ray head, an engine workspace), helpers and
runners."""
