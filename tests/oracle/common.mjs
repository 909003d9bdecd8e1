// What both recording drivers need: a scripted model that returns one batch of tool calls, then stops.

import { createAssistantMessageEventStream } from "@earendil-works/pi-ai";

export const model = {
  id: "oracle", name: "oracle", api: "openai-responses", provider: "oracle", baseUrl: "http://localhost",
  reasoning: false, input: ["text", "image"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 100000, maxTokens: 1000,
};

const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };

export const assistant = (content, stopReason) => ({ role: "assistant", content, api: model.api,
  provider: model.provider, model: model.id, usage, stopReason, timestamp: 0 });

/** A stream function that answers with `calls` (stop reason `stopReason`) first, then with plain text. */
export function scriptedModel(calls, stopReason) {
  const replies = [assistant(calls, stopReason)];
  const stream = () => {
    stream.requests++;
    const s = createAssistantMessageEventStream();
    const m = replies.shift() ?? assistant([{ type: "text", text: "done" }], "stop");
    queueMicrotask(() => { s.push({ type: "start", partial: m }); s.push({ type: "done", reason: m.stopReason, message: m }); });
    return s;
  };
  stream.requests = 0;
  return stream;
}
