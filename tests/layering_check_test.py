#!/usr/bin/python3
"""The layering check itself, on small fixture trees: a clean one passes, and each kind of
violation (a forbidden module, a forbidden library, one brought in by a header, Boost in a
bridge header, a CMake link or source list that disagrees) is reported in the promised
format with exit status 1."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "layering_check.py")

# A tree that follows every rule: the modules it has, their CMake files, the GuestPipe
# crossing from bridge.
CLEAN = {
    "lobby/base/status.h": "#pragma once\n#include <string>\n",
    "lobby/base/status.cc": '#include "lobby/base/status.h"\n',
    "lobby/base/CMakeLists.txt": "add_library(warren_base STATIC status.cc)\n"
                                 "target_link_libraries(warren_base PUBLIC Threads::Threads)\n",
    "keys/store.h": '#pragma once\n#include "lobby/base/status.h"\n',
    "keys/lmdb_table.h": "#pragma once\n#include <lmdb.h>\n",
    "keys/store.cc": '#include "keys/store.h"\n#include "keys/lmdb_table.h"\n'
                     "#include <nlohmann/json.hpp>\n",
    "keys/CMakeLists.txt": "# the store\nadd_library(warren_keys STATIC\n  store.cc\n)\n"
                           "target_link_libraries(warren_keys\n  PUBLIC warren_base\n"
                           "  PRIVATE PkgConfig::LMDB)\n",
    "vmhost/guest_control.h": '#pragma once\n#include "lobby/base/status.h"\n',
    "vmhost/vm_host.h": '#pragma once\n#include "lobby/base/status.h"\n',
    "vmhost/vm_host.cc": '#include "vmhost/vm_host.h"\n',
    "vmhost/libvirt_host.h": '#pragma once\n#include "vmhost/vm_host.h"\n'
                             "#include <libvirt/libvirt.h>\n",
    "vmhost/libvirt_host.cc": '#include "vmhost/libvirt_host.h"\n',
    "vmhost/CMakeLists.txt": "add_library(warren_vmhost STATIC vm_host.cc)\n"
                             "target_link_libraries(warren_vmhost PUBLIC warren_base)\n"
                             "add_library(warren_libvirt STATIC libvirt_host.cc)\n"
                             "target_link_libraries(warren_libvirt PUBLIC warren_vmhost "
                             "PkgConfig::LIBVIRT)\n",
    "vmhost/guest/runner/runner.h": "#pragma once\n#include <stdio.h>\n",
    "vmhost/guest/runner/run.c": '#include "runner.h"\n',
    "lobby/commands/vm_stream.h": '#pragma once\n#include "vmhost/guest_control.h"\n'
                                  '#include "keys/store.h"\n',
    "lobby/commands/vm_stream.cc": '#include "lobby/commands/vm_stream.h"\n'
                                   "#include <CLI/CLI.hpp>\n",
    "lobby/commands/CMakeLists.txt": "add_library(warren_commands STATIC vm_stream.cc)\n"
                                     "target_link_libraries(warren_commands PUBLIC warren_base "
                                     "warren_keys warren_vmhost CLI11::CLI11)\n",
    "bridge/http_handler.h": '#pragma once\n#include "lobby/base/status.h"\n',
    "bridge/exec.cc": '#include "bridge/http_handler.h"\n#include "lobby/commands/vm_stream.h"\n'
                      '#include "vmhost/guest_control.h"\n#include <boost/asio.hpp>\n',
    "bridge/CMakeLists.txt": "add_library(warren_bridge STATIC exec.cc)\n"
                             "target_link_libraries(warren_bridge PUBLIC warren_commands "
                             "PRIVATE Boost::boost)\n",
}


def make_tree(directory, files):
    for path, text in files.items():
        full = os.path.join(directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


class LayeringCheckTest(unittest.TestCase):

    def run_check(self, changes):
        """Runs the script on CLEAN with `changes` (path -> text, None removes it)."""
        files = dict(CLEAN)
        for path, text in changes.items():
            if text is None:
                files.pop(path, None)
            else:
                files[path] = text
        with tempfile.TemporaryDirectory(prefix="layering-") as root:
            make_tree(root, files)
            r = subprocess.run([sys.executable, SCRIPT, "--root", root],
                               capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout.splitlines()

    def assert_violation(self, changes, expected):
        code, lines = self.run_check(changes)
        self.assertEqual(code, 1, "\n".join(lines))
        self.assertIn(expected, lines)
        self.assertTrue(lines[-1].startswith("layering: "), lines)

    def test_clean_tree_passes(self):
        code, lines = self.run_check({})
        self.assertEqual(code, 0, "\n".join(lines))
        self.assertRegex(lines[-1], r"^layering: \d+ files, \d+ modules, no violation$")

    def test_keys_may_not_include_vmhost(self):
        self.assert_violation(
            {"keys/store.cc": '#include "keys/store.h"\n#include "vmhost/vm_host.h"\n'},
            'keys/store.cc:2: includes "vmhost/vm_host.h", but keys may not include '
            "vmhost-api (rule: keys never includes vmhost, bridge, or lobby above base)")

    def test_vmhost_may_not_include_lobby_above_base(self):
        self.assert_violation(
            {"vmhost/libvirt_host.cc": '#include "vmhost/libvirt_host.h"\n'
                                       '#include "lobby/commands/vm_stream.h"\n'},
            'vmhost/libvirt_host.cc:2: includes "lobby/commands/vm_stream.h", but vmhost may '
            "not include commands (rule: vmhost never includes keys, lobby above base, or "
            "bridge)")

    def test_base_depends_on_nothing(self):
        self.assert_violation(
            {"lobby/base/status.cc": '#include "lobby/base/status.h"\n#include "keys/store.h"\n'},
            'lobby/base/status.cc:2: includes "keys/store.h", but base may not include keys '
            "(rule: warren_base (lobby/base) depends on nothing)")

    def test_interpreter_includes_no_libssh(self):
        self.assert_violation(
            {"lobby/commands/vm_stream.cc": '#include "lobby/commands/vm_stream.h"\n'
                                            "#include <libssh/libssh.h>\n"},
            "lobby/commands/vm_stream.cc:2: includes <libssh/libssh.h>, but commands may not "
            "include libssh (rule: only the SSH lobby and the guest control connection use "
            "libssh)")

    def test_interpreter_gets_no_libvirt_through_a_header(self):
        self.assert_violation(
            {"lobby/commands/vm_stream.cc": '#include "vmhost/libvirt_host.h"\n'},
            'lobby/commands/vm_stream.cc:1: includes "vmhost/libvirt_host.h", but commands may '
            "not include vmhost (rule: the interpreter (lobby/commands) sees vmhost only "
            "through vm_host.h, host_set.h, guest_control.h and image_layout.h, and includes "
            "no libssh, HTTP or libvirt header)")

    def test_ssh_reaches_vms_only_through_the_interpreter(self):
        self.assert_violation(
            {"lobby/ssh/route.cc": '#include "vmhost/guest_control.h"\n'
                                   '#include "vmhost/vm_host.h"\n'},
            'lobby/ssh/route.cc:2: includes "vmhost/vm_host.h", but ssh may not include '
            "vmhost-api (rule: lobby/ssh reaches VMs only through the interpreter "
            "(lobby/commands); the one crossing is the GuestPipe an interpreter service hands "
            "back (vmhost/guest_control.h))")

    def test_a_library_that_comes_with_a_header_counts(self):
        self.assert_violation(
            {"lobby/commands/vm_stream.cc": '#include "keys/lmdb_table.h"\n'},
            'lobby/commands/vm_stream.cc:1: includes "keys/lmdb_table.h", but commands may not '
            "include LMDB (<lmdb.h> comes with it; rule: only keys uses LMDB)")

    def test_bridge_reaches_vmhost_only_through_the_interpreter(self):
        self.assert_violation(
            {"bridge/exec.cc": '#include "vmhost/vm_host.h"\n'},
            'bridge/exec.cc:1: includes "vmhost/vm_host.h", but bridge may not include '
            "vmhost-api (rule: bridge reaches vmhost only through the interpreter "
            "(lobby/commands); the one crossing is the GuestPipe an interpreter service hands "
            "back (vmhost/guest_control.h))")

    def test_bridge_headers_have_no_boost(self):
        self.assert_violation(
            {"bridge/http_handler.h": "#pragma once\n#include <boost/beast/http.hpp>\n"},
            "bridge/http_handler.h:2: includes <boost/beast/http.hpp>, but bridge's headers may "
            "not include Boost (rule: only bridge's .cc files use Boost (no Boost in its "
            "headers))")

    def test_product_includes_no_tests(self):
        self.assert_violation(
            {"tests/fakes/fake.h": "#pragma once\n",
             "keys/store.cc": '#include "keys/store.h"\n#include "tests/fakes/fake.h"\n'},
            'keys/store.cc:2: includes "tests/fakes/fake.h", but keys may not include tests/ '
            "(rule: the product includes only lobby/, keys/, vmhost/ and bridge/; no tests or "
            "fakes)")

    def test_every_file_is_in_a_module(self):
        self.assert_violation(
            {"lobby/unplaced/page.cc": '#include "lobby/base/status.h"\n'},
            "lobby/unplaced/page.cc:1: is in no module (rule: every product file is in one; add its "
            "folder to MODULES in tests/layering_check.py)")

    def test_cmake_link_line_must_agree(self):
        self.assert_violation(
            {"keys/CMakeLists.txt": "add_library(warren_keys STATIC store.cc)\n"
                                    "target_link_libraries(warren_keys PUBLIC warren_base "
                                    "warren_vmhost PRIVATE PkgConfig::LMDB)\n"},
            "keys/CMakeLists.txt: warren_keys links warren_vmhost, but keys may not include "
            "vmhost-api (rule: keys never includes vmhost, bridge, or lobby above base)")

    def test_cmake_library_link_must_agree(self):
        self.assert_violation(
            {"lobby/commands/CMakeLists.txt": "add_library(warren_commands STATIC vm_stream.cc)\n"
                                              "target_link_libraries(warren_commands PUBLIC "
                                              "warren_keys PkgConfig::LIBVIRT)\n"},
            "lobby/commands/CMakeLists.txt: warren_commands links PkgConfig::LIBVIRT, but "
            "commands may not include libvirt (rule: only warren_libvirt uses libvirt)")

    def test_cmake_sources_must_agree_with_the_modules(self):
        self.assert_violation(
            {"vmhost/CMakeLists.txt": "add_library(warren_vmhost STATIC vm_host.cc "
                                      "libvirt_host.cc)\n"
                                      "add_library(warren_libvirt STATIC)\n"},
            "vmhost/CMakeLists.txt: warren_vmhost builds vmhost/libvirt_host.cc, which is in "
            "module vmhost, not vmhost-api (rule: a module's sources are built by its own "
            "library)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
