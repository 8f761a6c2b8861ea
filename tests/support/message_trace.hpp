// Runs CAF's deterministic scheduler one message at a time and records each
// delivery as "sender -> receiver: content", with names the test gives the
// actors. A protocol test's expects are written from such a trace (and a
// failing expect is understood with one): run the scenario under
// run() and print the lines. next_message() reads the next message of one
// actor without taking it.
#pragma once

#include "tests/support/caf_catch.hpp"  // first

#include <map>
#include <string>
#include <vector>

#include <caf/abstract_actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduler/test_coordinator.hpp>

namespace kvferry::test {

class message_trace {
 public:
  /// Names the actor behind `h` in the trace.
  template <class Handle>
  void name(const Handle& h, std::string label) {
    if (h)
      names_[caf::actor_cast<caf::abstract_actor*>(h)] = std::move(label);
  }

  /// The next message the scheduler will deliver (FIFO), as a trace line;
  /// empty when no job is waiting.
  std::string next(caf::scheduler::test_coordinator& sched) const {
    if (sched.jobs.empty())
      return {};
    auto* to = dynamic_cast<caf::abstract_actor*>(sched.jobs.front());
    if (to == nullptr)
      return "(a job that is no actor)";
    auto* e = to->peek_at_next_mailbox_element();
    if (e == nullptr)
      return of(to) + ": (empty mailbox)";
    auto from = e->sender ? of(caf::actor_cast<caf::abstract_actor*>(e->sender)) : "_";
    auto text = to_string(e->content());
    if (text.size() > max_text)
      text = text.substr(0, max_text) + "...";
    return from + " -> " + of(to) + ": " + text;
  }

  /// Delivers every waiting message in FIFO order, recording each.
  std::vector<std::string> run(caf::scheduler::test_coordinator& sched) {
    std::vector<std::string> lines;
    while (!sched.jobs.empty()) {
      lines.push_back(next(sched));
      sched.run_once();
    }
    return lines;
  }

  static constexpr size_t max_text = 160;

 private:
  std::string of(const caf::abstract_actor* a) const {
    if (auto i = names_.find(a); i != names_.end())
      return i->second;
    return "#" + std::to_string(a->id());
  }

  std::map<const caf::abstract_actor*, std::string> names_;
};

/// The next message waiting in `to`'s mailbox, as a `T`, without taking it
/// (a test reads a field, e.g. the key a decider drew, before its expect).
template <class T, class Handle>
T next_message(const Handle& to) {
  auto* a = caf::actor_cast<caf::abstract_actor*>(to);
  REQUIRE(a != nullptr);
  auto* e = a->peek_at_next_mailbox_element();
  REQUIRE(e != nullptr);
  INFO("next message: " << to_string(e->content()));
  REQUIRE(e->content().template match_elements<T>());
  return e->content().template get_as<T>(0);
}

}  // namespace kvferry::test
