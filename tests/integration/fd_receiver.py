"""The sidecar half of the /dev/fd/N hand-off (as the GKE Cloud Storage FUSE CSI driver's
sidecar mounter does): connects to the Unix socket the mounting side listens on, receives the
/dev/fuse descriptor with SCM_RIGHTS, and execs the daemon with the mountpoint /dev/fd/N.

Usage: python fd_receiver.py SOCKET PROGRAM ARGS...   ("{fd}" in ARGS becomes /dev/fd/N)
"""

import os
import socket
import sys
import time


def main():
    path, argv = sys.argv[1], sys.argv[2:]
    deadline = time.monotonic() + 30
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            sock.connect(path)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                sys.exit(f"fd_receiver: nothing listens on {path}")
            time.sleep(0.05)
    _, fds, _, _ = socket.recv_fds(sock, 16, 1)
    sock.close()
    if len(fds) != 1:
        sys.exit(f"fd_receiver: expected one descriptor, got {len(fds)}")
    fd = fds[0]
    os.set_inheritable(fd, True)
    os.execv(argv[0], [a.replace("{fd}", f"/dev/fd/{fd}") for a in argv])


if __name__ == "__main__":
    main()
