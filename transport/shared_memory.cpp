#include "transport/shared_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

namespace kvferry::transport {

namespace {

struct mapping_entry {
  uint64_t length;
  int fd;
};

/// Every live shared_memory of the process, by base address.
class shared_index {
 public:
  static shared_index& instance() {
    static shared_index index;
    return index;
  }

  void add(const std::byte* base, uint64_t length, int fd) {
    std::lock_guard guard{mu_};
    entries_[reinterpret_cast<uintptr_t>(base)] = {length, fd};
  }

  void remove(const std::byte* base) {
    std::lock_guard guard{mu_};
    entries_.erase(reinterpret_cast<uintptr_t>(base));
  }

  std::optional<shared_backing> find(uintptr_t addr, uint64_t length) {
    std::lock_guard guard{mu_};
    auto i = entries_.upper_bound(addr);
    if (i == entries_.begin())
      return std::nullopt;
    --i;
    auto offset = addr - i->first;
    // Written so that nothing overflows: offset <= len and length <= len - offset.
    if (offset > i->second.length || length > i->second.length - offset)
      return std::nullopt;
    return shared_backing{i->second.fd, offset};
  }

 private:
  std::mutex mu_;
  std::map<uintptr_t, mapping_entry> entries_;
};

}  // namespace

uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

namespace {

constexpr uint64_t huge_page = uint64_t{2} << 20;

/// A memfd of at least `bytes`, sized to whole pages (2 MiB ones with
/// `huge`) and sealed at that size: a peer that maps it can trust it never
/// shrinks under its copies (a shrunk file would fault them with SIGBUS).
/// The fd (or -errno) and the size.
std::pair<int, uint64_t> make_memfd(uint64_t bytes, const char* name, bool huge) {
  auto page = huge ? huge_page : page_size();
  if (bytes > UINT64_MAX - page)
    return {-EOVERFLOW, 0};
  auto mapped = (bytes + page - 1) / page * page;
  int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0));
  if (fd < 0)
    return {-errno, 0};
  if (::ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    auto err = errno;
    ::close(fd);
    return {-err, 0};
  }
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  return {fd, mapped};
}

}  // namespace

result<shared_memory> shared_memory::allocate(uint64_t bytes, const char* name) {
  if (bytes == 0)
    return status::invalid_argument("shared memory of 0 B, expected a length above 0");
  if (bytes > UINT64_MAX - huge_page)
    return status::invalid_argument("shared memory of " + std::to_string(bytes) +
                                    " B overflows when rounded to pages");
  // Huge pages where the system reserved them (vm.nr_hugepages): 512 times
  // fewer page-table entries to fill now and to tear down when the process
  // dies (about 100 ms per GiB of 4 KiB pages), nothing else changes. Where
  // none are reserved the mapping fails at once and 4 KiB pages are used.
  // (A smaller piece stays on 4 KiB pages: a huge page for it would waste
  // most of one.)
  auto [fd, mapped] =
      bytes >= huge_page ? make_memfd(bytes, name, true) : std::pair<int, uint64_t>{-1, 0};
  void* p = MAP_FAILED;
  if (fd >= 0) {
    p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
      ::close(fd);
  }
  if (p == MAP_FAILED) {
    std::tie(fd, mapped) = make_memfd(bytes, name, false);
    if (fd < 0)
      return status::io_error(std::string{"memfd_create: "} + std::strerror(-fd));
    p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      auto err = errno;
      ::close(fd);
      return status::io_error("mmap of a " + std::to_string(mapped) +
                              " B memfd: " + std::strerror(err));
    }
    ::madvise(p, mapped, MADV_HUGEPAGE);  // honoured where shmem THP is "advise"
    std::memset(p, 0, mapped);            // pre-fault
  }
  shared_memory m;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = bytes;
  m.mapped_ = mapped;
  m.fd_ = fd;
  shared_index::instance().add(m.data_, m.mapped_, fd);
  return m;
}

shared_memory::shared_memory(shared_memory&& other) noexcept
    : data_(other.data_), size_(other.size_), mapped_(other.mapped_), fd_(other.fd_) {
  other.data_ = nullptr;
  other.size_ = other.mapped_ = 0;
  other.fd_ = -1;
}

shared_memory& shared_memory::operator=(shared_memory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    fd_ = other.fd_;
    other.data_ = nullptr;
    other.size_ = other.mapped_ = 0;
    other.fd_ = -1;
  }
  return *this;
}

shared_memory::~shared_memory() {
  release();
}

void shared_memory::release() {
  if (data_) {
    shared_index::instance().remove(data_);
    ::munmap(data_, mapped_);
    ::close(fd_);
  }
  data_ = nullptr;
  fd_ = -1;
}

std::optional<shared_backing> find_shared_backing(const void* base, uint64_t length) {
  auto addr = reinterpret_cast<uintptr_t>(base);
  if (base == nullptr || addr + length < addr)
    return std::nullopt;
  return shared_index::instance().find(addr, length);
}

}  // namespace kvferry::transport
