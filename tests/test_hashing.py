"""The canonical form and the chain hashes are part of every stored key: these values are frozen.

If one of these tests fails, a change would orphan every stored summary,
derived session and fragment id: change the code back, or write a migration.
"""

from __future__ import annotations

from proxy.hashing import canonical, chain_of, message_hash
from proxy.tenancy import derive_session

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Café ☕ at 9?", "name": None},
]


def test_the_canonical_form_sorts_keys_keeps_nulls_and_writes_utf8() -> None:
    assert canonical(MESSAGES[1]) == '{"content":"Café ☕ at 9?","name":null,"role":"user"}'.encode()
    assert canonical({"role": "user", "name": None, "content": "Café ☕ at 9?"}) == canonical(MESSAGES[1])


def test_message_and_chain_hashes_are_frozen() -> None:
    assert message_hash(MESSAGES[1]) == "51162d7f45ae1b4bda067267d0cd43e3b8c7aae5d0f2176037acafda0f6fd12a"
    assert chain_of(MESSAGES) == [
        "28e51589fc99911edfb7c3ae8de4c2784f224ad5aad1d7ad8cf2c9257ba08c29",
        "cadf732e5048dcb3920a656a0499843b8570ab55db80508d874ffbccdcdd04ee",
    ]


def test_a_derived_session_id_is_frozen() -> None:
    assert derive_session("acme", "ana", MESSAGES) == "s-11c3eb2e5c09cef2c99dd62ace67b6b1"


def test_a_message_of_client_context_alone_names_no_conversation() -> None:
    """Codex sends its AGENTS.md and environment first in every conversation of a folder: the user's first
    message of their own names the conversation; one with words of its own keeps its frozen id."""
    agents = {"role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /shop\n\n"
                                                                         "<INSTRUCTIONS>\nUse pytest.\n</INSTRUCTIONS>"}]}
    environment = {"role": "user", "content": "<environment_context>\n<cwd>/shop</cwd>\n</environment_context>"}
    one = [agents, environment, {"role": "user", "content": "Why Postgres?"}]
    other = [agents, environment, {"role": "user", "content": "Add a test."}]
    assert derive_session("acme", "ana", one) != derive_session("acme", "ana", other)
    assert derive_session("acme", "ana", one) == derive_session("acme", "ana", [*one, {"role": "assistant",
                                                                                          "content": "Because."}])
    assert derive_session("acme", "ana", [{"role": "system", "content": "x"}, agents, *MESSAGES[1:]]) == (
        derive_session("acme", "ana", MESSAGES))
    assert derive_session("acme", "ana", [agents]) != derive_session("acme", "ana", [environment])  # nothing else
