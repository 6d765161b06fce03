"""convo-worker: the Python worker runtime of convo.

A Worker claims prompts from convo's PostgreSQL, runs your async handler on
each, and writes what it streams (text, reasoning, structured JSON, tool
calls and their results) through the SQL worker API, many replies per
transaction, exactly once. See docs/workers-python.md in the repository.

    async def handle(job: Job) -> None:
        job.reply.text("Hello")

    asyncio.run(Worker(os.environ["DATABASE_URL"], handle).serve())
"""

from .errors import ConvoWorkerError, InvalidOutput, PromptStopped, WriteRefused
from .job import ContextBlock, HistoryToolCall, Job, Message, PromptFile
from .pause import InputRequest
from .reply import Block, InputKind, Reply, ToolCall
from .settings import Settings
from .worker import PROMPTS_CHANNEL, Handler, Outcome, Result, Worker

__all__ = [
    "Block",
    "ContextBlock",
    "ConvoWorkerError",
    "Handler",
    "HistoryToolCall",
    "InputKind",
    "InputRequest",
    "InvalidOutput",
    "Job",
    "Message",
    "Outcome",
    "PROMPTS_CHANNEL",
    "PromptFile",
    "PromptStopped",
    "Reply",
    "Result",
    "Settings",
    "ToolCall",
    "Worker",
    "WriteRefused",
]
