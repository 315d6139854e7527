"""The capsule's door answers a request aiohttp cannot parse with a sentence, echoing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.capsules import Capsules, add_examples, base_env
from tests.support.registry import RegistryBuilder
from tests.trust.test_malformed_requests import MALFORMED, SECRET, check_answer, exchange


async def test_the_door_answers_a_malformed_request_with_a_sentence(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    add_examples(registry, "echo")
    d = await daemon_factory(registry.root, spawn_allow=("echo",))
    cp = await capsules.start(
        "echo@0.1.0", tmp_path / "w", registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url)
    )
    door = urlsplit(cp.url)
    assert door.hostname is not None and door.port is not None
    for raw, sentence in MALFORMED:
        check_answer(exchange((door.hostname, door.port), raw), sentence)
    assert await cp.terminate() == 143
    noted = [line for line in cp.stderr if "could not serve with HTTP 400" in line]
    assert len(noted) == len(MALFORMED), cp.stderr
    for line in cp.stderr:
        assert SECRET not in line and "msc1." not in line and "Traceback" not in line, line
