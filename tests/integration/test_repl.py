#!/usr/bin/python3
"""The lobby REPL: `ssh -tt HOST` under expect (prompt, line editing, history, exit), and
the same REPL without a pty, fed a script on stdin."""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import warren_harness as h  # noqa: E402

PROMPT = "warren \u25b6 "

# Helpers for the expect scripts. A script failure exits 100+; otherwise the script exits
# with ssh's own exit status.
EXPECT_PROCS = r"""
proc prompt {} {
  expect {
    -ex "warren \u25b6 " {}
    timeout { puts "\nSCRIPT: no prompt"; exit 101 }
    eof { puts "\nSCRIPT: eof before the prompt"; exit 102 }
  }
}
proc want {text} {
  expect {
    -ex $text {}
    -ex "unknown command" { puts "\nSCRIPT: the wrong command ran"; exit 103 }
    timeout { puts "\nSCRIPT: timed out waiting for $text"; exit 101 }
    eof { puts "\nSCRIPT: eof waiting for $text"; exit 102 }
  }
}
proc finish {} {
  expect {
    eof {}
    timeout { puts "\nSCRIPT: the session did not end"; exit 104 }
  }
  set result [wait]
  exit [lindex $result 3]
}
"""


def tcl_word(arg):
    if any(c in arg for c in "{}\\"):
        raise ValueError("cannot quote " + arg)
    return "{" + arg + "}"


class ReplTest(h.LobbyTestCase):
    def run_expect(self, body, command=(), timeout=10):
        """Runs `ssh -tt` under expect with `body`; returns (exit status, transcript)."""
        spawn = " ".join(tcl_word(a) for a in self.ssh_args(self.admin, *command, tty=True))
        script = "set timeout %d\nlog_user 1\n%s\nspawn %s\n%s\n" % (
            timeout, EXPECT_PROCS, spawn, body)
        path = os.path.join(self.tmp, "repl-%s.exp" % self.id().rsplit(".", 1)[-1])
        with open(path, "w", encoding="utf-8") as f:
            f.write(script)
        env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
        r = subprocess.run(["expect", path], capture_output=True, timeout=timeout * 6,
                           env=env, stdin=subprocess.DEVNULL)
        transcript = r.stdout.decode("utf-8", "replace")
        self.assertLess(r.returncode, 100, "expect script failed:\n" + transcript)
        return r.returncode, transcript

    def test_prompt_help_whoami_exit(self):
        status, transcript = self.run_expect(r"""
want "Welcome to warren, admin"
prompt
send "help\r"
want "ssh-key list"
prompt
send "whoami\r"
want "user:"
want "admin"
prompt
send "exit\r"
finish
""")
        self.assertEqual(status, 0, transcript)
        self.assertIn(PROMPT, transcript)
        # With a pty, output lines end in CR LF.
        self.assertIn("ssh-key list", transcript)
        self.assertNotRegex(transcript.replace("\r\n", ""), r"ssh-key list[^\n]*\n")

    def test_quit_ends_with_status_0(self):
        status, transcript = self.run_expect(r"""
prompt
send "no-such-command\r"
expect -ex "unknown command"
prompt
send "quit\r"
finish
""")
        self.assertEqual(status, 0, transcript)

    def test_line_editing(self):
        status, transcript = self.run_expect(r"""
prompt
# Backspace.
send "whoamx\177i\r"
want "user:"
prompt
# Ctrl-U kills the line before the cursor.
send "no-such-command\025whoami\r"
want "user:"
prompt
# Ctrl-A / Ctrl-E: home and end.
send "hoami\001w\005\r"
want "user:"
prompt
# Left arrow, then insert in the middle.
send "whomi\033\[D\033\[Da\r"
want "user:"
prompt
# Home / End escape sequences and Right arrow.
send "hoam\033\[Hw\033\[Fi\033\[C\r"
want "user:"
prompt
# Ctrl-W kills the word before the cursor.
send "no-such-command\027whoami\r"
want "user:"
prompt
# Ctrl-K kills from the cursor to the end.
send "whoami zzz\033\[D\033\[D\033\[D\033\[D\013\r"
want "user:"
prompt
# Ctrl-C drops the line and gives a fresh prompt.
send "no-such-command\003"
want "^C"
prompt
send "\r"
prompt
# Up arrow recalls the last command; Down returns to the empty line.
send "\033\[A\r"
want "user:"
prompt
send "\033\[A\033\[A\033\[B\033\[B\r"
prompt
# UTF-8 is inserted whole and deleted whole.
send "whoami \u00e9\177\r"
want "user:"
prompt
# Ctrl-D on an empty line leaves.
send "\004"
finish
""")
        self.assertEqual(status, 0, transcript)
        self.assertIn("^C", transcript)
        self.assertNotIn("unknown command", transcript)

    def test_exec_with_pty(self):
        status, transcript = self.run_expect("want \"user:\"\nfinish\n", command=("whoami",))
        self.assertEqual(status, 0, transcript)
        self.assertIn("user:", transcript)
        self.assertNotIn(PROMPT, transcript)

    def test_repl_without_pty_reads_a_script(self):
        r = self.ssh(self.admin, input="whoami\nhelp\n\n  help whoami  \n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("user:", r.stdout)
        self.assertIn("ssh-key list", r.stdout)
        self.assertIn("usage: whoami", r.stdout)
        self.assertNotIn(PROMPT, r.stdout)
        self.assertNotIn("Welcome", r.stdout)
        self.assertNotIn("\r\n", r.stdout)

    def test_repl_without_pty_status_and_exit(self):
        # A script ends with the status of its last command...
        r = self.ssh(self.admin, input="whoami\nno-such-command\n")
        self.assert_status(r, "not_found")
        self.assertIn("unknown command", r.stderr)
        # ... and `exit` stops it there with 0.
        r = self.ssh(self.admin, input="no-such-command\nexit\nhelp\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("ssh-key list", r.stdout)
        # A last line without a newline still runs.
        r = self.ssh(self.admin, input="whoami --json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"user": "admin"', r.stdout)


if __name__ == "__main__":
    h.main()
