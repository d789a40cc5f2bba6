// Drives warren's /mcp with the official MCP TypeScript SDK client (@modelcontextprotocol/sdk,
// StreamableHTTPClientTransport with a bearer header), as a real agent framework would.
//
//   node mcp_sdk_client.mjs URL TOKEN basic     list tools, exec whoami and ls
//   node mcp_sdk_client.mjs URL TOKEN vm IMAGE  + new VM, a command in it, a job followed
//                                                with wait, rm
//   node mcp_sdk_client.mjs URL TOKEN web IMAGE
//                                              + the "build something and host it" flow: a
//                                                page in a new VM served on 8000 by a
//                                                systemd unit, `share show` (private: an
//                                                anonymous fetch gets no page),
//                                                `share set-public`, the page fetched, rm
//   node mcp_sdk_client.mjs URL TOKEN seed IMAGE UPSTREAM BEARER
//                                              + the "run something you don't trust" flow:
//                                                an integration to UPSTREAM, a VM with a git
//                                                repo and its test suite, `cp --egress
//                                                integrations`, the tests on the copy, the
//                                                copy cut off but for its integration, rm
//
// Prints one JSON line per step; exits non-zero (with the reason) on the first failure.
// Run with the pinned Node 22 from .peers/ (packaging/install-peers.sh); NODE_PATH or the
// working directory must reach .peers/node_modules.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import http from "node:http";

const [url, token, mode, image, upstream, bearer] = process.argv.slice(2);
if (!url || !token || !mode) {
  console.error("usage: mcp_sdk_client.mjs URL TOKEN basic|vm|web|seed [IMAGE [UPSTREAM BEARER]]");
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

// GET `url` anonymously (as someone with no sign-in would), connecting to 127.0.0.1: the host
// is NAME.warren.localhost, which browsers (not Node's resolver) send to loopback.
function anonymousGet(url) {
  const u = new URL(url);
  return new Promise((ok, bad) => {
    const req = http.request({ host: "127.0.0.1", port: u.port || 80, path: u.pathname,
                               headers: { Host: u.host, Accept: "application/json" } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => ok({ status: res.statusCode, body }));
    });
    req.on("error", bad);
    req.end();
  });
}

// exec, and when the command outlives wait_seconds (a busy guest), wait for its job as an
// agent would: the whole output and the exit status.
async function execToEnd(command, extra = {}) {
  let r = await exec(command, extra);
  if (r.isError || !r.structuredContent || r.structuredContent.finished !== false) return r;
  const sc = { ...r.structuredContent };
  for (let i = 0; i < 20 && !sc.finished; i++) {
    const w = await client.callTool({ name: "wait", arguments: { job: sc.job, wait_seconds: 30 } },
                                    undefined, opts);
    if (w.isError) return w;
    sc.stdout += w.structuredContent.stdout;
    sc.stderr += w.structuredContent.stderr;
    sc.finished = w.structuredContent.finished;
    sc.exit_code = w.structuredContent.exit_code;
  }
  return { ...r, structuredContent: sc };
}

if (mode === "web") {
  const name = "cat-facts-" + Math.random().toString(36).slice(2, 8);
  const page = "<!doctype html><title>cat facts</title><h1>Cats sleep 16 hours a day</h1>\n";
  r = await exec(`new --name=${name} --image=${image} --json`);
  check(!r.isError, "new", r);
  const created = JSON.parse(text(r));
  check(typeof created.url === "string" && created.url.includes(name + "."), "new gives a URL", created);
  step("new", { name, url: created.url });
  try {
    r = await execToEnd(`ssh ${name} 'mkdir -p ~/site && cat > ~/site/index.html && echo $HOME'`, { stdin: page });
    check(!r.isError && r.structuredContent.exit_code === 0, "the page", r);
    const home = r.structuredContent.stdout.trim();
    const unit = ["[Unit]", "Description=cat facts", "[Service]",
                  `WorkingDirectory=${home}/site`, "ExecStart=/usr/bin/python3 -m http.server 8000",
                  "Restart=always", "[Install]", "WantedBy=multi-user.target", ""].join("\n");
    r = await execToEnd(`ssh ${name} 'sudo tee /etc/systemd/system/catfacts.service >/dev/null && ` +
                   `sudo systemctl daemon-reload && sudo systemctl enable --now catfacts && ` +
                   `for i in $(seq 120); do curl -s -o /dev/null -w "%{http_code}" localhost:8000/ | ` +
                   `grep -q 200 && echo up && break; sleep 1; done'`, { stdin: unit });
    check(!r.isError && r.structuredContent.stdout.includes("up"), "the unit serves", r);
    step("served", { stdout: r.structuredContent.stdout.trim() });
    r = await exec(`share show ${name}`);
    check(!r.isError, "share show", r);
    const shown = JSON.parse(text(r));
    check(shown.status === "private" && shown.url === created.url, "private, at the same URL", shown);
    step("share_show", { status: shown.status, url: shown.url });
    let got = await anonymousGet(shown.url);
    check(got.status === 401 && !got.body.includes("Cats sleep"), "private to the anonymous", got);
    step("private", { status: got.status });
    r = await exec(`share set-public ${name}`);
    check(!r.isError, "share set-public", r);
    got = await anonymousGet(shown.url);
    check(got.status === 200 && got.body.includes("Cats sleep 16 hours a day"), "the page, public", got);
    step("public", { status: got.status });
  } finally {
    r = await exec(`rm ${name}`);
    check(!r.isError, "rm", r);
    step("rm", { name });
  }
}

if (mode === "seed") {
  const suffix = Math.random().toString(36).slice(2, 8);
  const src = "seed-src-" + suffix;
  const copy = "seed-box-" + suffix;
  const api = "seedapi" + suffix;
  const made = [];
  r = await exec(`integrations add http-proxy --name ${api} --target ${upstream} --bearer ${bearer}`);
  check(!r.isError, "integrations add", r);
  check(!text(r).includes(bearer), "add shows no secret", text(r));
  step("integration", { name: api });
  try {
    r = await exec(`new --name=${src} --image=${image} --egress=all --integration=${api}`);
    check(!r.isError, "new", r);
    made.push(src);
    step("new", { name: src });
    // A small project with a test suite, committed to git.
    const setup = [
      "set -e",
      "mkdir -p ~/proj && cd ~/proj",
      "cat > calc.py <<'PY'",
      "def add(a, b):",
      "    return a + b",
      "PY",
      "cat > test_calc.py <<'PY'",
      "import unittest",
      "import calc",
      "class CalcTest(unittest.TestCase):",
      "    def test_add(self):",
      "        self.assertEqual(calc.add(2, 3), 5)",
      "    def test_add_negative(self):",
      "        self.assertEqual(calc.add(-2, 1), -1)",
      "PY",
      "git init -q -b main .",
      "git add calc.py test_calc.py",
      "git -c user.name=seed -c user.email=seed@example.com commit -q -m 'calc and its tests'",
      "git log --oneline",
    ].join("\n") + "\n";
    r = await execToEnd(`ssh ${src} 'sh -s'`, { stdin: setup });
    check(!r.isError && r.structuredContent.stdout.includes("calc and its tests"), "the repo", r);
    step("repo", { log: r.structuredContent.stdout.trim() });
    r = await execToEnd(`ssh ${src} 'ls /sys/class/net'`);
    const nics = (out) => out.split("\n").filter((n) => n && n !== "lo" && !n.startsWith("rc=") && !n.startsWith("dns="));
    check(!r.isError && nics(r.structuredContent.stdout).length === 1, "the source has a NIC", r);

    r = await exec(`cp ${src} ${copy} --egress integrations`);
    check(!r.isError, "cp --egress integrations", r);
    made.push(copy);
    step("cp", { text: text(r).split("\n")[0] });

    r = await execToEnd(`ssh ${copy} 'cd ~/proj && git status --short && git log --oneline && python3 -m unittest -v'`);
    check(!r.isError && r.structuredContent.exit_code === 0, "the tests on the copy", r);
    check(r.structuredContent.stderr.includes("Ran 2 tests") && r.structuredContent.stderr.includes("OK"),
          "2 tests ran and passed", r.structuredContent);
    step("tests", { stderr: r.structuredContent.stderr.trim().split("\n").slice(-3) });

    // Cut off: no network device, no address reached, no DNS; only its integration.
    r = await execToEnd(`ssh ${copy} 'ls /sys/class/net; curl -sS -m 5 http://198.51.100.2/ 2>&1; echo rc=$?; ` +
                   `getent hosts example.com; echo dns=$?'`);
    const out = r.structuredContent.stdout;
    check(nics(out).filter((l) => !l.startsWith("curl:")).length === 0 && !out.includes("rc=0") &&
          !out.includes("dns=0"), "the copy is cut off", out);
    step("cut_off", { stdout: out.trim().split("\n") });
    // The copy's integration endpoint is set up a moment after it boots (later on a loaded
    // machine): connections refused until then are tried again.
    r = await execToEnd(`ssh ${copy} 'curl -sS -m 30 --retry 20 --retry-delay 3 --retry-connrefused ` +
                   `http://${api}.int.warren.internal/seed?from=copy'`);
    check(!r.isError && r.structuredContent.stdout.startsWith("ok /seed?from=copy"), "the integration", r);
    check(!r.structuredContent.stdout.includes(bearer), "no secret in the VM", r);
    step("integration_reached", { stdout: r.structuredContent.stdout.trim() });
  } finally {
    for (const name of made.reverse()) {
      r = await exec(`rm ${name}`);
      check(!r.isError, "rm " + name, r);
    }
    r = await exec(`integrations remove ${api}`);
    check(!r.isError, "integrations remove", r);
  }
  step("rm", { names: made });
  r = await exec("ls");
  check(!text(r).includes(src) && !text(r).includes(copy), "both are gone", text(r));
}

await transport.terminateSession();
await client.close();
step("done", {});
