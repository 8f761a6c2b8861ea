#include "apps/bench/kv_traffic.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "actors/facade/runtime.hpp"
#include "actors/plan/planner.hpp"
#include "transport/base/posix_socket.hpp"

namespace kvferry::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double gbps(uint64_t bytes, clock_type::time_point t0) {
  return static_cast<double>(bytes) /
         std::chrono::duration<double>(clock_type::now() - t0).count() / 1e9;
}

/// The plan of one KV-shaped batch: `chunk` random pages of src into `chunk`
/// random pages of dst.
transport::write_batch random_batch(const kv_layout& src, const kv_layout& dst, uint32_t chunk,
                                    std::vector<uint32_t>& sp, std::vector<uint32_t>& dp,
                                    std::mt19937& rng) {
  std::shuffle(sp.begin(), sp.end(), rng);
  std::shuffle(dp.begin(), dp.end(), rng);
  auto plan = plan_kv(src, dst, std::span{sp.data(), chunk}, std::span{dp.data(), chunk});
  if (!plan.ok())
    throw std::runtime_error(plan.error().to_string());
  return transport::write_batch{0, std::move(plan->ops)};
}

}  // namespace

apps::model_shape bandwidth_shape() {
  return apps::llama_7b();
}

kv_layout registered_layout(const apps::host_pool& pool) {
  std::vector<uint32_t> ids(pool.buffers());
  std::iota(ids.begin(), ids.end(), 1u);
  return *layout_of(pool.describe(), ids);
}

void register_pool(transport::transport& net, const apps::host_pool& pool) {
  for (uint32_t b = 0; b < pool.buffers(); ++b) {
    auto id = net.register_region(pool.page(b, 0), pool.item_len() * pool.pages());
    if (!id.ok())
      throw std::runtime_error("registering buffer " + std::to_string(b) + ": " +
                               id.error().to_string());
  }
}

std::string self_exe() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    throw std::runtime_error("cannot find my own executable");
  return std::string(buf, static_cast<size_t>(n));
}

void wait_for_parent() {
  char c;
  while (::read(0, &c, 1) > 0)
    ;
}

transport::completion_handler round_counter::handler() {
  return [this](transport::completion c) {
    std::lock_guard g{mu};
    ++done;
    if (!c.result.ok() && failed++ == 0)
      first_error = c.result.to_string();
    cv.notify_all();
  };
}

double transport_round(transport::transport& net, transport::peer_id peer, const kv_layout& src,
                       const kv_layout& dst, uint64_t bytes, uint32_t chunk, uint32_t window,
                       std::mt19937& rng, round_counter& rc, uint64_t& writes, uint64_t fence) {
  std::vector<uint32_t> sp(src.page_capacity()), dp(dst.page_capacity());
  std::iota(sp.begin(), sp.end(), 0u);
  std::iota(dp.begin(), dp.end(), 0u);
  auto per_batch = uint64_t{chunk} * src.kv_buffers.size() * src.kv_buffers[0].item_len;
  auto batches = std::max<uint64_t>(1, bytes / per_batch);
  {
    std::lock_guard g{rc.mu};
    rc.done = 0;
  }
  auto t0 = clock_type::now();
  for (uint64_t b = 0; b < batches; ++b) {
    auto batch = random_batch(src, dst, chunk, sp, dp, rng);
    batch.cookie = b;
    batch.fence = fence;
    writes += batch.ops.size();
    {
      std::unique_lock g{rc.mu};
      rc.cv.wait(g, [&] { return b - rc.done < window; });
    }
    if (auto st = net.post(peer, std::move(batch)); !st.ok())
      throw std::runtime_error(st.to_string());
  }
  std::unique_lock g{rc.mu};
  rc.cv.wait(g, [&] { return rc.done == batches; });
  auto rate = gbps(batches * per_batch, t0);
  if (rc.failed > 0)
    throw std::runtime_error("transport round failed: " + rc.first_error);
  return rate;
}

double memcpy_round(const apps::host_pool& src_pool, const apps::host_pool& dst_pool,
                    const kv_layout& src, const kv_layout& dst, uint64_t bytes, uint32_t chunk,
                    std::mt19937& rng) {
  std::vector<uint32_t> sp(src.page_capacity()), dp(dst.page_capacity());
  std::iota(sp.begin(), sp.end(), 0u);
  std::iota(dp.begin(), dp.end(), 0u);
  auto per_batch = uint64_t{chunk} * src.kv_buffers.size() * src.kv_buffers[0].item_len;
  auto batches = std::max<uint64_t>(1, bytes / per_batch);
  std::vector<transport::write_batch> plans;
  // Planned outside the clock (as the transport's caller plans before post).
  for (uint64_t b = 0; b < batches; ++b)
    plans.push_back(random_batch(src, dst, chunk, sp, dp, rng));
  auto t0 = clock_type::now();
  for (auto& batch : plans)
    for (auto& op : batch.ops)
      std::memcpy(dst_pool.page(op.remote - 1, 0) + op.remote_offset,
                  src_pool.page(op.local - 1, 0) + op.local_offset, op.length);
  return gbps(batches * per_batch, t0);
}

void raw_sink(int fd, const apps::host_pool& pool) {
  uint64_t want = 0;
  size_t buffer = 0, offset = 0;
  auto region_bytes = pool.item_len() * pool.pages();
  while (transport::read_exact(fd, &want, sizeof(want)).ok()) {
    while (want > 0) {
      auto len = std::min<uint64_t>({want, 1 << 20, region_bytes - offset});
      if (!transport::read_exact(fd, pool.page(buffer, 0) + offset, len).ok())
        return;
      want -= len;
      offset += len;
      if (offset == region_bytes) {
        offset = 0;
        buffer = (buffer + 1) % pool.buffers();
      }
    }
    char ack = 1;
    if (::send(fd, &ack, 1, MSG_NOSIGNAL) != 1)
      return;
  }
}

double raw_round(int fd, const apps::host_pool& pool, uint64_t bytes, uint64_t chunk) {
  auto t0 = clock_type::now();
  if (::send(fd, &bytes, sizeof(bytes), MSG_NOSIGNAL) != sizeof(bytes))
    throw std::runtime_error("raw baseline: send failed");
  size_t buffer = 0, offset = 0;
  auto region_bytes = pool.item_len() * pool.pages();
  uint64_t left = bytes;
  while (left > 0) {
    auto len = std::min<uint64_t>({left, chunk, region_bytes - offset});
    std::vector<iovec> iov{{pool.page(buffer, 0) + offset, len}};
    if (!transport::write_all(fd, iov).ok())
      throw std::runtime_error("raw baseline: write failed");
    left -= len;
    offset += len;
    if (offset == region_bytes) {
      offset = 0;
      buffer = (buffer + 1) % pool.buffers();
    }
  }
  char ack;
  if (!transport::read_exact(fd, &ack, 1).ok())
    throw std::runtime_error("raw baseline: no ack");
  return gbps(bytes, t0);
}

}  // namespace kvferry::bench
