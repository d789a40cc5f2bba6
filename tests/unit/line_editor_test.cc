// The REPL's line editor fed raw terminal bytes, as a client's pty sends them.
#include "lobby/ssh/line_editor.h"

#include <gtest/gtest.h>

#include <string>

namespace warren::ssh {
namespace {

struct Fed {
  LineEditor::Action last = LineEditor::Action::kNone;
  std::string echo;
};

Fed Feed(LineEditor& ed, std::string_view bytes) {
  Fed f;
  for (unsigned char c : bytes) {
    f.last = ed.Feed(c, &f.echo);
    if (f.last != LineEditor::Action::kNone) break;
  }
  return f;
}

std::string Submit(LineEditor& ed, std::string_view keys) {
  Fed f = Feed(ed, std::string(keys) + "\r");
  EXPECT_EQ(f.last, LineEditor::Action::kLine);
  return ed.TakeLine();
}

TEST(LineEditorTest, TypedTextIsEchoedAndSubmitted) {
  LineEditor ed("warren ▶ ");
  Fed f = Feed(ed, "help");
  EXPECT_EQ(f.last, LineEditor::Action::kNone);
  EXPECT_NE(f.echo.find("help"), std::string::npos);
  EXPECT_EQ(Submit(ed, ""), "help");
}

TEST(LineEditorTest, BackspaceAndArrowsEditInThemiddle) {
  LineEditor ed("> ");
  // "whoamx", backspace, "i" -> "whoami"; then Left x3, insert "X" -> "whoXami".
  EXPECT_EQ(Submit(ed, "whoamx\x7fi"), "whoami");
  EXPECT_EQ(Submit(ed, "whoami\x1b[D\x1b[D\x1b[DX"), "whoXami");
}

TEST(LineEditorTest, HomeEndAndKills) {
  LineEditor ed("> ");
  EXPECT_EQ(Submit(ed,
                   "bc\x01"
                   "a\x05"
                   "d"),
            "abcd");  // Ctrl-A, Ctrl-E
  EXPECT_EQ(Submit(ed,
                   "ssh-key list\x17"
                   "add"),
            "ssh-key add");  // Ctrl-W
  EXPECT_EQ(Submit(ed,
                   "garbage\x15"
                   "ls"),
            "ls");                                            // Ctrl-U
  EXPECT_EQ(Submit(ed, "help me\x1b[D\x1b[D\x0b"), "help ");  // Ctrl-K
}

TEST(LineEditorTest, HistoryWalksBackAndForth) {
  LineEditor ed("> ");
  Submit(ed, "first");
  Submit(ed, "second");
  EXPECT_EQ(Submit(ed, "\x1b[A"), "second");
  EXPECT_EQ(Submit(ed, "\x1b[A\x1b[A\x1b[A"), "first");  // stops at the oldest
  EXPECT_EQ(Submit(ed, "new\x1b[A\x1b[B"), "new");       // down restores the edit
}

TEST(LineEditorTest, CtrlCDropsTheLineAndCtrlDEndsOnlyWhenEmpty) {
  LineEditor ed("> ");
  Fed f = Feed(ed, "half\x03");
  EXPECT_EQ(f.last, LineEditor::Action::kNone);
  EXPECT_EQ(Submit(ed, "whoami"), "whoami");
  f = Feed(ed, "ab\x01\x04");  // Ctrl-D deletes under the cursor on a non-empty line
  EXPECT_EQ(f.last, LineEditor::Action::kNone);
  EXPECT_EQ(Submit(ed, ""), "b");
  EXPECT_EQ(Feed(ed, "\x04").last, LineEditor::Action::kEof);
}

TEST(LineEditorTest, Utf8MovesByCodePoint) {
  LineEditor ed("> ");
  // "é" is two bytes; Left once then Backspace removes it, keeping "a" and "z".
  EXPECT_EQ(Submit(ed, "a\xc3\xa9z\x1b[D\x7f"), "az");
}

TEST(LineEditorTest, CrLfSubmitsOnce) {
  LineEditor ed("> ");
  Fed f = Feed(ed, "ls\r");
  ASSERT_EQ(f.last, LineEditor::Action::kLine);
  EXPECT_EQ(ed.TakeLine(), "ls");
  // The \n of a CR LF pair is not a second, empty line.
  f = Feed(ed, "\nwhoami\r");
  ASSERT_EQ(f.last, LineEditor::Action::kLine);
  EXPECT_EQ(ed.TakeLine(), "whoami");
}

TEST(LineEditorTest, OverlongLineIsBounded) {
  LineEditor ed("> ");
  std::string big(LineEditor::kMaxLineBytes + 100, 'a');
  std::string line = Submit(ed, big);
  EXPECT_LE(line.size(), LineEditor::kMaxLineBytes);
}

TEST(LineEditorTest, UnknownEscapeSequencesAreIgnored) {
  LineEditor ed("> ");
  EXPECT_EQ(Submit(ed, "a\x1b[15~\x1b[1;5Cb"), "ab");
}

}  // namespace
}  // namespace warren::ssh
