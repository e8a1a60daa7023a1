// The headers nearly every test file parses, compiled once per test program
// (tests/CMakeLists.txt: target_precompile_headers when H2GATE_PCH is ON, the
// default; the top CMakeLists.txt says why h2gate_core has none):
// Catch2 (v2's single header, or v3's through support/catch2_v3/) and Asio are
// most of what a test file parses, and the test programs are three fifths of
// a build. Not included by any file; each file still includes what it uses.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>
