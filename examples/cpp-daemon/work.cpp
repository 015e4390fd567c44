#include "work.hpp"

#include <array>
#include <atomic>

namespace daemon_work {
namespace {
std::atomic<uint64_t> folded{0};
}  // namespace

std::string_view handle(std::string_view request) {
  std::array<uint32_t, 256> counts{};
  for (unsigned char c : request) ++counts[c];
  // Fold the table into a running checksum so the counting cannot be dropped.
  uint64_t h = 1469598103934665603ull;
  for (uint32_t n : counts) h = (h ^ n) * 1099511628211ull;
  folded.fetch_xor(h, std::memory_order_relaxed);
  return request.substr(0, request.size() / 8);
}

uint64_t checksum() { return folded.load(std::memory_order_relaxed); }

}  // namespace daemon_work
