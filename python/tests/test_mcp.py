"""`ccl-bench mcp` through the Model Context Protocol's own Python client: the
tools list, each tool's answer equal to the JSON the command line prints, and
bad input as a tool error after which the server answers the next call."""

import asyncio
import json
import sys

import pytest

from conftest import ROOT, SAMPLE, cli

mcp = pytest.importorskip("mcp", reason="the mcp client package needs Python 3.10+")
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

BALANCED = ROOT / "trace_collection" / "llama_fsdp_8gpu_balanced"
HANG = ROOT / "trace_collection" / "llama_fsdp_8gpu_hang"

TOOLS = {
    "open_run",
    "list_metrics",
    "metrics",
    "collectives",
    "stragglers",
    "ops",
    "compare",
    "gate",
    "hang",
}


def serve(calls):
    """Starts `ccl-bench mcp` (the installed package's command), makes the
    `calls` [(tool, arguments)] in one session, and returns the tool list
    and each call's result."""

    async def session():
        server = StdioServerParameters(
            command=sys.executable, args=["-m", "ccl_bench", "mcp"], cwd=str(ROOT)
        )
        async with stdio_client(server) as (read, write):
            async with mcp.ClientSession(read, write) as s:
                await s.initialize()
                tools = await s.list_tools()
                results = [await s.call_tool(name, args) for name, args in calls]
                return tools, results

    return asyncio.run(session())


def answer(result) -> dict:
    assert not result.is_error, result.content[0].text
    text = json.loads(result.content[0].text)
    # The structured answer and its text are the same document.
    assert result.structured_content == text
    return text


def cli_json(*args: str) -> dict:
    return json.loads(cli(*args, "--format", "json", check=False).stdout)


def test_every_tool_answers_as_the_cli_prints(trace_path):
    p = str(trace_path)
    want_overview = cli_json("overview", p)
    rank = want_overview["rank_ids"][0]
    calls = [
        ("open_run", {"path": p}),
        ("metrics", {"path": p, "names": ["avg_step_time", "communication_fraction", "mfu"]}),
        ("metrics", {"path": p}),
        ("collectives", {"path": p, "top": 5}),
        ("stragglers", {"path": p, "top": 4}),
        ("ops", {"path": p, "rank": rank, "limit": 30}),
    ]
    tools, results = serve(calls)
    assert {t.name for t in tools.tools} == TOOLS
    overview, some, every, coll, strag, ops = (answer(r) for r in results)
    assert overview == want_overview
    whole = cli_json("--trace", p, "--metrics")
    assert every == whole
    by_name = {m["name"]: m for m in whole["metrics"]}
    assert [m["name"] for m in some["metrics"]] == ["avg_step_time", "communication_fraction", "mfu"]
    for m in some["metrics"]:
        assert m == by_name[m["name"]]
    # A figure the trace cannot give says why rather than giving nothing.
    missing = [m for m in every["metrics"] if m["value"] is None]
    assert missing and all(m["not_applicable"] for m in missing)
    assert coll == cli_json("collectives", p, "--top", "5", "--sort", "wait", "--no-members")
    assert len(coll["instances"]) <= 5
    assert strag == cli_json("stragglers", p, "--top", "4")
    assert ops == cli_json("ops", p, "--rank", str(rank), "--limit", "30")
    assert len(ops["ops"]) == min(30, ops["count"])


def test_two_runs_and_the_hang():
    a, b = str(SAMPLE), str(BALANCED)
    tools, results = serve(
        [
            ("compare", {"a": a, "b": b}),
            ("gate", {"a": a, "b": b, "all_steps": True}),
            ("hang", {"path": str(HANG)}),
            ("list_metrics", {}),
        ]
    )
    cmp, gate, hang, listed = (answer(r) for r in results)
    assert cmp == cli_json("compare", a, b)
    assert gate == cli_json("gate", a, b, "--all-steps")
    assert gate["gate"]["verdict"] == "improved"
    assert hang == cli_json("hang", str(HANG))
    assert hang["findings"][0]["missing"] == [5]
    names = [m["name"] for m in listed["metrics"]]
    assert "avg_step_time" in names and len(names) > 50


def test_bad_input_is_a_tool_error_and_the_server_goes_on():
    missing = str(ROOT / "no_such_run")
    _, results = serve(
        [
            ("open_run", {"path": missing}),
            ("metrics", {"path": str(SAMPLE), "names": ["no_such_metric"]}),
            ("ops", {"path": str(SAMPLE), "rank": 0, "step": 99}),
            ("open_run", {"path": str(HANG)}),
            ("open_run", {"path": str(SAMPLE)}),
        ]
    )
    bad_path, bad_metric, bad_step, dumps, good = results
    assert bad_path.is_error and "no_such_run" in bad_path.content[0].text
    assert bad_metric.is_error and "no_such_metric" in bad_metric.content[0].text
    assert bad_step.is_error and "has no step 99" in bad_step.content[0].text
    assert dumps.is_error and "ask the hang tool" in dumps.content[0].text
    assert answer(good)["straggler"]["rank"] == 5
