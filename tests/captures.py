"""The kafka-metadata-quorum and kafka-topics captures more than one test file reads: the constructed examples of
docs/kafka-surfaces.md, byte for byte (cells padded with spaces, a TAB after every cell, trailing spaces kept).

The quorum captures are the files of the test landing zone (tests/data/landing) that the end-to-end tests ingest: one
copy of each, read here exactly as stored (no newline translation; a .gz file gunzipped).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import read_text

LANDING = Path(__file__).parent / "data" / "landing"


def landing_text(relative: str) -> str:
    """A file of the test landing zone (a path below tests/data/landing), exactly as stored."""
    return read_text(LANDING / relative)


# §3.3, `describe --replication` of the 3.9+ scenario: the leader is printed first.
REPLICATION_39 = landing_text("quorum/cluster=kraft-cli39/1730000000600.replication.txt")
# §3.3, 3.6-3.8 with --human-readable ("N ms ago" relative to the capture time, 1730000000500).
REPLICATION_HUMAN = landing_text("quorum/cluster=kraft-cli38/2024-10-27/1730000000500.replication.txt.gz")
# §3.2, `describe --status` of 3.9+: voters and observers as JSON objects.
STATUS_39 = landing_text("quorum/cluster=kraft-cli39/1730000000600.status.txt")
# §3.2, `describe --status` of 3.3-3.8: bare ids.
STATUS_38 = landing_text("quorum/cluster=kraft-cli38/2024-10-27/1730000000500.status.txt")

# §5.2 (3.8+), note the trailing space after the empty Elr/LastKnownElr values.
TOPICS_38 = (
    "Topic: orders\tTopicId: q8VZlRdhS0m8CxwYk9RWbA\tPartitionCount: 3\tReplicationFactor: 3\t"
    "Configs: min.insync.replicas=2\n"
    "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: \tLastKnownElr: \n"
    "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3\tElr: \tLastKnownElr: \n"
    "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\tElr: \tLastKnownElr: \n"
)
