"""Customers and locations: who the token may act for, and where (with each location's currency and prices)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .db import Database, typed, typed_or_none


@dataclass(frozen=True, slots=True)
class Customer:
    customer_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Location:
    name: str
    currency: str
    prices: str  # the price list as stored: a JSON object, unit -> monthly price (tests may write odd values in)

    def price_list(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.prices)
        return decoded


class AccountStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def empty(self) -> bool:
        """Whether nothing was seeded yet (no customer)."""
        return self.db.count("SELECT COUNT(*) FROM customers") == 0

    def add_customer(self, customer_id: str, name: str) -> None:
        self.db.run("INSERT INTO customers VALUES (?, ?)", customer_id, name)

    def add_location(self, name: str, currency: str, prices: dict[str, Any]) -> None:
        self.db.run("INSERT INTO locations VALUES (?, ?, ?)", name, currency, json.dumps(prices))

    def first_customer(self) -> str:
        return str(self.db.scalar("SELECT customer_id FROM customers ORDER BY rowid"))

    def customer(self, customer_id: str) -> Customer | None:
        return typed_or_none(Customer, self.db.row("SELECT * FROM customers WHERE customer_id=?", customer_id))

    def location(self, name: str) -> Location | None:
        return typed_or_none(Location, self.db.row("SELECT * FROM locations WHERE name=?", name))

    def locations(self) -> list[Location]:
        return [typed(Location, r) for r in self.db.rows("SELECT * FROM locations ORDER BY name")]
