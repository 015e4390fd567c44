// Requests lent from the client's arena, through the C API and shmlink.hpp:
// over shm and unix, loans of 1 and 16 MiB filled in place reach a server
// that answers their length and checksum; the arena stays flat over many
// calls and reuses freed loans; a small max_arena_bytes makes a large loan
// fail with SHMLINK_E_ARENA_FULL while a plain call of that size streams;
// large plain calls go through the arena transparently; tcp, servers that
// refuse lent requests and clients that never lend fail with nothing sent
// and the session usable; loans outlive their client.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "cpp_fixture.hpp"

namespace shmlink_test {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// FNV-1a of the bytes.
uint64_t checksum(const uint8_t* data, std::size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < len; ++i) {
    h ^= data[i];
    h *= 1099511628211ull;
  }
  return h;
}

// What the server answers for a request: "LEN:CHECKSUM".
std::string digest(const uint8_t* data, std::size_t len) {
  return std::to_string(len) + ":" + std::to_string(checksum(data, len));
}

// The C handler: answers the request's digest.
uint32_t digest_handler(void*, const uint8_t* request, size_t request_len,
                        shmlink_response* response) {
  std::string out = digest(request, request_len);
  return shmlink_response_write(response, bytes(out), out.size()) == SHMLINK_OK ? 0 : 1;
}

// Writes the bytes of request `seed` into `data` in place.
void fill(uint8_t* data, std::size_t len, unsigned seed) {
  for (std::size_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>((i * 131 + seed) >> 3);
  if (len > 0) data[len - 1] = static_cast<uint8_t>(seed);
}

// The request `fill` writes, as a string, and its digest.
std::string request(std::size_t len, unsigned seed) {
  std::string r(len, '\0');
  fill(reinterpret_cast<uint8_t*>(r.data()), len, seed);
  return r;
}

std::string digest_of(std::size_t len, unsigned seed) {
  std::string r = request(len, seed);
  return digest(bytes(r), r.size());
}

// A loan freed at scope exit unless released.
struct LoanFree {
  void operator()(shmlink_loan* l) const { shmlink_loan_free(l); }
};
using LoanPtr = std::unique_ptr<shmlink_loan, LoanFree>;

class CApiArena : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override { serve(nullptr); }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  // (Re)binds and starts the digest server with `options`; connects client_
  // with `client_options`.
  void serve(const shmlink_server_options* options,
             const shmlink_client_options* client_options = nullptr) {
    client_.reset();
    server_.reset();
    std::string bind = bind_address(GetParam(), dir_);
    const char* list[] = {bind.c_str()};
    shmlink_server* s = nullptr;
    ASSERT_EQ(shmlink_server_bind(list, 1, options, &s), SHMLINK_OK) << last_error();
    server_.reset(s);
    address_ = shmlink_server_address(s, 0);
    ASSERT_EQ(shmlink_server_start(s, digest_handler, nullptr), SHMLINK_OK) << last_error();
    client_ = connect(client_options);
  }

  ClientPtr connect(const shmlink_client_options* options = nullptr) {
    shmlink_client* c = nullptr;
    EXPECT_EQ(shmlink_client_connect(address_.c_str(), options, &c), SHMLINK_OK) << last_error();
    return ClientPtr(c);
  }

  // A loan of `len` bytes filled with request `seed`, sent; the answer in out_.
  shmlink_status lend_and_call(std::size_t len, unsigned seed) {
    shmlink_loan* loan = nullptr;
    uint8_t* data = nullptr;
    shmlink_status st = shmlink_client_loan(client_.get(), len, &loan, &data);
    if (st != SHMLINK_OK) return st;
    EXPECT_NE(data, nullptr);
    fill(data, len, seed);
    return shmlink_client_call_loan(client_.get(), loan, out_.get());
  }

  // A plain call of request `seed`; the answer in out_.
  shmlink_status plain_call(std::size_t len, unsigned seed) {
    std::string r = request(len, seed);
    return shmlink_client_call(client_.get(), bytes(r), r.size(), out_.get());
  }

  // A small plain call still works: the session survived.
  void expect_usable() {
    ASSERT_EQ(plain_call(100, 1), SHMLINK_OK) << last_error();
    EXPECT_EQ(out_.str(), digest_of(100, 1));
    EXPECT_EQ(shmlink_client_is_connected(client_.get()), 1);
  }

  TempDir dir_;
  std::string address_;
  ServerPtr server_;
  ClientPtr client_;
  Buffer out_;
};

TEST_P(CApiArena, LoansFilledInPlaceAreAnswered) {
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), 0u) << "nothing mapped before a loan";
  unsigned seed = 1;
  for (std::size_t len : {kMiB, 16 * kMiB, kMiB}) {
    ASSERT_EQ(lend_and_call(len, seed), SHMLINK_OK) << len << ": " << last_error();
    EXPECT_EQ(out_.str(), digest_of(len, seed)) << len;
    ++seed;
  }
  EXPECT_GT(shmlink_client_arena_bytes(client_.get()), 0u);
  ASSERT_EQ(lend_and_call(16 * kMiB, 9), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(16 * kMiB, 9));
  // A loan with a timeout.
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(shmlink_client_loan(client_.get(), 3, &loan, &data), SHMLINK_OK) << last_error();
  std::memcpy(data, "abc", 3);
  ASSERT_EQ(shmlink_client_call_loan_timeout(client_.get(), loan, 20'000'000, out_.get()),
            SHMLINK_OK)
      << last_error();
  EXPECT_EQ(out_.str(), digest(bytes("abc"), 3));
}

TEST_P(CApiArena, ManyCallsKeepTheArenaFlat) {
  ASSERT_EQ(lend_and_call(16 * kMiB, 1), SHMLINK_OK) << last_error();
  ASSERT_EQ(lend_and_call(kMiB, 2), SHMLINK_OK) << last_error();
  ASSERT_EQ(plain_call(16 * kMiB, 3), SHMLINK_OK) << last_error();
  uint64_t mapped = shmlink_client_arena_bytes(client_.get());
  ASSERT_GT(mapped, 0u);
  for (unsigned i = 0; i < 20; ++i) {
    std::size_t len = i % 2 == 0 ? 16 * kMiB : kMiB;
    ASSERT_EQ(lend_and_call(len, i), SHMLINK_OK) << i << ": " << last_error();
    if (i % 5 == 0) {
      EXPECT_EQ(out_.str(), digest_of(len, i)) << i;
    }
    ASSERT_EQ(plain_call(len, i + 100), SHMLINK_OK) << i << ": " << last_error();
  }
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), mapped) << "no growth";
}

TEST_P(CApiArena, AFreedLoanIsReused) {
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(shmlink_client_loan(client_.get(), 8 * kMiB, &loan, &data), SHMLINK_OK) << last_error();
  fill(data, 8 * kMiB, 4);
  shmlink_loan_free(loan);
  uint64_t mapped = shmlink_client_arena_bytes(client_.get());
  ASSERT_GT(mapped, 0u);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(shmlink_client_loan(client_.get(), 8 * kMiB, &loan, &data), SHMLINK_OK)
        << last_error();
    data[0] = 1;
    data[8 * kMiB - 1] = 2;
    shmlink_loan_free(loan);
  }
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), mapped) << "freed loans are reused";
  shmlink_loan_free(nullptr);
  ASSERT_EQ(lend_and_call(8 * kMiB, 5), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(8 * kMiB, 5));
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), mapped);
}

TEST_P(CApiArena, ASmallArenaIsFullAndPlainCallsStream) {
  shmlink_client_options o{};
  o.max_arena_bytes = 8 * kMiB;
  serve(nullptr, &o);
  shmlink_loan* loan = reinterpret_cast<shmlink_loan*>(&o);  // overwritten with NULL
  uint8_t* data = reinterpret_cast<uint8_t*>(&o);
  EXPECT_EQ(shmlink_client_loan(client_.get(), 16 * kMiB, &loan, &data), SHMLINK_E_ARENA_FULL);
  EXPECT_EQ(loan, nullptr);
  EXPECT_EQ(data, nullptr);
  EXPECT_NE(last_error().find("arena"), std::string::npos) << last_error();
  EXPECT_STREQ(shmlink_error_string(SHMLINK_E_ARENA_FULL), "arena full");
  // A plain call of the same size cannot borrow: it streams.
  ASSERT_EQ(plain_call(16 * kMiB, 6), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(16 * kMiB, 6));
  // Within the limit, loans work; while one is held a second is refused.
  ASSERT_EQ(shmlink_client_loan(client_.get(), 5 * kMiB, &loan, &data), SHMLINK_OK) << last_error();
  LoanPtr held(loan);
  EXPECT_EQ(shmlink_client_loan(client_.get(), 5 * kMiB, &loan, &data), SHMLINK_E_ARENA_FULL);
  held.reset();
  ASSERT_EQ(lend_and_call(5 * kMiB, 7), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(5 * kMiB, 7));
  EXPECT_LE(shmlink_client_arena_bytes(client_.get()), 8 * kMiB);
  expect_usable();
}

TEST_P(CApiArena, LargePlainCallsGoThroughTheArena) {
  unsigned seed = 10;
  for (std::size_t len : {std::size_t{64} << 10, kMiB, 16 * kMiB, std::size_t{100}}) {
    ASSERT_EQ(plain_call(len, seed), SHMLINK_OK) << len << ": " << last_error();
    EXPECT_EQ(out_.str(), digest_of(len, seed)) << len;
    ++seed;
  }
  EXPECT_GT(shmlink_client_arena_bytes(client_.get()), 0u) << "large calls were lent";
}

TEST_P(CApiArena, ThresholdAboveEveryRequestStreamsThem) {
  shmlink_client_options o{};
  o.arena_threshold = UINT64_MAX;
  serve(nullptr, &o);
  ASSERT_EQ(plain_call(16 * kMiB, 11), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(16 * kMiB, 11));
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), 0u) << "streamed, nothing lent";
  // Explicit loans still lend.
  ASSERT_EQ(lend_and_call(kMiB, 12), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(kMiB, 12));
}

TEST_P(CApiArena, ServerThatRefusesLentRequests) {
  shmlink_server_options o{};
  o.refuse_arena = 1;
  serve(&o);
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  EXPECT_EQ(shmlink_client_loan(client_.get(), kMiB, &loan, &data), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(loan, nullptr);
  EXPECT_FALSE(last_error().empty());
  ASSERT_EQ(plain_call(2 * kMiB, 13), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(2 * kMiB, 13));
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), 0u);
  expect_usable();
}

TEST_P(CApiArena, ClientThatNeverLends) {
  shmlink_client_options o{};
  o.no_arena = 1;
  o.max_arena_bytes = 64 * kMiB;  // no_arena wins
  serve(nullptr, &o);
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  EXPECT_EQ(shmlink_client_loan(client_.get(), kMiB, &loan, &data), SHMLINK_E_INVALID_ARGUMENT);
  ASSERT_EQ(plain_call(2 * kMiB, 14), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(2 * kMiB, 14));
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), 0u);
}

TEST_P(CApiArena, ALoanOutlivesItsClient) {
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(shmlink_client_loan(client_.get(), kMiB, &loan, &data), SHMLINK_OK) << last_error();
  fill(data, kMiB, 15);
  client_.reset();
  // Still mapped: written and read after the client is gone, then freed.
  fill(data, kMiB, 16);
  EXPECT_EQ(checksum(data, kMiB), checksum(bytes(request(kMiB, 16)), kMiB));
  shmlink_loan_free(loan);

  // Sent on a closed client: refused, and the loan is taken all the same.
  client_ = connect();
  ASSERT_EQ(shmlink_client_loan(client_.get(), kMiB, &loan, &data), SHMLINK_OK) << last_error();
  ASSERT_EQ(shmlink_client_close(client_.get()), SHMLINK_OK);
  EXPECT_EQ(shmlink_client_call_loan(client_.get(), loan, out_.get()), SHMLINK_E_CLOSED);
}

TEST_P(CApiArena, CallLoanTakesTheLoanWhateverTheOutcome) {
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(shmlink_client_loan(client_.get(), 4 * kMiB, &loan, &data), SHMLINK_OK) << last_error();
  uint64_t mapped = shmlink_client_arena_bytes(client_.get());
  // NULL response, NULL client: invalid, the loan back in the arena (the
  // leak checker would see one left behind).
  EXPECT_EQ(shmlink_client_call_loan(client_.get(), loan, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("response is NULL"), std::string::npos) << last_error();
  ASSERT_EQ(shmlink_client_loan(client_.get(), 4 * kMiB, &loan, &data), SHMLINK_OK) << last_error();
  EXPECT_EQ(shmlink_client_call_loan_timeout(nullptr, loan, 0, out_.get()),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_call_loan(client_.get(), nullptr, out_.get()),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("loan is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(shmlink_client_arena_bytes(client_.get()), mapped) << "the loans came back";
  // NULL out-parameters.
  EXPECT_EQ(shmlink_client_loan(client_.get(), 10, nullptr, &data), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_loan(client_.get(), 10, &loan, nullptr), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_client_loan(nullptr, 10, &loan, &data), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(loan, nullptr);
  EXPECT_EQ(shmlink_client_arena_bytes(nullptr), 0u);
  expect_usable();
}

TEST_P(CApiArena, LoanWriteCopiesInPiecesAndChecksItsBounds) {
  // A 16 MiB request written in three pieces, the largest past the 12 MiB
  // from which the copy is streamed; the server's digest must match the
  // same bytes sent by memcpy.
  const std::size_t len = 16 * kMiB;
  std::string want(len, '\0');
  fill(reinterpret_cast<uint8_t*>(want.data()), len, 5);
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(shmlink_client_loan(client_.get(), len, &loan, &data), SHMLINK_OK) << last_error();
  const auto* src = reinterpret_cast<const uint8_t*>(want.data());
  const std::size_t a = 3, b = 13 * kMiB + 5;
  ASSERT_EQ(shmlink_loan_write(loan, 0, src, a), SHMLINK_OK) << last_error();
  ASSERT_EQ(shmlink_loan_write(loan, a, src + a, b), SHMLINK_OK) << last_error();
  ASSERT_EQ(shmlink_loan_write(loan, a + b, src + a + b, len - a - b), SHMLINK_OK) << last_error();
  EXPECT_EQ(std::memcmp(data, want.data(), len), 0) << "the loan holds the bytes";
  // Out of bounds: refused, nothing written.
  uint8_t x = 1;
  EXPECT_EQ(shmlink_loan_write(loan, len, &x, 1), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("1 bytes at offset 16777216 pass the loan's 16777216 bytes"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(shmlink_loan_write(loan, SIZE_MAX, &x, 2), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_loan_write(loan, 0, nullptr, 1), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(shmlink_loan_write(loan, len, nullptr, 0), SHMLINK_OK) << "nothing to copy";
  EXPECT_EQ(shmlink_loan_write(nullptr, 0, &x, 1), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("loan is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(std::memcmp(data, want.data(), len), 0) << "refused writes wrote nothing";
  ASSERT_EQ(shmlink_client_call_loan(client_.get(), loan, out_.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(out_.str(), digest_of(len, 5));
}

INSTANTIATE_TEST_SUITE_P(Transports, CApiArena, ::testing::Values(Transport::Shm, Transport::Unix),
                         transport_name);

TEST(CApiArenaOptions, InitSpellsTheDefaultsAndFlagsAreZeroOrOne) {
  shmlink_client_options c;
  shmlink_client_options_init(&c);
  EXPECT_EQ(c.max_arena_bytes, SHMLINK_DEFAULT_ARENA_BYTES);
  EXPECT_EQ(c.arena_threshold, 64u << 10);
  EXPECT_EQ(c.no_arena, 0u);
  shmlink_server_options s;
  shmlink_server_options_init(&s);
  EXPECT_EQ(s.max_arena_bytes, SHMLINK_DEFAULT_ARENA_BYTES);
  EXPECT_EQ(s.refuse_arena, 0u);

  TempDir dir;
  std::string bind = bind_address(Transport::Unix, dir);
  const char* list[] = {bind.c_str()};
  shmlink_server* raw = nullptr;
  s.refuse_arena = 2;
  EXPECT_EQ(shmlink_server_bind(list, 1, &s, &raw), SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(raw, nullptr);
  EXPECT_NE(last_error().find("refuse_arena"), std::string::npos) << last_error();
  s.refuse_arena = 0;
  ASSERT_EQ(shmlink_server_bind(list, 1, &s, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  ASSERT_EQ(shmlink_server_start(raw, digest_handler, nullptr), SHMLINK_OK) << last_error();
  c.no_arena = 2;
  shmlink_client* client = nullptr;
  EXPECT_EQ(shmlink_client_connect(shmlink_server_address(raw, 0), &c, &client),
            SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(client, nullptr);
  EXPECT_NE(last_error().find("no_arena"), std::string::npos) << last_error();
  c.no_arena = 0;
  ASSERT_EQ(shmlink_client_connect(shmlink_server_address(raw, 0), &c, &client), SHMLINK_OK)
      << last_error();
  ClientPtr owned(client);
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  ASSERT_EQ(shmlink_client_loan(client, kMiB, &loan, &data), SHMLINK_OK) << last_error();
  shmlink_loan_free(loan);
}

TEST(CApiArenaTcp, Unsupported) {
  const char* list[] = {"tcp:127.0.0.1:0"};
  shmlink_server* raw = nullptr;
  ASSERT_EQ(shmlink_server_bind(list, 1, nullptr, &raw), SHMLINK_OK) << last_error();
  ServerPtr server(raw);
  ASSERT_EQ(shmlink_server_start(raw, digest_handler, nullptr), SHMLINK_OK) << last_error();
  shmlink_client* c = nullptr;
  ASSERT_EQ(shmlink_client_connect(shmlink_server_address(raw, 0), nullptr, &c), SHMLINK_OK);
  ClientPtr client(c);
  shmlink_loan* loan = nullptr;
  uint8_t* data = nullptr;
  EXPECT_EQ(shmlink_client_loan(c, kMiB, &loan, &data), SHMLINK_E_UNSUPPORTED);
  EXPECT_EQ(loan, nullptr);
  EXPECT_FALSE(last_error().empty());
  // A large plain call streams.
  std::string r = request(2 * kMiB, 17);
  Buffer out;
  ASSERT_EQ(shmlink_client_call(c, bytes(r), r.size(), out.get()), SHMLINK_OK) << last_error();
  EXPECT_EQ(out.str(), digest_of(2 * kMiB, 17));
  EXPECT_EQ(shmlink_client_arena_bytes(c), 0u);
}

// shmlink.hpp: Loan (RAII), Client::loan/try_loan, call/try_call with a
// loan, ArenaFullError, arena options.
class CppArena : public CppServerTest {
 protected:
  // Serves the digest with `options`; connects client_ with `client_options`.
  void start(const shmlink::ServerOptions& options = {},
             const shmlink::ClientOptions& client_options = {}) {
    CppServerTest::start(
        [](std::string_view req, std::string& resp) { resp = digest(bytes(req), req.size()); },
        options, client_options);
  }
};

TEST_P(CppArena, LoanWrittenInPieces) {
  start();
  const std::size_t len = 16 * kMiB;
  std::string want(len, '\0');
  fill(reinterpret_cast<uint8_t*>(want.data()), len, 6);
  shmlink::Loan loan = client_.loan(len);
  loan.write(0, std::string_view(want).substr(0, kMiB));
  loan.write(kMiB, std::string_view(want).substr(kMiB));
  EXPECT_THROW(loan.write(len - 1, "ab"), shmlink::Error);
  EXPECT_EQ(client_.call(std::move(loan)), digest_of(len, 6));
}

TEST_P(CppArena, LoanFilledAndCalled) {
  start();
  for (unsigned seed : {20u, 21u}) {
    std::size_t len = seed == 20 ? kMiB : 16 * kMiB;
    shmlink::Loan loan = client_.loan(len);
    ASSERT_TRUE(loan);
    ASSERT_EQ(loan.size(), len);
    fill(loan.data(), loan.size(), seed);
    EXPECT_EQ(client_.call(std::move(loan)), digest_of(len, seed));
    EXPECT_FALSE(loan) << "consumed";  // NOLINT(bugprone-use-after-move)
  }
  uint64_t mapped = client_.arena_bytes();
  EXPECT_GT(mapped, 0u);
  // Dropped unsent, loans go back: no growth.
  for (int i = 0; i < 20; ++i) {
    shmlink::Loan l = client_.loan(16 * kMiB);
    std::fill(l.begin(), l.end(), uint8_t{7});
  }
  EXPECT_EQ(client_.arena_bytes(), mapped) << "no growth";
  std::string out;
  shmlink::Loan loan;
  ASSERT_TRUE(client_.try_loan(3, loan));
  std::memcpy(loan.data(), "xyz", 3);
  EXPECT_TRUE(client_.try_call(std::move(loan), out)) << out;
  EXPECT_EQ(out, digest(bytes("xyz"), 3));
  // Moves hand the buffer over.
  shmlink::Loan a = client_.loan(10);
  uint8_t* where = a.data();
  shmlink::Loan b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.data(), where);
  a = std::move(b);
  EXPECT_EQ(a.data(), where);
}

TEST_P(CppArena, ArenaFullThrowsAndPlainCallsStream) {
  shmlink::ClientOptions o;
  o.max_arena_bytes = 8 * kMiB;
  start({}, o);
  try {
    client_.loan(16 * kMiB);
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::ArenaFullError& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_ARENA_FULL);
  }
  shmlink::Loan loan;
  EXPECT_EQ(client_.try_loan(16 * kMiB, loan).code, SHMLINK_E_ARENA_FULL);
  EXPECT_FALSE(loan);
  std::string r = request(16 * kMiB, 22);
  EXPECT_EQ(client_.call(r), digest_of(16 * kMiB, 22));
}

TEST_P(CppArena, RefusedOrNotLent) {
  shmlink::ServerOptions refusing;
  refusing.accept_arena = false;
  start(refusing);
  try {
    client_.loan(kMiB);
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_INVALID_ARGUMENT);
  }
  EXPECT_EQ(client_.call(request(2 * kMiB, 23)), digest_of(2 * kMiB, 23));

  shmlink::ClientOptions never;
  never.lend = false;
  start({}, never);
  shmlink::Loan loan;
  EXPECT_EQ(client_.try_loan(kMiB, loan).code, SHMLINK_E_INVALID_ARGUMENT);
  EXPECT_EQ(client_.call(request(2 * kMiB, 24)), digest_of(2 * kMiB, 24));
  EXPECT_EQ(client_.arena_bytes(), 0u);
}

TEST_P(CppArena, ALoanOutlivesItsClient) {
  start();
  shmlink::Loan loan = client_.loan(kMiB);
  client_ = shmlink::Client();
  fill(loan.data(), loan.size(), 25);
  EXPECT_EQ(checksum(loan.data(), loan.size()), checksum(bytes(request(kMiB, 25)), kMiB));
  // Sent through an empty client: refused, and consumed all the same.
  std::string out;
  EXPECT_EQ(client_.try_call(std::move(loan), out).code, SHMLINK_E_CLOSED);
  EXPECT_FALSE(loan);  // NOLINT(bugprone-use-after-move)
}

INSTANTIATE_TEST_SUITE_P(Transports, CppArena, ::testing::Values(Transport::Shm, Transport::Unix),
                         transport_name);

TEST(CppArenaTcp, UnsupportedThrows) {
  shmlink::Server server = shmlink::Server::bind({"tcp:127.0.0.1:0"});
  server.start(
      [](std::string_view req, std::string& resp) { resp = digest(bytes(req), req.size()); });
  shmlink::Client c = shmlink::Client::connect(server.addresses()[0]);
  try {
    c.loan(kMiB);
    ADD_FAILURE() << "no exception";
  } catch (const shmlink::Error& e) {
    EXPECT_EQ(e.code(), SHMLINK_E_UNSUPPORTED);
  }
  EXPECT_EQ(c.call(request(kMiB, 26)), digest_of(kMiB, 26));
}

}  // namespace
}  // namespace shmlink_test
