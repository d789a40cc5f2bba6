#include "vmhost/libvirt_accel_probe.h"

#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "vmhost/libvirt_handles.h"

namespace warren {
namespace {

// What the probe's thread found: whether libvirt offers kvm domains there, and why not.
struct Answer {
  bool kvm_offered = false;
  std::string detail;
};

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Answer> answer;
};

Answer AskDaemon(const std::string& uri) {
  Result<ConnectHandle> conn = OpenLibvirt(uri);
  if (!conn.ok()) return {false, "cannot connect: " + conn.status().message()};
  LibvirtString kvm(
      virConnectGetDomainCapabilities(conn->get(), nullptr, nullptr, nullptr, "kvm", 0));
  if (kvm) return {true, ""};
  return {false, LibvirtError("kvm domain capabilities").message()};
}

}  // namespace

AccelChoice ProbeRemoteAccel(const std::string& uri, std::string_view force,
                             std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  AccelChoice c;
  auto done = [&]() {
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return c;
  };
  std::string forced(force);
  std::string source = "--accel";
  if (forced.empty()) {
    const char* env = std::getenv("WARREN_ACCEL");
    if (env != nullptr && *env != '\0') {
      forced = env;
      source = "WARREN_ACCEL";
    }
  }
  if (!forced.empty()) {
    Result<Accel> a = ParseAccel(forced);
    c.accel = a.ok() ? *a : Accel::kTcg;
    c.reason = a.ok() ? "forced by " + source + "=" + forced
                      : "ignored " + source + "=" + forced + " (not kvm or tcg); chose TCG";
    return done();
  }
  auto shared = std::make_shared<Shared>();
  std::thread([shared, uri] {
    Answer a = AskDaemon(uri);
    std::lock_guard lock(shared->mu);
    shared->answer = std::move(a);
    shared->cv.notify_all();
  }).detach();
  std::unique_lock lock(shared->mu);
  if (!shared->cv.wait_for(lock, timeout, [&] { return shared->answer.has_value(); })) {
    c.reason = "libvirt at " + uri + " did not describe its kvm domains within " +
               std::to_string(timeout.count()) + " ms (a stalled capability probe)";
    return done();
  }
  c.reason = shared->answer->kvm_offered
                 ? "libvirt at " + uri +
                       " offers kvm, which is not proof that guests boot under it (kvm_pvm "
                       "hangs them): TCG unless forced"
                 : "libvirt at " + uri + " offers no kvm (" + shared->answer->detail + ")";
  return done();
}

}  // namespace warren
