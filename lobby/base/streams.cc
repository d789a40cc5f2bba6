#include "lobby/base/streams.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace warren {

void CancelSignal::Cancel() {
  {
    // Set under the mutex so a waiter cannot check the flag, miss the store and then sleep
    // through the notification.
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.store(true);
  }
  cv_.notify_all();
}

bool CancelSignal::WaitFor(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(std::max(timeout_ms, 0)),
                      [this] { return cancelled_.load(); });
}

Result<size_t> StringInput::Read(char* buf, size_t len) {
  size_t n = std::min(len, data_.size() - pos_);
  if (n > 0) std::memcpy(buf, data_.data() + pos_, n);
  pos_ += n;
  return n;
}

void StringSink::Write(std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  data_.append(bytes);
}

std::string StringSink::str() const {
  std::lock_guard<std::mutex> lock(mu_);
  return data_;
}

Result<std::string> ReadAll(InputStream& in, size_t limit) {
  std::string data;
  char buf[4096];
  while (true) {
    // Asking for one byte past the limit tells "exactly the limit" from "more than it"
    // without buffering the excess.
    size_t want = std::min(sizeof buf, limit + 1 - data.size());
    Result<size_t> n = in.Read(buf, want);
    if (!n.ok()) return n.status();
    if (*n == 0) return data;
    data.append(buf, *n);
    if (data.size() > limit) {
      return TooLarge("input is larger than " + std::to_string(limit) + " bytes");
    }
  }
}

}  // namespace warren
