// The official MCP TypeScript SDK's OAuth client (@modelcontextprotocol/sdk) signing in to
// warren headlessly, from the first 401 to a working tools/call:
//
//   node oauth_sdk_client.mjs MCP_URL REDIRECT_URI
//   env WARREN_SSH_ARGV: JSON array, the ssh command (with options and destination) that
//   runs a lobby command as the approving user; the code is appended.
//
// The provider captures the authorization URL instead of opening a browser; this script
// fetches the sign-in page, reads the code from it, approves it by running
// `ssh ... authorize CODE` (OpenSSH), polls the page's status endpoint as the page's own
// script would, and hands the code from the redirect to transport.finishAuth. Prints one
// JSON line per step; exits non-zero with the reason on the first failure.
import { spawnSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [mcpUrl, redirectUri] = process.argv.slice(2);
const sshArgv = JSON.parse(process.env.WARREN_SSH_ARGV || "[]");
if (!mcpUrl || !redirectUri || sshArgv.length === 0) {
  console.error("usage: WARREN_SSH_ARGV='[...]' oauth_sdk_client.mjs MCP_URL REDIRECT_URI");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.error("FAILED: " + what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
    process.exit(1);
  }
}
function step(name, data = {}) {
  console.log(JSON.stringify({ step: name, ...data }));
}

const STATE = "sdk-state-" + Math.random().toString(36).slice(2);
const provider = {
  _client: undefined,
  _tokens: undefined,
  _verifier: undefined,
  authorizationUrl: undefined,
  get redirectUrl() {
    return redirectUri;
  },
  get clientMetadata() {
    return {
      client_name: "SDK OAuth Test",
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state() {
    return STATE;
  },
  clientInformation() {
    return this._client;
  },
  saveClientInformation(info) {
    this._client = info;
  },
  tokens() {
    return this._tokens;
  },
  saveTokens(tokens) {
    this._tokens = tokens;
  },
  redirectToAuthorization(url) {
    this.authorizationUrl = url;
  },
  saveCodeVerifier(v) {
    this._verifier = v;
  },
  codeVerifier() {
    return this._verifier;
  },
};

// 1. Connect without a token: 401 -> discovery -> registration -> authorization URL.
let transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
let client = new Client({ name: "warren-oauth-sdk-test", version: "1.0.0" });
let unauthorized = false;
try {
  await client.connect(transport);
} catch (e) {
  unauthorized = e instanceof UnauthorizedError;
  if (!unauthorized) throw e;
}
check(unauthorized, "the first connect is refused (401) and starts the sign-in");
const authUrl = provider.authorizationUrl;
check(authUrl, "the SDK asked to open an authorization URL");
check(provider._client?.client_id?.startsWith("wc-"), "registered a client", provider._client);
const params = authUrl.searchParams;
check(params.get("code_challenge_method") === "S256", "PKCE S256", params.get("code_challenge_method"));
check(params.get("resource") === mcpUrl, "resource is the MCP URL", params.get("resource"));
step("authorization_url", { host: authUrl.host, path: authUrl.pathname });

// 2. The sign-in page, as a browser would get it.
const page = await fetch(authUrl);
check(page.status === 200, "the sign-in page", page.status);
const html = await page.text();
const code = /id="code">([A-Z0-9]{4}-[A-Z0-9]{4})</.exec(html)?.[1];
const secret = /var s="([A-Za-z0-9_-]+)"/.exec(html)?.[1];
check(code && secret, "a code and the page's poll secret on the page");
check(html.includes("authorize " + code), "the page shows the ssh command");
step("page", { code });

// 3. Approve over SSH, as the person would.
const ssh = spawnSync(sshArgv[0], [...sshArgv.slice(1), "authorize", code], { encoding: "utf8", timeout: 60000 });
check(ssh.status === 0, "ssh authorize", { status: ssh.status, stderr: ssh.stderr });
check(ssh.stdout.includes("SDK OAuth Test"), "authorize names the client", ssh.stdout);
step("approved");

// 4. Poll like the page's script, then follow the redirect's code.
const statusUrl = new URL("/oauth/status", authUrl);
let redirect;
for (let i = 0; i < 50 && !redirect; i++) {
  const r = await fetch(statusUrl, { method: "POST", body: secret, headers: { "Content-Type": "text/plain" } });
  const j = await r.json();
  if (j.status === "approved") redirect = new URL(j.redirect);
  else if (j.status !== "pending") check(false, "status while polling", j);
  else await new Promise((res) => setTimeout(res, 200));
}
check(redirect, "approved within 10 s");
check(redirect.href.startsWith(redirectUri), "redirected to the registered URI", redirect.href);
check(redirect.searchParams.get("state") === STATE, "state passed back");
await transport.finishAuth(redirect.searchParams.get("code"));
check(provider._tokens?.access_token?.startsWith("wr1."), "an access token (a warren API token)");
check(provider._tokens?.refresh_token, "a refresh token");
step("tokens", { expires_in: provider._tokens.expires_in });

// 5. Connect again with the token and call a tool.
transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
client = new Client({ name: "warren-oauth-sdk-test", version: "1.0.0" });
await client.connect(transport);
const instructions = client.getInstructions() || "";
const result = await client.callTool({ name: "exec", arguments: { command: "whoami" } });
const text = (result.content || []).map((c) => c.text || "").join("");
check(!result.isError, "tools/call exec whoami succeeds", result);
check(text.includes("admin"), "whoami answers as the approving user", text);
step("tools_call", { whoami: text.split("\n")[0] });
await client.close();
console.log(JSON.stringify({ step: "done", instructions }));
