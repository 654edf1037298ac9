"""Messages of any JSON shape never crash the compression's rendering (issue 14, defect 14)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context.compressor import render_transcript
from tests.fuzz_inputs import json_values


@settings(max_examples=300, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "tool", "system"]) | json_values,
    content=json_values,
    tool_calls=json_values,
    function_call=json_values,
)
def test_any_message_shape_renders(role: Any, content: Any, tool_calls: Any, function_call: Any) -> None:
    message = {"role": role, "content": content, "tool_calls": tool_calls, "function_call": function_call}
    text = render_transcript([message, {"role": "user", "content": "next"}], 1)
    assert "next" in text


def test_non_list_tool_calls_are_ignored_and_a_real_list_is_rendered() -> None:
    for odd in [5, True, "calls", {"id": "x"}, 2.5]:
        assert "calls get_weather" not in render_transcript([{"role": "assistant", "content": "hi", "tool_calls": odd}], 1)
    calls = [{"id": "c1", "function": {"name": "get_weather", "arguments": "{}"}}]
    assert "calls get_weather" in render_transcript([{"role": "assistant", "content": None, "tool_calls": calls}], 1)
