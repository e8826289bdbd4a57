"""``python -m core curator ...``: make, list and remove curator keys on the server's own terminal.

``add NAME`` prints the new curator's sign-in link once (the key is stored hashed only); ``first`` does
the same for a fresh installation with no curator yet (``make run`` calls it) and prints nothing else
when curators exist, so a key is never shown twice."""
from __future__ import annotations

import argparse

from core.access import CuratorKeys


def signin_link(key: str, address: str = "127.0.0.1", port: int = 8501) -> str:
    """The link a curator opens once: the key after ``#``, so no request line or log ever carries it."""
    host = "127.0.0.1" if address in ("", "0.0.0.0", "::") else address
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{int(port)}/signin#key={key}"


def add_curator_parser(sub) -> None:
    cur = sub.add_parser("curator", help="curator keys: add, remove, list; first (used by make run)")
    cur.add_argument("action", choices=("add", "remove", "list", "first"))
    cur.add_argument("name", nargs="?", help="the curator's name (add, remove)")
    cur.add_argument("--address", default="127.0.0.1", help="the dashboard's address, for the link printed")
    cur.add_argument("--port", type=int, default=8501, help="the dashboard's port, for the link printed")


def run_curator_command(args: argparse.Namespace) -> int:
    keys = CuratorKeys()
    try:
        if args.action == "list":
            names = keys.names()
            print("\n".join(names) if names else "No curator yet: `python -m core curator add NAME` makes one.")
        elif args.action == "first":
            made = keys.ensure_first_curator()
            if made is not None:
                name, key = made
                print(f"First curator '{name}' made. Open this link once to sign in (it is shown only now; "
                      f"keep it like a password):\n  {signin_link(key, args.address, args.port)}")
        elif args.name is None:
            raise ValueError(f"`curator {args.action}` needs the curator's name.")
        elif args.action == "add":
            key = keys.add(args.name)
            print(f"Curator '{args.name.strip()}' added. Their sign-in link, shown only now:\n  "
                  f"{signin_link(key, args.address, args.port)}")
        else:
            keys.remove(args.name)
            print(f"Curator '{args.name.strip()}' removed; their key and sign-ins no longer open anything.")
    finally:
        keys.dispose()
    return 0
