// RecordingResponder for the fuzz targets that drive HTTP handlers: what HttpServer's own
// responder would send (status, headers, body whole or streamed), kept in a Record that
// outlives the responder, so a target can wait until every holder has let go — the moment
// HttpServer would answer 500 had nobody answered. Thread-safe: handlers answer from the
// runner's threads.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "bridge/http_handler.h"

namespace warren::fuzz {

struct Record {
  std::mutex mu;
  std::condition_variable cv;
  int responses = 0;  // Respond and BeginStream calls
  int status = 0;
  HttpHeaders headers;
  std::string body;
  bool streaming = false;
  bool released = false;  // the responder is gone

  std::string Header(std::string_view name) {
    std::lock_guard lock(mu);
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return "";
  }
  // Waits until the responder is gone (no timeout: libFuzzer's -timeout reports a hang).
  void AwaitReleased() {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return released; });
  }
};

class RecordingResponder final : public HttpResponder {
 public:
  explicit RecordingResponder(std::shared_ptr<Record> record) : record_(std::move(record)) {}
  ~RecordingResponder() override {
    std::lock_guard lock(record_->mu);
    record_->released = true;
    record_->cv.notify_all();
  }

  void Respond(int status, HttpHeaders headers, std::string body) override {
    std::lock_guard lock(record_->mu);
    ++record_->responses;
    record_->status = status;
    record_->headers = std::move(headers);
    record_->body = std::move(body);
  }
  void BeginStream(int status, HttpHeaders headers) override {
    std::lock_guard lock(record_->mu);
    ++record_->responses;
    record_->status = status;
    record_->headers = std::move(headers);
    record_->streaming = true;
  }
  bool Write(std::string_view bytes) override {
    std::lock_guard lock(record_->mu);
    record_->body += bytes;
    return true;
  }
  void End() override {}
  std::shared_ptr<CancelSignal> closed() const override { return closed_; }

 private:
  std::shared_ptr<Record> record_;
  std::shared_ptr<CancelSignal> closed_ = std::make_shared<CancelSignal>();
};

}  // namespace warren::fuzz
