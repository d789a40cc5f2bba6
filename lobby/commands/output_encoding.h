// How bytes a command relays (CommandResult::relayed: what a command in a VM printed) travel
// where only text may go. The one rule; each surface maps it onto its own wire shape:
// JSON (--json, /exec, MCP's structuredContent) carries "stdout" when the bytes are UTF-8
// and "stdout_base64" otherwise; MCP's content is an image for a whole PNG, JPEG, GIF or
// WebP, base64 for other binary output, text otherwise; plain text output (the SSH
// channel) passes the bytes through untouched. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace warren {

enum class BytesForm { kText, kImage, kBinary };

struct EncodedBytes {
  BytesForm form = BytesForm::kText;
  std::string mime_type;  // kImage: "image/png", "image/jpeg", "image/gif" or "image/webp"
  std::string base64;     // kImage and kBinary: the bytes, base64 (RFC 4648, padded)
};

// "image/png", "image/jpeg", "image/gif" or "image/webp" when the bytes start with that
// format's magic number; empty otherwise.
std::string_view ImageMimeType(std::string_view bytes);

// kImage when the bytes are an image by magic number and `whole` (nothing was cut out of
// the middle, which would break it); else kText when they are valid UTF-8; else kBinary.
EncodedBytes EncodeBytes(std::string_view bytes, bool whole);

// data[name] = the bytes when they are valid UTF-8. Otherwise data[name] = "" and
// data[name + "_base64"] = their base64, so a JSON reader gets them byte for byte.
void PutBytes(nlohmann::json& data, const std::string& name, std::string_view bytes);

}  // namespace warren
