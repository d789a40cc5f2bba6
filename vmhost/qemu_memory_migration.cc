#include "vmhost/qemu_memory_migration.h"

#include <libvirt/libvirt-qemu.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "lobby/base/log.h"
#include "vmhost/libvirt_handles.h"

namespace warren {
namespace {

using nlohmann::json;

// The name QEMU keeps the file's descriptor under until `migrate` takes it.
constexpr char kFdName[] = "warren-live-copy";
// How often query-migrate asks: a round trip through libvirtd is well under a millisecond.
constexpr auto kQueryInterval = std::chrono::milliseconds(2);
// No cap on the migration's bandwidth (QEMU's default is 128 MiB/s; libvirt lifts it for its
// own saves the same way).
constexpr int64_t kUnlimitedBytesPerSecond = int64_t{1} << 40;

// One QMP command: its "return" member, or Unavailable with QEMU's error (or libvirt's).
Result<json> Qmp(virDomainPtr dom, std::string_view id, const json& command, int fd = -1) {
  const std::string text = command.dump();
  char* reply = nullptr;
  unsigned int nfiles = fd >= 0 ? 1 : 0;
  int fds[1] = {fd};
  const int rc = virDomainQemuMonitorCommandWithFiles(
      dom, text.c_str(), nfiles, fd >= 0 ? fds : nullptr, nullptr, nullptr, &reply, 0);
  const std::string what =
      "QEMU's " + command.value("execute", std::string("command")) + " for vm " + std::string(id);
  if (rc < 0) return Unavailable(LibvirtError(what).message());
  std::string body(reply != nullptr ? reply : "");
  std::free(reply);
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Unavailable(what + ": an answer that is not a JSON object");
  }
  if (parsed.contains("error")) {
    const json& e = parsed["error"];
    const std::string desc = e.is_object() && e.contains("desc") && e["desc"].is_string()
                                 ? e["desc"].get<std::string>()
                                 : std::string("no reason given");
    return Unavailable(what + ": " + desc);
  }
  if (!parsed.contains("return")) return Unavailable(what + ": an answer without \"return\"");
  return parsed["return"];
}

void CancelMigration(virDomainPtr dom, std::string_view id) {
  Result<json> r = Qmp(dom, id, json{{"execute", "migrate_cancel"}});
  if (!r.ok()) LogWarn("vmhost: " + r.status().ToString());
}

}  // namespace

Result<int64_t> MigrateMemoryToFile(virDomainPtr dom, std::string_view id, int file_fd,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  WARREN_RETURN_IF_ERROR(
      Qmp(dom, id, json{{"execute", "getfd"}, {"arguments", {{"fdname", kFdName}}}}, file_fd)
          .status());
  WARREN_RETURN_IF_ERROR(Qmp(dom, id,
                             json{{"execute", "migrate-set-parameters"},
                                  {"arguments", {{"max-bandwidth", kUnlimitedBytesPerSecond}}}})
                             .status());
  WARREN_RETURN_IF_ERROR(
      Qmp(dom, id,
          json{{"execute", "migrate"}, {"arguments", {{"uri", std::string("fd:") + kFdName}}}})
          .status());
  while (true) {
    Result<json> info = Qmp(dom, id, json{{"execute", "query-migrate"}});
    if (!info.ok()) {
      CancelMigration(dom, id);
      return info.status();
    }
    const std::string status = info->value("status", std::string());
    if (status == "completed") {
      struct stat st {};
      if (fstat(file_fd, &st) != 0) {
        return Internal(std::string("the memory file: fstat: ") + std::strerror(errno));
      }
      return static_cast<int64_t>(st.st_size);
    }
    if (status == "failed" || status == "cancelled" || status == "cancelling") {
      const std::string why = info->value("error-desc", status);
      return Unavailable("migrating the memory of vm " + std::string(id) + " into a file: " + why);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      CancelMigration(dom, id);
      return Timeout("migrating the memory of vm " + std::string(id) + " into a file took over " +
                     std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(kQueryInterval);
  }
}

}  // namespace warren
