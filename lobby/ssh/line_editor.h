// LineEditor: the REPL's line editing over a pty, as a pure state machine. It is fed the
// bytes the client's terminal sends (keys, escape sequences, UTF-8) and produces the bytes
// to echo back (redraws) and, on Enter, a finished line. No I/O, so it is testable alone.
//
// Keys: printable text inserts; Backspace; Delete; Left/Right; Home/End; Ctrl-A/E (home/
// end), Ctrl-B/F (left/right), Ctrl-U/K (kill to start/end), Ctrl-W (kill word before);
// Up/Down walk the history; Ctrl-C drops the line; Ctrl-D on an empty line ends input (and
// deletes under the cursor otherwise); Ctrl-L redraws on a clear screen; Enter submits.
// The cursor moves by code point and each code point is taken as one column wide.
// Thread-compatible.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace warren::ssh {

class LineEditor {
 public:
  enum class Action {
    kNone,  // keep feeding
    kLine,  // a line was submitted: TakeLine()
    kEof,   // Ctrl-D on an empty line
  };

  explicit LineEditor(std::string prompt);

  // The prompt for a fresh line (printed before the first key and after each command).
  const std::string& prompt() const { return prompt_; }

  // Processes one input byte; appends what the terminal must show to `echo`.
  Action Feed(unsigned char byte, std::string* echo);

  // The submitted line (valid after kLine); also records it in the history.
  std::string TakeLine();

  static constexpr size_t kMaxLineBytes = 64 * 1024;
  static constexpr size_t kMaxHistory = 200;

 private:
  enum class EscState { kNone, kEsc, kCsi, kSs3 };

  void Insert(std::string_view text, std::string* echo);
  void Redraw(std::string* echo);
  void SetBuffer(std::string text, std::string* echo);
  size_t PrevBoundary(size_t pos) const;
  size_t NextBoundary(size_t pos) const;
  Action HandleControl(unsigned char c, std::string* echo);
  void HandleCsi(std::string* echo);
  void HistoryUp(std::string* echo);
  void HistoryDown(std::string* echo);

  std::string prompt_;
  std::string buf_;
  size_t cursor_ = 0;  // byte offset, always on a code point boundary
  std::string submitted_;

  std::vector<std::string> history_;
  size_t history_pos_ = 0;  // == history_.size() when editing a new line
  std::string saved_edit_;  // the new line's text while browsing the history

  EscState esc_ = EscState::kNone;
  std::string csi_params_;
  std::string utf8_pending_;
  size_t utf8_needed_ = 0;
  bool last_was_cr_ = false;
};

}  // namespace warren::ssh
