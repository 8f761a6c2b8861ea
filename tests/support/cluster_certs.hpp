// Certificates for the tests that run a cluster under [tls]: a private
// temporary directory, and deploy/make-certs.sh run on a cluster file into
// it. The tests skip, saying why, where the openssl command is missing.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>

#include <catch2/catch.hpp>

#include "actors/process/tls_files.hpp"
#include "apps/common/child_process.hpp"

namespace kvferry::test {

/// A private directory, removed with what is in it.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    char name[] = "/tmp/kvferry-tls-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline bool on_path(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

/// True (and says it skips) when the openssl command is missing.
inline bool openssl_missing() {
  if (on_path("openssl"))
    return false;
  std::cout << "SKIPPED: openssl is not on PATH (make-certs.sh needs the openssl command)"
            << std::endl;
  return true;
}

/// Runs `make_certs` (deploy/make-certs.sh) on cluster file `file` into
/// dir/certs; false (and its output) when it fails.
inline std::pair<bool, std::string> certs_for(const std::string& make_certs,
                                              const std::filesystem::path& file,
                                              const std::filesystem::path& dir) {
  apps::child_process mk{
      {"/bin/bash", make_certs, file.string(), (dir / "certs").string(), "--days", "2"}};
  int rc = mk.wait(std::chrono::seconds{60});
  return {rc == 0, mk.output()};
}

/// The files of identity `name` (a node, or "ctl") in `certs`.
inline tls_files identity_in(const std::filesystem::path& certs, const std::string& name) {
  return tls_files{(certs / (name + ".pem")).string(),
                   (certs / (name + ".key")).string(),
                   (certs / "ca.pem").string(),
                   {}};
}

}  // namespace kvferry::test
