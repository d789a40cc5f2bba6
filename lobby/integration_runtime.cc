#include "lobby/integration_runtime.h"

#include <utility>
#include <vector>

#include "lobby/base/log.h"
#include "lobby/commands/integration_access.h"
#include "lobby/integrations/integration_ca.h"
#include "vmhost/guest/ssh_guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {

// The proxy's questions answered from the store: the VM's egress first (`none` reaches no
// integration), then integration_access.h's rules.
class IntegrationRuntime::StoreLookup final : public integrations::IntegrationLookup {
 public:
  explicit StoreLookup(Services& services) : services_(services) {}

  Result<integrations::IntegrationRoute> Find(std::string_view vm_id,
                                              std::string_view name) override {
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, services_.store->GetVm(vm_id));
    if (vm.egress == "none") {
      return PermissionDenied("VM " + vm.name +
                              " has egress none: it reaches no integration (see help egress)");
    }
    if (services_.integration_key == nullptr) return Unavailable("no integration key");
    WARREN_ASSIGN_OR_RETURN(
        ResolvedIntegration r,
        ResolveIntegration(*services_.store, *services_.integration_key, vm_id, name));
    integrations::IntegrationRoute route;
    route.owner = std::move(r.owner);
    route.name = std::move(r.name);
    route.target = r.target;
    for (auto& [header, value] : r.headers) {
      route.headers.push_back({std::move(header), std::move(value)});
    }
    return route;
  }

  std::vector<std::string> NamesFor(std::string_view vm_id) override {
    if (!WantsEndpoint(vm_id)) return {};
    return IntegrationNamesFor(*services_.store, vm_id);
  }

  bool WantsEndpoint(std::string_view vm_id) override {
    Result<VmRecord> vm = services_.store->GetVm(vm_id);
    return vm.ok() && vm->egress != "none";
  }

  std::string OwnerOf(std::string_view vm_id) override {
    Result<VmRecord> vm = services_.store->GetVm(vm_id);
    return vm.ok() ? vm->owner : std::string();
  }

 private:
  Services& services_;
};

Result<std::unique_ptr<IntegrationRuntime>> IntegrationRuntime::Create(
    const IntegrationRuntimeOptions& options, const std::string& data_dir, Services& services) {
  std::unique_ptr<IntegrationRuntime> rt(new IntegrationRuntime());
  const std::string& domain = services.info.int_domain;
  WARREN_ASSIGN_OR_RETURN(integrations::IntegrationCa ca,
                          integrations::LoadOrCreateIntegrationCa(data_dir, domain));
  rt->services_ = &services;
  rt->lookup_ = std::make_unique<StoreLookup>(services);
  integrations::IntegrationProxyOptions proxy = options.proxy;
  proxy.domain = domain;
  proxy.tls_server = ca.server;
  rt->proxy_ = std::make_unique<integrations::IntegrationProxy>(proxy, rt->lookup_.get());
  rt->sink_ =
      std::make_unique<integrations::IntegrationEndpointSink>(rt->proxy_.get(), rt->lookup_.get());
  rt->endpoint_.domain = domain;
  rt->endpoint_.ca_pem = ca.ca_pem;
  rt->sweep_ = options.sweep;
  return rt;
}

void IntegrationRuntime::Start(guest::SshGuestControl* guests, VmHost* vms) {
  guests_ = guests;
  vms_ = vms;
  if (services_->integration_events == nullptr) {
    services_->integration_events = std::make_shared<IntegrationEvents>();
  }
  // The callback runs under the registry's lock on a command's thread: note and wake only.
  subscription_ = services_->integration_events->Subscribe([this](std::string_view owner) {
    std::lock_guard lock(mu_);
    dirty_.emplace(owner);
    cv_.notify_one();
  });
  watcher_ = std::thread([this] { Watch(); });
}

IntegrationRuntime::~IntegrationRuntime() {
  Stop();
  proxy_.reset();  // cuts what is still open, waits for its workers
}

void IntegrationRuntime::Stop() {
  subscription_.Reset();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (watcher_.joinable()) watcher_.join();
}

void IntegrationRuntime::Watch() {
  std::unique_lock lock(mu_);
  auto next_sweep = std::chrono::steady_clock::now();
  while (!stopping_) {
    if (dirty_.empty() && std::chrono::steady_clock::now() < next_sweep) {
      cv_.wait_until(lock, next_sweep, [this] { return stopping_ || !dirty_.empty(); });
      continue;
    }
    std::set<std::string> owners = std::exchange(dirty_, {});
    lock.unlock();
    for (const std::string& owner : owners) Refresh(owner);
    if (std::chrono::steady_clock::now() >= next_sweep) {
      KeepEndpointsUp();
      next_sweep = std::chrono::steady_clock::now() + sweep_;
    }
    lock.lock();
  }
}

void IntegrationRuntime::Refresh(const std::string& owner) {
  const int cut = proxy_->Revalidate(owner);
  if (cut > 0) LogInfo("integrations: cut " + std::to_string(cut) + " connection(s) of " + owner);
  Result<std::vector<VmRecord>> vms = services_->store->ListVms();
  if (!vms.ok()) {
    LogWarn("integrations: cannot list VMs: " + vms.status().ToString());
    return;
  }
  for (const VmRecord& vm : *vms) {
    if (vm.owner != owner) continue;
    Result<VmInfo> info = vms_->Inspect(vm.id);
    if (info.ok() && info->state == VmState::kRunning) guests_->RefreshEndpoint(vm.id);
  }
}

void IntegrationRuntime::KeepEndpointsUp() {
  Result<std::vector<VmInfo>> running = vms_->List();
  if (!running.ok()) return;
  for (const VmInfo& info : *running) {
    if (info.state == VmState::kRunning && lookup_->WantsEndpoint(info.id)) {
      guests_->EnsureEndpoint(info.id);
    }
  }
}

}  // namespace warren
