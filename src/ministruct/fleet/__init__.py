"""The same constraint on a fleet of inference servers, every output verified.

`dialects` turns a constraint and sampling settings into each server kind's request body;
`client` speaks HTTP to one server (faults, backoff, kind detection); `run` sends a batch
concurrently and hands results back in input order; `verify` checks every output with our
own engine; `trace` turns returned logprobs into per-token records; `serve` starts local
llama-cpp-python servers.
"""

from ministruct.fleet.client import Server, split_servers
from ministruct.fleet.dialects import KINDS, Dialect, Settings
from ministruct.fleet.run import FleetBatch, FleetResult, Ignored, connect
from ministruct.fleet.verify import Verdict, Verifier

__all__ = [
    "KINDS",
    "Dialect",
    "FleetBatch",
    "FleetResult",
    "Ignored",
    "Server",
    "Settings",
    "Verdict",
    "Verifier",
    "connect",
    "split_servers",
]
