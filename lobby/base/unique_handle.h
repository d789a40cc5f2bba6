// UniqueHandle: the one RAII owner for a C library's objects (libvirt, libssh, ...): a
// std::unique_ptr whose deleter calls the library's free function, so no code path frees by
// hand. Header-only, no dependencies beyond the standard library. Thread-compatible, like
// any unique_ptr: whether the owned object may be shared between threads is its library's
// rule, stated where the module declares its handles.
#pragma once

#include <memory>
#include <type_traits>

namespace warren {

// A deleter that calls `Free` (the library's free function; its result, if any, is ignored).
// unique_ptr never calls a deleter with null, so `Free` need not accept one.
template <auto Free>
struct CallFree {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};

// `Handle` is the library's pointer type (virDomainPtr, ssh_session: a typedef of T*) or a
// plain T*; `Free` takes that pointer. A free step that needs more than one call (abort,
// then free) is a small function of the module's own, named after what it does.
//   using DomainHandle = UniqueHandle<virDomainPtr, virDomainFree>;
template <typename Handle, auto Free>
using UniqueHandle = std::unique_ptr<std::remove_pointer_t<Handle>, CallFree<Free>>;

}  // namespace warren
