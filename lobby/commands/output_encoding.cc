#include "lobby/commands/output_encoding.h"

#include "keys/base64.h"
#include "lobby/base/utf8.h"

namespace warren {

std::string_view ImageMimeType(std::string_view bytes) {
  auto starts = [&](std::string_view magic, size_t at = 0) {
    return bytes.size() >= at + magic.size() && bytes.substr(at, magic.size()) == magic;
  };
  if (starts(std::string_view("\x89PNG\r\n\x1a\n", 8))) return "image/png";
  if (starts("\xff\xd8\xff")) return "image/jpeg";
  if (starts("GIF87a") || starts("GIF89a")) return "image/gif";
  if (starts("RIFF") && starts("WEBP", 8)) return "image/webp";
  return {};
}

EncodedBytes EncodeBytes(std::string_view bytes, bool whole) {
  EncodedBytes e;
  if (std::string_view mime = ImageMimeType(bytes); whole && !mime.empty()) {
    e.form = BytesForm::kImage;
    e.mime_type = std::string(mime);
  } else if (IsValidUtf8(bytes)) {
    return e;
  } else {
    e.form = BytesForm::kBinary;
  }
  e.base64 = Base64Encode(bytes);
  return e;
}

void PutBytes(nlohmann::json& data, const std::string& name, std::string_view bytes) {
  if (IsValidUtf8(bytes)) {
    data[name] = std::string(bytes);
    return;
  }
  data[name] = "";
  data[name + "_base64"] = Base64Encode(bytes);
}

}  // namespace warren
