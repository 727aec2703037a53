"""A small app on pyroscope-io for profcol's peer tests (tests/peers/README.md): CPU in named
functions, part of it under tag_wrapper({"span_id": ...}), uploaded every 2 s to the server
given until the run time has passed; shutdown() sends what is left.

    app.py URL APP TENANT SPAN_ID SECONDS
"""

import hashlib
import sys
import time

import pyroscope


def burn_sha(seconds):
    end = time.monotonic() + seconds
    h = b"profcol"
    while time.monotonic() < end:
        for _ in range(200):
            h = hashlib.sha256(h).digest()
    return h[0]


def spin_loop(seconds):
    end = time.monotonic() + seconds
    x = 1
    while time.monotonic() < end:
        for i in range(2000):
            x = (x * 31 + i) & 0xFFFFFFFF
    return x


def traced_work(seconds):
    return burn_sha(seconds)


def main():
    url, app, tenant, span, seconds = sys.argv[1:6]
    pyroscope.configure(application_name=app, server_address=url, tenant_id=tenant,
                        tags={"env": "peer", "sdk": "python"}, upload_interval=2,
                        enable_logging=True)
    end = time.monotonic() + float(seconds)
    sink = 0
    while time.monotonic() < end:
        sink += burn_sha(0.03)
        sink += spin_loop(0.02)
        with pyroscope.tag_wrapper({"span_id": span}):
            sink += traced_work(0.03)
    if not pyroscope.shutdown():
        sys.exit("pyroscope.shutdown() failed")


if __name__ == "__main__":
    main()
