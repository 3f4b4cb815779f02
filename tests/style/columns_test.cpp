// The formatter's column limit (.clang-format: ColumnLimit 120) as a check: no line of Quorum's C++
// sources and tests is longer, except inside raw string literals (program text a reproducer writer
// emits, kept as the generated program has it). `clang-format -i --lines=N:N FILE` reflows one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace quorum {
namespace {

namespace fs = std::filesystem;

constexpr size_t kColumnLimit = 120;

// Lines longer than the limit in `path`, outside raw string literals ("file:line (n columns)").
std::vector<std::string> long_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line, raw_end;  // raw_end: the ")delim\"" closing the raw string we are in
  static const std::regex raw_open(R"re(R"([^(\s]{0,16})\()re");
  for (int number = 1; std::getline(in, line); ++number) {
    size_t from = 0;
    bool inside_at_start = !raw_end.empty();
    bool any_outside = !inside_at_start;
    while (true) {
      if (!raw_end.empty()) {
        const size_t e = line.find(raw_end, from);
        if (e == std::string::npos) break;
        from = e + raw_end.size();
        raw_end.clear();
        any_outside = true;
        continue;
      }
      std::smatch m;
      const std::string rest = line.substr(from);
      if (!std::regex_search(rest, m, raw_open)) break;
      raw_end = ")" + m[1].str() + "\"";
      from += static_cast<size_t>(m.position(0) + m.length(0));
    }
    // A line that starts inside a raw string and ends it is the string's text up to its end.
    if (line.size() > kColumnLimit && any_outside && !inside_at_start)
      out.push_back(path.string() + ":" + std::to_string(number) + " (" + std::to_string(line.size()) + " columns)");
  }
  return out;
}

TEST(Style, NoSourceLineExceedsTheColumnLimit) {
  std::vector<std::string> bad;
  size_t files = 0;
  for (const char* top : {"src", "tests", "bench", "fuzz"}) {
    const fs::path dir = fs::path(QUORUM_SOURCE_DIR) / top;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      ++files;
      for (auto& l : long_lines(e.path())) bad.push_back(std::move(l));
    }
  }
  EXPECT_GT(files, 100u);
  std::string list;
  for (size_t i = 0; i < bad.size() && i < 40; ++i) list += "\n  " + bad[i];
  EXPECT_TRUE(bad.empty()) << bad.size() << " lines longer than " << kColumnLimit << " columns:" << list;
}

TEST(Style, RawStringTextDoesNotCount) {
  const fs::path p = fs::temp_directory_path() / "quorum_columns_probe.cpp";
  {
    std::ofstream o(p);
    o << "const char* k = R\"CPP(\n" << std::string(130, 'x') << "\n)CPP\";\n" << "int x; //" << std::string(130, 'y')
      << "\n";
  }
  const auto bad = long_lines(p);
  fs::remove(p);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find(":4 "), std::string::npos) << bad[0];
}

}  // namespace
}  // namespace quorum
