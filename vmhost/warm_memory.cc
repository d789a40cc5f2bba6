#include "vmhost/warm_memory.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "lobby/base/log.h"

namespace warren {
namespace {

constexpr int64_t kHugePage = int64_t{2} << 20;
constexpr int64_t kPage = 4096;
// virtio's device id of a memory balloon, and its feature bit for free page reporting.
constexpr std::string_view kBalloonDeviceId = "0x0005";
constexpr size_t kBalloonReportingBit = 5;

std::string ReadTrimmed(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int64_t Mib(int64_t bytes) { return bytes >> 20; }

}  // namespace

Result<int64_t> ParseWarmMemory(std::string_view text, bool host_reports_free_memory) {
  constexpr int64_t kMaxMib = 65536;
  if (text == "auto") return host_reports_free_memory ? kAutoWarmMemoryMib << 20 : 0;
  int64_t mib = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mib);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || mib < 0 ||
      mib > kMaxMib) {
    return InvalidArgument("warm memory is MiB from 0 to " + std::to_string(kMaxMib) +
                           " or auto, not \"" + std::string(text) + "\"");
  }
  return mib << 20;
}

bool HostReportsFreeMemory(const std::string& sysfs_root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path driver = fs::path(sysfs_root) / "bus/virtio/drivers/virtio_balloon";
  for (const fs::directory_entry& e : fs::directory_iterator(driver, ec)) {
    // The driver's directory names each device it is bound to (virtioN), beside its own files.
    if (e.path().filename().string().rfind("virtio", 0) != 0) continue;
    if (ReadTrimmed(e.path() / "device") != kBalloonDeviceId) continue;
    // One character per feature bit, bit 0 first: what the driver negotiated.
    const std::string features = ReadTrimmed(e.path() / "features");
    if (features.size() > kBalloonReportingBit && features[kBalloonReportingBit] == '1') {
      return true;
    }
  }
  return false;
}

int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = -1;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

WarmMemory::WarmMemory(WarmMemoryOptions options)
    : options_([&] {
        WarmMemoryOptions o = std::move(options);
        o.bytes = (std::max<int64_t>(0, o.bytes) + kHugePage - 1) / kHugePage * kHugePage;
        if (!o.available_bytes) o.available_bytes = AvailableMemoryBytes;
        return o;
      }()) {
  thread_ = std::thread([this] { Run(); });
}

WarmMemory::~WarmMemory() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  FreeLocked();
}

void WarmMemory::Release() {
  std::unique_lock<std::mutex> lock(mu_);
  last_release_ = std::chrono::steady_clock::now();
  release_asked_ = true;
  cv_.notify_all();
  cv_.wait(lock, [this] { return !filling_; });
  FreeLocked();
  release_asked_ = false;
}

void WarmMemory::FreeLocked() {
  if (region_ != nullptr) ::munmap(region_, static_cast<size_t>(options_.bytes));
  region_ = nullptr;
  held_ = 0;
}

void WarmMemory::Run() {
  // Its faults are worth taking only with CPU nothing else wants.
  sched_param idle{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && options_.bytes > 0) {
    if (region_ != nullptr) {
      // Held: let go when the host runs short.
      cv_.wait_for(lock, options_.check_every, [this] { return stop_ || region_ == nullptr; });
      if (stop_ || region_ == nullptr) continue;
      const int64_t available = options_.available_bytes();
      if (available >= 0 && available < options_.floor_bytes) {
        LogInfo("warm memory: let go of " + std::to_string(Mib(held_)) + " MiB (the host has " +
                std::to_string(Mib(available)) + " MiB available)");
        FreeLocked();
        last_release_ = std::chrono::steady_clock::now();
      }
      continue;
    }
    if (last_release_.has_value()) {
      const auto due = *last_release_ + options_.quiet;
      if (std::chrono::steady_clock::now() < due) {
        cv_.wait_until(lock, due, [this] { return stop_; });
        continue;
      }
    }
    const int64_t available = options_.available_bytes();
    if (available >= 0 && available < options_.floor_bytes + options_.bytes) {
      cv_.wait_for(lock, options_.check_every, [this] { return stop_; });
      continue;
    }
    Fill(lock);
  }
}

void WarmMemory::Fill(std::unique_lock<std::mutex>& lock) {
  const size_t len = static_cast<size_t>(options_.bytes);
  // Aligned to a huge page so that each 2 MiB step can be one, and goes back as one.
  void* mapped = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    LogWarn(std::string("warm memory: cannot map it: ") + std::strerror(errno));
    last_release_ = std::chrono::steady_clock::now() + options_.check_every;
    return;
  }
  char* base = static_cast<char*>(mapped);
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) &
                                          ~static_cast<uintptr_t>(kHugePage - 1));
  if (aligned > base) ::munmap(base, static_cast<size_t>(aligned - base));
  char* end = aligned + len;
  if (base + len + kHugePage > end) {
    ::munmap(end, static_cast<size_t>(base + len + kHugePage - end));
  }
  ::madvise(aligned, len, MADV_HUGEPAGE);
  region_ = aligned;
  filling_ = true;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  while (done < options_.bytes && !stop_ && !release_asked_) {
    lock.unlock();
    // Every 4 KiB page, in case the kernel gives no huge page here.
    for (int64_t off = 0; off < kHugePage; off += kPage) {
      static_cast<volatile char*>(aligned)[done + off] = 1;
    }
    done += kHugePage;
    held_ = done;
    lock.lock();
  }
  filling_ = false;
  cv_.notify_all();
  if (done == options_.bytes) {
    fills_++;
    LogInfo("warm memory: holding " + std::to_string(Mib(done)) + " MiB (taken in " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - t0)
                               .count()) +
            " ms)");
  }
}

}  // namespace warren
