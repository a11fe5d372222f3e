"""``whitesky-emulator``: run the emulator in the foreground; print its base URL once ready."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from collections.abc import Sequence

import uvicorn

from .app import Emulator, build_app
from .ratelimit import Limits, parse_cli
from .world import DEMO_TOKEN, load_world


def rate_limit_arg(text: str) -> Limits | None:
    """``--rate-limit``'s value, normalized (None: off); an argparse error names what is valid."""
    try:
        return parse_cli(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="whitesky-emulator", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8742, help="port to listen on; 0 picks a free one (default 8742)")
    p.add_argument(
        "--state-dir",
        default=os.path.expanduser("~/.cache/whitesky-emulator"),
        help="folder for the persisted state (state.db)",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("WHITESKY_EMULATOR_TOKEN", DEMO_TOKEN),
        help="the accepted bearer token (default: %s)" % DEMO_TOKEN,
    )
    p.add_argument("--config", help="seed file (JSON or YAML) used when the state is empty")
    p.add_argument("--nic-hook", help="shell command run on each NIC attach (EMU_* variables describe the NIC)")
    p.add_argument(
        "--rate-limit",
        type=rate_limit_arg,
        default=None,
        metavar="off|default|mutating=RATE:BURST[,read=RATE:BURST]",
        help="per-credential token buckets: off (default); default (mutating 5/s burst 50, read 20/s burst 100); "
        "or RATE tokens per second and BURST capacity per class (a class left out is unlimited). The faults "
        "API's rate_limit overrides it; DELETE /_emulator/faults returns to it",
    )
    return p.parse_args(argv)


class Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            sock = self.servers[0].sockets[0]
            host, port = sock.getsockname()[:2]
            print("http://%s:%d/api/1" % (host, port), flush=True)


class _QuietDrops(logging.Filter):
    """An injected dropped response is not a server error: keep it out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ConnectionAbortedError))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("uvicorn.error").addFilter(_QuietDrops())
    emu = Emulator(args.state_dir, args.token, load_world(args.config), nic_hook=args.nic_hook)
    emu.faults.set_defaults(rate_limit=args.rate_limit)
    config = uvicorn.Config(
        build_app(emu), host=args.host, port=args.port, log_level="warning", access_log=False, lifespan="off"
    )
    server = Server(config)
    asyncio.run(server.serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
