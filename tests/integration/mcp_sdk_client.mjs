// Drives warren's /mcp with the official MCP TypeScript SDK client (@modelcontextprotocol/sdk,
// StreamableHTTPClientTransport with a bearer header), as a real agent framework would.
//
//   node mcp_sdk_client.mjs URL TOKEN basic     list tools, exec whoami and ls
//   node mcp_sdk_client.mjs URL TOKEN vm IMAGE  + new VM, a command in it, a job followed
//                                                with wait, rm
//
// Prints one JSON line per step; exits non-zero (with the reason) on the first failure.
// Run with the pinned Node 22 from .peers/ (packaging/install-peers.sh); NODE_PATH or the
// working directory must reach .peers/node_modules.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, mode, image] = process.argv.slice(2);
if (!url || !token || !mode) {
  console.error("usage: mcp_sdk_client.mjs URL TOKEN basic|vm [IMAGE]");
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
function text(result) {
  return (result.content || []).map((c) => c.text || "").join("");
}

const client = new Client({ name: "warren-sdk-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: "Bearer " + token } },
});
await client.connect(transport);
check(transport.sessionId, "a session id after initialize");
step("connected", { server: client.getServerVersion(), session: transport.sessionId.length });

const { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
check(byName.exec && byName.exec_read_only && byName.wait, "exec, exec_read_only, wait", tools.map((t) => t.name));
check(byName.exec.annotations?.destructiveHint === true, "exec is destructive", byName.exec.annotations);
check(byName.exec_read_only.annotations?.readOnlyHint === true, "exec_read_only is read-only");
check(byName.wait.annotations?.readOnlyHint === true, "wait is read-only");
step("tools", { names: tools.map((t) => t.name) });

// Long calls (a VM's first boot under TCG) outlast the SDK's 60 s default.
const opts = { timeout: 600000, resetTimeoutOnProgress: true, onprogress: () => {} };
async function exec(command, extra = {}) {
  return client.callTool({ name: "exec", arguments: { command, ...extra } }, undefined, opts);
}

let r = await exec("whoami");
check(!r.isError && r.structuredContent, "whoami", r);
step("whoami", { structured: r.structuredContent });
r = await exec("ls");
check(!r.isError, "ls", r);
step("ls", { text: text(r).slice(0, 200) });
r = await client.callTool({ name: "exec_read_only", arguments: { command: "ssh x true" } });
check(r.isError === true, "exec_read_only refuses ssh", r);

if (mode === "vm") {
  const name = "sdk-" + Math.random().toString(36).slice(2, 8);
  r = await exec(`new --name=${name} --image=${image || "tiny"}`);
  check(!r.isError, "new", r);
  step("new", { name });
  try {
    r = await exec(`ssh ${name} 'echo hello from $(hostname); echo oops >&2; exit 3'`);
    check(r.isError === true, "a failing command is isError", r);
    check(r.structuredContent.stdout.startsWith("hello from"), "stdout", r.structuredContent);
    check(r.structuredContent.stderr === "oops\n", "stderr", r.structuredContent);
    check(r.structuredContent.exit_code === 3, "exit code", r.structuredContent);
    check(text(r).includes("[remote command exited with status 3]"), "status note", text(r));
    step("ssh", { structured: r.structuredContent });

    r = await exec(`ssh ${name} cat`, { stdin: "piped stdin\n" });
    check(!r.isError && r.structuredContent.stdout === "piped stdin\n", "stdin", r);

    r = await exec(`ssh ${name} 'echo started; sleep 4; echo finished'`, { wait_seconds: 0 });
    check(!r.isError && r.structuredContent.finished === false && r.structuredContent.job, "a job", r);
    const job = r.structuredContent.job;
    step("job", { job });
    let out = r.structuredContent.stdout;
    let done = null;
    for (let i = 0; i < 10 && !done; i++) {
      const w = await client.callTool({ name: "wait", arguments: { job, wait_seconds: 10 } }, undefined, opts);
      check(!w.isError, "wait", w);
      out += w.structuredContent.stdout;
      if (w.structuredContent.finished) done = w.structuredContent;
    }
    check(done && done.exit_code === 0, "the job ended with 0", done);
    check(out.includes("started") && out.includes("finished"), "the job's whole output", out);
    step("wait", { exit_code: done.exit_code, output: out });
  } finally {
    r = await exec(`rm ${name}`);
    check(!r.isError, "rm", r);
    step("rm", { name });
  }
  r = await exec("ls");
  check(!text(r).includes(name), "the VM is gone", text(r));
}

await transport.terminateSession();
await client.close();
step("done", {});
