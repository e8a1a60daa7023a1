// Explicit phases for the state machines on a request's path (AppSocket,
// DownstreamConnection, H2Connection, H2Stream, Http1Exchange, Transport;
// gateway/README.md, Phases). A machine is an enum class and a table that
// names each phase and lists the phases it may go to. Its class changes
// the phase in one function, which calls movePhase(): every transition is
// traced at trace level ("http1 exchange body -> complete"), and one the
// table does not allow is reported, always as an error line beginning
// with "illegal phase transition", and in the builds that check (no
// NDEBUG, or H2GATE_SANITIZE: the debug and ASan builds) by stopping the
// process there. The integration tests fail on that line in the release
// build too (tests/support/h2gate.cc).
//
//   enum class Phase : uint8_t { Idle, Busy, Done };
//   static constexpr PhaseTable<Phase, 3> kPhases{"example", {{
//       {Phase::Idle, "idle", nextPhases(Phase::Busy)},
//       {Phase::Busy, "busy", nextPhases(Phase::Idle, Phase::Done)},
//       {Phase::Done, "done", nextPhases()},
//   }}};
//   static_assert(kPhases.wellFormed());
//
// Rows are in the enum's order (checked when the table is compiled). A
// "transition" to the current phase changes nothing and is always allowed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "gateway/base/log.h"

namespace h2gate::upstream {

#if !defined(NDEBUG) || defined(H2GATE_SANITIZE)
inline constexpr bool kPhaseChecksStop = true;
#else
inline constexpr bool kPhaseChecksStop = false;
#endif

// The phases `to...` as a set (bit i: the phase of value i).
template <typename... Es>
constexpr uint32_t nextPhases(Es... to) {
  static_assert((std::is_enum_v<Es> && ...));
  return (uint32_t{0} | ... | (uint32_t{1} << static_cast<unsigned>(to)));
}

template <typename E>
struct PhaseRow {
  E phase;
  const char* name;
  uint32_t next;  // the phases it may go to (nextPhases())
};

template <typename E, size_t N>
struct PhaseTable {
  static_assert(N <= 32);
  const char* machine;
  std::array<PhaseRow<E>, N> rows;

  constexpr bool wellFormed() const {
    for (size_t i = 0; i < N; ++i)
      if (static_cast<size_t>(rows[i].phase) != i || (rows[i].next >> N) != 0) return false;
    return true;
  }
  constexpr bool allows(E from, E to) const {
    return from == to || (rows[static_cast<size_t>(from)].next >> static_cast<unsigned>(to)) & 1;
  }
  constexpr const char* name(E p) const { return rows[static_cast<size_t>(p)].name; }
};

// What an illegal transition (or a broken rule, see phaseRule()) does after
// its error line: stop the process when kPhaseChecksStop, else nothing. A
// test replaces it to see the report without stopping; returns the one it
// replaced.
using IllegalPhaseHandler = void (*)(const std::string& line);
IllegalPhaseHandler setIllegalPhaseHandler(IllegalPhaseHandler handler);

// Logs "illegal phase transition in <machine>: <from> -> <to>" (or, with
// `to` null, "illegal phase transition in <machine>: <from>") at error
// level, then calls the handler.
void reportIllegalPhase(const char* machine, const char* from, const char* to, uint64_t conn_id,
                        uint64_t stream_id);

// Moves `phase` to `to` (see above).
template <typename E, size_t N>
inline void movePhase(const PhaseTable<E, N>& table, E& phase, E to, uint64_t conn_id,
                      uint64_t stream_id) {
  if (phase == to) return;
  if (!table.allows(phase, to)) [[unlikely]]
    reportIllegalPhase(table.machine, table.name(phase), table.name(to), conn_id, stream_id);
  else
    H2G_LOG(Trace, conn_id, stream_id,
            table.machine << " " << table.name(phase) << " -> " << table.name(to));
  phase = to;
}

// A rule that ties phases together (a phase of one machine needs one of
// another, or a call is not allowed in a phase): reported like an illegal
// transition when `holds` is false, with `rule` saying which.
inline void phaseRule(bool holds, const char* machine, const char* rule, uint64_t conn_id,
                      uint64_t stream_id) {
  if (!holds) [[unlikely]]
    reportIllegalPhase(machine, rule, nullptr, conn_id, stream_id);
}

}  // namespace h2gate::upstream
