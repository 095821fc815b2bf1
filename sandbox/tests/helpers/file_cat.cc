// file_cat: prints each file named on its command line, for rootfs images that have no
// /bin/cat. Exits 1 if one cannot be read.
//
//   $ file_cat /proc/self/mountinfo
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::perror(argv[i]);
      rc = 1;
      continue;
    }
    char buffer[4096];
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) {
      if (write(1, buffer, static_cast<size_t>(n)) != n) rc = 1;
    }
    close(fd);
  }
  return rc;
}
