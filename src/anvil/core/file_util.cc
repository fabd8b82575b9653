// POSIX file handling: whole-file reads, atomic writes, checksums.
#include "anvil/core/file_util.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace anvil {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

std::string Errno() { return std::strerror(errno); }

Status WriteAll(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("{}: write failed: {}", path, Errno()));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("{}: no such file", path));
    return IoError(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const std::string why = Errno();
    ::close(fd);
    return IoError(fmt::format("{}: cannot stat: {}", path, why));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return IoError(fmt::format("{}: is a folder, not a file", path));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // the file grew, or /proc
    const ssize_t r = ::read(fd, out.data() + done, out.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string why = Errno();
      ::close(fd);
      return IoError(fmt::format("{}: read failed: {}", path, why));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

Status MakeDirectories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return IoError(fmt::format("{}: cannot create the folder: {}", path, ec.message()));
  if (!std::filesystem::is_directory(path, ec)) {
    return IoError(fmt::format("{}: exists and is not a folder", path));
  }
  return Status::Ok();
}

AtomicFile::AtomicFile(std::string path, std::string temp, int fd)
    : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      fd_(other.fd_),
      size_(other.size_),
      buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(fmt::format("{}: cannot create: {}", temp, Errno()));
  return AtomicFile(path, std::move(temp), fd);
}

Status AtomicFile::Flush() {
  RETURN_IF_ERROR(WriteAll(fd_, buffer_.data(), buffer_.size(), temp_));
  buffer_.clear();
  return Status::Ok();
}

Status AtomicFile::Append(const void* data, size_t size) {
  if (fd_ < 0) return Internal(fmt::format("{}: append after commit", path_));
  if (size == 0) return Status::Ok();  // (data may be null then)
  size_ += size;
  if (buffer_.size() + size > kBufferBytes) {
    RETURN_IF_ERROR(Flush());
    if (size > kBufferBytes) return WriteAll(fd_, static_cast<const char*>(data), size, temp_);
  }
  buffer_.append(static_cast<const char*>(data), size);
  return Status::Ok();
}

Status AtomicFile::WriteAt(uint64_t offset, const void* data, size_t size) {
  if (fd_ < 0) return Internal(fmt::format("{}: write after commit", path_));
  if (offset + size > size_) return Internal(fmt::format("{}: WriteAt past the end", path_));
  RETURN_IF_ERROR(Flush());
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t w = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return IoError(fmt::format("{}: write failed: {}", temp_, Errno()));
    p += w;
    offset += static_cast<uint64_t>(w);
    size -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (fd_ < 0) return Internal(fmt::format("{}: committed twice", path_));
  RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return IoError(fmt::format("{}: fsync failed: {}", temp_, Errno()));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_.c_str());
    return IoError(fmt::format("{}: close failed: {}", temp_, Errno()));
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string why = Errno();
    ::unlink(temp_.c_str());
    return IoError(fmt::format("{}: cannot rename {} over it: {}", path_, temp_, why));
  }
  // The rename itself is durable only once the folder is synced.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  RETURN_IF_ERROR(file.Append(contents.data(), contents.size()));
  return file.Commit();
}

uint64_t Fnv1a64(const void* data, size_t size, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= kFnv1a64Prime;
  }
  return hash;
}

}  // namespace anvil
