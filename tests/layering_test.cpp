// Reads every #include of the tree and names the file that crosses a line of
// the design card: messages/ knows only std and CAF; transport/ knows no CAF
// and nothing of messages/ or actors/; inside transport/, the interface at its
// top includes only itself, base/ (what every backend builds on) the
// interface and itself, and a backend those two and itself, never a sibling;
// actors/ uses the transport only through the interface headers listed below,
// and its folders include each other only as the table below says; nothing
// but tests/ includes tests/.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct include {
  std::string file;
  int line;
  std::string target;
  bool angled;
};

std::vector<include> includes_under(const fs::path& root, const std::string& folder) {
  std::vector<include> out;
  std::regex inc{R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])"};
  for (auto& e : fs::recursive_directory_iterator(root / folder)) {
    if (!e.is_regular_file())
      continue;
    auto ext = e.path().extension().string();
    if (ext != ".hpp" && ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh")
      continue;
    std::ifstream in{e.path()};
    std::string text;
    int n = 0;
    while (std::getline(in, text)) {
      ++n;
      std::smatch m;
      if (std::regex_search(text, m, inc))
        out.push_back({fs::relative(e.path(), root).string(), n, m[2], m[1] == "<"});
    }
  }
  return out;
}

bool starts(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string where(const include& i) {
  return i.file + ":" + std::to_string(i.line) + " includes " + i.target;
}

}  // namespace

TEST_CASE("every #include respects the layering", "[layering]") {
  fs::path root{KVFERRY_SOURCE_DIR};
  std::vector<std::string> crossings;

  for (auto& i : includes_under(root, "messages"))
    if (starts(i.target, "transport/") || starts(i.target, "actors/") ||
        starts(i.target, "apps/") || starts(i.target, "tests/") || starts(i.target, "spdlog"))
      crossings.push_back(where(i) + " (messages/ knows std and CAF only)");

  // The transport's interface: the headers at the top of transport/, the only
  // ones of transport/ that actors/ may include. What backends build on lives
  // in transport/base/, each backend in a folder of its own.
  static const std::set<std::string> transport_interface{
      "transport/device_memory.hpp",    // memory_kind, device_copier
      "transport/device_registry.hpp",  // device copiers by name
      "transport/grant.hpp",            // what a fence admits
      "transport/options.hpp",          // what every backend is made with
      "transport/region.hpp",           // region_id
      "transport/registry.hpp",         // backends by name
      "transport/segment_copy.hpp",     // gather and scatter lists, the CPU copy
      "transport/shared_memory.hpp",    // memory another process can map
      "transport/status.hpp",           // status, result<T>
      "transport/transport.hpp",        // the interface and its caps
      "transport/write_op.hpp",         // write_op, write_batch, completion
  };
  for (auto& e : fs::directory_iterator(root / "transport")) {
    auto name = "transport/" + e.path().filename().string();
    if (e.path().extension() == ".hpp" && !transport_interface.contains(name))
      crossings.push_back(name +
                          " (a header at the top of transport/ is interface: list it in "
                          "layering_test's transport_interface, or move it to base/)");
  }

  for (auto& i : includes_under(root, "transport")) {
    if (starts(i.target, "caf/") || starts(i.target, "messages/") || starts(i.target, "actors/") ||
        starts(i.target, "apps/") || starts(i.target, "tests/"))
      crossings.push_back(where(i) + " (transport/ knows no CAF, messages/ or actors/)");
    if (!starts(i.target, "transport/"))
      continue;
    // Folders as "transport", "transport/base", "transport/tcp", ...
    auto from = fs::path{i.file}.parent_path().string();
    auto to = fs::path{i.target}.parent_path().string();
    bool header = fs::path{i.file}.extension() == ".hpp";
    // The two registries are the places that name backends and device copiers.
    bool names_backends =
        i.file == "transport/registry.cpp" || i.file == "transport/device_registry.cpp";
    if (from == "transport") {
      if (header && !transport_interface.contains(i.target))
        crossings.push_back(where(i) + " (an interface header includes only the interface)");
      else if (!header && !names_backends && to != "transport" && to != "transport/base")
        crossings.push_back(where(i) + " (only the registries name a backend)");
    } else if (from == "transport/base") {
      if (to != "transport" && to != "transport/base")
        crossings.push_back(where(i) + " (base/ builds on the interface, never on a backend)");
    } else if (to != "transport" && to != "transport/base" && to != from) {
      crossings.push_back(where(i) + " (a backend never includes a sibling backend)");
    }
    // The registries name the backends; nothing below them names a registry
    // back (auto gets its tcp and shm made, it does not make them).
    if (from != "transport" &&
        (i.target == "transport/registry.hpp" || i.target == "transport/device_registry.hpp"))
      crossings.push_back(where(i) + " (a backend or base/ never calls back into a registry)");
  }

  for (auto& i : includes_under(root, "actors")) {
    if (starts(i.target, "apps/") || starts(i.target, "tests/"))
      crossings.push_back(where(i) + " (actors/ knows messages/, transport/ and CAF)");
    if (starts(i.target, "transport/") && !transport_interface.contains(i.target))
      crossings.push_back(where(i) +
                          " (actors/ uses the transport through its interface headers only)");
  }

  // Inside actors/: which folder may include which (besides itself,
  // messages/ and the transport interface).
  // Shared vocabulary lives in common/; rank/ is no one's utility folder.
  static const std::map<std::string, std::set<std::string>> may_include{
      {"base", {}},  // what every actor uses: log, JSON log, handler guard, sender checks
      {"common", {}},
      {"metrics", {}},
      {"plan", {}},
      // the process as a whole: its config, TLS files, life tokens, CAF port guard
      {"process", {"base", "common", "metrics"}},
      {"gateway", {"base", "process"}},  // + publishing and lookup through it (tls, remote_lookup)
      {"bootstrap", {"base", "gateway", "process"}},
      {"decision", {"base", "common", "gateway", "metrics", "process"}},
      {"rank", {"base", "common", "gateway", "metrics", "plan"}},
      {"staging", {"base", "common", "metrics", "plan"}},
      {"transfer", {"base", "common", "metrics", "plan", "staging"}},
      {"facade",
       {"base", "common", "decision", "gateway", "metrics", "plan", "process", "rank", "staging",
        "transfer"}},
  };
  // Every source of actors/ lives in a folder of the table (issue 33: the
  // process's plumbing once lay loose at the top).
  for (auto& e : fs::directory_iterator(root / "actors"))
    if (e.is_regular_file() && e.path().extension() != ".txt")
      crossings.push_back(e.path().string() +
                          " (a file at the top of actors/; put it in a folder)");
  for (auto& i : includes_under(root, "actors")) {
    if (!starts(i.target, "actors/"))
      continue;
    auto folder_of = [](const fs::path& p) {
      auto parent = p.parent_path();  // actors or actors/<folder>
      return parent == "actors" ? std::string{} : parent.filename().string();
    };
    auto from = folder_of(i.file);
    auto to = folder_of(i.target);
    if (to.empty() || to == from)
      continue;
    auto allowed = may_include.find(from);
    if (allowed == may_include.end())
      crossings.push_back(where(i) + " (actors/" + from +
                          "/ is not in layering_test's table of actor folders)");
    else if (!allowed->second.contains(to))
      crossings.push_back(where(i) + " (actors/" + (from.empty() ? "" : from + "/") +
                          " may not include actors/" + to + "/)");
  }

  for (auto& i : includes_under(root, "apps"))
    if (starts(i.target, "tests/"))
      crossings.push_back(where(i) + " (apps/ never includes tests/)");

  INFO("crossings:\n"
       << [&] {
            std::string s;
            for (auto& c : crossings)
              s += "  " + c + "\n";
            return s;
          }());
  CHECK(crossings.empty());
}
