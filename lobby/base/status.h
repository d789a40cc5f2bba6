// Status and Result<T>: warren's one error model. Every fallible function returns one of
// these; exceptions from libraries are caught at the narrowest wrapper and turned into a
// Status. Values are immutable and safe to copy between threads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace warren {

// The closed set of error kinds. Each maps once (error_map.h) to an SSH exit status, an
// HTTP status and an MCP/JSON-RPC error code. Add a kind only together with its mapping.
enum class Code {
  kOk = 0,
  kInvalidArgument,   // bad syntax or argument                       -> 400
  kUnauthenticated,   // bad or missing credential                    -> 401
  kPermissionDenied,  // authenticated but not allowed                -> 403
  kNotFound,          // unknown command, VM, key, user, job          -> 404
  kMethodNotAllowed,  // wrong HTTP method                            -> 405
  kConflict,          // already exists, or wrong state               -> 409
  kTooLarge,          // input over a size limit                      -> 413
  kCommandFailed,     // the command (or the command in the VM) exited non-zero -> 422
  kLimitExceeded,     // a quota or rate limit was hit                -> 429
  kInternal,          // a bug or an unexpected failure of ours       -> 500
  kUnavailable,       // a dependency (libvirt, a guest) is not reachable -> 503
  kTimeout,           // a deadline passed                            -> 504
  kCancelled,         // the caller went away or cancelled            -> 499
};

std::string_view CodeName(Code code);  // "invalid_argument", ...

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "not_found: no VM named web-1"
  std::string ToString() const;

  // Prefixes context to the message, keeping the code: "opening store: <message>".
  Status Annotate(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
inline Status TooLarge(std::string m) { return {Code::kTooLarge, std::move(m)}; }
inline Status LimitExceeded(std::string m) { return {Code::kLimitExceeded, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
inline Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }

// A value or a non-OK Status. g++ 12 has no std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The Status: OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace warren

// Early return on error. WARREN_RETURN_IF_ERROR(expr) for Status;
// WARREN_ASSIGN_OR_RETURN(lhs, expr) for Result<T>.
#define WARREN_RETURN_IF_ERROR(expr) \
  do {                               \
    ::warren::Status _st = (expr);   \
    if (!_st.ok()) return _st;       \
  } while (0)

#define WARREN_CONCAT_INNER(a, b) a##b
#define WARREN_CONCAT(a, b) WARREN_CONCAT_INNER(a, b)
#define WARREN_ASSIGN_OR_RETURN(lhs, expr) \
  WARREN_ASSIGN_OR_RETURN_IMPL(WARREN_CONCAT(_res_, __LINE__), lhs, expr)
#define WARREN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
