// A listener's address policy (gateway/downstream/listener_context.h): every
// address a DIRECT destination resolves to is put to the listener's filters
// in chain order, and the first refusal is the answer the app gets.
#include "gateway/downstream/listener_context.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "gateway/net/ip_address.h"

using namespace h2gate;
using namespace h2gate::downstream;

namespace {

// Refuses addresses starting with `first_byte` (0: none), and records what
// it was asked.
struct Judge : filters::Filter {
  Judge(std::string n, uint8_t b, std::vector<std::string>& log)
      : name(std::move(n)), first_byte(b), asked(log) {}
  std::optional<Refusal> checkAddress(const RequestHead&, const StreamInfo&,
                                      const net::IpAddress& ip) const override {
    asked.push_back(name + " " + ip.str());
    if (first_byte != 0 && ip.bytes[0] == first_byte) return Refusal{403, name + " says no"};
    return std::nullopt;
  }
  std::string name;
  uint8_t first_byte;
  std::vector<std::string>& asked;
};

std::optional<Refusal> check(const ListenerContext& ctx, const char* ip) {
  return ctx.checkAddress(RequestHead{}, StreamInfo{}, *net::parseIp(ip));
}

}  // namespace

TEST_CASE("listener context: the first filter that refuses an address answers",
          "[downstream][listener_context]") {
  std::vector<std::string> asked;
  ListenerContext ctx;
  ctx.filters.push_back(std::make_shared<Judge>("acl", 10, asked));
  ctx.filters.push_back(std::make_shared<Judge>("second", 10, asked));
  ctx.filters.push_back(std::make_shared<Judge>("third", 192, asked));

  std::optional<Refusal> r = check(ctx, "10.0.0.1");
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK(r->reason == "acl says no");
  CHECK(asked == std::vector<std::string>{"acl 10.0.0.1"});  // the rest not asked

  asked.clear();
  r = check(ctx, "192.0.2.1");
  REQUIRE(r);
  CHECK(r->reason == "third says no");
  CHECK(asked == std::vector<std::string>{"acl 192.0.2.1", "second 192.0.2.1", "third 192.0.2.1"});

  asked.clear();
  CHECK_FALSE(check(ctx, "203.0.113.9"));
  CHECK(asked.size() == 3);
}

TEST_CASE("listener context: no filters, every address is fine", "[downstream][listener_context]") {
  ListenerContext ctx;
  CHECK_FALSE(check(ctx, "127.0.0.1"));
  CHECK_FALSE(check(ctx, "::1"));
}
