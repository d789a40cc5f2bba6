#!/usr/bin/python3
"""The layering check: fails when a product file includes what its module may not.

The rules are docs/ARCHITECTURE.md's "Layering rules", as data below: each module (a folder,
or a list of files) names the modules and single headers it may include, and each library
names the modules that may include its headers. A header's libraries count for every file
that includes it, through any chain of project headers (keys/lmdb_table.h brings <lmdb.h>
with it). The CMake files must agree: each module's sources are built by its library, and a
library links only what its module may include.

    layering_check.py [--root DIR]     check the tree at DIR (default: this repository)

Every tracked .h/.cc/.c under lobby/, keys/, vmhost/ and bridge/ is read (all such files
when DIR is not a git checkout, or git is not installed). Prints each violation as
`file:line: includes X, but MODULE may not include Y (rule: ...)` and exits 1; exits 0 with
a one-line summary when there is none.
"""

import argparse
import os
import re
import subprocess
import sys

# ---- the rules -------------------------------------------------------------------------

# The one sanctioned crossing of "lobby/ssh and bridge reach VMs only through the
# interpreter": an interpreter service (lobby/commands/vm_stream.h) hands back a GuestPipe,
# the type declared in vmhost/guest_control.h. Only the interpreter opens one.
GUEST_PIPE = "vmhost/guest_control.h"

# name -> where its files are (folder prefixes ending in "/", single files, or "DIR/*" for the
# files directly in DIR; a file belongs to the most specific match), its CMake library, what it may include besides itself
# (module names, or single headers), and the rule in words.
MODULES = {
    "base": dict(
        paths=["lobby/base/"], target="warren_base", may_include=[],
        rule="warren_base (lobby/base) depends on nothing"),
    "keys": dict(
        paths=["keys/"], target="warren_keys", may_include=["base"],
        rule="keys never includes vmhost, bridge, or lobby above base"),
    "vmhost-api": dict(
        paths=["vmhost/vm_host.h", "vmhost/vm_host.cc", "vmhost/guest_control.h",
               "vmhost/image_layout.h", "vmhost/image_layout.cc",
               "vmhost/vm_state_delivery.h", "vmhost/vm_state_delivery.cc",
               "vmhost/guest/identity.h", "vmhost/guest/identity.cc",
               "vmhost/guest_text.h", "vmhost/guest_text.cc",
               "vmhost/host_load.h", "vmhost/host_load.cc",
               "vmhost/host_set.h", "vmhost/host_set.cc",
               "vmhost/warm_memory.h", "vmhost/warm_memory.cc"],
        target="warren_vmhost", may_include=["base"],
        rule="the vmhost interfaces (VmHost, GuestControl), the image layout, the state "
             "delivery every host shares, a restored clone's identity (pure over "
             "GuestControl), the host's load and the set of hosts (pure over VmHost) "
             "include only lobby/base"),
    "vmhost": dict(
        paths=["vmhost/"], target="warren_libvirt", may_include=["base", "vmhost-api"],
        rule="vmhost never includes keys, lobby above base, or bridge"),
    "guest": dict(
        paths=["vmhost/guest/"], target="warren_guest", may_include=["base", "vmhost-api"],
        rule="vmhost never includes keys, lobby above base, or bridge; the guest side sees "
             "the rest of vmhost only through its interfaces"),
    "runner": dict(
        paths=["vmhost/guest/runner/"], target=None, may_include=[],
        rule="the guest runner is a standalone static C program"),
    "commands": dict(
        paths=["lobby/commands/"], target="warren_commands",
        may_include=["base", "keys", "vmhost-api"],
        rule="the interpreter (lobby/commands) sees vmhost only through vm_host.h, "
             "host_set.h, guest_control.h and image_layout.h, and includes no libssh, HTTP "
             "or libvirt header"),
    "ssh": dict(
        paths=["lobby/ssh/"], target="warren_ssh",
        may_include=["base", "keys", "commands", GUEST_PIPE],
        rule="lobby/ssh reaches VMs only through the interpreter (lobby/commands); the one "
             "crossing is the GuestPipe an interpreter service hands back (" + GUEST_PIPE + ")"),
    "bridge": dict(
        paths=["bridge/"], target="warren_bridge",
        may_include=["base", "keys", "commands", "rate-limiter", GUEST_PIPE],
        rule="bridge reaches vmhost only through the interpreter (lobby/commands); the one "
             "crossing is the GuestPipe an interpreter service hands back (" + GUEST_PIPE + ")"),
    "rate-limiter": dict(
        paths=["bridge/rate_limiter.h", "bridge/rate_limiter.cc"], target="warren_rate_limiter",
        may_include=[], rule="warren_rate_limiter (per-key token buckets) depends on nothing"),
    "mcp": dict(
        paths=["bridge/mcp/"], target="warren_mcp",
        may_include=["base", "keys", "commands", "bridge/http_handler.h"],
        rule="MCP runs commands through the interpreter and sees HTTP only through "
             "bridge/http_handler.h"),
    "oauth": dict(
        paths=["bridge/oauth/"], target="warren_oauth",
        may_include=["base", "keys", "rate-limiter", "bridge/http_handler.h"],
        rule="OAuth uses the store (keys) and sees HTTP only through bridge/http_handler.h"),
    "relay": dict(
        paths=["lobby/relay/"], target="warren_relay",
        may_include=["base", GUEST_PIPE],
        rule="the relay (byte streams, TLS, HTTP heads shared by warren's proxies) sees VMs "
             "only through the GuestPipe (" + GUEST_PIPE + ") and knows no proxy"),
    "integrations": dict(
        paths=["lobby/integrations/"], target="warren_integrations",
        may_include=["base", "vmhost-api", "relay"],
        rule="the integrations proxy sees VMs only through vmhost/guest_control.h (GuestPipe, "
             "GuestInboundSink) and the store only through its own IntegrationLookup"),
    "web": dict(
        paths=["lobby/web/"], target="warren_web",
        may_include=["base", "relay", GUEST_PIPE, "lobby/commands/web_visit.h", "keys/token.h"],
        rule="the web proxy asks every decision of its WebGate (web_gate.h, in the interpreter's "
             "vocabulary lobby/commands/web_visit.h), reaches VMs only through the GuestPipe the "
             "gate opens, and knows tokens only by their prefix (keys/token.h)"),
    "binary": dict(
        paths=["lobby/*"], target="warren", may_include=["*"],
        rule="the binary (lobby/main.cc, lobby/vm_runtime.*) wires every module together, "
             "with what their headers bring, but uses no library of theirs itself"),
}

# Libraries: how their headers and CMake targets are named, and which modules may use them.
# `headers: False`: only in .cc files (the module's headers stay free of it).
LIBRARIES = {
    "libssh": dict(includes=["libssh/"], cmake=["PkgConfig::LIBSSH"], modules=["guest", "ssh"],
                   rule="only the SSH lobby and the guest control connection use libssh"),
    "libvirt": dict(includes=["libvirt/"], cmake=["PkgConfig::LIBVIRT"], modules=["vmhost"],
                    rule="only warren_libvirt uses libvirt"),
    "libxml2": dict(includes=["libxml/"], cmake=["PkgConfig::LIBXML2"], modules=["vmhost"],
                    rule="only warren_libvirt reads libvirt's XML"),
    "Boost": dict(includes=["boost/"], cmake=["Boost::"], modules=["bridge"], headers=False,
                  rule="only bridge's .cc files use Boost (no Boost in its headers)"),
    "LMDB": dict(includes=["lmdb.h"], cmake=["PkgConfig::LMDB"], modules=["keys"],
                 rule="only keys uses LMDB"),
    "OpenSSL": dict(includes=["openssl/"], cmake=["OpenSSL::"],
                    modules=["keys", "bridge", "relay", "integrations", "web"],
                    rule="OpenSSL is for keys (fingerprints, tokens), bridge (HTTPS), the relay "
                         "(TLS both ways) and the proxies on it (the integrations CA, the web "
                         "proxy's certificate)"),
    "CLI11": dict(includes=["CLI/"], cmake=["CLI11::"], modules=["commands", "binary"],
                  rule="flags are parsed by the interpreter and the binary"),
    "nlohmann/json": dict(includes=["nlohmann/"], cmake=["nlohmann_json::"],
                          modules=[m for m in MODULES
                                   if m not in ("base", "runner", "rate-limiter")],
                          rule="warren_base depends on nothing"),
    "GoogleTest": dict(includes=["gtest/", "gmock/"], cmake=["GTest::"], modules=[],
                       rule="the product has no tests or fakes in it"),
}

CHECKED_DIRS = ("lobby", "keys", "vmhost", "bridge")
SOURCE_EXTS = (".h", ".cc", ".c")

# ---- the check -------------------------------------------------------------------------

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def module_of(path):
    """The module a repository path belongs to (most specific match), or None."""
    best, best_len = None, -1
    for name, m in MODULES.items():
        for p in m["paths"]:
            if p.endswith("/*"):
                hit = os.path.dirname(path) == p[:-2]
            elif p.endswith("/"):
                hit = path.startswith(p)
            else:
                hit = path == p
            if hit and len(p) > best_len:
                best, best_len = name, len(p)
    return best


def library_of(header):
    for name, lib in LIBRARIES.items():
        for p in lib["includes"]:
            if (header.startswith(p) if p.endswith("/") else header == p):
                return name
    return None


def list_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--", *CHECKED_DIRS],
                             capture_output=True, text=True, check=True).stdout.split()
        if out:
            return sorted(f for f in out if f.endswith(SOURCE_EXTS))
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for top in CHECKED_DIRS:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(SOURCE_EXTS):
                    files.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(files)


class Include:
    def __init__(self, line, text, system, target):
        self.line = line      # line number
        self.text = text      # as written: <x> or "x"
        self.system = system  # <...>
        self.target = target  # repository path of a project header, or the <...> name


def read_includes(root, path):
    out = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            system = m.group(1) == "<"
            name = m.group(2)
            text = ("<%s>" if system else '"%s"') % name
            target = name
            if not system:
                # Rooted at the repository; a bare name is beside the including file.
                beside = os.path.normpath(os.path.join(os.path.dirname(path), name))
                if not os.path.exists(os.path.join(root, name)) and \
                        os.path.exists(os.path.join(root, beside)):
                    target = beside
            out.append(Include(n, text, system, target))
    return out


def allowed(module, target_path):
    """Whether `module` may include the project file `target_path`."""
    other = module_of(target_path)
    may = MODULES[module]["may_include"]
    return other == module or "*" in may or other in may or target_path in may


def check_includes(root, files):
    violations = []
    includes = {f: read_includes(root, f) for f in files}

    # The libraries each project header brings in, through project headers (memoised DFS).
    libs_of = {}

    def header_libs(path, seen):
        if path in libs_of:
            return libs_of[path]
        libs = {}
        for inc in includes.get(path, []):
            if inc.system:
                lib = library_of(inc.target)
                if lib is not None:
                    libs.setdefault(lib, inc.text)
            elif inc.target in includes and inc.target not in seen:
                for lib, via in header_libs(inc.target, seen | {inc.target}).items():
                    libs.setdefault(lib, via)
        libs_of[path] = libs
        return libs

    for f in files:
        module = module_of(f)
        if module is None:
            violations.append("%s:1: is in no module (rule: every product file is in one; "
                              "add its folder to MODULES in tests/layering_check.py)" % f)
            continue
        rule = MODULES[module]["rule"]
        for inc in includes[f]:
            where = "%s:%d: includes %s" % (f, inc.line, inc.text)
            if inc.system:
                lib = library_of(inc.target)
                if lib is None:
                    continue
                spec = LIBRARIES[lib]
                if module not in spec["modules"]:
                    violations.append("%s, but %s may not include %s (rule: %s)"
                                      % (where, module, lib, spec["rule"]))
                elif spec.get("headers", True) is False and f.endswith(".h"):
                    violations.append("%s, but %s's headers may not include %s (rule: %s)"
                                      % (where, module, lib, spec["rule"]))
                continue
            target = inc.target
            if not os.path.exists(os.path.join(root, target)):
                violations.append("%s, but no such file is in the tree (rule: includes are "
                                  "rooted at the repository)" % where)
                continue
            other = module_of(target)
            if other is None:
                violations.append("%s, but %s may not include %s (rule: the product includes "
                                  "only lobby/, keys/, vmhost/ and bridge/; no tests or fakes)"
                                  % (where, module, target.split("/")[0] + "/"))
                continue
            if not allowed(module, target):
                violations.append("%s, but %s may not include %s (rule: %s)"
                                  % (where, module, other, rule))
                continue
            if "*" in MODULES[module]["may_include"]:
                continue  # the binary includes every module and what comes with it
            for lib, via in sorted(header_libs(target, {target}).items()):
                if module not in LIBRARIES[lib]["modules"]:
                    violations.append("%s, but %s may not include %s (%s comes with it; "
                                      "rule: %s)" % (where, module, lib, via,
                                                     LIBRARIES[lib]["rule"]))
    return violations


# ---- CMake -----------------------------------------------------------------------------

COMMAND = re.compile(r"\b(add_library|add_executable|target_link_libraries)\s*\(([^)]*)\)",
                     re.S)
KEYWORDS = {"STATIC", "SHARED", "OBJECT", "INTERFACE", "PUBLIC", "PRIVATE", "MODULE"}


def read_cmake(root):
    """target -> dict(file, dir, sources, links), from the CMake files of the checked dirs."""
    targets = {}
    for top in CHECKED_DIRS:
        for d, _, names in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in names:
                continue
            path = os.path.join(d, "CMakeLists.txt")
            rel_dir = os.path.relpath(d, root)
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"#[^\n]*", "", f.read())
            for cmd, args in COMMAND.findall(text):
                words = args.split()
                if not words:
                    continue
                t = targets.setdefault(words[0], dict(
                    file=os.path.join(rel_dir, "CMakeLists.txt"), dir=rel_dir, sources=[],
                    links=[]))
                rest = [w for w in words[1:] if w not in KEYWORDS]
                if cmd == "target_link_libraries":
                    t["links"] += rest
                else:
                    t["sources"] += [os.path.normpath(os.path.join(rel_dir, w)) for w in rest
                                     if "$" not in w]
    return targets


def cmake_library(item):
    for name, lib in LIBRARIES.items():
        if any(item.startswith(c) for c in lib["cmake"]):
            return name
    return None


def check_cmake(root, files):
    violations = []
    targets = read_cmake(root)
    module_of_target = {m["target"]: name for name, m in MODULES.items() if m["target"]}
    for name, m in MODULES.items():
        t = targets.get(m["target"]) if m["target"] else None
        if m["target"] and t is None:
            if any(module_of(f) == name for f in files):
                violations.append("CMakeLists.txt: no CMake target %s builds module %s (rule: "
                                  "a module's sources are built by its own library)"
                                  % (m["target"], name))
            continue
        if t is None:
            continue
        built = set(t["sources"])
        for f in files:
            if module_of(f) == name and f.endswith((".cc", ".c")) and f not in built:
                violations.append("%s: %s does not build %s, which is in module %s (rule: a "
                                  "module's sources are built by its own library)"
                                  % (t["file"], m["target"], f, name))
        for src in sorted(built):
            if module_of(src) != name:
                violations.append("%s: %s builds %s, which is in module %s, not %s (rule: a "
                                  "module's sources are built by its own library)"
                                  % (t["file"], m["target"], src, module_of(src), name))
        for item in t["links"]:
            other = module_of_target.get(item)
            if other is not None:
                if other != name and "*" not in m["may_include"] and \
                        other not in m["may_include"]:
                    violations.append("%s: %s links %s, but %s may not include %s (rule: %s)"
                                      % (t["file"], m["target"], item, name, other, m["rule"]))
                continue
            lib = cmake_library(item)
            if lib is not None and name not in LIBRARIES[lib]["modules"]:
                violations.append("%s: %s links %s, but %s may not include %s (rule: %s)"
                                  % (t["file"], m["target"], item, name, lib,
                                     LIBRARIES[lib]["rule"]))
    return violations


def main(argv=None):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=here, help="the tree to check (default: this repo)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    files = list_files(root)
    if not files:
        print("layering: no source files under %s in %s" % (", ".join(CHECKED_DIRS), root))
        return 1
    violations = check_includes(root, files) + check_cmake(root, files)
    for v in violations:
        print(v)
    if violations:
        print("layering: %d violation(s) in %d files (rules: tests/layering_check.py, "
              "docs/ARCHITECTURE.md \"Layering rules\")" % (len(violations), len(files)))
        return 1
    print("layering: %d files, %d modules, no violation" % (len(files), len(MODULES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
