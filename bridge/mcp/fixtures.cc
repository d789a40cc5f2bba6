// The MCP conformance suite's fixture tools. TEST-ONLY: registered only by
// `warren serve --mcp-conformance-fixtures` (never on by default), so the official suite
// (@modelcontextprotocol/conformance) can exercise content types, errors, progress and
// logging on the real transport. They run no command and touch no state.
#include <chrono>
#include <thread>

#include "bridge/mcp/jsonrpc.h"
#include "bridge/mcp/tools.h"

namespace warren::mcp {
namespace {

using nlohmann::json;

// A 1x1 PNG and a tiny WAV, base64.
constexpr const char* kPng =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg==";
constexpr const char* kWav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

json Text(std::string t) { return {{"type", "text"}, {"text", std::move(t)}}; }
json Image() { return {{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}}; }
json Resource() {
  return {{"type", "resource"},
          {"resource",
           {{"uri", "test://embedded-resource"},
            {"mimeType", "text/plain"},
            {"text", "This is an embedded resource content."}}}};
}

json NoArgs() {
  return {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
}

Tool Fixture(std::string name, std::string description,
             std::function<json(const json&, ToolCall&)> run, json schema = NoArgs()) {
  return Tool{{{"name", std::move(name)},
               {"description", std::move(description)},
               {"inputSchema", std::move(schema)},
               {"annotations", {{"readOnlyHint", true}, {"openWorldHint", false}}}},
              std::move(run)};
}

void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

}  // namespace

void AddConformanceFixtures(ToolSet& tools) {
  tools.Add(Fixture("test_simple_text", "test fixture: returns text", [](const json&, ToolCall&) {
    return json{{"content", {Text("This is a simple text response for testing.")}}};
  }));
  tools.Add(
      Fixture("test_image_content", "test fixture: returns an image", [](const json&, ToolCall&) {
        return json{{"content", {Image()}}};
      }));
  tools.Add(
      Fixture("test_audio_content", "test fixture: returns audio", [](const json&, ToolCall&) {
        return json{{"content", {{{"type", "audio"}, {"data", kWav}, {"mimeType", "audio/wav"}}}}};
      }));
  tools.Add(Fixture("test_embedded_resource", "test fixture: returns an embedded resource",
                    [](const json&, ToolCall&) {
                      return json{{"content", {Resource()}}};
                    }));
  tools.Add(Fixture(
      "test_multiple_content_types", "test fixture: returns mixed content",
      [](const json&, ToolCall&) {
        return json{{"content", {Text("Multiple content types test:"), Image(), Resource()}}};
      }));
  tools.Add(
      Fixture("test_error_handling", "test fixture: always fails", [](const json&, ToolCall&) {
        return json{{"content", {Text("This tool intentionally returns an error for testing")}},
                    {"isError", true}};
      }));
  tools.Add(Fixture(
      "test_tool_with_logging", "test fixture: logs three messages",
      [](const json&, ToolCall& call) {
        for (const char* m :
             {"Tool execution started", "Tool processing data", "Tool execution completed"}) {
          if (call.notify) {
            call.notify(Notification("notifications/message", {{"level", "info"}, {"data", m}}));
          }
          Pause();
        }
        return json{{"content", {Text("Tool with logging executed successfully")}}};
      }));
  tools.Add(Fixture(
      "test_tool_with_progress", "test fixture: reports progress", [](const json&, ToolCall& call) {
        for (int p : {0, 50, 100}) {
          if (call.notify && !call.progress_token.is_null()) {
            call.notify(Notification(
                "notifications/progress",
                {{"progressToken", call.progress_token}, {"progress", p}, {"total", 100}}));
          }
          if (p != 100) Pause();
        }
        return json{{"content", {Text("Tool with progress executed successfully")}}};
      }));
  json schema2020 = {
      {"$schema", "https://json-schema.org/draft/2020-12/schema"},
      {"type", "object"},
      {"$defs",
       {{"address",
         {{"type", "object"},
          {"properties", {{"street", {{"type", "string"}}}, {"city", {{"type", "string"}}}}}}}}},
      {"properties", {{"name", {{"type", "string"}}}, {"address", {{"$ref", "#/$defs/address"}}}}},
      {"additionalProperties", false}};
  tools.Add(Fixture(
      "json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features",
      [](const json& args, ToolCall&) {
        return json{{"content", {Text("received " + Dump(args))}}};
      },
      schema2020));
}

}  // namespace warren::mcp
