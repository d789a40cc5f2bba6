// images: the guest images this server offers — NAME@VERSION, size and what each is, one
// line each — read from the catalog (image.json in each image's directory) on every call.
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/image_catalog.h"

namespace warren {
namespace {

class ImagesCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    const Services& services = ctx.services;
    if (!services.images.list) return Unavailable("this server has no image catalog");
    std::vector<ImageInfo> images = services.images.list();
    std::string default_ref;
    if (services.images.resolve) {
      Result<std::string> resolved = services.images.resolve(services.vm_defaults.image);
      if (resolved.ok()) default_ref = *resolved;
    }
    nlohmann::json list = nlohmann::json::array();
    for (const ImageInfo& image : images) {
      nlohmann::json j = ImageJson(image);
      j["default"] = image.ref == default_ref;
      list.push_back(std::move(j));
    }
    CommandResult r;
    r.data = {{"images", std::move(list)}, {"default", services.vm_defaults.image}};
    r.text = ImageLines(images) +
             "new --image NAME takes the newest version of NAME; the default "
             "is " +
             services.vm_defaults.image + ".\n";
    return r;
  }
};

}  // namespace

void RegisterImagesCommand(CommandTable& table) {
  table.Add({
      .path = "images",
      .summary = "list the guest images VMs can be made from",
      .description = "Lists the images installed on this server, one line each: NAME@VERSION, "
                     "size and what it is. `new --image NAME` takes NAME's newest version, "
                     "`new --image NAME@VERSION` that one; a VM keeps the version it was made "
                     "with.\n",
      .read_only = true,
      .make = [] { return std::make_unique<ImagesCommand>(); },
  });
}

}  // namespace warren
