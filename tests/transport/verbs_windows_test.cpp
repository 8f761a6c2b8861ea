// The verbs receiver's memory windows (verbs_options::windows): the plan of
// which windows a batch gets (transport/verbs/window_plan.hpp), tested
// exhaustively without a device, and, where an RDMA device with type-2B
// windows exists, the real bind / write / invalidate path: a window's rkey
// writes the granted bytes and nothing else, and no longer writes once the
// batch ended. Without a device that case prints "SKIPPED: <why>" (ctest
// reports it as skipped); where the verbs backend was not built the whole
// file does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <vector>

#ifndef KVFERRY_HAVE_VERBS

TEST_CASE("verbs windows: not built", "[logic][verbs][security]") {
  std::cout << "SKIPPED: built without libibverbs" << std::endl;
}

#else

#include "transport/base/fence_table.hpp"
#include "transport/base/peer_auth.hpp"
#include "transport/base/posix_socket.hpp"
#include "transport/base/wire_hello.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_qp.hpp"
#include "transport/verbs/verbs_receiver.hpp"
#include "transport/verbs/verbs_regions.hpp"
#include "transport/verbs/verbs_wire.hpp"
#include "transport/verbs/window_plan.hpp"

using namespace kvferry::transport;
using namespace kvferry::transport::verbs;

namespace {

op_header op(region_id region, uint64_t offset, uint64_t length) {
  return op_header{region, 0, offset, length};
}

/// Two regions at made-up addresses: the plan only does arithmetic on them.
const std::map<region_id, region_extent> two_regions{{1, {0x10000, 4096}}, {2, {0x90000, 64}}};

}  // namespace

TEST_CASE("verbs windows: touching and overlapping ops share a window, a gap never does",
          "[logic][verbs][security]") {
  SECTION("touching ops on one region: one window, each op at its own address") {
    auto plan = plan_windows({op(1, 0, 100), op(1, 100, 28), op(1, 128, 4)}, two_regions, 8);
    REQUIRE(plan.ok());
    REQUIRE(plan->windows.size() == 1);
    CHECK(plan->windows[0].region == 1u);
    CHECK(plan->windows[0].offset == 0u);
    CHECK(plan->windows[0].length == 132u);
    CHECK(plan->windows[0].addr == 0x10000u);
    REQUIRE(plan->targets.size() == 3);
    for (auto& t : plan->targets)
      CHECK(t.window == 0u);
    CHECK(plan->targets[1].addr == 0x10000u + 100);
    CHECK(plan->targets[2].addr == 0x10000u + 128);
  }

  SECTION("overlapping and contained ops, in any order: one window over their union") {
    auto plan = plan_windows({op(1, 50, 10), op(1, 10, 45), op(1, 20, 5)}, two_regions, 8);
    REQUIRE(plan.ok());
    REQUIRE(plan->windows.size() == 1);
    CHECK(plan->windows[0].offset == 10u);
    CHECK(plan->windows[0].length == 50u);
  }

  SECTION("a one-byte gap keeps two windows") {
    auto plan = plan_windows({op(1, 0, 10), op(1, 11, 10)}, two_regions, 8);
    REQUIRE(plan.ok());
    REQUIRE(plan->windows.size() == 2);
    CHECK(plan->windows[0].length == 10u);
    CHECK(plan->windows[1].offset == 11u);
    CHECK(plan->targets[0].window == 0u);
    CHECK(plan->targets[1].window == 1u);
  }

  SECTION("regions never share a window, even at touching offsets") {
    auto plan = plan_windows({op(2, 0, 8), op(1, 0, 8), op(2, 8, 8)}, two_regions, 8);
    REQUIRE(plan.ok());
    REQUIRE(plan->windows.size() == 2);
    CHECK(plan->windows[0].region == 1u);  // by region, then offset
    CHECK(plan->windows[1].region == 2u);
    CHECK(plan->windows[1].length == 16u);
    CHECK(plan->windows[1].addr == 0x90000u);
    CHECK(plan->targets[0].window == 1u);
    CHECK(plan->targets[1].window == 0u);
    CHECK(plan->targets[2].window == 1u);
  }

  SECTION("a zero-length op gets no window and joins nothing") {
    auto plan = plan_windows({op(1, 0, 10), op(1, 10, 0), op(1, 4096, 0)}, two_regions, 8);
    REQUIRE(plan.ok());
    REQUIRE(plan->windows.size() == 1);
    CHECK(plan->windows[0].length == 10u);
    CHECK(plan->targets[1].window == op_target::no_window);
    CHECK(plan->targets[2].window == op_target::no_window);
    CHECK(plan->targets[2].addr == 0x10000u + 4096);
  }

  SECTION("a batch of only empty ops, or none, needs no window even with a cap of 0") {
    CHECK(plan_windows({op(1, 5, 0)}, two_regions, 0)->windows.empty());
    CHECK(plan_windows({}, two_regions, 0)->windows.empty());
  }
}

TEST_CASE("verbs windows: the windows cover exactly the bytes the ops name (random batches)",
          "[logic][verbs][security]") {
  std::mt19937_64 rng{20240529};
  auto pick = [&](uint64_t below) {
    return std::uniform_int_distribution<uint64_t>{0, below}(rng);
  };
  for (int round = 0; round < 20000; ++round) {
    std::map<region_id, region_extent> extents;
    auto n_regions = 1 + pick(2);
    for (region_id id = 1; id <= n_regions; ++id)
      extents[id] = region_extent{0x1000 * id + pick(7), 1 + pick(47)};
    std::vector<op_header> ops;
    for (auto n = pick(10); n > 0; --n) {
      auto id = static_cast<region_id>(1 + pick(n_regions - 1));
      auto len = extents[id].length;
      auto offset = pick(len);
      ops.push_back(op(id, offset, pick(std::min<uint64_t>(len - offset, 9))));
    }
    auto plan = plan_windows(ops, extents, UINT32_MAX);
    REQUIRE(plan.ok());
    // Byte by byte: what the ops name, and what the windows cover.
    std::map<region_id, std::vector<bool> > named, covered;
    for (auto& [id, ext] : extents) {
      named[id].assign(ext.length, false);
      covered[id].assign(ext.length, false);
    }
    for (auto& o : ops)
      for (uint64_t b = o.offset; b < o.offset + o.length; ++b)
        named[o.region][b] = true;
    for (size_t w = 0; w < plan->windows.size(); ++w) {
      auto& win = plan->windows[w];
      INFO("round " << round << ", window " << w);
      REQUIRE(win.length > 0);
      REQUIRE(win.offset + win.length <= extents[win.region].length);
      CHECK(win.addr == extents[win.region].base + win.offset);
      for (uint64_t b = win.offset; b < win.offset + win.length; ++b) {
        CHECK_FALSE(covered[win.region][b]);  // windows never overlap
        covered[win.region][b] = true;
      }
      // Sorted and never touching: touching ones would have been one.
      if (w > 0 && plan->windows[w - 1].region == win.region)
        CHECK(plan->windows[w - 1].offset + plan->windows[w - 1].length < win.offset);
    }
    INFO("round " << round);
    CHECK(named == covered);
    REQUIRE(plan->targets.size() == ops.size());
    for (size_t k = 0; k < ops.size(); ++k) {
      auto& t = plan->targets[k];
      CHECK(t.addr == extents[ops[k].region].base + ops[k].offset);
      if (ops[k].length == 0) {
        CHECK(t.window == op_target::no_window);
        continue;
      }
      REQUIRE(t.window < plan->windows.size());
      auto& win = plan->windows[t.window];
      CHECK(win.region == ops[k].region);
      CHECK(win.offset <= ops[k].offset);
      CHECK(ops[k].offset + ops[k].length <= win.offset + win.length);
    }
  }
}

TEST_CASE("verbs windows: a batch past the cap is refused, naming the numbers",
          "[logic][verbs][security]") {
  std::vector<op_header> ops;
  for (uint64_t k = 0; k < 5; ++k)
    ops.push_back(op(1, k * 100, 10));  // five separate ranges
  CHECK(plan_windows(ops, two_regions, 5).ok());
  auto refused = plan_windows(ops, two_regions, 4);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().error_code() == code::invalid_argument);
  CHECK(refused.error().message() ==
        "batch of 5 ops needs 5 memory windows (separate ranges of receiver memory), at most 4 "
        "per batch: split the batch");
  // Joined ranges count once: the same bytes in one run fit a cap of 1.
  ops.clear();
  for (uint64_t k = 0; k < 5; ++k)
    ops.push_back(op(1, k * 10, 10));
  CHECK(plan_windows(ops, two_regions, 1)->windows.size() == 1);
}

TEST_CASE("verbs windows: ops outside their region are refused, naming the values",
          "[logic][verbs][security]") {
  auto refusal = [](std::vector<op_header> ops) {
    auto plan = plan_windows(ops, two_regions, 8);
    REQUIRE_FALSE(plan.ok());
    return plan.error();
  };
  auto past = refusal({op(1, 0, 8), op(2, 56, 16)});
  CHECK(past.error_code() == code::out_of_bounds);
  CHECK(past.message() == "write of 16 B at offset 56 past receiver region 2 (64 B)");

  auto far = refusal({op(2, 65, 0)});
  CHECK(far.error_code() == code::out_of_bounds);
  CHECK(far.message() == "write of 0 B at offset 65 past receiver region 2 (64 B)");

  // No sum may wrap: an offset near 2^64 plus a small length.
  auto wraps = refusal({op(1, UINT64_MAX - 1, 4)});
  CHECK(wraps.error_code() == code::out_of_bounds);
  CHECK(wraps.message() ==
        "write of 4 B at offset 18446744073709551614 past receiver region 1 (4096 B)");

  auto unknown = refusal({op(7, 0, 1)});
  CHECK(unknown.error_code() == code::unknown_region);
  CHECK(unknown.message() == "receiver region 7 is not registered");

  auto bad_extent = plan_windows({op(3, 0, 1)}, {{3, {UINT64_MAX - 4, 16}}}, 8);
  REQUIRE_FALSE(bad_extent.ok());
  CHECK(bad_extent.error().message() ==
        "receiver region 3 of 16 B at address 18446744073709551611 wraps around the address "
        "space");
}

TEST_CASE("verbs windows: a window's rkeys rotate its 8-bit key and never repeat",
          "[logic][verbs][security]") {
  CHECK(next_window_rkey(0x12345600, 0x12345600) == 0x12345601u);
  CHECK(next_window_rkey(0x123456FF, 0x12345610) == 0x12345600u);  // the key wraps, index stays
  const uint32_t first = 0xABCDEF07;
  std::set<uint32_t> told;
  uint32_t rkey = first;
  for (;;) {
    auto next = next_window_rkey(rkey, first);
    if (!next)
      break;
    CHECK((*next & 0xFFFFFF00u) == (first & 0xFFFFFF00u));
    CHECK(told.insert(*next).second);
    rkey = *next;
  }
  // Every key but the one it was allocated with, once each; then retire.
  CHECK(told.size() == 255);
  CHECK(told.count(first) == 0);
  CHECK(rkey == 0xABCDEF06u);
}

// -- the real bind / write / invalidate path ---------------------------------

namespace {

/// Why the device case cannot run here, or empty where it can.
std::string device_skip_reason(std::shared_ptr<device>& dev) {
  auto devices = rdma_devices();
  if (!devices.ok())
    return devices.error().message();
  auto opened = open_device("", 1, 0);
  if (!opened.ok())
    return opened.error().message();
  dev = std::move(opened).value();
  if (!dev->memory_windows)
    return "device " + dev->name + " has no type-2B memory windows";
  return {};
}

/// A sender speaking the verbs side channel by hand, so that it can write
/// with any rkey at any address, granted or not.
struct raw_sender {
  std::shared_ptr<device> dev;
  ibv_cq* cq = nullptr;
  qp_ptr qp;
  socket_fd fd;
  std::vector<std::byte> src = std::vector<std::byte>(4096, std::byte{0x5A});
  ibv_mr* mr = nullptr;

  raw_sender(std::shared_ptr<device> d, const verbs_receiver& rx) : dev(std::move(d)) {
    cq = ::ibv_create_cq(dev->context, 64, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    auto made = make_rc_qp(*dev, cq, 16, 1);
    REQUIRE(made.ok());
    qp = std::move(made).value();
    mr = ::ibv_reg_mr(dev->pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr != nullptr);
    auto connected = connect_to(host_port{"127.0.0.1", rx.port()}, 5000);
    REQUIRE(connected.ok());
    fd = std::move(connected).value();
    hello h;
    h.qp = local_info(*dev, *qp);
    REQUIRE(
        introduce(fd.get(), h, sender_identity{"verbs://raw-sender:1", "", rx.endpoint()}, max_name)
            .ok());
    hello reply;
    REQUIRE(read_exact(fd.get(), &reply, sizeof(reply)).ok());
    REQUIRE(reply.version == wire_version);
    REQUIRE(connect_qp(*dev, *qp, h.qp, reply.qp).ok());
  }

  ~raw_sender() {
    qp.reset();
    ::ibv_dereg_mr(mr);
    ::ibv_destroy_cq(cq);
  }

  /// Begins batch `seq` of `ops`; the receiver's op grants (empty if refused).
  std::vector<op_grant> begin(uint64_t seq, std::vector<op_header> ops) {
    frame f;
    f.magic = begin_magic;
    f.seq = seq;
    f.n_ops = static_cast<uint32_t>(ops.size());
    std::vector<iovec> iov{{&f, sizeof(f)}, {ops.data(), ops.size() * sizeof(op_header)}};
    REQUIRE(write_all(fd.get(), iov).ok());
    return read_reply(reply_magic, seq);
  }

  /// Ends batch `seq` and waits until the receiver released it.
  void end(uint64_t seq) {
    frame f;
    f.magic = end_magic;
    f.seq = seq;
    std::vector<iovec> iov{{&f, sizeof(f)}};
    REQUIRE(write_all(fd.get(), iov).ok());
    read_reply(released_magic, seq);
  }

  std::vector<op_grant> read_reply(uint32_t magic, uint64_t seq) {
    reply v;
    REQUIRE(read_exact(fd.get(), &v, sizeof(v)).ok());
    REQUIRE(v.magic == magic);
    REQUIRE(v.seq == seq);
    REQUIRE(v.message_len <= max_reply_message);
    REQUIRE(v.n_regions <= max_ops_per_batch);
    std::string message(v.message_len, '\0');
    std::vector<op_grant> grants(v.n_regions);
    REQUIRE(read_exact(fd.get(), message.data(), message.size()).ok());
    REQUIRE(read_exact(fd.get(), grants.data(), grants.size() * sizeof(op_grant)).ok());
    INFO(message);
    CHECK(v.code == 0);
    return grants;
  }

  /// RDMA WRITE of `length` bytes to `addr` with `rkey`: its completion status.
  ibv_wc_status write(uint64_t addr, uint32_t rkey, uint32_t length) {
    ibv_sge sge{reinterpret_cast<uint64_t>(src.data()), length, mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(::ibv_post_send(qp.get(), &wr, &bad) == 0);
    ibv_wc wc{};
    for (int spins = 0; spins < 100000000; ++spins)
      if (::ibv_poll_cq(cq, 1, &wc) == 1)
        return wc.status;
    FAIL("no completion for an RDMA WRITE");
    return IBV_WC_GENERAL_ERR;
  }
};

}  // namespace

TEST_CASE(
    "verbs windows: a window writes its granted bytes, nothing else, and only while "
    "its batch lasts",
    "[verbs][security][device]") {
  std::shared_ptr<device> dev;
  if (auto why = device_skip_reason(dev); !why.empty()) {
    std::cout << "SKIPPED: " << why << std::endl;
    return;
  }
  verbs_regions regions{dev, true};
  fence_table fences{true};
  peer_key key{false};
  std::vector<std::byte> dst(1 << 16);
  auto dst_id = regions.add(dst.data(), dst.size());
  REQUIRE(dst_id.ok());
  auto rx = verbs_receiver::start(dev, "127.0.0.1", 0, regions, fences, key, {64, 1024});
  REQUIRE(rx.ok());
  auto base = reinterpret_cast<uint64_t>(dst.data());

  SECTION("granted bytes land; after the batch ends the stale rkey is refused") {
    raw_sender s{dev, **rx};
    auto grants = s.begin(1, {op(*dst_id, 4096, 1024)});
    REQUIRE(grants.size() == 1);
    CHECK(grants[0].addr == base + 4096);
    CHECK(s.write(grants[0].addr, grants[0].rkey, 1024) == IBV_WC_SUCCESS);
    CHECK(dst[4096] == std::byte{0x5A});
    CHECK(dst[4096 + 1023] == std::byte{0x5A});
    CHECK(dst[4096 + 1024] == std::byte{0});
    s.end(1);
    CHECK(s.write(grants[0].addr, grants[0].rkey, 16) == IBV_WC_REM_ACCESS_ERR);
  }

  SECTION("a write past the window, inside the region, is refused") {
    raw_sender s{dev, **rx};
    auto grants = s.begin(1, {op(*dst_id, 4096, 1024)});
    REQUIRE(grants.size() == 1);
    CHECK(s.write(grants[0].addr + 1024, grants[0].rkey, 16) == IBV_WC_REM_ACCESS_ERR);
    CHECK(dst[4096 + 1024] == std::byte{0});
  }

  SECTION("the region's own rkey grants nothing") {
    raw_sender s{dev, **rx};
    auto whole = regions.find(*dst_id, 0, dst.size(), "receiver");
    REQUIRE(whole.ok());
    auto grants = s.begin(1, {op(*dst_id, 0, 64)});
    REQUIRE(grants.size() == 1);
    CHECK(s.write(base, whole->rkey, 64) == IBV_WC_REM_ACCESS_ERR);
  }
}

#endif  // KVFERRY_HAVE_VERBS
