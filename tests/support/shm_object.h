// ShmObject: a POSIX shared-memory object a test creates as a client would (shm_open), mapped
// for the test to fill and read, and unlinked when it goes. Names are unique per process.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace packrat::testing {

class ShmObject {
 public:
  explicit ShmObject(size_t size) : size_(size) {
    static std::atomic<int> next{0};
    key_ = "/pkrt-test-" + std::to_string(getpid()) + "-" + std::to_string(next++);
    fd_ = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      throw std::runtime_error("cannot create " + key_ + ": " + std::strerror(errno));
    }
    void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED) throw std::runtime_error("cannot map " + key_);
    data_ = static_cast<uint8_t*>(map);
  }
  ~ShmObject() {
    munmap(data_, size_);
    close(fd_);
    shm_unlink(key_.c_str());
  }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;

  const std::string& key() const { return key_; }
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }
  // Shrinks the object as a careless client might (the test's own mapping is unchanged).
  void Truncate(size_t size) {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) throw std::runtime_error("ftruncate");
  }

 private:
  std::string key_;
  int fd_ = -1;
  size_t size_;
  uint8_t* data_ = nullptr;
};

}  // namespace packrat::testing
