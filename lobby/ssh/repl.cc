// The shell side of a session channel: the lobby REPL.
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "lobby/commands/tokenizer.h"
#include "lobby/ssh/line_editor.h"
#include "lobby/ssh/lobby_workers.h"

namespace warren::ssh {
namespace {

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Forwards to a channel stream and remembers whether the REPL's output (both streams: a
// pty shows them as one) last ended a line, so the prompt never lands after a command's
// unterminated last line.
class LineTrackingSink final : public OutputSink {
 public:
  LineTrackingSink(OutputSink& inner, std::atomic<bool>* at_line_start)
      : inner_(inner), at_line_start_(at_line_start) {}
  void Write(std::string_view bytes) override {
    if (bytes.empty()) return;
    inner_.Write(bytes);
    *at_line_start_ = bytes.back() == '\n';
  }

 private:
  OutputSink& inner_;
  std::atomic<bool>* at_line_start_;
};

class Repl {
 public:
  Repl(ChannelIo& io, Interpreter& interpreter, const Caller& caller, bool pty)
      : io_(io),
        interpreter_(interpreter),
        caller_(caller),
        pty_(pty),
        out_(io, /*is_stderr=*/false, pty),
        err_(io, /*is_stderr=*/!pty, pty) {  // one stream on a pty, as under sshd
    caller_.surface = "repl";
  }

  int Run() { return pty_ ? RunInteractive() : RunScript(); }

 private:
  // Runs one line. False when the line asks the REPL to end.
  bool RunLine(std::string_view raw) {
    std::string_view line = Trim(raw);
    if (line.empty()) return true;
    if (line == "exit" || line == "quit") {
      last_status_ = 0;
      return false;
    }
    EmptyInput no_stdin;  // the REPL's own input is the keyboard, not the command's
    std::atomic<bool> at_line_start{true};
    LineTrackingSink out(out_, &at_line_start);
    LineTrackingSink err(err_, &at_line_start);
    CommandSession session;
    session.caller = caller_;
    session.in = &no_stdin;
    session.out = &out;
    session.err = &err;
    // The line's own signal: the channel going ends it, and on a terminal so does Ctrl-C,
    // which leaves the REPL running.
    session.cancel = std::make_shared<CancelSignal>();
    io_.SetCommand(session.cancel, /*ctrl_c=*/pty_);
    session.streams_output = true;  // a terminal: `ssh VM CMD` streams to it
    interpreter_.ExecuteLine(session, line);
    io_.SetCommand(nullptr, false);
    last_status_ = session.exit_status;
    if (pty_ && !at_line_start) out_.Write("\n");
    return !io_.cancel()->cancelled();
  }

  int RunInteractive() {
    out_.Write("Welcome to warren, " + caller_.user +
               ". Type help for the commands, exit to leave.\n");
    LineEditor editor(kReplPrompt);
    out_.Write(editor.prompt());
    char buf[4096];
    for (;;) {
      Result<size_t> n = io_.ReadStdin(buf, sizeof buf);
      if (!n.ok() || *n == 0) return 0;  // the client went away or sent EOF
      std::string echo;
      for (size_t i = 0; i < *n; ++i) {
        LineEditor::Action action = editor.Feed(static_cast<unsigned char>(buf[i]), &echo);
        if (action == LineEditor::Action::kNone) continue;
        out_.Write(echo);
        echo.clear();
        if (action == LineEditor::Action::kEof) return 0;
        if (!RunLine(editor.TakeLine())) return 0;
        out_.Write(editor.prompt());
      }
      if (!echo.empty()) out_.Write(echo);
    }
  }

  int RunScript() {
    std::string line;
    char buf[4096];
    for (;;) {
      Result<size_t> n = io_.ReadStdin(buf, sizeof buf);
      if (!n.ok()) return last_status_;
      if (*n == 0) break;
      for (size_t i = 0; i < *n; ++i) {
        char c = buf[i];
        if (c != '\n') {
          // Keep a runaway line bounded: one byte over the limit is enough for the
          // interpreter to report it as too large.
          if (line.size() <= kMaxCommandLineBytes) line.push_back(c);
          continue;
        }
        bool go_on = RunLine(line);
        line.clear();
        if (!go_on) return last_status_;
      }
    }
    if (!Trim(line).empty()) RunLine(line);
    return last_status_;
  }

  ChannelIo& io_;
  Interpreter& interpreter_;
  Caller caller_;
  bool pty_;
  ChannelOutput out_;
  ChannelOutput err_;
  int last_status_ = 0;
};

}  // namespace

int RunRepl(ChannelIo& io, Interpreter& interpreter, const Caller& caller, bool pty) {
  Repl repl(io, interpreter, caller, pty);
  return repl.Run();
}

}  // namespace warren::ssh
