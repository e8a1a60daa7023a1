#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal and types into it as a person would.

    on_terminal.py PROMPT=LINE [PROMPT=LINE ...] -- COMMAND [ARG ...]

For each PROMPT=LINE in turn: waits (at most 10 s) until PROMPT appears on
the terminal, then until the program has turned the terminal's echo off (at
most 1 s: a program that keeps echo on gets the line after that second),
then types LINE and Enter. Then reads until the program ends. Writes to
stdout everything the terminal showed (the program's output and whatever the
terminal echoed of the typing, "\r\n" as "\n"), and on stderr a line per
prompt saying whether echo was off when the line was typed. Exits with the
program's exit code (2 when a prompt never came or it ran past 30 s).

Used by tests/integration/keyring_test.cc, which first proves it with bash's
own `read` with and without -s.
"""
import os
import pty
import select
import signal
import sys
import termios
import time


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: on_terminal.py PROMPT=LINE ... -- COMMAND [ARG ...]")
    cut = argv.index("--")
    answers = [a.split("=", 1) for a in argv[:cut]]
    command = argv[cut + 1:]

    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)

    shown = bytearray()

    def read_some(timeout):
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the program ended, the terminal is gone
            return False
        shown.extend(data)
        return bool(data)

    ok = True
    searched = 0  # the shown text before this is done with: a prompt must come anew
    for prompt, line in answers:
        want = prompt.encode()
        deadline = time.monotonic() + 10
        while shown.find(want, searched) < 0 and time.monotonic() < deadline:
            if not read_some(0.1):
                break
        at = shown.find(want, searched)
        if at < 0:
            sys.stderr.write(f"on_terminal: no prompt {prompt!r} within 10 s\n")
            ok = False
            break
        searched = at + len(want)
        echo_off = False
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            if not termios.tcgetattr(fd)[3] & termios.ECHO:
                echo_off = True
                break
            time.sleep(0.01)
        sys.stderr.write(f"on_terminal: {prompt!r}: echo {'off' if echo_off else 'on'}\n")
        os.write(fd, line.encode() + b"\r")  # Enter: CR, made '\n' by ICRNL

    deadline = time.monotonic() + 30
    while read_some(0.5) and time.monotonic() < deadline:
        pass
    if time.monotonic() >= deadline:
        sys.stderr.write("on_terminal: still running after 30 s: killed\n")
        os.kill(pid, signal.SIGKILL)
        ok = False
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(shown.decode(errors="replace").replace("\r\n", "\n"))
    if not ok:
        sys.exit(2)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
