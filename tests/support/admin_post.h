// POST to h2gate's admin endpoint (POST /reload), with curl like adminGet().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tests/support/scrape.h"

namespace h2gate::test {

// status 0: no HTTP answer.
AdminReply adminPost(uint16_t port, const std::string& path,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace h2gate::test
