// An ACP client built on the real @agentclientprotocol/sdk (npm) that spawns `openmax --acp`
// and runs a plan, printing one JSON line per thing it saw, for tests/tests/acp_e2e.rs.
//
// usage: node client.mjs <sdk entry (acp.js)> <openmax binary> <cwd> <plan JSON>
// plan: {"permission": "allow"|"reject", "steps": [step...]} where a step is one of
//   {"op": "new", "mcpServers": [..]?}  session/new in cwd           → {"new": result} | {"error": e}
//   {"op": "load", "session": id, "mcpServers": [..]?}
//                                       session/load of id           → {"load": result}
//   {"op": "prompt", "text": t, "cancel_after": n?, "blocks": [..]?}
//                                       session/prompt (the text block, then `blocks` as
//                                       given); with cancel_after, session/cancel is
//                                       sent after n agent_message_chunk updates
//                                                                    → {"response": r} | {"error": e}
//   {"op": "set_mode", "mode": m}       session/set_mode             → {"set_mode": r} | {"error": e}
// With "fs": {"read": bool, "write": bool, "buffers": {abs path: text}}, the client offers the
// fs capability: fs/read_text_file answers a buffer's text (else the file on disk) and is
// printed as {"fs_read": params}; fs/write_text_file only updates the buffer (nothing is saved)
// and is printed as {"fs_write": params}. With "fail": true both answer an error; with
// "hang": true neither is ever answered.
// Every session/update is printed as {"update": params}, every permission request as
// {"permission": params}. The process ends with {"exit": code} once openmax has exited.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkPath, bin, cwd, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const { client, ndJsonStream } = await import(pathToFileURL(sdkPath).href);

const log = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// With "agent": {"command", "args", "env"} (an editor's agent_servers entry, as Zed's
// settings.json holds it), that command is spawned, found on PATH, with env added to the
// client's own environment, as an editor does; otherwise `<openmax binary> --acp`.
const agent_spec = plan.agent ?? { command: bin, args: ["--acp"], env: {} };
const child = spawn(agent_spec.command, agent_spec.args ?? [], {
  cwd,
  env: { ...process.env, ...(agent_spec.env ?? {}) },
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

let sessionId = null;
let cancelAfter = null;
let chunks = 0;

const buffers = plan.fs?.buffers ?? {};
const app = client()
  .onNotification("session/update", async ({ params }) => {
    log({ update: params });
    if (params.update?.sessionUpdate === "agent_message_chunk" && cancelAfter !== null) {
      chunks += 1;
      if (chunks === cancelAfter) {
        cancelAfter = null;
        await conn.agent.notify("session/cancel", { sessionId: params.sessionId });
      }
    }
  })
  .onRequest("session/request_permission", async ({ params }) => {
    log({ permission: params });
    return { outcome: { outcome: "selected", optionId: plan.permission ?? "reject" } };
  })
  .onRequest("fs/read_text_file", async ({ params }) => {
    log({ fs_read: params });
    if (plan.fs?.hang) await new Promise(() => {});
    if (plan.fs?.fail) throw new Error("the editor refused the read");
    if (params.path in buffers) return { content: buffers[params.path] };
    return { content: readFileSync(params.path, "utf8") };
  })
  .onRequest("fs/write_text_file", async ({ params }) => {
    log({ fs_write: params });
    if (plan.fs?.hang) await new Promise(() => {});
    if (plan.fs?.fail) throw new Error("the editor refused the write");
    buffers[params.path] = params.content;
    return {};
  });

const conn = app.connect(stream);
const agent = conn.agent;

const errorOf = (e) => ({ code: e.code ?? null, message: e.message ?? String(e) });

try {
  log({ initialize: await agent.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: !!plan.fs?.read, writeTextFile: !!plan.fs?.write } },
  }) });
  for (const step of plan.steps) {
    if (step.op === "new") {
      try {
        const r = await agent.request("session/new", { cwd, mcpServers: step.mcpServers ?? [] });
        sessionId = r.sessionId;
        log({ new: r });
      } catch (e) {
        log({ error: errorOf(e) });
      }
    } else if (step.op === "load") {
      const r = await agent.request("session/load", {
        sessionId: step.session,
        cwd,
        mcpServers: step.mcpServers ?? [],
      });
      sessionId = step.session;
      log({ load: r });
    } else if (step.op === "prompt") {
      chunks = 0;
      cancelAfter = step.cancel_after ?? null;
      try {
        const r = await agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: step.text }, ...(step.blocks ?? [])],
        });
        log({ response: r });
      } catch (e) {
        log({ error: errorOf(e) });
      }
    } else if (step.op === "set_mode") {
      try {
        log({ set_mode: await agent.request("session/set_mode", { sessionId, modeId: step.mode }) });
      } catch (e) {
        log({ error: errorOf(e) });
      }
    }
  }
} catch (e) {
  log({ failed: errorOf(e) });
}
child.stdin.end();
log({ exit: await exited });
process.exit(0);
