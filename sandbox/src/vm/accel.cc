#include "accel.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "unique_fd.h"

namespace smolbox::vm {
namespace {

constexpr const char* kFallback =
    "run it on a KVM host instead: smolvm-check remote github --repo OWNER/NAME; "
    "or ask for emulation explicitly with --accel tcg (slow)";

bool Exists(const char* path) {
  struct stat st{};
  return stat(path, &st) == 0;
}

}  // namespace

std::string KvmUnusableReason() {
  UniqueFd kvm(open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm.valid()) {
    return errno == ENOENT ? "no /dev/kvm" : fmt::format("/dev/kvm cannot be opened: {}", strerror(errno));
  }
  // PVM's kvm_pvm runs KVM on paging alone; stock guest kernels do not boot on it.
  if (!Exists("/sys/module/kvm_intel") && !Exists("/sys/module/kvm_amd")) {
    return "/dev/kvm is not backed by VT-x or AMD-V (no kvm_intel or kvm_amd module)";
  }
  if (ioctl(kvm.get(), KVM_GET_API_VERSION, 0) != KVM_API_VERSION) return "KVM_GET_API_VERSION is not 12";
  UniqueFd vm(ioctl(kvm.get(), KVM_CREATE_VM, 0));
  if (!vm.valid()) return fmt::format("KVM_CREATE_VM failed: {}", strerror(errno));
  // QEMU runs as an unprivileged uid and opens /dev/kvm itself.
  struct stat st{};
  if (geteuid() == 0 && stat("/dev/kvm", &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH)) != (S_IROTH | S_IWOTH)) {
    return "/dev/kvm is not open to other users (mode 0666), and QEMU runs confined as an "
           "unprivileged uid; add the udev rule KERNEL==\"kvm\", MODE=\"0666\"";
  }
  return "";
}

Expected<Accel> ChooseAccel(Accel asked) {
  if (asked == Accel::kTcg) return Accel::kTcg;
  std::string why = KvmUnusableReason();
  if (why.empty()) return Accel::kKvm;
  return std::unexpected(Error{"accel", fmt::format("KVM is not usable here ({}); {}", why, kFallback), 0});
}

}  // namespace smolbox::vm
