"""Credentials: the bearer tokens the emulator accepts, each for all customers or a list of them.

Only a token's SHA-256 is stored.  The token given on the command line (``--token``) acts for every customer, as it
always has, unless it was revoked here; more are added, rotated and revoked through ``/_emulator/credentials``
(tests: a rotated credential, two customers each with their own).  Every request reads the in-memory copy, which
every write here keeps equal to the table.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

from .db import Database


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Credential:
    digest: str
    #: the customers it may act for; None: every customer
    customers: frozenset[str] | None
    revoked: bool

    def view(self) -> dict[str, object]:
        return {
            "digest": self.digest[:12],
            "customers": None if self.customers is None else sorted(self.customers),
            "revoked": self.revoked,
        }


class CredentialStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.by_digest: dict[str, Credential] = {}
        for row in db.rows("SELECT digest, customers, revoked_at FROM credentials"):
            self.by_digest[row["digest"]] = self._record(row["digest"], row["customers"], row["revoked_at"])

    @staticmethod
    def _record(key: str, customers: str | None, revoked_at: float | None) -> Credential:
        listed = None if customers is None else frozenset(json.loads(customers))
        return Credential(key, listed, revoked_at is not None)

    def grant(self, token: str, customers: list[str] | None) -> Credential:
        """Accept ``token`` from now on, for ``customers`` (None: all); a revoked one is accepted again."""
        key = digest(token)
        stored = None if customers is None else json.dumps(sorted(set(customers)))
        self.db.run(
            "INSERT INTO credentials VALUES (?, ?, ?, NULL) ON CONFLICT(digest) DO UPDATE SET customers=excluded."
            "customers, revoked_at=NULL",
            key,
            stored,
            time.time(),
        )
        self.by_digest[key] = self._record(key, stored, None)
        return self.by_digest[key]

    def revoke(self, token: str) -> bool:
        """Refuse ``token`` from now on (the one of ``--token`` too); False when it was never accepted."""
        key = digest(token)
        known = key in self.by_digest
        self.db.run(
            "INSERT INTO credentials VALUES (?, NULL, ?, ?) ON CONFLICT(digest) DO UPDATE SET revoked_at=excluded."
            "revoked_at",
            key,
            time.time(),
            time.time(),
        )
        before = self.by_digest.get(key)
        self.by_digest[key] = Credential(key, before.customers if before else None, True)
        return known

    def get(self, token: str) -> Credential | None:
        return self.by_digest.get(digest(token))

    def all(self) -> list[Credential]:
        return sorted(self.by_digest.values(), key=lambda c: c.digest)
