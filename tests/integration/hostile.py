#!/usr/bin/env python3
"""Hostile clients for the integration tests of Tether's listening sockets.

Each command talks to one TCP port and prints one line saying what it did
and how the peer answered; it never runs longer than its --seconds bound.

  frame HOST:PORT --mechanism NULL|CURVE --announce BYTES [--send BYTES]
      a ZMTP 3.0 greeting, then one command frame announced as BYTES, then
      up to --send bytes of it: prints "cut after N bytes" when the peer
      closed the connection, "open after N bytes" when it did not.
  garbage HOST:PORT [--send BYTES]
      random bytes.
  idle HOST:PORT --count N
      N connections that send nothing, held for --seconds.
  post HOST:PORT --announce BYTES [--send BYTES]
      POST /metrics with a Content-Length of BYTES, streaming up to --send:
      prints the status line, or "cut after N bytes".
  slow HOST:PORT
      a GET /metrics whose head is sent a byte every 0.2 s.
  headers HOST:PORT --count N
      a GET /metrics with N header lines: prints the status line.
  soak HOST:PORT,... --http HOST:PORT,... --seconds S
      all of the above in a loop on every port given, until S seconds pass:
      prints how many of each it ran.
"""
import argparse
import os
import random
import signal
import socket
import struct
import sys
import time


def connect(hostport, timeout=5.0):
    host, port = hostport.rsplit(":", 1)
    s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    return s


def closed(s, wait=0.0):
    """True when the peer has closed `s` (reads 0 bytes or fails)."""
    s.settimeout(wait)
    try:
        data = s.recv(4096)
        return data == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def stream(s, total, deadline, block=1 << 16):
    """Sends up to `total` bytes; returns (bytes sent, whether cut off)."""
    sent = 0
    chunk = b"z" * block
    s.settimeout(0.2)
    while sent < total and time.monotonic() < deadline:
        try:
            n = s.send(chunk[: min(block, total - sent)])
            sent += n
        except socket.timeout:
            if closed(s):
                return sent, True
        except OSError:
            return sent, True
    return sent, closed(s, 1.0)


def greeting(mechanism):
    g = bytearray(64)
    g[0] = 0xFF
    g[9] = 0x7F
    g[10] = 3
    g[12:12 + len(mechanism)] = mechanism.encode()
    return bytes(g)


def frame(a):
    s = connect(a.target)
    s.sendall(greeting(a.mechanism))
    s.sendall(bytes([0x06]) + struct.pack(">Q", a.announce))
    sent, cut = stream(s, a.send, time.monotonic() + a.seconds)
    s.close()
    print(("cut" if cut else "open") + f" after {sent} bytes")


def garbage(a):
    s = connect(a.target)
    sent, cut = stream(s, a.send, time.monotonic() + a.seconds)
    s.sendall(os.urandom(256)) if not cut else None
    s.close()
    print(("cut" if cut else "open") + f" after {sent} bytes")


def idle(a):
    conns = []
    for _ in range(a.count):
        try:
            conns.append(connect(a.target))
        except OSError:
            break
    time.sleep(a.seconds)  # the idle clients' whole point: hold and say nothing
    still = sum(0 if closed(c) else 1 for c in conns)
    for c in conns:
        c.close()
    print(f"{len(conns)} opened, {still} still open after {a.seconds} s")


def status_line(s, wait=5.0):
    s.settimeout(wait)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data.split(b"\r\n", 1)[0].decode("latin-1")


def post(a):
    s = connect(a.target)
    s.sendall(f"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: {a.announce}\r\n\r\n".encode())
    sent, cut = stream(s, a.send, time.monotonic() + a.seconds)
    line = status_line(s, 2.0)
    s.close()
    print(f"{line or 'no answer'}; {'cut' if cut else 'open'} after {sent} bytes")


def slow(a):
    s = connect(a.target)
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    t0 = time.monotonic()
    for i in range(len(head)):
        try:
            s.send(head[i:i + 1])
        except OSError:
            break
        if closed(s, 0.2):
            break
    s.close()
    print(f"held {time.monotonic() - t0:.1f} s")


def headers(a):
    s = connect(a.target)
    lines = "".join(f"X-{i}: y\r\n" for i in range(a.count))
    s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\n{lines}\r\n".encode())
    print(status_line(s) or "no answer")
    s.close()


def soak(a):
    """Every kind of hostile client, over and over, on every port given."""
    zmq_ports = [p for p in a.target.split(",") if p]
    http_ports = [p for p in (a.http or "").split(",") if p]
    counts = {}
    deadline = time.monotonic() + a.seconds
    held = []
    rnd = random.Random(7)

    def tally(kind):
        counts[kind] = counts.get(kind, 0) + 1

    def report(*_):
        print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
        sys.exit(0)

    # The caller ends the attack with SIGTERM when the job is done: the
    # counts are printed then too.
    signal.signal(signal.SIGTERM, report)

    while time.monotonic() < deadline:
        for p in zmq_ports:
            for kind in ("frame", "garbage", "idle"):
                try:
                    s = connect(p, 2.0)
                    if kind == "frame":
                        s.sendall(greeting(rnd.choice(["NULL", "CURVE"])))
                        s.sendall(bytes([0x06]) + struct.pack(">Q", 3_000_000_000))
                        stream(s, 1 << 20, time.monotonic() + 1.0)
                        s.close()
                    elif kind == "garbage":
                        s.sendall(os.urandom(rnd.randint(1, 4096)))
                        s.close()
                    else:
                        held.append(s)  # idle: kept open until the end
                    tally(kind)
                except OSError:
                    tally(kind + "_refused")
        for p in http_ports:
            for kind in ("post", "slow", "headers"):
                try:
                    s = connect(p, 2.0)
                    if kind == "post":
                        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000000\r\n\r\n")
                        stream(s, 1 << 20, time.monotonic() + 0.5)
                        s.close()
                    elif kind == "slow":
                        s.send(b"GET /met")
                        held.append(s)
                    else:
                        s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-a: b\r\n" * 200 + b"\r\n")
                        s.close()
                    tally(kind)
                except OSError:
                    tally(kind + "_refused")
        while len(held) > 200:
            held.pop(0).close()
        time.sleep(0.05)  # a pace, not a wait for an event
    for s in held:
        s.close()
    report()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command")
    p.add_argument("target")
    p.add_argument("--mechanism", default="NULL")
    p.add_argument("--announce", type=int, default=3_000_000_000)
    p.add_argument("--send", type=int, default=1 << 20)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--http", default="")
    a = p.parse_args()
    {"frame": frame, "garbage": garbage, "idle": idle, "post": post, "slow": slow, "headers": headers,
     "soak": soak}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
