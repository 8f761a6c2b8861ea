// A workaround for a CAF 0.17 bug that lets one bad TLS peer cut every other
// TLS connection of the process.
//
// OpenSSL keeps a per-thread error queue, and SSL_get_error() reports
// SSL_ERROR_SSL whenever that queue holds anything, whichever session put it
// there. libcaf_openssl drains the queue only inside CAF_LOG_INFO, which
// Debian's build compiles out. So after one failed handshake (a stranger's
// garbage, a peer of another CA) the errors stay queued, and the next
// SSL_read on a healthy connection in the same multiplexer thread that
// returns "want read" is taken for a failure: CAF closes it, and every actor
// across it reads down (remote_link_unreachable). tls_test caught it.
//
// OpenSSL's own rule is that the queue must be empty before an I/O call. The
// four calls CAF makes are defined here, in the executable: libcaf_openssl
// binds to these (an executable's definitions come first in the dynamic
// linker's scope, and ld exports the ones a shared library refers to), and
// each clears the calling thread's queue and calls OpenSSL's own.
#include <dlfcn.h>
#include <errno.h>

#include <cstddef>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace kvferry::detail {

bool caf_port_tracked(int fd);                                      // caf_port_guard.cpp
bool caf_port_bytes(int fd, const void* data, size_t n, bool tls);  // caf_port_guard.cpp

}  // namespace kvferry::detail

namespace {

template <class Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto real = next_definition<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  int got = real(ssl, buf, num);
  // A connection of a guarded CAF port (actors/process/caf_port_guard.hpp):
  // its frames are read as CAF gets them, decrypted; a refused one fails
  // CAF's read, and CAF closes it.
  if (got > 0) {
    int fd = SSL_get_fd(ssl);
    if (kvferry::detail::caf_port_tracked(fd) &&
        !kvferry::detail::caf_port_bytes(fd, buf, static_cast<size_t>(got), true)) {
      ERR_clear_error();
      errno = ECONNRESET;
      return -1;
    }
  }
  return got;
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto real = next_definition<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static auto real = next_definition<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return real(ssl);
}

int SSL_connect(SSL* ssl) {
  static auto real = next_definition<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

}  // extern "C"

namespace kvferry::detail {

/// True when libcaf_openssl calls the definitions above (the process's
/// SSL_read is this file's).
bool openssl_error_queue_guarded() {
  return ::dlsym(RTLD_DEFAULT, "SSL_read") == reinterpret_cast<void*>(&SSL_read);
}

}  // namespace kvferry::detail
