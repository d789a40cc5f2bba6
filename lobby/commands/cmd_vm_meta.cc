// tag [-d] VM TAG…, comment VM TEXT…: the labels people put on VMs. A credential limited
// to a tag may not change tags: its view of the world is that tag, and dropping it from a
// VM would hide the VM from itself, adding another would reach past its scope.
#include <algorithm>

#include <CLI/CLI.hpp>

#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_flags.h"

namespace warren {
namespace {

class TagCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_flag("-d,--delete", delete_, "remove the tags instead of adding them");
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("TAG", words_, "tags: a-z first, then a-z, 0-9, _ and -")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    if (!ctx.caller().scope.tag.empty()) {
      return PermissionDenied(CredentialNoun(ctx.caller()) + " is limited to the tag \"" +
                              ctx.caller().scope.tag + "\" and may not change tags");
    }
    WARREN_ASSIGN_OR_RETURN(std::vector<std::string> tags, ParseTags(words_));
    const VmRecord& vm = *ctx.vm;
    std::vector<std::string> result;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
      if (delete_) {
        std::erase_if(r.tags, [&](const std::string& t) {
          return std::binary_search(tags.begin(), tags.end(), t);
        });
      } else {
        MergeTags(r.tags, tags);
        if (r.tags.size() > kMaxTagsPerVm) {
          return InvalidArgument("a VM may carry at most " + std::to_string(kMaxTagsPerVm) +
                                 " tags");
        }
      }
      result = r.tags;
      return Status::Ok();
    }));
    NotifyIntegrations(ctx.services, vm.owner);  // tag:T attachments follow the VM's tags
    std::string shown;
    for (const std::string& t : result) shown += (shown.empty() ? "" : ",") + t;
    CommandResult r;
    r.data = {{"name", vm.name}, {"tags", result}};
    r.text = vm.name + " tags: " + (shown.empty() ? "(none)" : shown) + "\n";
    return r;
  }

 private:
  bool delete_ = false;
  std::string vm_;
  std::vector<std::string> words_;
};

class CommentCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("TEXT", words_, "the comment (words are joined with spaces); \"\" clears it")
        ->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const std::string comment = JoinWords(words_);
    WARREN_RETURN_IF_ERROR(CheckComment(comment));
    const VmRecord& vm = *ctx.vm;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
      r.comment = comment;
      return Status::Ok();
    }));
    CommandResult r;
    r.data = {{"name", vm.name}, {"comment", comment}};
    r.text = comment.empty() ? "cleared the comment of " + vm.name + "\n"
                             : "commented " + vm.name + "\n";
    return r;
  }

 private:
  std::string vm_;
  std::vector<std::string> words_;
};

}  // namespace

void RegisterVmMetaCommands(CommandTable& table) {
  table.Add({
      .path = "tag",
      .summary = "add or remove tags on a VM",
      .args = "VM TAG…",
      .description = "Adds tags to a VM (-d removes them). Tags group VMs for ls and limit "
                     "what a key or token limited with --tag can see.\n",
      .target = {"VM", VmNeed::kExists},
      .make = [] { return std::make_unique<TagCommand>(); },
  });
  table.Add({
      .path = "comment",
      .summary = "set a VM's comment",
      .args = "VM TEXT…",
      .description = "Sets a short note shown by ls -l and stat, at most 200 bytes; "
                     "comment VM \"\" clears it.\n",
      .target = {"VM", VmNeed::kExists},
      .make = [] { return std::make_unique<CommentCommand>(); },
  });
}

}  // namespace warren
