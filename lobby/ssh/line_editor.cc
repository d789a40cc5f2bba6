#include "lobby/ssh/line_editor.h"

#include <utility>

namespace warren::ssh {
namespace {

constexpr unsigned char kEsc = 0x1b;

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += IsContinuation(c) ? 0 : 1;
  return n;
}

// How many bytes a UTF-8 sequence starting with `lead` has; 0 for an invalid lead byte.
size_t Utf8Length(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool IsWordByte(unsigned char c) { return c != ' ' && c != '\t'; }

}  // namespace

LineEditor::LineEditor(std::string prompt) : prompt_(std::move(prompt)) {}

std::string LineEditor::TakeLine() {
  std::string line = std::move(submitted_);
  submitted_.clear();
  if (!line.empty() && (history_.empty() || history_.back() != line)) {
    history_.push_back(line);
    if (history_.size() > kMaxHistory) history_.erase(history_.begin());
  }
  history_pos_ = history_.size();
  saved_edit_.clear();
  return line;
}

size_t LineEditor::PrevBoundary(size_t pos) const {
  if (pos == 0) return 0;
  --pos;
  while (pos > 0 && IsContinuation(static_cast<unsigned char>(buf_[pos]))) --pos;
  return pos;
}

size_t LineEditor::NextBoundary(size_t pos) const {
  if (pos >= buf_.size()) return buf_.size();
  ++pos;
  while (pos < buf_.size() && IsContinuation(static_cast<unsigned char>(buf_[pos]))) ++pos;
  return pos;
}

void LineEditor::Redraw(std::string* echo) {
  echo->append("\r").append(prompt_).append(buf_).append("\x1b[K");
  size_t after = CodePoints(std::string_view(buf_).substr(cursor_));
  if (after > 0) echo->append("\x1b[").append(std::to_string(after)).append("D");
}

void LineEditor::SetBuffer(std::string text, std::string* echo) {
  buf_ = std::move(text);
  cursor_ = buf_.size();
  Redraw(echo);
}

void LineEditor::Insert(std::string_view text, std::string* echo) {
  if (buf_.size() + text.size() > kMaxLineBytes) {
    echo->push_back('\a');  // the bell: the line is full
    return;
  }
  bool at_end = cursor_ == buf_.size();
  buf_.insert(cursor_, text);
  cursor_ += text.size();
  if (at_end) {
    echo->append(text);  // the common case: no redraw needed
  } else {
    Redraw(echo);
  }
}

void LineEditor::HistoryUp(std::string* echo) {
  if (history_pos_ == 0) return;
  if (history_pos_ == history_.size()) saved_edit_ = buf_;
  --history_pos_;
  SetBuffer(history_[history_pos_], echo);
}

void LineEditor::HistoryDown(std::string* echo) {
  if (history_pos_ >= history_.size()) return;
  ++history_pos_;
  SetBuffer(history_pos_ == history_.size() ? saved_edit_ : history_[history_pos_], echo);
}

void LineEditor::HandleCsi(std::string* echo) {
  // csi_params_ holds the parameter bytes and the final byte last.
  char final = csi_params_.empty() ? 0 : csi_params_.back();
  std::string params = csi_params_.substr(0, csi_params_.empty() ? 0 : csi_params_.size() - 1);
  switch (final) {
    case 'A':
      HistoryUp(echo);
      break;
    case 'B':
      HistoryDown(echo);
      break;
    case 'C':
      if (cursor_ < buf_.size()) {
        cursor_ = NextBoundary(cursor_);
        echo->append("\x1b[C");
      }
      break;
    case 'D':
      if (cursor_ > 0) {
        cursor_ = PrevBoundary(cursor_);
        echo->append("\x1b[D");
      }
      break;
    case 'H':
      cursor_ = 0;
      Redraw(echo);
      break;
    case 'F':
      cursor_ = buf_.size();
      Redraw(echo);
      break;
    case '~':
      if (params == "1" || params == "7") {
        cursor_ = 0;
        Redraw(echo);
      } else if (params == "4" || params == "8") {
        cursor_ = buf_.size();
        Redraw(echo);
      } else if (params == "3" && cursor_ < buf_.size()) {
        buf_.erase(cursor_, NextBoundary(cursor_) - cursor_);
        Redraw(echo);
      }
      break;
    default:
      break;  // unknown sequences are swallowed whole
  }
}

LineEditor::Action LineEditor::HandleControl(unsigned char c, std::string* echo) {
  switch (c) {
    case '\r':
    case '\n':
      submitted_ = buf_;
      buf_.clear();
      cursor_ = 0;
      echo->append("\r\n");
      return Action::kLine;
    case 0x01:  // Ctrl-A
      cursor_ = 0;
      Redraw(echo);
      break;
    case 0x05:  // Ctrl-E
      cursor_ = buf_.size();
      Redraw(echo);
      break;
    case 0x02:  // Ctrl-B
      if (cursor_ > 0) {
        cursor_ = PrevBoundary(cursor_);
        echo->append("\x1b[D");
      }
      break;
    case 0x06:  // Ctrl-F
      if (cursor_ < buf_.size()) {
        cursor_ = NextBoundary(cursor_);
        echo->append("\x1b[C");
      }
      break;
    case 0x03:  // Ctrl-C: abandon the line
      buf_.clear();
      cursor_ = 0;
      history_pos_ = history_.size();
      saved_edit_.clear();
      echo->append("^C\r\n").append(prompt_);
      break;
    case 0x04:  // Ctrl-D
      if (buf_.empty()) {
        echo->append("\r\n");
        return Action::kEof;
      }
      if (cursor_ < buf_.size()) {
        buf_.erase(cursor_, NextBoundary(cursor_) - cursor_);
        Redraw(echo);
      }
      break;
    case 0x08:  // Ctrl-H
    case 0x7f:  // Backspace
      if (cursor_ > 0) {
        size_t start = PrevBoundary(cursor_);
        buf_.erase(start, cursor_ - start);
        cursor_ = start;
        Redraw(echo);
      }
      break;
    case 0x0b:  // Ctrl-K
      buf_.erase(cursor_);
      Redraw(echo);
      break;
    case 0x15:  // Ctrl-U
      buf_.erase(0, cursor_);
      cursor_ = 0;
      Redraw(echo);
      break;
    case 0x17: {  // Ctrl-W: blanks before the cursor, then the word before them
      size_t start = cursor_;
      while (start > 0 && !IsWordByte(static_cast<unsigned char>(buf_[start - 1]))) --start;
      while (start > 0 && IsWordByte(static_cast<unsigned char>(buf_[start - 1]))) --start;
      buf_.erase(start, cursor_ - start);
      cursor_ = start;
      Redraw(echo);
      break;
    }
    case 0x0c:  // Ctrl-L
      echo->append("\x1b[H\x1b[2J");
      Redraw(echo);
      break;
    case 0x0e:  // Ctrl-N
      HistoryDown(echo);
      break;
    case 0x10:  // Ctrl-P
      HistoryUp(echo);
      break;
    default:
      break;  // other control bytes (Tab included) are ignored
  }
  return Action::kNone;
}

LineEditor::Action LineEditor::Feed(unsigned char c, std::string* echo) {
  // A terminal may send CR LF for Enter: the LF belongs to the CR.
  bool after_cr = last_was_cr_;
  last_was_cr_ = (c == '\r');
  if (c == '\n' && after_cr) return Action::kNone;

  switch (esc_) {
    case EscState::kEsc:
      if (c == '[') {
        esc_ = EscState::kCsi;
        csi_params_.clear();
      } else if (c == 'O') {
        esc_ = EscState::kSs3;
      } else {
        esc_ = EscState::kNone;  // Alt-<key>: ignored
      }
      return Action::kNone;
    case EscState::kCsi:
      if (csi_params_.size() > 16) {  // a runaway sequence: drop it
        esc_ = EscState::kNone;
        return Action::kNone;
      }
      csi_params_.push_back(static_cast<char>(c));
      if (c >= 0x40 && c <= 0x7e) {
        esc_ = EscState::kNone;
        HandleCsi(echo);
      }
      return Action::kNone;
    case EscState::kSs3:
      esc_ = EscState::kNone;
      csi_params_.assign(1, static_cast<char>(c));
      HandleCsi(echo);  // ESC O A..D, H, F mean the same as their CSI forms
      return Action::kNone;
    case EscState::kNone:
      break;
  }

  if (utf8_needed_ > 0) {
    if (!IsContinuation(c)) {
      utf8_pending_.clear();
      utf8_needed_ = 0;  // broken sequence: drop it and treat this byte afresh
    } else {
      utf8_pending_.push_back(static_cast<char>(c));
      if (utf8_pending_.size() == utf8_needed_) {
        std::string cp = std::move(utf8_pending_);
        utf8_pending_.clear();
        utf8_needed_ = 0;
        Insert(cp, echo);
      }
      return Action::kNone;
    }
  }

  if (c == kEsc) {
    esc_ = EscState::kEsc;
    return Action::kNone;
  }
  if (c < 0x20 || c == 0x7f) return HandleControl(c, echo);
  if (c < 0x80) {
    char ch = static_cast<char>(c);
    Insert(std::string_view(&ch, 1), echo);
    return Action::kNone;
  }
  size_t len = Utf8Length(c);
  if (len == 0) return Action::kNone;  // stray continuation or invalid lead byte
  utf8_pending_.assign(1, static_cast<char>(c));
  utf8_needed_ = len;
  return Action::kNone;
}

}  // namespace warren::ssh
