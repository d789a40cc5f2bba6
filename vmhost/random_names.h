// Random names for what vmhost makes: domain UUIDs, disk layer and temporary file names.
// From the kernel's generator (std::random_device), so two threads or two processes never
// pick the same one. Thread-safe.
#pragma once

#include <string>

namespace warren {

// A version 4 UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".
std::string NewUuid();

// `n` random lowercase hexadecimal digits.
std::string RandomHex(int n);

}  // namespace warren
