// share show|port|set-public|set-private|add|remove|add-link|remove-link VM …: who may see a
// VM's pages at its web address (web_access.h decides on every request, so a change here
// takes effect at the next one). Private by default: the owner only. The settings are kept
// by the VM's id (keys/web_share.h): rename keeps them, rm removes them, cp starts the copy
// private. A key or token limited to a tag reaches only its tag's VMs (the target rule).
#include <algorithm>

#include <CLI/CLI.hpp>

#include "keys/oauth.h"
#include "lobby/base/user_name.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_view.h"
#include "lobby/commands/web_url.h"

namespace warren {
namespace {

constexpr char kShareNote[] =
    "A VM's pages are private until shared: only its owner (signed in with `browser`, or "
    "with an API token as `Authorization: Bearer`), the users it is shared with and whoever "
    "holds one of its share links may see them, or everyone once it is public. Every port "
    "3000-9999 is also at NAME-pPORT.DOMAIN for the owner alone, whatever is shared.\n";

std::string StatusWord(const VmShare& s) { return s.is_public ? "public" : "private"; }

nlohmann::json LinkJson(const ShareLink& l) {
  return {{"id", l.id},
          {"created_at", l.created_at},
          {"created_by", l.created_by},
          {"use_count", l.use_count},
          {"last_used_at", l.last_used_at}};
}

// {"name","status","public","port","url","users","links"}: never a link's token.
nlohmann::json ShareJson(const VmRecord& vm, const VmShare& s, const ServerInfo& info) {
  nlohmann::json links = nlohmann::json::array();
  for (const ShareLink& l : s.links) links.push_back(LinkJson(l));
  return {{"name", vm.name},
          {"status", StatusWord(s)},
          {"public", s.is_public},
          {"port", s.port},
          {"url", WebUrlJson(VmUrl(info, vm.name))},
          {"users", s.users},
          {"links", std::move(links)}};
}

std::string UsersText(const std::vector<std::string>& users) {
  std::string out;
  for (const std::string& u : users) out += (out.empty() ? "" : ", ") + u;
  return out.empty() ? "(none)" : out;
}

// The share link's URL: the VM's address with ?share=TOKEN; "" with no web listener.
std::string LinkUrl(const ServerInfo& info, const VmRecord& vm, const std::string& token) {
  std::string url = VmUrl(info, vm.name);
  return url.empty() ? "" : url + "?share=" + token;
}

class ShowCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override { app.add_option("VM", vm_, "the VM")->required(); }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    WARREN_ASSIGN_OR_RETURN(VmShare s, ctx.store().GetVmShare(vm.id));
    const ServerInfo& info = ctx.services.info;
    CommandResult r;
    r.data = ShareJson(vm, s, info);
    std::string text = vm.name + " is " + StatusWord(s) +
                       (s.is_public ? ": anyone may see its pages\n"
                                    : ": only its owner, the users and the links below may see "
                                      "its pages\n");
    const std::string url = VmUrl(info, vm.name);
    if (!url.empty()) text += "  url:   " + url + "\n";
    text += "  port:  " + std::to_string(s.port) + "\n";
    text += "  users: " + UsersText(s.users) + "\n";
    if (s.links.empty()) {
      text += "  links: (none)\n";
    } else {
      TextTable table({"ID", "USES", "LAST USED", "CREATED", "BY"});
      for (const ShareLink& l : s.links) {
        table.AddRow({l.id, std::to_string(l.use_count), FormatTime(l.last_used_at),
                      FormatTime(l.created_at), l.created_by});
      }
      text += "  links:\n";
      std::string rendered = table.Render();
      size_t pos = 0;
      while (pos < rendered.size()) {
        size_t nl = rendered.find('\n', pos);
        if (nl == std::string::npos) nl = rendered.size();
        text += "    " + rendered.substr(pos, nl - pos) + "\n";
        pos = nl + 1;
      }
    }
    r.text = std::move(text);
    return r;
  }

 private:
  std::string vm_;
};

class PortCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("PORT", port_, "the port NAME.DOMAIN serves, 3000-9999")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    int64_t port = 0;
    size_t used = 0;
    try {
      port = std::stoll(port_, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != port_.size()) {
      return InvalidArgument("PORT is a number 3000-9999, not \"" + port_.substr(0, 20) + "\"");
    }
    WARREN_RETURN_IF_ERROR(CheckWebPort(port));
    const VmRecord& vm = *ctx.vm;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVmShare(vm.id, [&](VmShare& s) {
      s.port = static_cast<int>(port);
      return Status::Ok();
    }));
    const std::string url = VmUrl(ctx.services.info, vm.name);
    CommandResult r;
    r.data = {{"name", vm.name}, {"port", port}, {"url", WebUrlJson(url)}};
    r.text = (url.empty() ? vm.name : url) + " now serves port " + std::to_string(port) + " of " +
             vm.name + "\n";
    return r;
  }

 private:
  std::string vm_, port_;
};

class SetPublicCommand final : public Command {
 public:
  explicit SetPublicCommand(bool make_public) : public_(make_public) {}
  void DeclareFlags(CLI::App& app) override { app.add_option("VM", vm_, "the VM")->required(); }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVmShare(vm.id, [&](VmShare& s) {
      s.is_public = public_;
      return Status::Ok();
    }));
    CommandResult r;
    r.data = {{"name", vm.name}, {"status", public_ ? "public" : "private"}, {"public", public_}};
    r.text = public_ ? vm.name + " is public: anyone may see its pages (ports 3000-9999 at " +
                           vm.name + "-pPORT stay yours alone)\n"
                     : vm.name + " is private: only you, the users and the links it is " +
                           "shared with may see its pages\n";
    return r;
  }

 private:
  bool public_;
  std::string vm_;
};

class AddUserCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("USER", user_, "a user of this server")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    if (!CheckUserName(user_).ok() ||
        ctx.store().GetUser(user_).status().code() == Code::kNotFound) {
      return NotFound("no user named \"" + user_.substr(0, 64) +
                      "\" on this server: share add takes a warren user (for anyone else, "
                      "make a link with: share add-link " +
                      vm.name + ")");
    }
    if (user_ == vm.owner) {
      return InvalidArgument(user_ + " owns " + vm.name + " and sees it already");
    }
    bool added = false;
    std::vector<std::string> users;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVmShare(vm.id, [&](VmShare& s) {
      auto it = std::lower_bound(s.users.begin(), s.users.end(), user_);
      if (it == s.users.end() || *it != user_) {
        s.users.insert(it, user_);
        added = true;
      }
      users = s.users;
      return Status::Ok();
    }));
    CommandResult r;
    r.data = {{"name", vm.name}, {"users", users}, {"added", added}};
    r.text = added ? "shared " + vm.name + " with " + user_ + "\n"
                   : vm.name + " was shared with " + user_ + " already\n";
    return r;
  }

 private:
  std::string vm_, user_;
};

class RemoveUserCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("USER", user_, "a user it is shared with")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    std::vector<std::string> users;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVmShare(vm.id, [&](VmShare& s) {
      auto it = std::find(s.users.begin(), s.users.end(), user_);
      if (it == s.users.end()) {
        return NotFound(vm.name + " is not shared with \"" + user_.substr(0, 64) +
                        "\"; see: share show " + vm.name);
      }
      s.users.erase(it);
      users = s.users;
      return Status::Ok();
    }));
    CommandResult r;
    r.data = {{"name", vm.name}, {"users", users}};
    r.text = vm.name + " is no longer shared with " + user_ + "\n";
    return r;
  }

 private:
  std::string vm_, user_;
};

class AddLinkCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override { app.add_option("VM", vm_, "the VM")->required(); }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    WARREN_ASSIGN_OR_RETURN(std::string token, NewSecret(32));
    ShareLink link;
    link.token_sha256 = HashSecret(token);
    link.created_at = ctx.now;
    link.created_by = ctx.caller().user;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVmShare(vm.id, [&](VmShare& s) -> Status {
      // 32 random bits, unique within the VM: drawn again on the rare clash.
      do {
        WARREN_ASSIGN_OR_RETURN(link.id, NewShareLinkId());
      } while (std::any_of(s.links.begin(), s.links.end(),
                           [&](const ShareLink& l) { return l.id == link.id; }));
      s.links.push_back(link);
      return Status::Ok();
    }));
    const std::string url = LinkUrl(ctx.services.info, vm, token);
    CommandResult r;
    r.data = LinkJson(link);
    r.data["name"] = vm.name;
    r.data["url"] = WebUrlJson(url);
    r.data["token"] = token;
    r.text = url.empty()
                 ? "made share link " + link.id + " of " + vm.name +
                       " (this server has no web listener, so it leads nowhere yet)\n"
                 : "Anyone with this link may see " + vm.name +
                       "'s pages; it is shown only now:\n  " + url +
                       "\nRemove it with: share remove-link " + vm.name + " " + link.id + "\n";
    return r;
  }

 private:
  std::string vm_;
};

class RemoveLinkCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("LINK_ID", id_, "the link's id, as share show lists it")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVmShare(vm.id, [&](VmShare& s) {
      auto it = std::find_if(s.links.begin(), s.links.end(),
                             [&](const ShareLink& l) { return l.id == id_; });
      if (it == s.links.end()) {
        return NotFound(vm.name + " has no share link \"" + id_.substr(0, 64) +
                        "\"; see: share show " + vm.name);
      }
      s.links.erase(it);
      return Status::Ok();
    }));
    CommandResult r;
    r.data = {{"name", vm.name}, {"removed", id_}};
    r.text = "removed share link " + id_ + " of " + vm.name + "; it no longer works\n";
    return r;
  }

 private:
  std::string vm_, id_;
};

}  // namespace

void RegisterShareCommands(CommandTable& table) {
  table.AddGroup("share", "who may see a VM's pages at its web address");
  const VmTarget vm = {"VM", VmNeed::kExists};
  table.Add({
      .path = "share show",
      .summary = "show who may see a VM's pages",
      .args = "VM",
      .description = std::string("Shows whether VM is public or private, the port its address "
                                 "serves, the users it is shared with and its share links (id, "
                                 "uses, last use; never the link itself).\n") +
                     kShareNote,
      .read_only = true,
      .target = vm,
      .make = [] { return std::make_unique<ShowCommand>(); },
  });
  table.Add({
      .path = "share port",
      .summary = "set the port a VM's address serves",
      .args = "VM PORT",
      .description = "Sets the VM's route port: NAME.DOMAIN serves this port of the VM "
                     "(default 8000; 3000-9999). Serve on it inside the VM, e.g. "
                     "python3 -m http.server 8000; check with curl localhost:8000 there.\n",
      .target = vm,
      .make = [] { return std::make_unique<PortCommand>(); },
  });
  table.Add({
      .path = "share set-public",
      .summary = "let anyone see a VM's pages",
      .args = "VM",
      .description = std::string("Makes the VM's address open to everyone, signed in or not. "
                                 "Its NAME-pPORT hosts stay yours alone.\n") +
                     kShareNote,
      .target = vm,
      .make = [] { return std::make_unique<SetPublicCommand>(true); },
  });
  table.Add({
      .path = "share set-private",
      .summary = "make a VM's pages private again",
      .args = "VM",
      .description = "Closes the VM's address to everyone but its owner, the users it is "
                     "shared with and its share links; at once, for the next request.\n",
      .target = vm,
      .make = [] { return std::make_unique<SetPublicCommand>(false); },
  });
  table.Add({
      .path = "share add",
      .summary = "share a VM's pages with a user of this server",
      .args = "VM USER",
      .description = "Lets USER, a user of this server, see the VM's pages once signed in "
                     "(their own `browser`). For anyone else make a link: share add-link VM.\n",
      .target = vm,
      .make = [] { return std::make_unique<AddUserCommand>(); },
  });
  table.Add({
      .path = "share remove",
      .summary = "stop sharing a VM's pages with a user",
      .args = "VM USER",
      .description = "Ends USER's access to the VM's pages, at once.\n",
      .target = vm,
      .make = [] { return std::make_unique<RemoveUserCommand>(); },
  });
  table.Add({
      .path = "share add-link",
      .summary = "make a share link to a VM's pages",
      .args = "VM",
      .description = "Prints a URL (…/?share=TOKEN) that lets whoever holds it see the VM's "
                     "pages without an account. It is shown only this once; share show lists "
                     "it by id with its use count; share remove-link VM ID revokes it.\n",
      .target = vm,
      .make = [] { return std::make_unique<AddLinkCommand>(); },
  });
  table.Add({
      .path = "share remove-link",
      .summary = "revoke a share link",
      .args = "VM LINK_ID",
      .description = "Revokes the share link LINK_ID (see share show): it stops working at "
                     "once.\n",
      .target = vm,
      .make = [] { return std::make_unique<RemoveLinkCommand>(); },
  });
}

}  // namespace warren
