#include "gateway/net/fd_limit.h"

#include <catch2/catch.hpp>

TEST_CASE("raiseFdLimit: the soft limit ends at the hard limit", "[limits]") {
  const h2gate::net::FdLimit fd = h2gate::net::raiseFdLimit();
  INFO(fd.error);
  CHECK(fd.error.empty());
  CHECK(fd.soft >= fd.soft_before);
  CHECK(fd.soft <= fd.hard);
  if (fd.hard <= (1u << 20)) CHECK(fd.soft == fd.hard);
}

TEST_CASE("fdsNeeded: two per allowed connection plus a reserve", "[limits]") {
  h2gate::config::Bootstrap b;
  b.listeners.resize(2);
  b.listeners[0].max_connections = 100;
  b.listeners[1].max_connections = 10;
  CHECK(h2gate::net::fdsNeeded(b) == 2 * 110 + 64);
}
