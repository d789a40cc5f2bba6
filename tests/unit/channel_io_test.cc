// ChannelIo's REPL hand-off: Ctrl-C (0x03 in the client's data) while a line's command
// runs cancels that command, not the channel, and takes the input typed before it; at the
// prompt it is input; the channel closing cancels the command too.
#include "lobby/ssh/channel_io.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace warren::ssh {
namespace {

std::string ReadAvailable(ChannelIo& io) {
  char buf[256];
  Result<size_t> n = io.ReadStdinFor(buf, sizeof buf, 10);
  return n.ok() ? std::string(buf, *n) : std::string();
}

TEST(ChannelIoTest, CtrlCCancelsTheRunningCommandAndDropsTypedAhead) {
  ChannelIo io(std::make_shared<EventWaker>());
  auto command = std::make_shared<CancelSignal>();
  io.SetCommand(command, /*ctrl_c=*/true);
  const std::string typed = "ls\r";
  EXPECT_EQ(io.PushStdin(typed.data(), typed.size()), typed.size());
  const std::string interrupt = "xy\x03help\r";
  EXPECT_EQ(io.PushStdin(interrupt.data(), interrupt.size()), interrupt.size());
  EXPECT_TRUE(command->cancelled());
  EXPECT_FALSE(io.cancel()->cancelled());  // the REPL goes on
  io.SetCommand(nullptr, false);
  // What came after the Ctrl-C is the next line's; what came before is gone.
  EXPECT_EQ(ReadAvailable(io), "help\r");
  // At the prompt a Ctrl-C is input (the line editor's).
  EXPECT_EQ(io.PushStdin("\x03", 1), 1u);
  EXPECT_EQ(ReadAvailable(io), "\x03");
}

TEST(ChannelIoTest, WithoutATerminalCtrlCIsData) {
  ChannelIo io(std::make_shared<EventWaker>());
  auto command = std::make_shared<CancelSignal>();
  io.SetCommand(command, /*ctrl_c=*/false);
  EXPECT_EQ(io.PushStdin("a\x03"
                         "b",
                         3),
            3u);
  EXPECT_FALSE(command->cancelled());
  EXPECT_EQ(ReadAvailable(io),
            "a\x03"
            "b");
}

TEST(ChannelIoTest, TheChannelGoingCancelsTheCommand) {
  ChannelIo io(std::make_shared<EventWaker>());
  auto command = std::make_shared<CancelSignal>();
  io.SetCommand(command, true);
  io.Cancel();
  EXPECT_TRUE(command->cancelled());
  // And a command that begins after the channel went is cancelled at once.
  auto late = std::make_shared<CancelSignal>();
  io.SetCommand(late, true);
  EXPECT_TRUE(late->cancelled());
}

}  // namespace
}  // namespace warren::ssh
