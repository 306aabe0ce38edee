// A fresh directory under /tmp for one test, removed with everything in it when the object
// goes away. Declare it before members that use files in it, so it is destroyed after them.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace packrat::testing {

class TempDir {
 public:
  // Creates /tmp/<prefix>-XXXXXX; throws if it cannot (a broken test machine).
  explicit TempDir(const std::string& prefix = "packrat") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace packrat::testing
