// Runs OpenAI's own Node SDK (the npm package openai, pinned in
// web/package.json) against convo's Responses API; driven by the Go test
// TestOpenAINodeSDK (go test ./httpapi/openai), which starts the server
// and judges this script's report.
//
//   OPENAI_BASE_URL=url  the server's /v1
//   OPENAI_API_KEY=token a convo token
//
// Resume: a background streamed response (responses.create, background
// and stream) is read until its third output_text delta, then its stream
// is aborted mid-reply; client.responses.retrieve(id, {stream: true,
// starting_after: n}) resumes it after the last sequence_number read and
// is read to its terminal event; then client.responses.retrieve(id) gets
// the response. Every event's sequence_number and type, the terminal
// event's response and GET's are reported.
//
// Refused: responses.create with store: false; the error the SDK raises
// is reported (its class, status, type, code and param).
//
// Function tool: responses.create with a function tool (get_weather) and
// the demo model's "/call get_weather {...}" ends with a function_call
// item; responses.create with previous_response_id and its
// function_call_output resumes the reply as a new response. Both
// responses are reported.
//
// The report is one JSON object on stdout. The script exits non-zero only
// when it cannot run at all; the Go test judges the report.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.OPENAI_BASE_URL,
  apiKey: process.env.OPENAI_API_KEY,
  maxRetries: 0,
  timeout: 30_000,
});

const terminal = new Set(["response.completed", "response.failed", "response.incomplete"]);

/** The events of stream as reported, until stop says so or it ends. */
async function read(stream, stop) {
  const out = [];
  for await (const event of stream) {
    out.push(event);
    if (stop(event)) break;
  }
  return out;
}

const brief = (e) => ({ seq: e.sequence_number, type: e.type, delta: e.delta ?? null });

async function resume() {
  const stream = await client.responses.create({
    model: "demo",
    input: "Tell me a story about a lighthouse.",
    background: true,
    stream: true,
  });
  let deltas = 0;
  const live = await read(stream, (e) => e.type === "response.output_text.delta" && ++deltas === 3);
  // The client goes away mid-reply.
  stream.controller.abort();
  const id = live[0]?.response?.id;
  if (!id) throw new Error(`the stream's first event has no response id: ${JSON.stringify(live[0])}`);
  const last = live[live.length - 1].sequence_number;
  const resumed = await read(
    await client.responses.retrieve(id, { stream: true, starting_after: last }),
    (e) => terminal.has(e.type),
  );
  const end = resumed[resumed.length - 1];
  const got = await client.responses.retrieve(id);
  return {
    id,
    live: live.map(brief),
    resumed: resumed.map(brief),
    final: end?.response ?? null,
    got,
  };
}

async function refused() {
  try {
    const res = await client.responses.create({ model: "demo", input: "x", store: false });
    return { raised: false, response: res };
  } catch (err) {
    return {
      raised: true,
      badRequest: err instanceof OpenAI.BadRequestError,
      apiError: err instanceof OpenAI.APIError,
      status: err.status ?? null,
      type: err.type ?? null,
      code: err.code ?? null,
      param: err.param ?? null,
      message: err.message ?? String(err),
    };
  }
}

async function functionCall() {
  const tools = [
    {
      type: "function",
      name: "get_weather",
      description: "The weather in a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
      strict: true,
    },
  ];
  const first = await client.responses.create({ model: "demo", input: '/call get_weather {"city":"Lima"}', tools });
  const call = first.output.find((item) => item.type === "function_call");
  if (!call) return { first, call: null, next: null };
  const next = await client.responses.create({
    model: "demo",
    previous_response_id: first.id,
    input: [{ type: "function_call_output", call_id: call.call_id, output: "warm, 24 C" }],
  });
  return { first, call, next };
}

const report = { resume: await resume(), refused: await refused(), functionCall: await functionCall() };
process.stdout.write(JSON.stringify(report));
