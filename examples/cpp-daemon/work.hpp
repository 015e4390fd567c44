// The work the original daemon did: count byte frequencies of the request,
// reply with its first floor(len / 8) bytes.
#pragma once

#include <cstdint>
#include <string_view>

namespace daemon_work {

// Walks `request` counting byte frequencies and returns the reply: a view of
// the first floor(len / 8) bytes of `request`. Thread-safe.
std::string_view handle(std::string_view request);

// A checksum over every count table so far (keeps the counting observable).
uint64_t checksum();

}  // namespace daemon_work
