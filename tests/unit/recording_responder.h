// RecordingResponder: an HttpResponder for handler tests without sockets (/exec, MCP). It
// records the status, headers and body — whole, or streamed (SSE) — that a handler answers
// from any thread, and lets the test wait for them. Thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bridge/http_handler.h"

namespace warren {

// Records what the handler answers; calls may finish on another thread.
class RecordingResponder final : public HttpResponder {
 public:
  void Respond(int status, HttpHeaders headers, std::string body) override {
    std::lock_guard lock(mu_);
    status_ = status;
    headers_ = std::move(headers);
    body_ = std::move(body);
    done_ = true;
    ++responses_;
    cv_.notify_all();
  }
  void BeginStream(int status, HttpHeaders headers) override {
    std::lock_guard lock(mu_);
    status_ = status;
    headers_ = std::move(headers);
    streaming_ = true;
  }
  bool Write(std::string_view bytes) override {
    std::lock_guard lock(mu_);
    body_ += bytes;
    cv_.notify_all();
    return true;
  }
  void End() override {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  std::shared_ptr<CancelSignal> closed() const override { return closed_; }

  // How many times Respond was called (a handler must answer once).
  int responses() {
    std::lock_guard lock(mu_);
    return responses_;
  }
  void Await() {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [this] { return done_; }));
  }
  // Waits until the body holds `text`.
  bool AwaitText(const std::string& text) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return body_.find(text) != std::string::npos; });
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::string header(const std::string& name) {
    std::lock_guard lock(mu_);
    for (auto& [k, v] : headers_) {
      if (k == name) return v;
    }
    return "";
  }
  std::string body() {
    std::lock_guard lock(mu_);
    return body_;
  }
  bool streaming() {
    std::lock_guard lock(mu_);
    return streaming_;
  }
  // The JSON-RPC messages sent: the body, or each SSE event's data.
  std::vector<nlohmann::json> Messages() {
    std::string b = body();
    std::vector<nlohmann::json> out;
    if (!streaming()) {
      if (!b.empty()) out.push_back(nlohmann::json::parse(b));
      return out;
    }
    size_t pos = 0;
    while ((pos = b.find("data: ", pos)) != std::string::npos) {
      size_t end = b.find('\n', pos);
      out.push_back(nlohmann::json::parse(b.substr(pos + 6, end - pos - 6)));
      pos = end;
    }
    return out;
  }

  std::shared_ptr<CancelSignal> closed_ = std::make_shared<CancelSignal>();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  HttpHeaders headers_;
  std::string body_;
  bool streaming_ = false;
  bool done_ = false;
  int responses_ = 0;
};

}  // namespace warren
