// OutageVmHost: a VmHost that forwards to another until the test says the host is gone; then
// every call fails Unavailable at once, as LibvirtHost's do while it reconnects to a daemon
// that went away, and the VMs are all still there when it is back. For tests of what warren
// does with a host that does not answer (vmhost/host_set.h). Thread-safe.
#pragma once

#include <atomic>
#include <string>

#include "vmhost/vm_host.h"

namespace warren {

class OutageVmHost final : public VmHost {
 public:
  explicit OutageVmHost(VmHost& host) : host_(host) {}

  void SetDown(bool down) { down_ = down; }
  // The host it forwards to, and whether it answers (a migration's other end needs both).
  VmHost& inner() { return host_; }
  bool up() const { return Up(); }
  Status GoneStatus() const { return Gone(); }

  std::string uri() const override { return host_.uri(); }
  Result<HostCapacity> Capacity() override { return Up() ? host_.Capacity() : Gone(); }
  Status Create(const VmSpec& spec) override { return Up() ? host_.Create(spec) : Gone(); }
  Status Start(std::string_view id) override { return Up() ? host_.Start(id) : Gone(); }
  Status Stop(std::string_view id) override { return Up() ? host_.Stop(id) : Gone(); }
  Status Pause(std::string_view id) override { return Up() ? host_.Pause(id) : Gone(); }
  Status Resume(std::string_view id) override { return Up() ? host_.Resume(id) : Gone(); }
  Status Restart(std::string_view id) override { return Up() ? host_.Restart(id) : Gone(); }
  Status Destroy(std::string_view id) override { return Up() ? host_.Destroy(id) : Gone(); }
  Status Rename(std::string_view id, std::string_view name) override {
    return Up() ? host_.Rename(id, name) : Gone();
  }
  Status Copy(std::string_view source_id, const VmSpec& spec) override {
    return Up() ? host_.Copy(source_id, spec) : Gone();
  }
  Result<ResizeOutcome> Resize(std::string_view id, const ResizeSpec& spec) override {
    if (!Up()) return Gone();
    return host_.Resize(id, spec);
  }
  Result<int> RemoveUnusedDisks() override {
    if (!Up()) return Gone();
    return host_.RemoveUnusedDisks();
  }
  Result<bool> SetNetwork(std::string_view id, Egress egress) override {
    if (!Up()) return Gone();
    return host_.SetNetwork(id, egress);
  }
  Result<VmInfo> Inspect(std::string_view id) override {
    if (!Up()) return Gone();
    return host_.Inspect(id);
  }
  Result<std::vector<VmInfo>> List() override {
    if (!Up()) return Gone();
    return host_.List();
  }
  Result<std::string> Console(std::string_view id, int max_lines) override {
    if (!Up()) return Gone();
    return host_.Console(id, max_lines);
  }
  Status SaveTemplate(std::string_view id, std::string_view tag) override {
    return Up() ? host_.SaveTemplate(id, tag) : Gone();
  }
  Result<std::vector<TemplateInfo>> Templates() override {
    if (!Up()) return Gone();
    return host_.Templates();
  }
  Status RemoveTemplate(const VmShape& shape) override {
    return Up() ? host_.RemoveTemplate(shape) : Gone();
  }
  Result<RestoredVm> CreateFromTemplate(const VmSpec& spec) override {
    if (!Up()) return Gone();
    return host_.CreateFromTemplate(spec);
  }
  Result<RestoredVm> Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) override {
    if (!Up()) return Gone();
    return host_.Reidentify(spec, meanwhile);
  }
  Result<RestoredVm> CopyLive(std::string_view source_id, const VmSpec& spec) override {
    if (!Up()) return Gone();
    return host_.CopyLive(source_id, spec);
  }
  Status WatchStates(VmStateListener listener) override {
    return host_.WatchStates(std::move(listener));
  }
  // Forwarded when both ends answer; a target behind another OutageVmHost is handed to the
  // host it wraps (the hosts move VMs between themselves).
  Result<MigrationReport> MigrateTo(std::string_view id, VmHost& target) override {
    if (!Up()) return Gone();
    if (auto* other = dynamic_cast<OutageVmHost*>(&target)) {
      if (!other->Up()) return other->Gone();
      return host_.MigrateTo(id, other->host_);
    }
    return host_.MigrateTo(id, target);
  }

 private:
  bool Up() const { return !down_; }
  Status Gone() const {
    return Unavailable("VM host unavailable (" + host_.uri() + " does not answer; reconnecting)");
  }

  VmHost& host_;
  std::atomic<bool> down_{false};
};

}  // namespace warren
