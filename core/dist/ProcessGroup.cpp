#include "dist/ProcessGroup.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#if defined(PARETO_DIST_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(PARETO_DIST_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <cstring>
#include <vector>

#include "util/Error.h"

namespace pareto {
namespace {

constexpr const char* kFailureKey = "pareto/failure";

std::string describe(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t).count()) + " s";
}

}  // namespace

void parseMasterAddress(const std::string& text, ProcessGroupOptions& options) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw InputError("--master " + text + ": expected HOST:PORT (the address rank 0 listens on)");
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) < 1 ||
      std::stoi(port) > 65535)
    throw InputError("--master " + text + ": the port must be a number from 1 to 65535");
  options.masterHost = text.substr(0, colon);
  if (options.masterHost.size() > 2 && options.masterHost.front() == '[' && options.masterHost.back() == ']')
    options.masterHost = options.masterHost.substr(1, options.masterHost.size() - 2);   // [::1]:port
  options.masterPort = std::stoi(port);
}

// The backend is held as its concrete type: in LibTorch 1.13 both derive from ProcessGroup, in 2.x from Backend
// (and a ProcessGroup wraps Backends). The calls used here (the constructors from a store, Options::create,
// allreduce, broadcast, Work::wait with a timeout, TCPStoreOptions) read the same on both, so no version test is
// needed; a call that differs would go behind TORCH_VERSION_MAJOR here.
struct ProcessGroup::Impl {
  ProcessGroupOptions options;
  c10::Device commDevice = c10::Device(c10::kCPU);
  std::string backendName;
  c10::intrusive_ptr<c10d::TCPStore> store;
#if defined(PARETO_DIST_GLOO)
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#endif
#if defined(PARETO_DIST_NCCL)
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif

  std::string where() const {
    return "rank " + std::to_string(options.rank) + " of " + std::to_string(options.worldSize);
  }

  // What another rank reported before it stopped, if it could; "" otherwise (the store lives in rank 0, so it
  // is gone with it).
  std::string peerFailure() {
    try {
      store->setTimeout(std::chrono::seconds(2));
      if (!store->check({kFailureKey})) return "";
      const std::vector<uint8_t> v = store->get(kFailureKey);
      return std::string(v.begin(), v.end());
    } catch (const std::exception&) {
      return "";
    }
  }

  [[noreturn]] void fail(const char* op, const std::exception& e) {
    const std::string peer = peerFailure();
    throw Error("distributed " + std::string(op) + " failed on " + where() + ": " +
                (peer.empty() ? "another rank stopped or did not answer within " + seconds(options.timeout) + " (" +
                                    describe(e) + ")"
                              : peer));
  }

  void run(const char* op, std::vector<at::Tensor>& tensors,
           const std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>& start) {
    try {
      start(tensors)->wait(options.timeout);
    } catch (const std::exception& e) {
      fail(op, e);
    }
  }

  // A sum needs the real dtype (float, double and int64 are what the engine sums; every backend has them).
  void allReduceSum(const at::Tensor& t) {
    at::Tensor s = t.device() == commDevice && t.is_contiguous() ? t : t.to(commDevice).contiguous();
    std::vector<at::Tensor> tensors{s};
    run("all-reduce", tensors, [&](std::vector<at::Tensor>& v) { return allreduce(v); });
    if (!s.is_same(t)) t.copy_(s);
  }

  // A broadcast moves bytes: any dtype goes (bool, bfloat16 and the packed formats' integer types alike, which
  // not every backend of every LibTorch version has), and the root's tensor is only read.
  void broadcast(const at::Tensor& t, int root) {
    const bool inPlace = t.device() == commDevice && t.is_contiguous();
    at::Tensor s = inPlace ? t : t.to(commDevice).contiguous();
    std::vector<at::Tensor> tensors{s.reshape({-1}).view(at::kByte)};
    run("broadcast", tensors, [&](std::vector<at::Tensor>& v) { return broadcastBackend(v, root); });
    if (!inPlace && options.rank != root) t.copy_(s);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors) {
#if defined(PARETO_DIST_NCCL)
    if (nccl) return nccl->allreduce(tensors);
#endif
#if defined(PARETO_DIST_GLOO)
    if (gloo) return gloo->allreduce(tensors);
#endif
    throw Error("no c10d backend");
  }

  c10::intrusive_ptr<c10d::Work> broadcastBackend(std::vector<at::Tensor>& tensors, int root) {
    c10d::BroadcastOptions o;
    o.rootRank = root;
#if defined(PARETO_DIST_NCCL)
    if (nccl) return nccl->broadcast(tensors, o);
#endif
#if defined(PARETO_DIST_GLOO)
    if (gloo) return gloo->broadcast(tensors, o);
#endif
    throw Error("no c10d backend");
  }
};

ProcessGroup::ProcessGroup(const ProcessGroupOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.options = options;
  if (options.worldSize < 1) throw InputError("--world-size must be at least 1");
  if (options.rank < 0 || options.rank >= options.worldSize)
    throw InputError("--rank " + std::to_string(options.rank) + " is outside 0.." +
                     std::to_string(options.worldSize - 1) + " (--world-size " + std::to_string(options.worldSize) +
                     ")");
  const std::string master = options.masterHost + ":" + std::to_string(options.masterPort);
  if (options.device.is_cuda()) {
#if defined(PARETO_DIST_NCCL)
    d.backendName = "nccl";
    d.commDevice = options.device;
    // This rank's GPU as the current device: NCCL's communicator and any CUDA context the process makes belong
    // there, not on GPU 0 of every rank.
    if (options.device.has_index()) c10::cuda::set_device(options.device.index());
#else
    throw InputError("this build's LibTorch has no NCCL (c10d ProcessGroupNCCL): distributed runs on CUDA need it; "
                     "use --device cpu, or build against a CUDA LibTorch with NCCL");
#endif
  } else {
#if defined(PARETO_DIST_GLOO)
    d.backendName = "gloo";
#else
    throw InputError("this build has no gloo (c10d ProcessGroupGloo, Debian package libgloo-dev): distributed runs "
                     "on the CPU need it");
#endif
  }
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(options.masterPort);
    so.isServer = options.rank == 0;
    so.numWorkers = static_cast<size_t>(options.worldSize);
    so.waitWorkers = true;
    so.timeout = options.timeout;
    d.store = c10::make_intrusive<c10d::TCPStore>(options.masterHost, so);
  } catch (const std::exception& e) {
    throw Error("distributed rendezvous at " + master + " failed on " + d.where() + ": " + describe(e) +
                (options.rank == 0 ? " (is the port free?)" : " (is rank 0 running and the address reachable?)"));
  }
  try {
#if defined(PARETO_DIST_NCCL)
    if (d.backendName == "nccl") {
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = options.timeout;
      d.nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(d.store, options.rank, options.worldSize, o);
    }
#endif
#if defined(PARETO_DIST_GLOO)
    if (d.backendName == "gloo") {
      auto o = c10d::ProcessGroupGloo::Options::create(options.timeout);
      // The address this host is reached at from the master's side: loopback for a job on one host.
      const bool local = options.masterHost == "127.0.0.1" || options.masterHost == "localhost" ||
                         options.masterHost == "::1";
      o->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname(options.masterHost)
                                 : c10d::ProcessGroupGloo::createDefaultDevice());
      o->threads = 2;
      d.gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(d.store, options.rank, options.worldSize, o);
    }
#endif
  } catch (const std::exception& e) {
    throw Error("distributed " + d.backendName + " setup with " + master + " failed on " + d.where() + ": " +
                describe(e));
  }
}

ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return impl_->options.rank; }
int ProcessGroup::size() const { return impl_->options.worldSize; }
std::string ProcessGroup::backend() const { return impl_->backendName; }

void ProcessGroup::allReduceSum(const at::Tensor& t) { impl_->allReduceSum(t); }

void ProcessGroup::broadcast(const at::Tensor& t, int root) {
  if (root < 0 || root >= size()) throw Error("broadcast from rank " + std::to_string(root) + " of " + std::to_string(size()));
  impl_->broadcast(t, root);
}

void ProcessGroup::broadcastBytes(std::string& bytes, int root) {
  at::Tensor length = at::tensor({static_cast<int64_t>(bytes.size())}, at::kLong);
  broadcast(length, root);
  const int64_t n = length.item<int64_t>();
  at::Tensor data = at::empty({n}, at::kByte);
  if (rank() == root && n > 0) std::memcpy(data.data_ptr(), bytes.data(), static_cast<size_t>(n));
  if (n > 0) broadcast(data, root);
  bytes.assign(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(n));
}

void ProcessGroup::barrier() {
  // An all-reduce of one number is a barrier on every backend, with the same timeout and error as the others.
  allReduceSum(at::zeros({1}, at::kFloat));
}

bool ProcessGroup::any(bool flag) {
  at::Tensor t = at::tensor({flag ? 1.0f : 0.0f}, at::kFloat);
  allReduceSum(t);
  return t.item<float>() > 0;
}

void ProcessGroup::reportFailure(const std::string& message) noexcept {
  try {
    const std::string text = "rank " + std::to_string(rank()) + " failed: " + message;
    impl_->store->setTimeout(std::chrono::seconds(2));
    impl_->store->compareSet(kFailureKey, {}, std::vector<uint8_t>(text.begin(), text.end()));
  } catch (...) {
    // the store may be gone with rank 0; the failing rank's own error is what matters
  }
}

void ProcessGroup::faultPoint(int64_t layer) const {
  const char* spec = std::getenv("PARETO_TEST_KILL_RANK");
  if (spec == nullptr) return;
  const std::string s = spec;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return;
  if (std::atoi(s.substr(0, colon).c_str()) == rank() && std::atoll(s.substr(colon + 1).c_str()) == layer)
    ::kill(::getpid(), SIGKILL);
}

}  // namespace pareto
