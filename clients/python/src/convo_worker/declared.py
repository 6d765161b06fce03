"""The client tools a prompt's client declared: the model configuration's
``tools`` (an OpenAI Responses request's function tools,
docs/worker-api.md), offered to the model beside the handler's own tools
as the Go runtime offers them (worker/declared.go).

``with_declared_tools(job, tools)`` gives the OpenAI SDK's ``tools`` with
the declared ones added; a call of one is a client tool's call: ask for
its output with ``call.request_input("client_tool", {})`` (``is_declared``
tells), and the resumed prompt's ``InputRequest.resolve()`` completes it
with the client's output (or fails it with the client's error)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from .job import Job

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolDeclaration:
    """A client tool the prompt declares."""

    name: str
    description: str | None = None
    #: A JSON Schema of an object; None: no arguments.
    parameters: dict[str, Any] | None = None


def declared_tools(job: Job) -> list[ToolDeclaration]:
    """The client tools the job's prompt declares (``model_config["tools"]``),
    in order; none when it declares none. A declaration that is not one (not
    an object, a name that is not 1 to 64 letters, digits, ``_`` or ``-``, a
    description that is not a text, parameters that are not the JSON Schema
    of an object), or a name declared twice, raises ValueError naming it:
    raised from a handler, it fails the reply."""
    raw = (job.model_config or {}).get("tools")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("the prompt's declared tools (model_config.tools) must be a list")
    out: list[ToolDeclaration] = []
    seen: set[str] = set()
    for i, d in enumerate(raw):
        at = f"the prompt's declared tool {i}"
        if not isinstance(d, dict):
            raise ValueError(f"{at} must be an object {{name, description?, parameters?}}")
        name, description, parameters = d.get("name"), d.get("description"), d.get("parameters")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"{at}: tool name {name!r}: want 1 to 64 letters, digits, _ or -")
        if name in seen:
            raise ValueError(f"{at}: tool {name} is declared twice")
        seen.add(name)
        if description is not None and not isinstance(description, str):
            raise ValueError(f"{at}: tool {name}: description must be a text")
        if parameters is not None:
            if not isinstance(parameters, dict):
                raise ValueError(f"{at}: tool {name}: parameters must be a JSON Schema object")
            if parameters.get("type") != "object":
                raise ValueError(f'{at}: tool {name}: parameters must be the schema of an object ("type": "object")')
        out.append(ToolDeclaration(name, description, parameters))
    return out


def is_declared(job: Job, name: str) -> bool:
    """Whether ``name`` is a client tool the job's prompt declares: its call
    asks the client for the output (``request_input("client_tool", {})``)."""
    return any(d.name == name for d in declared_tools(job))


def _name_of(tool: Any) -> Any:
    """A tool's name, in the Chat Completions shape
    (``{"type": "function", "function": {"name": …}}``) or the Responses one
    (``{"type": "function", "name": …}``)."""
    if not isinstance(tool, dict):
        return None
    fn = tool.get("function")
    if isinstance(fn, dict):
        return fn.get("name")
    return tool.get("name")


def with_declared_tools(job: Job, tools: list[dict[str, Any]] | None = None, *,
                        api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
    """The ``tools`` to send the model: the handler's own (the OpenAI SDK's
    shapes) and, after them, the client tools the prompt declares, as
    function tools of ``api``'s shape (``"chat"``:
    ``{"type": "function", "function": {"name", "description", "parameters"}}``;
    ``"responses"``: ``{"type": "function", "name", "description",
    "parameters"}``), parameters ``{"type": "object", "properties": {}}``
    when the declaration has none. A declared tool named as one of
    ``tools`` (the model could not tell them apart) raises ValueError naming
    it, as does a declaration ``declared_tools`` refuses: raised from the
    handler before the model runs, it fails the reply."""
    if api not in ("chat", "responses"):
        raise ValueError(f'with_declared_tools: api must be "chat" or "responses", got {api!r}')
    own = list(tools or [])
    names = {_name_of(t) for t in own}
    for d in declared_tools(job):
        if d.name in names:
            raise ValueError(f'the prompt declares a client tool "{d.name}", but this worker has a tool of that name: '
                             "rename the declared tool")
        fn: dict[str, Any] = {"name": d.name}
        if d.description is not None:
            fn["description"] = d.description
        fn["parameters"] = d.parameters if d.parameters is not None else {"type": "object", "properties": {}}
        own.append({"type": "function", "function": fn} if api == "chat" else {"type": "function", **fn})
    return own
