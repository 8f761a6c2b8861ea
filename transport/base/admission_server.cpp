#include "transport/base/admission_server.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <deque>

#include "transport/base/posix_socket.hpp"

namespace kvferry::transport::admission {

namespace {

/// A batch the sender may be writing: what it holds busy here.
struct admitted_batch {
  uint64_t seq;
  uint64_t fence;
  std::vector<region_id> regions;
};

}  // namespace

status send_reply(int fd, uint32_t magic, uint64_t seq, const status& st, const void* records,
                  uint32_t n_records, size_t record_size) {
  reply v;
  v.magic = magic;
  v.seq = seq;
  v.code = static_cast<uint8_t>(st.error_code());
  auto msg = st.message().substr(0, max_reply_message);
  v.message_len = static_cast<uint32_t>(msg.size());
  v.n_regions = n_records;
  std::vector<iovec> iov{{&v, sizeof(v)},
                         {msg.data(), msg.size()},
                         {const_cast<void*>(records), size_t{n_records} * record_size}};
  return write_all(fd, iov);
}

void serve(int fd, fence_table& fences, const std::string& sender, const backend_part& part) {
  std::deque<admitted_batch> admitted;
  std::vector<op_header> ops;
  // What the batch held goes before its fence opens: verbs invalidates the
  // batch's memory windows in unpin, so a fence reported closed has no
  // window left that writes into it.
  auto release = [&](admitted_batch& b) {
    part.unpin(b.regions);
    fences.leave(b.fence);
  };
  auto muted = [&] { return part.muted != nullptr && part.muted->load(); };
  for (;;) {
    frame f;
    if (!read_exact(fd, &f, sizeof(f)).ok())
      break;
    if (f.magic == part.wire.end) {
      // Ends come in begin order; anything else means the peer lost track.
      if (admitted.empty() || admitted.front().seq != f.seq)
        break;
      release(admitted.front());
      admitted.pop_front();
      if (muted())
        continue;  // the peer reads end-of-stream instead
      if (!send_reply(fd, part.wire.released, f.seq, {}).ok())
        break;
      continue;
    }
    if (f.magic != part.wire.begin || f.n_ops > max_ops_per_batch ||
        !read_items(fd, ops, f.n_ops).ok())
      break;
    if (muted())
      continue;  // the peer reads end-of-stream instead of a reply
    admitted_batch batch{f.seq, f.fence, {}};
    status reply_status = fences.enter(f.fence, sender, ops);
    if (reply_status.ok()) {
      for (auto& op : ops)
        if (std::find(batch.regions.begin(), batch.regions.end(), op.region) == batch.regions.end())
          batch.regions.push_back(op.region);
      reply_status = part.check(begun_batch{ops, batch.regions});
      if (reply_status.ok())
        admitted.push_back(std::move(batch));
      else
        fences.leave(f.fence);
    }
    if (!part.answer(f.seq, reply_status).ok())
      break;
  }
  part.quiesce();
  for (auto& b : admitted)
    release(b);
}

}  // namespace kvferry::transport::admission
