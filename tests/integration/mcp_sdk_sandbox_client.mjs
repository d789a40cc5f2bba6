// Drives warren's /mcp/sandbox (seed 004's sandbox API) with the official MCP TypeScript SDK
// client (@modelcontextprotocol/sdk, StreamableHTTPClientTransport with a bearer header), as
// an agent framework would.
//
//   node mcp_sdk_sandbox_client.mjs URL TOKEN tools       the four tools, their annotations
//                                                          and the instructions; a tool error
//   node mcp_sdk_sandbox_client.mjs URL TOKEN seed SIZE   + seed 004's transcript: create,
//                                                          exec with cwd/env, state kept, a
//                                                          failing command as a result, a
//                                                          timeout_ms that kills, extend,
//                                                          destroy
//   node mcp_sdk_sandbox_client.mjs URL TOKEN drive ID    exec in a sandbox made elsewhere
//                                                          (REST): reads /tmp/made-by, writes
//                                                          /tmp/mcp-was-here
//
// Prints one JSON line per step; exits non-zero (with the reason) on the first failure. Run
// with the pinned Node 22 from .peers/ (packaging/install-peers.sh) from inside .peers/.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, mode, arg] = process.argv.slice(2);
if (!url || !token || !mode) {
  console.error("usage: mcp_sdk_sandbox_client.mjs URL TOKEN tools|seed|drive [SIZE|ID]");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error("FAILED: " + what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
    process.exit(1);
  }
}
function step(name, data) {
  console.log(JSON.stringify({ step: name, ...data }));
}
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

const client = new Client({ name: "warren-sdk-sandbox-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: "Bearer " + token } },
});
await client.connect(transport);
check(transport.sessionId, "a session id after initialize");
const instructions = client.getInstructions() || "";
for (const part of ["default 15", "24 hours", "extend_sandbox", "at most 20 sandboxes"]) {
  check(instructions.includes(part), "instructions state " + part, instructions);
}
step("connected", { server: client.getServerVersion() });

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(
  JSON.stringify(names) === JSON.stringify(["create_sandbox", "destroy_sandbox", "exec", "extend_sandbox"]),
  "exactly the four tools",
  names,
);
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
check(byName.destroy_sandbox.annotations?.destructiveHint === true, "destroy is destructive");
check(byName.exec.annotations?.openWorldHint === true, "exec is open-world");
for (const t of tools) check(t.outputSchema, t.name + " has an outputSchema");
step("tools", { names });

// A sandbox's first boot and long commands outlast the SDK's 60 s default; progress
// notifications keep the request alive.
let progress = 0;
const opts = { timeout: 900000, resetTimeoutOnProgress: true, onprogress: () => progress++ };
async function call(name, args) {
  return client.callTool({ name, arguments: args }, undefined, opts);
}
async function exec(id, command, extra = {}) {
  const r = await call("exec", { sandbox_id: id, command, ...extra });
  check(!r.isError, "exec " + command + " is a result", r);
  return r.structuredContent;
}

if (mode === "tools") {
  const r = await call("destroy_sandbox", { sandbox_id: "sbx-nothere" });
  check(r.isError === true, "destroying a sandbox that does not exist is a tool error", r);
  step("error", { text: r.content[0].text });
}

if (mode === "seed") {
  // create_sandbox(size="small", timeout_minutes=30) in seed 004; a test size fits the host.
  let r = await call("create_sandbox", { size: arg || "small", timeout_minutes: 30 });
  check(!r.isError, "create_sandbox", r);
  const sbx = r.structuredContent;
  check(/^sbx-[a-z0-9]+$/.test(sbx.id), "an sbx- id", sbx);
  check(sbx.status === "running", "running", sbx);
  check(sbx.size === (arg || "small"), "its size", sbx);
  check(RFC3339.test(sbx.expires_at), "expires_at in RFC 3339", sbx);
  const minutes = (Date.parse(sbx.expires_at) - Date.now()) / 60000;
  check(minutes > 28 && minutes <= 30.5, "expires in 30 minutes", sbx);
  step("create", { sandbox: sbx });

  let out = await exec(sbx.id, 'pwd && echo "$GREETING"', { cwd: "/tmp", env: { GREETING: "hello" } });
  check(out.exit_code === 0 && out.stdout === "/tmp\nhello\n", "cwd and env apply", out);
  check(Number.isInteger(out.duration_ms) && out.truncated === false, "duration_ms, truncated", out);
  // cwd and env are that call's only; state persists between calls.
  out = await exec(sbx.id, 'pwd; echo "[$GREETING]"; echo kept > state.txt');
  check(out.stdout === "/home/dev\n[]\n", "the next call has neither", out);
  out = await exec(sbx.id, "cat state.txt");
  check(out.stdout === "kept\n", "files persist between calls", out);
  step("exec", {});

  // A failing test run is a result with its exit code, not a tool error.
  out = await exec(sbx.id, "echo '2 failing' && exit 1", { timeout_ms: 180000 });
  check(out.exit_code === 1 && out.stdout === "2 failing\n", "a non-zero exit", out);
  step("failing", {});

  const t0 = Date.now();
  out = await exec(sbx.id, "sleep 60 & echo started; sleep 60", { timeout_ms: 3000 });
  check(out.timed_out === true && out.exit_code === 124, "timeout_ms kills and reports", out);
  check(Date.now() - t0 < 20000, "killed near timeout_ms", Date.now() - t0);
  check(out.stdout === "started\n", "the output up to the kill", out);
  // The whole process tree went: no sleep is left.
  out = await exec(sbx.id, "pgrep -x sleep || echo none");
  check(out.stdout === "none\n", "the process tree was killed", out);
  step("timeout", {});

  r = await call("extend_sandbox", { sandbox_id: sbx.id, additional_minutes: 30 });
  check(!r.isError, "extend_sandbox", r);
  const later = (Date.parse(r.structuredContent.expires_at) - Date.parse(sbx.expires_at)) / 60000;
  check(r.structuredContent.id === sbx.id && later >= 29 && later <= 31, "30 minutes later", r);
  step("extend", { extended: r.structuredContent });

  r = await call("destroy_sandbox", { sandbox_id: sbx.id });
  check(!r.isError, "destroy_sandbox", r);
  check(r.structuredContent.id === sbx.id && r.structuredContent.status === "destroyed", "destroyed", r);
  r = await call("exec", { sandbox_id: sbx.id, command: "true" });
  check(r.isError === true, "a destroyed sandbox runs nothing", r);
  step("destroy", {});
}

if (mode === "drive") {
  let out = await exec(arg, "cat /tmp/made-by && echo mcp > /tmp/mcp-was-here");
  check(out.exit_code === 0, "exec in a sandbox made elsewhere", out);
  step("drive", { made_by: out.stdout.trim() });
}

await client.close();
step("done", {});
