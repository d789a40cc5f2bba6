// Fuzzes a command line as every surface hands it to the interpreter
// (Interpreter::ExecuteLine): the tokenizer, the command table's lookup, each command's flags
// parsed by CLI11 on a fresh App, the permission and read-only checks, and the handlers
// themselves over a real store and the fake VM host and guest (command_world.h). Input: one
// option byte (bit 0: --json session, bit 1: the agent's token instead of the admin's key,
// bit 2: a read-only session), then the line; bytes after a NUL are the command's stdin (the
// tokenizer refuses NUL anyway).
// Invariants: the outcome is a Status of the closed set with its mapped exit status, and no
// command throws (the interpreter turns that into an internal error, which is still a bug).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/error_map.h"
#include "lobby/base/streams.h"
#include "lobby/commands/session.h"
#include "tests/fuzz/command_world.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace warren;
  if (size == 0) return 0;
  fuzz::CommandWorld& world = fuzz::CommandWorld::Get();
  if (world.Due()) world.Reset();

  const uint8_t options = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t nul = rest.find('\0');
  std::string_view line = rest.substr(0, nul);
  std::string stdin_bytes(nul == std::string_view::npos ? std::string_view()
                                                        : rest.substr(nul + 1));

  StringInput in(std::move(stdin_bytes));
  StringSink out, err;
  CommandSession session;
  session.caller = (options & 2) ? world.agent() : world.admin();
  session.in = &in;
  session.out = &out;
  session.err = &err;
  session.json = options & 1;
  session.read_only = options & 4;
  world.interpreter().ExecuteLine(session, line);

  const Code code = session.status.code();
  fuzz::Note(std::string(CodeName(code)) + ": " + session.status.message() + " | " + out.str());
  if (CodeName(code).empty()) fuzz::Fail("a status outside the closed set");
  if (code == Code::kInternal) fuzz::Fail("internal error: " + session.status.message());
  if (code != Code::kCommandFailed && session.exit_status != ExitStatusFor(code)) {
    fuzz::Fail("exit status " + std::to_string(session.exit_status) + " for " +
               std::string(CodeName(code)));
  }
  return 0;
}
