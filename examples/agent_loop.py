"""A minimal agent loop around a vrom search tool, with a scripted model: no network, no API key.

    python examples/agent_loop.py                # the fake embedder (hashed words), instant
    python examples/agent_loop.py --real-model   # the default model (all-MiniLM-L6-v2, offline)

The loop speaks the OpenAI Chat Completions shapes: the tool goes in as ``tool.openai_schema()``,
the model answers with a tool call whose arguments are JSON text, the loop runs ``tool.call`` on
that text and sends the result back as ``openai_tool_message``. Swap `ScriptedModel.reply` for a
real ``client.chat.completions.create(...)`` call and the rest stays the same.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from vrom import Collection, Embedder
from vrom.tools import SearchTool, ToolResult, openai_tool_message

HANDBOOK = [
    {
        "id": "leave",
        "text": "Annual leave is 25 days a year, plus public holidays.",
        "metadata": {"section": "hr"},
    },
    {
        "id": "expenses",
        "text": "Expenses are reimbursed within a month of submitting the receipts.",
        "metadata": {"section": "finance"},
    },
    {
        "id": "laptops",
        "text": "Laptops are replaced every three years; ask IT for a new one.",
        "metadata": {"section": "it"},
    },
    {
        "id": "remote",
        "text": "Remote work is allowed up to three days each week, with your manager's approval.",
        "metadata": {"section": "hr"},
    },
]
QUESTION = "How many days of annual leave do I get a year?"
MAX_TURNS = 4

Message = dict[str, Any]


class ScriptedModel:
    """Stands in for a chat model: asks for the search tool once, then answers from its result."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    def reply(self, messages: Sequence[Message], tools: Sequence[Message]) -> Message:
        """Return the next assistant message (OpenAI Chat Completions shape)."""
        last = messages[-1]
        if last["role"] == "user":
            arguments = json.dumps({"query": last["content"], "k": 3})
            call = {"name": self.tool_name, "arguments": arguments}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
            }
        results = json.loads(last["content"]).get("results", [])
        if not results:
            return {"role": "assistant", "content": "The handbook does not say."}
        best = results[0]
        return {"role": "assistant", "content": f"{best['text']} [source: {best['id']}]"}


def run_agent(tool: SearchTool, model: ScriptedModel, question: str) -> list[Message]:
    """Return the transcript of one question: model turns and tool results until an answer."""
    messages: list[Message] = [
        {"role": "system", "content": "Answer from the handbook and cite the source id."},
        {"role": "user", "content": question},
    ]
    tools = [tool.openai_schema()]
    for _ in range(MAX_TURNS):
        reply = model.reply(messages, tools)
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for tool_call in reply["tool_calls"]:
            function = tool_call["function"]
            if function["name"] == tool.name:
                result = tool.call(function["arguments"])
            else:
                result = ToolResult(is_error=True, content=f"no tool named {function['name']!r}")
            messages.append(openai_tool_message(tool_call["id"], result))
    return messages


def print_transcript(messages: Sequence[Message]) -> None:
    """Print each message on its own lines, tool calls and tool results included."""
    for message in messages:
        for tool_call in message.get("tool_calls") or ():
            function = tool_call["function"]
            print(f"assistant -> {function['name']}({function['arguments']})")
        if message.get("content") is not None:
            print(f"{message['role']}: {message['content']}")


def main(argv: Sequence[str] | None = None) -> None:
    """Build an in-memory handbook collection, ask it one question, print the transcript."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="embed with the default model (all-MiniLM-L6-v2) instead of the fake one",
    )
    args = parser.parse_args(argv)
    embedder = Embedder.default() if args.real_model else Embedder.fake()
    with Collection.open("handbook", embedder=embedder) as handbook:  # in memory
        handbook.add(HANDBOOK)
        tool = handbook.as_tool("search_handbook", "Search the employee handbook.")
        print_transcript(run_agent(tool, ScriptedModel(tool.name), QUESTION))


if __name__ == "__main__":
    main()
