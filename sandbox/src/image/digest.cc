#include "digest.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <fmt/format.h>

#include <memory>

namespace smolbox::image {
namespace {

using Context = std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)>;

std::string Finish(EVP_MD_CTX* context) {
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(context, sum, &size);
  std::string out = "sha256:";
  for (unsigned int i = 0; i < size; ++i) out += fmt::format("{:02x}", sum[i]);
  return out;
}

Context NewContext() {
  Context context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (context) EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  return context;
}

}  // namespace

bool IsSha256Digest(std::string_view digest) {
  if (!digest.starts_with("sha256:") || digest.size() != 7 + 64) return false;
  for (char c : digest.substr(7)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string DigestHex(std::string_view digest) { return std::string(digest.substr(7)); }

Expected<std::string> Sha256Of(int fd, int copy_fd, int64_t max_bytes, const std::string& what) {
  Context context = NewContext();
  if (!context) return std::unexpected(Error{what, "OpenSSL: out of memory", ENOMEM});
  if (lseek(fd, 0, SEEK_SET) != 0) return std::unexpected(Error::Sys(what + ": seek"));
  char buffer[1 << 16];
  int64_t total = 0;
  while (true) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys(what + ": read"));
    if (n == 0) break;
    total += n;
    if (total > max_bytes) return std::unexpected(Error{what, fmt::format("is larger than the {} bytes allowed", max_bytes), 0});
    EVP_DigestUpdate(context.get(), buffer, static_cast<size_t>(n));
    for (ssize_t done = 0; copy_fd >= 0 && done < n;) {
      ssize_t w = write(copy_fd, buffer + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return std::unexpected(Error::Sys(what + ": write a copy"));
      done += w;
    }
  }
  return Finish(context.get());
}

std::string Sha256Of(std::string_view bytes) {
  Context context = NewContext();
  EVP_DigestUpdate(context.get(), bytes.data(), bytes.size());
  return Finish(context.get());
}

}  // namespace smolbox::image
